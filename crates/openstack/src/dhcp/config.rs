//! The command line of `calico-dhcp-agent` (each flag also an environment variable).

use std::path::PathBuf;
use std::time::Duration;

use calico_datastore::EtcdArgs;
use clap::Parser;

use crate::config::{AuthArgs, duration};

/// Serves this compute host's OpenStack VMs their addresses by DHCP, through one dnsmasq.
///
/// Watches etcd for the host's endpoints of orchestrator `openstack` (written by
/// calico-neutron), reads their subnets from Neutron (gateway, DNS servers, host routes, IPv6
/// modes) and runs dnsmasq with `--bridge-interface=<interface><n>,<tap>,…` per network: DHCP
/// requests and router solicitations arriving on a VM's TAP are answered as if they arrived on
/// its network's interface, which holds that network's subnets' gateway addresses. See
/// docs/openstack.md, "DHCP agent".
#[derive(Debug, Clone, Parser)]
#[command(name = "calico-dhcp-agent", version)]
pub struct DhcpArgs {
    /// This compute host's name, as Nova gives it to Neutron (binding:host_id); default: the
    /// kernel's hostname
    #[arg(long, env = "CALICO_DHCP_HOST")]
    pub host: Option<String>,
    /// Neutron's API endpoint, http(s)://HOST:PORT (authenticated as calico-neutron is)
    #[arg(long, env = "NEUTRON_URL", default_value = "http://127.0.0.1:9696")]
    pub neutron_url: String,
    #[command(flatten)]
    pub auth: AuthArgs,
    /// How often the subnets are read from Neutron (also at once when an endpoint has an
    /// address in no known subnet), e.g. 10s
    #[arg(long, env = "CALICO_DHCP_NEUTRON_POLL_INTERVAL", default_value = "10s", value_parser = duration)]
    pub neutron_poll_interval: Duration,
    /// The dnsmasq binary
    #[arg(long, env = "CALICO_DHCP_DNSMASQ", default_value = "/usr/sbin/dnsmasq")]
    pub dnsmasq: PathBuf,
    /// Directory of dnsmasq's hosts, options and lease files (created if missing)
    #[arg(
        long,
        env = "CALICO_DHCP_STATE_DIR",
        default_value = "/var/lib/calico/dhcp"
    )]
    pub state_dir: PathBuf,
    /// The prefix of the interfaces holding the served subnets' gateway addresses: one bridge
    /// without ports per served network, <prefix>0, <prefix>1, … (created and removed by the
    /// agent); at most 12 characters
    #[arg(long, env = "CALICO_DHCP_INTERFACE", default_value = "ns-calico", value_parser = interface_prefix)]
    pub interface: String,
    /// The prefix of the VMs' TAP interfaces (Nova: tap + 11 characters of the port id)
    #[arg(long, env = "CALICO_DHCP_TAP_PREFIX", default_value = "tap", value_parser = interface)]
    pub tap_prefix: String,
    /// dnsmasq's DNS port, answering the names of this host's ports (Neutron's dns_assignment)
    /// on the gateway addresses; 0 turns DNS off (names are then only in the leases)
    #[arg(long, env = "CALICO_DHCP_DNS_PORT", default_value = "53")]
    pub dns_port: u16,
    /// The lease time dnsmasq gives, e.g. 24h (at least 2m)
    #[arg(long, env = "CALICO_DHCP_LEASE_TIME", default_value = "24h", value_parser = lease)]
    pub lease_time: Duration,
    /// Log filter (tracing's env-filter syntax), e.g. info or calico_openstack=debug
    #[arg(long, env = "CALICO_DHCP_LOG", default_value = "info")]
    pub log: String,
    #[command(flatten)]
    pub etcd: EtcdArgs,
}

/// dnsmasq refuses leases shorter than two minutes.
fn lease(text: &str) -> Result<Duration, String> {
    let value = duration(text)?;
    if value < Duration::from_secs(120) {
        return Err(format!("{text:?}: dnsmasq's shortest lease is 2m"));
    }
    Ok(value)
}

/// The interfaces' prefix: an interface name of at most 12 characters (3 left for the
/// network's number).
fn interface_prefix(text: &str) -> Result<String, String> {
    let name = interface(text)?;
    if name.len() > 12 {
        return Err(format!(
            "{text:?}: at most 12 characters (the agent adds each network's number, and an \
             interface name has at most 15)"
        ));
    }
    Ok(name)
}

/// A Linux interface name (or prefix): 1 to 15 characters, no `/`, blank, `*` or `,`.
fn interface(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > 15 {
        return Err(format!(
            "{text:?}: an interface name has 1 to 15 characters"
        ));
    }
    if text.contains(['/', ' ', '*', ',', ':']) {
        return Err(format!(
            "{text:?}: no '/', ' ', '*', ',' or ':' in an interface name"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let args = DhcpArgs::try_parse_from(["calico-dhcp-agent"]).unwrap();
        assert_eq!(args.interface, "ns-calico");
        assert_eq!(args.tap_prefix, "tap");
        assert_eq!(args.lease_time, Duration::from_secs(86400));
        assert_eq!(args.dnsmasq, PathBuf::from("/usr/sbin/dnsmasq"));
    }

    #[test]
    fn bad_values_name_the_flag_and_the_reason() {
        let err = |args: &[&str]| {
            let mut all = vec!["calico-dhcp-agent"];
            all.extend(args);
            DhcpArgs::try_parse_from(all).unwrap_err().to_string()
        };
        let e = err(&["--interface", "a-much-too-long-name"]);
        assert!(
            e.contains("--interface") && e.contains("1 to 15 characters"),
            "{e}"
        );
        let e = err(&["--interface", "ns-calico-dhcp"]);
        assert!(
            e.contains("--interface") && e.contains("at most 12 characters"),
            "{e}"
        );
        let e = err(&["--lease-time", "60s"]);
        assert!(
            e.contains("--lease-time") && e.contains("shortest lease is 2m"),
            "{e}"
        );
        let e = err(&["--tap-prefix", "tap*"]);
        assert!(e.contains("--tap-prefix"), "{e}");
    }
}
