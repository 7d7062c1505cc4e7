//! The command line of `calico-neutron` (each flag also an environment variable): Neutron's
//! URL, how to authenticate to it ([`AuthArgs`], shared with `calico-dhcp-agent`), the poll
//! and resync intervals, and the `--etcd-*`/`ETCD_*` settings every component takes.

use std::path::PathBuf;
use std::time::Duration;

use calico_datastore::EtcdArgs;
use clap::Parser;

use crate::credentials::{self, CredentialsError, Resolved, Strategy};
use crate::run::ChangeSource;

/// How both binaries authenticate to Neutron.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// keystone: every request to Neutron carries a token of the service user (from the OS_*
    /// variables or --auth-config); noauth: no token, for a neutron-server run with
    /// auth_strategy = noauth (labs only)
    #[arg(
        long,
        env = "NEUTRON_AUTH_STRATEGY",
        value_enum,
        default_value = "keystone",
        hide_possible_values = true
    )]
    pub auth_strategy: Strategy,
    /// An ini file whose [keystone_authtoken] section gives auth_url, username, password,
    /// project_name (or project_id), user_domain_name, project_domain_name and cafile, as in
    /// neutron.conf; an OS_* variable wins over the file
    #[arg(long, env = "CALICO_AUTH_CONFIG")]
    pub auth_config: Option<PathBuf>,
}

impl AuthArgs {
    /// The settings from the file and this process's `OS_*` variables.
    pub fn resolve(&self) -> Result<Resolved, CredentialsError> {
        credentials::resolve(
            self.auth_strategy,
            self.auth_config.as_deref(),
            &credentials::os_environment(),
        )
    }
}

/// Keeps Calico's endpoints and profiles in etcd equal to Neutron's ports and security groups.
///
/// Every VM port bound by Calico's ML2 driver becomes a workload endpoint of orchestrator
/// `openstack`; every security group a profile `openstack-sg-<id>`. Nothing else in etcd is
/// touched. See docs/openstack.md.
#[derive(Debug, Clone, Parser)]
#[command(name = "calico-neutron", version)]
pub struct Args {
    /// Neutron's API endpoint, http(s)://HOST:PORT (https certificates are checked against
    /// OS_CACERT / cafile, else the system's CA bundle)
    #[arg(long, env = "NEUTRON_URL", default_value = "http://127.0.0.1:9696")]
    pub neutron_url: String,
    #[command(flatten)]
    pub auth: AuthArgs,
    /// notifications: the calico_rs driver tells which object changed as each change commits
    /// (its [calico_rs] notify_socket must be --notify-socket); polling: ids and revision
    /// numbers of everything are read every --poll-interval
    #[arg(
        long,
        env = "CALICO_NEUTRON_CHANGE_SOURCE",
        value_enum,
        default_value = "notifications",
        hide_possible_values = true
    )]
    pub change_source: ChangeSource,
    /// The unix socket the driver's notifications arrive on (made by calico-neutron; with
    /// --change-source notifications)
    #[arg(long, env = "CALICO_NEUTRON_NOTIFY_SOCKET", default_value = crate::notify::DEFAULT_SOCKET)]
    pub notify_socket: PathBuf,
    /// How often Neutron is asked whether anything changed (with --change-source polling),
    /// e.g. 500ms
    #[arg(long, env = "CALICO_NEUTRON_POLL_INTERVAL", value_parser = duration)]
    pub poll_interval: Option<Duration>,
    /// How often etcd is compared with Neutron in full, repairing what no notification
    /// announced and keys changed or deleted behind the sync's back, e.g. 60s
    #[arg(long, env = "CALICO_NEUTRON_RESYNC_INTERVAL", default_value = "60s", value_parser = duration)]
    pub resync_interval: Duration,
    /// Log filter (tracing's env-filter syntax), e.g. info or calico_openstack=debug
    #[arg(long, env = "CALICO_NEUTRON_LOG", default_value = "info")]
    pub log: String,
    #[command(flatten)]
    pub etcd: EtcdArgs,
}

/// The poll interval without the notifications' setting: a poll interval is only read when
/// polling.
const DEFAULT_POLL: Duration = Duration::from_millis(500);

impl Args {
    /// The poll interval when polling (default 500 ms); an error naming `--poll-interval` when
    /// it is given with notifications (it would do nothing).
    pub fn poll(&self) -> Result<Option<Duration>, String> {
        match (self.change_source, self.poll_interval) {
            (ChangeSource::Polling, given) => Ok(Some(given.unwrap_or(DEFAULT_POLL))),
            (ChangeSource::Notifications, None) => Ok(None),
            (ChangeSource::Notifications, Some(_)) => Err(
                "--poll-interval (CALICO_NEUTRON_POLL_INTERVAL) is read only with \
                 --change-source polling; leave it out, or poll"
                    .to_owned(),
            ),
        }
    }
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
        assert_eq!(args.change_source, ChangeSource::Notifications);
        assert_eq!(args.poll(), Ok(None));
        assert_eq!(args.resync_interval, Duration::from_secs(60));
        assert_eq!(args.neutron_url, "http://127.0.0.1:9696");
        assert_eq!(args.auth.auth_strategy, Strategy::Keystone);
        let args = Args::try_parse_from(["x", "--auth-strategy", "noauth"]).unwrap();
        assert_eq!(args.auth.auth_strategy, Strategy::Noauth);
        let err = Args::try_parse_from(["x", "--auth-strategy", "none"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--auth-strategy"), "{err}");
        let args = Args::try_parse_from(["x", "--change-source", "polling"]).unwrap();
        assert_eq!(args.poll(), Ok(Some(Duration::from_millis(500))));
        let args =
            Args::try_parse_from(["x", "--change-source", "polling", "--poll-interval", "2s"])
                .unwrap();
        assert_eq!(args.poll(), Ok(Some(Duration::from_secs(2))));
        // A poll interval without polling would be ignored: refused by name.
        let args = Args::try_parse_from(["x", "--poll-interval", "2s"]).unwrap();
        let err = args.poll().unwrap_err();
        assert!(
            err.contains("--poll-interval") && err.contains("polling"),
            "{err}"
        );
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
