//! What workloads need from the kernel besides the firewall: a route to each address (and to
//! each `ext_ip` of its NAT mappings) through the workload's interface, a static ARP/NDP entry for its MAC, the interface settings that
//! make the host answer for the workload's gateway (proxy ARP) and forward its packets, and
//! forgetting the connections of addresses that went away.
//!
//! [`Routing::sync`] compares the kernel with the desired state and changes only what differs,
//! so it serves start-up (stateless restart), each batch of changes, link events and the
//! periodic repair alike.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use calico_calc::{DesiredState, EndpointKey};
use calico_linux::{
    CommandError, Family, Link, Neighbour, Netlink, NetlinkError, Netns, Route, SysctlError,
    flush_conntrack, get_sysctl, set_sysctl, workload_interface_sysctls,
};
use ipnet::IpNet;

/// Something in the kernel could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error(transparent)]
    Sysctl(#[from] SysctlError),
    #[error(transparent)]
    Conntrack(#[from] CommandError),
}

impl RoutingError {
    /// The kernel interface that failed, for metrics: `netlink`, `sysctl` or `conntrack`.
    pub fn tool(&self) -> &'static str {
        match self {
            RoutingError::Netlink(_) => "netlink",
            RoutingError::Sysctl(_) => "sysctl",
            RoutingError::Conntrack(_) => "conntrack",
        }
    }
}

/// What one sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingChanges {
    pub routes_added: Vec<Route>,
    pub routes_removed: Vec<Route>,
    pub neighbours_added: Vec<Neighbour>,
    pub neighbours_removed: Vec<Neighbour>,
    /// Interfaces whose settings were (re)applied.
    pub interfaces_configured: Vec<String>,
    /// Addresses whose connections were forgotten.
    pub conntrack_flushed: Vec<IpAddr>,
}

impl RoutingChanges {
    pub fn is_empty(&self) -> bool {
        *self == RoutingChanges::default()
    }
}

/// Routes, neighbours, interface settings and conntrack of one network namespace.
#[derive(Debug)]
pub struct Routing {
    netns: Netns,
    netlink: Netlink,
    /// Workload interfaces start with this (`InterfacePrefix`); only their static neighbours
    /// are Calico's.
    prefix: String,
    /// Interfaces already configured, with the index they had (a new link of the same name is
    /// configured again).
    configured: BTreeMap<String, u32>,
    /// The local workloads' addresses at the last sync.
    addresses: BTreeSet<IpAddr>,
    forwarding_on: bool,
    /// Interfaces that were up at the last sync.
    up: BTreeSet<String>,
}

impl Routing {
    /// Opens netlink in `netns`; call inside a tokio runtime.
    pub fn new(netns: Netns, prefix: &str) -> Result<Routing, RoutingError> {
        Ok(Routing {
            netlink: Netlink::connect(&netns)?,
            netns,
            prefix: prefix.to_owned(),
            configured: BTreeMap::new(),
            addresses: BTreeSet::new(),
            forwarding_on: false,
            up: BTreeSet::new(),
        })
    }

    /// Makes routes, neighbours and interface settings match `state`; flushes the connections
    /// of addresses no local workload has any more.
    pub async fn sync(&mut self, state: &DesiredState) -> Result<RoutingChanges, RoutingError> {
        let mut changes = RoutingChanges::default();
        if !self.forwarding_on {
            set_sysctl(&self.netns, "net/ipv4/ip_forward", "1")?;
            if get_sysctl(&self.netns, "net/ipv6/conf/all/forwarding").is_ok() {
                set_sysctl(&self.netns, "net/ipv6/conf/all/forwarding", "1")?;
            }
            self.forwarding_on = true;
        }
        let links = self.netlink.links().await?;
        let by_name: HashMap<&str, &Link> = links.iter().map(|l| (l.name.as_str(), l)).collect();
        self.up = links
            .iter()
            .filter(|l| l.up)
            .map(|l| l.name.clone())
            .collect();

        let mut routes = BTreeSet::new();
        // NAT mappings' ext_ips, routed through the workload (the first mapping wins) unless
        // they are a local workload's own address.
        let mut external: BTreeMap<IpNet, u32> = BTreeMap::new();
        let mut neighbours = BTreeSet::new();
        let mut addresses = BTreeSet::new();
        for (key, program) in &state.endpoints {
            if !matches!(key, EndpointKey::Workload(_)) {
                continue;
            }
            addresses.extend(program.addresses.iter().copied());
            // A mapping that goes takes the connections through it with it.
            addresses.extend(program.nat.iter().map(|(_, ext)| *ext));
            let Some(link) = program.interface.as_deref().and_then(|i| by_name.get(i)) else {
                continue;
            };
            if self.configured.get(&link.name) != Some(&link.index) {
                self.configure(link)?;
                changes.interfaces_configured.push(link.name.clone());
            }
            // A route through a link that is down is refused; its "up" event brings us back.
            if !program.active || !link.up {
                continue;
            }
            for (_, ext) in &program.nat {
                external.entry(IpNet::from(*ext)).or_insert(link.index);
            }
            for &ip in &program.addresses {
                routes.insert(Route {
                    destination: IpNet::from(ip),
                    ifindex: link.index,
                });
                if let Some(mac) = program.mac {
                    neighbours.insert(Neighbour {
                        ip,
                        mac,
                        ifindex: link.index,
                    });
                }
            }
        }
        let own: BTreeSet<IpNet> = routes.iter().map(|r: &Route| r.destination).collect();
        for (destination, ifindex) in external {
            if !own.contains(&destination) {
                routes.insert(Route {
                    destination,
                    ifindex,
                });
            }
        }
        self.configured.retain(|name, index| {
            by_name
                .get(name.as_str())
                .is_some_and(|l| l.index == *index)
        });

        let current: BTreeSet<Route> = self.netlink.calico_routes().await?.into_iter().collect();
        for route in current.difference(&routes) {
            self.netlink.delete_route(route).await?;
            changes.routes_removed.push(*route);
        }
        for route in routes.difference(&current) {
            self.netlink.replace_route(route).await?;
            changes.routes_added.push(*route);
        }

        let ours: BTreeSet<u32> = links
            .iter()
            .filter(|l| l.name.starts_with(&self.prefix))
            .map(|l| l.index)
            .collect();
        let current: BTreeSet<Neighbour> = self
            .netlink
            .permanent_neighbours()
            .await?
            .into_iter()
            .filter(|n| ours.contains(&n.ifindex))
            .collect();
        for neighbour in current.difference(&neighbours) {
            self.netlink.delete_neighbour(neighbour).await?;
            changes.neighbours_removed.push(*neighbour);
        }
        for neighbour in neighbours.difference(&current) {
            self.netlink.replace_neighbour(neighbour).await?;
            changes.neighbours_added.push(*neighbour);
        }

        for &gone in self.addresses.difference(&addresses) {
            flush_conntrack(&self.netns, gone)?;
            changes.conntrack_flushed.push(gone);
        }
        self.addresses = addresses;
        Ok(changes)
    }

    /// Every interface (by name) with its addresses.
    pub async fn interface_addresses(
        &self,
    ) -> Result<BTreeMap<String, BTreeSet<IpAddr>>, RoutingError> {
        let names: HashMap<u32, String> = self
            .netlink
            .links()
            .await?
            .into_iter()
            .map(|l| (l.index, l.name))
            .collect();
        let addresses = self.netlink.all_addresses().await?;
        Ok(addresses
            .into_iter()
            .filter_map(|(index, held)| Some((names.get(&index)?.clone(), held)))
            .collect())
    }

    /// Whether the interface existed and was up at the last sync.
    pub fn interface_up(&self, name: &str) -> bool {
        self.up.contains(name)
    }

    fn configure(&mut self, link: &Link) -> Result<(), RoutingError> {
        // The same list the CNI plugin applies when it creates the interface.
        for (path, value) in workload_interface_sysctls(&link.name, Family::V4) {
            set_sysctl(&self.netns, &path, value)?;
        }
        let has_ipv6 = get_sysctl(
            &self.netns,
            &format!("net/ipv6/conf/{}/forwarding", link.name),
        )
        .is_ok();
        if has_ipv6 {
            for (path, value) in workload_interface_sysctls(&link.name, Family::V6) {
                set_sysctl(&self.netns, &path, value)?;
            }
        }
        self.configured.insert(link.name.clone(), link.index);
        Ok(())
    }
}
