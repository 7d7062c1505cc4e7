//! What workloads need from the kernel besides the firewall: a route to each address (and to
//! each `ext_ip` of its NAT mappings) through the workload's interface, a static ARP/NDP entry for its MAC, the interface settings that
//! make the host answer for the workload's gateway (proxy ARP) and forward its packets, and
//! forgetting the connections of addresses that went away.
//!
//! [`Routing::sync`] compares the kernel with the desired state and changes only what differs,
//! so it serves start-up (stateless restart), each batch of changes, link events and the
//! periodic repair alike. It runs in three steps, so that what it would do is a value that can
//! be tested without root and printed (`calico-felix --dry-run`):
//!
//! 1. [`Routing::read`]: the kernel (links, Calico routes, permanent neighbours on workload
//!    interfaces) and what this `Routing` remembers, as a [`KernelRoutingState`];
//! 2. [`plan`]: a pure function from the desired state and that value to a [`RoutingPlan`];
//! 3. [`Routing::execute`]: applies the plan and returns the [`RoutingChanges`] it made.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use calico_calc::{DesiredState, EndpointKey};
use calico_linux::{
    ConntrackError, Family, Neighbour, Netlink, NetlinkError, Netns, Route, SysctlError,
    flush_conntrack, get_sysctl, set_sysctl, workload_interface_sysctls,
};
use calico_model::MacAddr;
use ipnet::IpNet;

use crate::firewall::config::InterfacePrefixes;

/// Something in the kernel could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error(transparent)]
    Sysctl(#[from] SysctlError),
    #[error(transparent)]
    Conntrack(#[from] ConntrackError),
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
    /// Connection-tracking entries deleted for them.
    pub conntrack_entries_deleted: usize,
    /// Interfaces (by index) that went away between plan and execute: what was planned for
    /// them was skipped, and the next sync plans without them.
    pub interfaces_vanished: Vec<u32>,
}

impl RoutingChanges {
    pub fn is_empty(&self) -> bool {
        *self == RoutingChanges::default()
    }
}

/// One link as the routing plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLink {
    pub index: u32,
    pub name: String,
    pub up: bool,
    /// Whether the interface has IPv6 settings (`net/ipv6/conf/<name>`). Read only for the
    /// interfaces the plan may configure (workload interfaces not configured at this index).
    pub ipv6: bool,
}

/// What the kernel holds of what routing manages, and what a [`Routing`] remembers of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelRoutingState {
    pub links: Vec<KernelLink>,
    /// The Calico routes (`proto 80`).
    pub routes: BTreeSet<Route>,
    /// Permanent neighbours on workload interfaces (those starting with the prefix).
    pub neighbours: BTreeSet<Neighbour>,
    /// Interfaces already configured, with the index they had then.
    pub configured: BTreeMap<String, u32>,
    /// Whether `ip_forward` (and IPv6 forwarding) were already turned on.
    pub forwarding_on: bool,
    /// Whether the namespace has IPv6 (`net/ipv6/conf/all/forwarding`); read only while
    /// forwarding is not on yet.
    pub ipv6: bool,
    /// Interfaces operationally up (`calico_linux::Link::running`): what endpoint statuses
    /// report, not what routes need.
    pub running: BTreeSet<String>,
}

/// One interface to (re)configure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfacePlan {
    pub name: String,
    pub index: u32,
    /// `(path under /proc/sys, value)`, from [`workload_interface_sysctls`].
    pub sysctls: Vec<(String, &'static str)>,
}

/// What a sync would do: the kernel changes in the order they are made, and what the
/// [`Routing`] remembers afterwards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingPlan {
    /// Namespace-wide settings (`ip_forward`, IPv6 forwarding), `(path, value)`.
    pub forwarding: Vec<(String, &'static str)>,
    /// Interfaces remembered as configured whose link went or has another index now.
    pub forget: Vec<String>,
    pub interfaces: Vec<InterfacePlan>,
    pub routes_to_remove: Vec<Route>,
    pub routes_to_add: Vec<Route>,
    pub neighbours_to_remove: Vec<Neighbour>,
    pub neighbours_to_add: Vec<Neighbour>,
    /// Addresses no local workload has any more: their connections are forgotten.
    pub conntrack_flush: Vec<IpAddr>,
    /// The local workloads' addresses (and NAT `ext_ip`s), remembered for the next plan.
    pub addresses: BTreeSet<IpAddr>,
}

impl RoutingPlan {
    /// Whether applying it changes nothing in the kernel.
    pub fn is_empty(&self) -> bool {
        self.forwarding.is_empty()
            && self.interfaces.is_empty()
            && self.routes_to_remove.is_empty()
            && self.routes_to_add.is_empty()
            && self.neighbours_to_remove.is_empty()
            && self.neighbours_to_add.is_empty()
            && self.conntrack_flush.is_empty()
    }

    /// The kernel changes, one a line, in the order they would be made: `sysctl <path>=<value>`,
    /// `route del|add <dest> dev <if>`, `neighbour del|add <ip> lladdr <mac> dev <if>`,
    /// `conntrack flush <ip>`. Interfaces are named from `kernel`'s links.
    pub fn lines(&self, kernel: &KernelRoutingState) -> Vec<String> {
        let names: HashMap<u32, &str> = kernel
            .links
            .iter()
            .map(|l| (l.index, l.name.as_str()))
            .collect();
        let dev = |index: u32| match names.get(&index) {
            Some(name) => (*name).to_owned(),
            None => format!("if{index}"),
        };
        let mut lines = Vec::new();
        let sysctls = self
            .forwarding
            .iter()
            .chain(self.interfaces.iter().flat_map(|i| &i.sysctls));
        for (path, value) in sysctls {
            lines.push(format!("sysctl {path}={value}"));
        }
        for (verb, routes) in [
            ("del", &self.routes_to_remove),
            ("add", &self.routes_to_add),
        ] {
            for r in routes {
                lines.push(format!(
                    "route {verb} {} dev {}",
                    r.destination,
                    dev(r.ifindex)
                ));
            }
        }
        let neighbours = [
            ("del", &self.neighbours_to_remove),
            ("add", &self.neighbours_to_add),
        ];
        for (verb, neighbours) in neighbours {
            for n in neighbours {
                lines.push(format!(
                    "neighbour {verb} {} lladdr {} dev {}",
                    n.ip,
                    MacAddr(n.mac),
                    dev(n.ifindex)
                ));
            }
        }
        for ip in &self.conntrack_flush {
            lines.push(format!("conntrack flush {ip}"));
        }
        lines
    }
}

/// What makes routes, neighbours and interface settings match `desired`, given what the kernel
/// holds and `known`, the local workloads' addresses at the last sync (whose connections are
/// flushed when they go). Pure: reads and changes nothing.
///
/// Each local workload's interface is configured once per link (again when it is re-created);
/// an active workload whose link is up gets a host route to each address and to each `ext_ip`
/// of its NAT mappings (the first mapping wins; a local workload's own address wins over an
/// `ext_ip`), and a static neighbour for each address when it has a MAC. Calico routes and
/// workload-interface permanent neighbours not wanted are removed.
pub fn plan(
    desired: &DesiredState,
    kernel: &KernelRoutingState,
    known: &BTreeSet<IpAddr>,
) -> RoutingPlan {
    let mut plan = RoutingPlan::default();
    if !kernel.forwarding_on {
        plan.forwarding
            .push(("net/ipv4/ip_forward".to_owned(), "1"));
        if kernel.ipv6 {
            plan.forwarding
                .push(("net/ipv6/conf/all/forwarding".to_owned(), "1"));
        }
    }
    let by_name: HashMap<&str, &KernelLink> =
        kernel.links.iter().map(|l| (l.name.as_str(), l)).collect();
    plan.forget = kernel
        .configured
        .iter()
        .filter(|(name, index)| {
            by_name
                .get(name.as_str())
                .is_none_or(|l| l.index != **index)
        })
        .map(|(name, _)| name.clone())
        .collect();

    let mut routes = BTreeSet::new();
    // NAT mappings' ext_ips, routed through the workload (the first mapping wins) unless
    // they are a local workload's own address.
    let mut external: BTreeMap<IpNet, u32> = BTreeMap::new();
    let mut neighbours = BTreeSet::new();
    let mut configuring = BTreeSet::new();
    for (key, program) in &desired.endpoints {
        if !matches!(key, EndpointKey::Workload(_)) {
            continue;
        }
        plan.addresses.extend(program.addresses.iter().copied());
        // A mapping that goes takes the connections through it with it.
        plan.addresses
            .extend(program.nat.iter().map(|(_, ext)| *ext));
        let Some(link) = program.interface.as_deref().and_then(|i| by_name.get(i)) else {
            continue;
        };
        if kernel.configured.get(&link.name) != Some(&link.index)
            && configuring.insert(link.name.as_str())
        {
            let mut sysctls = workload_interface_sysctls(&link.name, Family::V4);
            if link.ipv6 {
                sysctls.extend(workload_interface_sysctls(&link.name, Family::V6));
            }
            plan.interfaces.push(InterfacePlan {
                name: link.name.clone(),
                index: link.index,
                sysctls,
            });
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
    plan.routes_to_remove = kernel.routes.difference(&routes).copied().collect();
    plan.routes_to_add = routes.difference(&kernel.routes).copied().collect();
    plan.neighbours_to_remove = kernel.neighbours.difference(&neighbours).copied().collect();
    plan.neighbours_to_add = neighbours.difference(&kernel.neighbours).copied().collect();
    plan.conntrack_flush = known.difference(&plan.addresses).copied().collect();
    plan
}

/// Routes, neighbours, interface settings and conntrack of one network namespace.
#[derive(Debug)]
pub struct Routing {
    netns: Netns,
    netlink: Netlink,
    /// Workload interfaces start with one of these (`InterfacePrefix`); only their static
    /// neighbours are Calico's.
    prefixes: InterfacePrefixes,
    /// Interfaces already configured, with the index they had (a new link of the same name is
    /// configured again).
    configured: BTreeMap<String, u32>,
    /// The local workloads' addresses at the last sync.
    addresses: BTreeSet<IpAddr>,
    forwarding_on: bool,
    /// Interfaces that were up, and operationally up, at the last sync.
    up: BTreeSet<String>,
}

impl Routing {
    /// Opens netlink in `netns`; call inside a tokio runtime.
    pub fn new(netns: Netns, prefixes: &InterfacePrefixes) -> Result<Routing, RoutingError> {
        Ok(Routing {
            netlink: Netlink::connect(&netns)?,
            netns,
            prefixes: prefixes.clone(),
            configured: BTreeMap::new(),
            addresses: BTreeSet::new(),
            forwarding_on: false,
            up: BTreeSet::new(),
        })
    }

    /// Makes routes, neighbours and interface settings match `state`; flushes the connections
    /// of addresses no local workload has any more: [`read`](Routing::read), [`plan`],
    /// [`execute`](Routing::execute).
    pub async fn sync(&mut self, state: &DesiredState) -> Result<RoutingChanges, RoutingError> {
        let kernel = self.read(state).await?;
        self.up = kernel
            .links
            .iter()
            .filter(|l| l.up && kernel.running.contains(&l.name))
            .map(|l| l.name.clone())
            .collect();
        let plan = plan(state, &kernel, &self.addresses);
        self.execute(&plan).await
    }

    /// What a sync would do now, changing nothing.
    pub async fn dry_run(
        &self,
        state: &DesiredState,
    ) -> Result<(KernelRoutingState, RoutingPlan), RoutingError> {
        let kernel = self.read(state).await?;
        let plan = plan(state, &kernel, &self.addresses);
        Ok((kernel, plan))
    }

    /// Reads the kernel (and what this `Routing` remembers) for [`plan`]. `state` only says
    /// which interfaces' IPv6 settings are worth looking up.
    pub async fn read(&self, state: &DesiredState) -> Result<KernelRoutingState, RoutingError> {
        let ipv6 =
            !self.forwarding_on && get_sysctl(&self.netns, "net/ipv6/conf/all/forwarding").is_ok();
        let workload_interfaces: BTreeSet<&str> = state
            .endpoints
            .iter()
            .filter(|(key, _)| matches!(key, EndpointKey::Workload(_)))
            .filter_map(|(_, program)| program.interface.as_deref())
            .collect();
        let kernel_links = self.netlink.links().await?;
        let running = kernel_links
            .iter()
            .filter(|l| l.running)
            .map(|l| l.name.clone())
            .collect();
        let links: Vec<KernelLink> = kernel_links
            .into_iter()
            .map(|l| {
                let may_configure = workload_interfaces.contains(l.name.as_str())
                    && self.configured.get(&l.name) != Some(&l.index);
                let ipv6 = may_configure
                    && get_sysctl(&self.netns, &format!("net/ipv6/conf/{}/forwarding", l.name))
                        .is_ok();
                KernelLink {
                    index: l.index,
                    name: l.name,
                    up: l.up,
                    ipv6,
                }
            })
            .collect();
        let routes = self.netlink.calico_routes().await?.into_iter().collect();
        let ours: BTreeSet<u32> = links
            .iter()
            .filter(|l| self.prefixes.matches(&l.name))
            .map(|l| l.index)
            .collect();
        let neighbours = self
            .netlink
            .permanent_neighbours()
            .await?
            .into_iter()
            .filter(|n| ours.contains(&n.ifindex))
            .collect();
        Ok(KernelRoutingState {
            links,
            routes,
            neighbours,
            configured: self.configured.clone(),
            forwarding_on: self.forwarding_on,
            ipv6,
            running,
        })
    }

    /// Applies `plan` in its order, remembering what it configured and the addresses; stops at
    /// the first failure (the next sync plans again from the kernel). A write that failed
    /// because its interface is gone (removed since [`read`](Routing::read)) is skipped and
    /// recorded in [`RoutingChanges::interfaces_vanished`] instead: its workload is going away.
    pub async fn execute(&mut self, plan: &RoutingPlan) -> Result<RoutingChanges, RoutingError> {
        let mut changes = RoutingChanges::default();
        for (path, value) in &plan.forwarding {
            set_sysctl(&self.netns, path, value)?;
        }
        self.forwarding_on = true;
        for name in &plan.forget {
            self.configured.remove(name);
        }
        for interface in &plan.interfaces {
            let configured = interface
                .sysctls
                .iter()
                .try_for_each(|(path, value)| set_sysctl(&self.netns, path, value).map(drop));
            if let Err(e) = configured {
                self.skip_if_vanished(interface.index, &mut changes, e)
                    .await?;
                continue;
            }
            self.configured
                .insert(interface.name.clone(), interface.index);
            changes.interfaces_configured.push(interface.name.clone());
        }
        for route in &plan.routes_to_remove {
            self.netlink.delete_route(route).await?;
            changes.routes_removed.push(*route);
        }
        for route in &plan.routes_to_add {
            match self.netlink.replace_route(route).await {
                Ok(()) => changes.routes_added.push(*route),
                Err(e) => {
                    self.skip_if_vanished(route.ifindex, &mut changes, e)
                        .await?
                }
            }
        }
        for neighbour in &plan.neighbours_to_remove {
            self.netlink.delete_neighbour(neighbour).await?;
            changes.neighbours_removed.push(*neighbour);
        }
        for neighbour in &plan.neighbours_to_add {
            match self.netlink.replace_neighbour(neighbour).await {
                Ok(()) => changes.neighbours_added.push(*neighbour),
                Err(e) => {
                    self.skip_if_vanished(neighbour.ifindex, &mut changes, e)
                        .await?
                }
            }
        }
        // After the routes, so that a removal never delays an addition; one table dump for
        // the whole batch, on a blocking thread.
        changes.conntrack_entries_deleted =
            flush_conntrack(&self.netns, &plan.conntrack_flush).await?;
        changes.conntrack_flushed = plan.conntrack_flush.clone();
        self.addresses = plan.addresses.clone();
        Ok(changes)
    }

    /// Swallows `error` if the interface it was about is gone (removed since the plan was
    /// made: its routes and neighbours went with it), recording it; otherwise returns it.
    async fn skip_if_vanished(
        &self,
        index: u32,
        changes: &mut RoutingChanges,
        error: impl Into<RoutingError>,
    ) -> Result<(), RoutingError> {
        let gone = match self.netlink.links().await {
            Ok(links) => !links.iter().any(|l| l.index == index),
            Err(_) => false,
        };
        if !gone {
            return Err(error.into());
        }
        if !changes.interfaces_vanished.contains(&index) {
            changes.interfaces_vanished.push(index);
        }
        Ok(())
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

    /// Whether the interface existed and was up at the last sync, with a carrier (as Calico's
    /// Felix read `operstate`): a workload's veth whose container end is gone from the
    /// container (back in the host's namespace, unused) is not.
    pub fn interface_up(&self, name: &str) -> bool {
        self.up.contains(name)
    }
}
