//! Plugging a workload in, as data: a [`PlumbPlan`] lists the changes to the kernel (the veth,
//! the host-side settings, MTU, the container's addresses and routes), each with its undo,
//! without touching anything; [`crate::execute`] runs it and undoes the steps already done (in
//! reverse order) when one fails.
//!
//! Two runtimes plug workloads in, and differ in who does what:
//!
//! | step | CNI ADD ([`plan()`]) | Docker `Join` ([`veth_plan`]), then dockerd, then [`routes_plan`] |
//! | --- | --- | --- |
//! | the veth, host side set up | the plan, container end created in `CNI_NETNS` | the plan, both ends in the driver's namespace |
//! | the container end's MAC | the plan | the plan (dockerd keeps it) |
//! | moving it in, its name, addresses, up | the plan | dockerd |
//! | the first attachment's routes | the plan | dockerd, from `Join`'s static routes ([`gateway_routes`]) |
//! | a standby's routes, own table, source rules | the plan | [`routes_plan`], once dockerd has moved the interface in |
//!
//! The plans are pure so that what each runtime does to the kernel is tested without root; the
//! executor is the only part that needs the kernel.

use std::net::IpAddr;

use calico_linux::{Family, Netns, workload_interface_sysctls};
use calico_model::MacAddr;
use ipnet::IpNet;

pub use crate::routes::RoutePlacement;
use crate::routes::{IPV4_GATEWAY, MAIN_TABLE, SourceRule};

/// Which end of the veth pair a step acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The host side, in the plugging process's own namespace.
    Host,
    /// The container side, in the attachment's namespace.
    Container,
}

/// The next hop of a route in the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gateway {
    /// No next hop: the destination is on the link (scope link).
    OnLink,
    /// Through this address.
    Via(IpAddr),
    /// Through the host side's IPv6 link-local address, known once the veth exists.
    HostLinkLocal,
}

/// A route of the container, its gateway still to be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRoute {
    pub destination: IpNet,
    pub gateway: Gateway,
    /// The attachment's metric.
    pub metric: u32,
    /// The main table, or a standby's own.
    pub table: u32,
}

/// One change to the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Removes a host side left by an earlier container of the same workload (if any).
    RemoveStaleVeth { host: String },
    /// Creates the veth pair: `host` here, `container` directly inside `netns`.
    CreateVeth {
        host: String,
        container: String,
        netns: Netns,
    },
    /// Writes `/proc/sys/<path>` in the namespace of `side`.
    SetSysctl {
        side: Side,
        path: String,
        value: String,
    },
    /// Sets the container side's MAC (before it is up, so its IPv6 link-local address
    /// follows).
    SetMac { mac: MacAddr },
    /// Sets one end up.
    SetUp { side: Side },
    /// Sets the MTU of both ends, the host side first.
    SetMtu { mtu: u32 },
    /// Adds an address (a /32 or /128) to the container side.
    AddAddress { address: IpNet },
    /// Deletes the container's source rules from these addresses: an earlier attachment's
    /// that nobody removed (a Docker `Leave` after a driver restart cannot reach the sandbox),
    /// which would make adding this attachment's fail.
    RemoveSourceRules { addresses: Vec<IpAddr> },
    /// Adds the container's routes and source rules of one family, in order (see
    /// [`crate::routes`]): added, never replaced, so another attachment's routes stay.
    AddRoutes {
        family: Family,
        routes: Vec<PlannedRoute>,
        /// A standby's source rules (none for the first attachment).
        rules: Vec<SourceRule>,
    },
}

impl Step {
    /// Whether the step acts on the container side (which is looked up before the first one).
    pub(crate) fn in_container(&self) -> bool {
        match self {
            Step::RemoveStaleVeth { .. } | Step::CreateVeth { .. } => false,
            Step::SetSysctl { side, .. } | Step::SetUp { side } => *side == Side::Container,
            Step::SetMtu { .. }
            | Step::SetMac { .. }
            | Step::AddAddress { .. }
            | Step::RemoveSourceRules { .. }
            | Step::AddRoutes { .. } => true,
        }
    }
}

/// What undoes a step. Addresses, routes, MTU and settings go with the link, so only the veth
/// and the source rules (which belong to the namespace) have an undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// Deletes the veth pair by its host side (both ends go).
    DeleteLink { host: String },
    /// Deletes source rules in the container's namespace.
    DeleteSourceRules {
        netns: Netns,
        rules: Vec<SourceRule>,
    },
}

/// A step and what undoes it once it has been done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub step: Step,
    pub undo: Option<Undo>,
}

/// Changes to the kernel for one attachment, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlumbPlan {
    /// The host side's name.
    pub host: String,
    /// The container side's name where the plan acts on it.
    pub container: String,
    /// The container side's namespace.
    pub netns: Netns,
    pub steps: Vec<Planned>,
}

impl PlumbPlan {
    /// The undo of the whole plan: every step's undo, in reverse order.
    pub fn undo_list(&self) -> Vec<Undo> {
        self.steps
            .iter()
            .rev()
            .filter_map(|p| p.undo.clone())
            .collect()
    }
}

/// What one attachment (one interface of a container) gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The host side's name.
    pub host: String,
    /// The container side's name (`CNI_IFNAME`; for Docker, the name before and after dockerd
    /// moved it in: `tmp…`, then `eth<n>`).
    pub container: String,
    /// The container side's namespace (`CNI_NETNS`; for Docker, the driver's own before the
    /// move and the sandbox's after).
    pub netns: Netns,
    pub addresses: Vec<IpAddr>,
    pub mtu: Option<u32>,
    /// The container side's MAC, when the runtime asks for one.
    pub mac: Option<MacAddr>,
    /// Where its IPv4 and IPv6 routes go (`routes::placement`).
    pub routes: RoutePlacement,
}

/// Collects planned steps.
#[derive(Default)]
struct Steps(Vec<Planned>);

impl Steps {
    fn push(&mut self, step: Step, undo: Option<Undo>) {
        self.0.push(Planned { step, undo });
    }

    fn sysctl(&mut self, side: Side, path: String, value: &str) {
        let value = value.to_owned();
        self.push(Step::SetSysctl { side, path, value }, None);
    }

    fn into_plan(self, attachment: &Attachment) -> PlumbPlan {
        PlumbPlan {
            host: attachment.host.clone(),
            container: attachment.container.clone(),
            netns: attachment.netns.clone(),
            steps: self.0,
        }
    }
}

/// CNI's ADD: the veth (the container side created in its namespace), the host-side settings,
/// the MTU if any, then the container side's settings and MAC, its addresses and its routes
/// through 169.254.1.1 (IPv4) and the host side's link-local address (IPv6), with source
/// routing for a standby. Pure: no kernel, no root.
pub fn plan(attachment: &Attachment) -> PlumbPlan {
    let mut steps = Steps::default();
    veth(attachment, &mut steps);
    if let Some(mtu) = attachment.mtu {
        steps.push(Step::SetMtu { mtu }, None);
    }
    if has_family(attachment, Family::V6) {
        let container = &attachment.container;
        for (path, value) in [
            (format!("net/ipv6/conf/{container}/disable_ipv6"), "0"),
            (format!("net/ipv6/conf/{container}/accept_dad"), "0"),
        ] {
            steps.sysctl(Side::Container, path, value);
        }
    }
    if let Some(mac) = attachment.mac {
        steps.push(Step::SetMac { mac }, None);
    }
    steps.push(
        Step::SetUp {
            side: Side::Container,
        },
        None,
    );
    for ip in &attachment.addresses {
        let address = IpNet::from(*ip);
        steps.push(Step::AddAddress { address }, None);
    }
    for family in [Family::V4, Family::V6] {
        if let Some((step, undo)) = family_routes(attachment, family) {
            steps.push(step, undo);
        }
    }
    steps.into_plan(attachment)
}

/// Docker's `Join`: the veth with both ends in the driver's namespace (`attachment.netns` is
/// it), the host-side settings, and the container end's MAC if one was asked. dockerd then
/// moves the container end into the sandbox, names it, gives it its addresses and MTU, sets it
/// up and adds `Join`'s static routes. Pure.
pub fn veth_plan(attachment: &Attachment) -> PlumbPlan {
    let mut steps = Steps::default();
    veth(attachment, &mut steps);
    if let Some(mac) = attachment.mac {
        steps.push(Step::SetMac { mac }, None);
    }
    steps.into_plan(attachment)
}

/// A Docker attachment's routes of `families` once dockerd has moved the interface into the
/// sandbox (`attachment.container` is its name there, `attachment.netns` the sandbox): for a
/// second network, the standby routes in the main table and its own, and the source rules, as
/// CNI's ADD adds them; any rule left from the same addresses goes first. Pure.
pub fn routes_plan(attachment: &Attachment, families: &[Family]) -> PlumbPlan {
    let mut steps = Steps::default();
    let addresses: Vec<IpAddr> = attachment
        .addresses
        .iter()
        .copied()
        .filter(|ip| families.contains(&family_of(ip)))
        .collect();
    if families
        .iter()
        .any(|f| attachment.routes.of(*f).standby && has_family(attachment, *f))
    {
        steps.push(Step::RemoveSourceRules { addresses }, None);
    }
    for family in families {
        if let Some((step, undo)) = family_routes(attachment, *family) {
            steps.push(step, undo);
        }
    }
    steps.into_plan(attachment)
}

/// The pair, a host side left by an earlier container first, and the host side's settings
/// (the same Felix applies: one list, in `calico_linux`), then the host side up.
fn veth(attachment: &Attachment, steps: &mut Steps) {
    let host = attachment.host.clone();
    steps.push(Step::RemoveStaleVeth { host: host.clone() }, None);
    steps.push(
        Step::CreateVeth {
            host: host.clone(),
            container: attachment.container.clone(),
            netns: attachment.netns.clone(),
        },
        Some(Undo::DeleteLink { host: host.clone() }),
    );
    let mut settings = workload_interface_sysctls(&host, Family::V4);
    if has_family(attachment, Family::V6) {
        settings.extend(workload_interface_sysctls(&host, Family::V6));
    }
    for (path, value) in settings {
        steps.sysctl(Side::Host, path, value);
    }
    steps.push(Step::SetUp { side: Side::Host }, None);
}

fn family_of(ip: &IpAddr) -> Family {
    match ip {
        IpAddr::V4(_) => Family::V4,
        IpAddr::V6(_) => Family::V6,
    }
}

fn has_family(attachment: &Attachment, family: Family) -> bool {
    attachment
        .addresses
        .iter()
        .any(|ip| family_of(ip) == family)
}

/// A workload's gateway routes of one family: for IPv4 `169.254.1.1` on the link and the
/// default route through it (the host side answers by proxy ARP), for IPv6 the default route
/// through the host side's link-local address. CNI adds them itself; the Docker driver hands
/// them to dockerd as `Join`'s static routes.
pub fn gateway_routes(family: Family) -> Vec<(IpNet, Gateway)> {
    match family {
        Family::V4 => {
            let gateway = IpAddr::V4(IPV4_GATEWAY);
            vec![
                (IpNet::from(gateway), Gateway::OnLink),
                ("0.0.0.0/0".parse().expect("valid"), Gateway::Via(gateway)),
            ]
        }
        Family::V6 => vec![("::/0".parse().expect("valid"), Gateway::HostLinkLocal)],
    }
}

/// The routes of one family (none without an address of it): the gateway routes in the main
/// table with the attachment's metric, and for a standby the same routes in its own table
/// (numbered as the metric) and a source rule per address (see [`crate::routes`]).
fn family_routes(attachment: &Attachment, family: Family) -> Option<(Step, Option<Undo>)> {
    let addresses = attachment
        .addresses
        .iter()
        .filter(|ip| family_of(ip) == family);
    // No address of this family, no routes of it.
    addresses.clone().next()?;
    let placement = attachment.routes.of(family);
    let mut tables = vec![MAIN_TABLE];
    let mut rules = Vec::new();
    if placement.standby {
        tables.push(placement.metric);
        rules.extend(addresses.map(|&from| SourceRule {
            from,
            table: placement.metric,
        }));
    }
    let gateways = gateway_routes(family);
    let routes = tables
        .iter()
        .flat_map(|&table| {
            gateways
                .iter()
                .map(move |&(destination, gateway)| PlannedRoute {
                    destination,
                    gateway,
                    metric: placement.metric,
                    table,
                })
        })
        .collect();
    let undo = (!rules.is_empty()).then(|| Undo::DeleteSourceRules {
        netns: attachment.netns.clone(),
        rules: rules.clone(),
    });
    Some((
        Step::AddRoutes {
            family,
            routes,
            rules,
        },
        undo,
    ))
}

#[cfg(test)]
mod tests;
