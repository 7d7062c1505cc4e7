//! The command line of `calico-neutron` (each flag also an environment variable): Neutron's
//! URL, the poll and resync intervals, and the `--etcd-*`/`ETCD_*` settings every component
//! takes.

use std::time::Duration;

use calico_datastore::EtcdArgs;
use clap::Parser;

/// Keeps Calico's endpoints and profiles in etcd equal to Neutron's ports and security groups.
///
/// Every VM port bound by Calico's ML2 driver becomes a workload endpoint of orchestrator
/// `openstack`; every security group a profile `openstack-sg-<id>`. Nothing else in etcd is
/// touched. See docs/openstack.md.
#[derive(Debug, Clone, Parser)]
#[command(name = "calico-neutron", version)]
pub struct Args {
    /// Neutron's API endpoint, http://HOST:PORT (the server must run with auth_strategy =
    /// noauth for now)
    #[arg(long, env = "NEUTRON_URL", default_value = "http://127.0.0.1:9696")]
    pub neutron_url: String,
    /// How often Neutron is asked whether anything changed (ids and revision numbers only),
    /// e.g. 500ms
    #[arg(long, env = "CALICO_NEUTRON_POLL_INTERVAL", default_value = "500ms", value_parser = duration)]
    pub poll_interval: Duration,
    /// How often etcd is compared with Neutron in full, repairing keys changed or deleted
    /// behind the sync's back, e.g. 60s
    #[arg(long, env = "CALICO_NEUTRON_RESYNC_INTERVAL", default_value = "60s", value_parser = duration)]
    pub resync_interval: Duration,
    /// Log filter (tracing's env-filter syntax), e.g. info or calico_openstack=debug
    #[arg(long, env = "CALICO_NEUTRON_LOG", default_value = "info")]
    pub log: String,
    #[command(flatten)]
    pub etcd: EtcdArgs,
}

/// A positive duration such as `500ms`, `2s` or `1m`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let value = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?}: {e} (expected e.g. 500ms, 2s, 1m)"))?;
    if value.is_zero() {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_durations() {
        let args = Args::try_parse_from(["calico-neutron"]).unwrap();
        assert_eq!(args.poll_interval, Duration::from_millis(500));
        assert_eq!(args.resync_interval, Duration::from_secs(60));
        assert_eq!(args.neutron_url, "http://127.0.0.1:9696");
        let args = Args::try_parse_from(["x", "--poll-interval", "2s"]).unwrap();
        assert_eq!(args.poll_interval, Duration::from_secs(2));
    }

    #[test]
    fn a_bad_interval_names_the_flag_and_the_value() {
        let err = Args::try_parse_from(["x", "--resync-interval", "0s"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--resync-interval"), "{err}");
        assert!(err.contains("must be longer than zero"), "{err}");
        let err = Args::try_parse_from(["x", "--poll-interval", "soon"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"soon\""), "{err}");
    }
}
