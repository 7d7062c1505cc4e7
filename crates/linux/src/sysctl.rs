//! Kernel settings under `/proc/sys`, per network namespace (`/proc/sys/net` shows the
//! namespace of the thread that opens it).

use crate::rtnl::in_netns;
use crate::{Family, Netns};

/// A setting could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sysctl {path} in {netns}: {reason}")]
pub struct SysctlError {
    pub path: String,
    pub netns: String,
    pub reason: String,
}

/// Reads `/proc/sys/<path>` (e.g. `net/ipv4/ip_forward`), trimmed.
pub fn get_sysctl(netns: &Netns, path: &str) -> Result<String, SysctlError> {
    let file = format!("/proc/sys/{path}");
    in_netns(netns, || std::fs::read_to_string(&file))
        .map(|v| v.trim().to_owned())
        .map_err(|e| error(netns, path, e))
}

/// Writes `value` to `/proc/sys/<path>` unless it already holds it; returns whether it changed.
pub fn set_sysctl(netns: &Netns, path: &str, value: &str) -> Result<bool, SysctlError> {
    let file = format!("/proc/sys/{path}");
    in_netns(netns, || {
        if std::fs::read_to_string(&file)?.trim() == value {
            return Ok(false);
        }
        std::fs::write(&file, value)?;
        Ok(true)
    })
    .map_err(|e| error(netns, path, e))
}

fn error(netns: &Netns, path: &str, e: std::io::Error) -> SysctlError {
    SysctlError {
        path: path.to_owned(),
        netns: netns.to_string(),
        reason: e.to_string(),
    }
}

/// The settings of the host side of a workload interface (`cali…`) for one IP family, as
/// `(path under /proc/sys, value)`: the one list both the CNI plugin (when it creates the veth)
/// and Felix (when it sees the interface, and again whenever it comes back) apply, so a workload
/// behaves the same whichever of them got there first.
///
/// IPv4 (Felix's settings in the seeds): the host answers the workload's ARP requests with its
/// own MAC at once (`proxy_arp`, `proxy_delay` 0), traffic from the workload may be directed to
/// localhost (`route_localnet`), the kernel's strict reverse-path check stops spoofed sources
/// (`rp_filter`), and the interface forwards (`forwarding`).
/// IPv6: the host answers neighbour solicitations for the workload (`proxy_ndp`), forwards, and
/// does no duplicate address detection on the host side (`accept_dad` 0) so its link-local
/// address, the workload's gateway, answers at once. See docs/dataplane.md.
pub fn workload_interface_sysctls(name: &str, family: Family) -> Vec<(String, &'static str)> {
    match family {
        Family::V4 => vec![
            (format!("net/ipv4/conf/{name}/rp_filter"), "1"),
            (format!("net/ipv4/conf/{name}/route_localnet"), "1"),
            (format!("net/ipv4/conf/{name}/proxy_arp"), "1"),
            (format!("net/ipv4/neigh/{name}/proxy_delay"), "0"),
            (format!("net/ipv4/conf/{name}/forwarding"), "1"),
        ],
        Family::V6 => vec![
            (format!("net/ipv6/conf/{name}/accept_dad"), "0"),
            (format!("net/ipv6/conf/{name}/proxy_ndp"), "1"),
            (format!("net/ipv6/conf/{name}/forwarding"), "1"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_interface_settings_name_the_interface_in_each_family() {
        let v4 = workload_interface_sysctls("cali0", Family::V4);
        assert!(v4.iter().all(|(path, _)| path.starts_with("net/ipv4/")));
        assert!(v4.contains(&("net/ipv4/conf/cali0/proxy_arp".to_owned(), "1")));
        assert!(v4.contains(&("net/ipv4/conf/cali0/rp_filter".to_owned(), "1")));
        assert!(v4.contains(&("net/ipv4/neigh/cali0/proxy_delay".to_owned(), "0")));
        let v6 = workload_interface_sysctls("cali0", Family::V6);
        assert!(v6.iter().all(|(path, _)| path.starts_with("net/ipv6/")));
        assert!(v6.contains(&("net/ipv6/conf/cali0/proxy_ndp".to_owned(), "1")));
        assert!(v6.contains(&("net/ipv6/conf/cali0/forwarding".to_owned(), "1")));
    }
}
