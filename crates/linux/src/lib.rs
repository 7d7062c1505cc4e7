//! The only crate that talks to the kernel or runs kernel tools. Each tool runs in the network
//! namespace the process is in, or, when given one, inside a named namespace
//! (`ip netns exec <ns> …`), which is how tests and the lab drive a host. Routes, neighbours and
//! links go over rtnetlink ([`Netlink`]), settings through `/proc/sys` ([`set_sysctl`]).
//!
//! The firewall is reached through two narrow traits, [`FirewallTables`] and [`IpSets`], or,
//! for the nftables backend, through [`nft::NfTables`] (nf_tables over netlink, [`nft::Nft`]);
//! the [`fake`] module implements them in memory for tests that run without root.

mod command;
mod conntrack;
pub mod fake;
mod ipset;
mod iptables;
pub mod nflog;
mod nfnl;
pub mod nft;
mod rtnl;
mod seams;
mod sysctl;

pub use command::{CommandError, Netns, output_with_input};
pub use conntrack::{Connection, ConntrackError, Tuple, connections, flush_conntrack};
pub use ipset::Ipset;
pub use iptables::{Family, Iptables};
pub use rtnl::{
    FdbEntry, GatewayRoute, Link, LinkEvent, LinkEvents, MainRoute, Neighbour, Netlink,
    NetlinkError, PolicyRule, ROUTE_PROTOCOL, Route, RouteEvent, RouteEvents,
    TUNNEL_ROUTE_PROTOCOL, TableRoute, TunnelRoute, VxlanDevice, in_netns,
};
pub use seams::{FirewallTables, IpSets};
pub use sysctl::{SysctlError, get_sysctl, set_sysctl, workload_interface_sysctls};

/// The kernel's hostname (the UTS namespace's), as Calico 1.x took it from `gethostname()`:
/// the default name of this host in the datastore.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}
