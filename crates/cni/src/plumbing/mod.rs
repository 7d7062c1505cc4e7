//! Plugging a workload in, as data: [`plan`] computes a [`PlumbPlan`] (the veth, the
//! host-side settings, MTU, the container's addresses and routes, each step with its undo)
//! without touching anything, and [`execute`] runs it against the kernel, undoing the steps
//! already done (in reverse order) when one fails.
//!
//! The plan is pure so that what ADD does to the kernel can be tested without root; the
//! executor (`execute.rs`) is the only part that needs the kernel.

use std::net::IpAddr;

use calico_linux::{Family, workload_interface_sysctls};
use ipnet::IpNet;

use crate::routes::{IPV4_GATEWAY, MAIN_TABLE, Placement, SourceRule};

mod execute;
pub(crate) use execute::host_link_local;
pub use execute::{Plumbed, execute, undo};

/// Which end of the veth pair a step acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The host side, in the plugin's own namespace.
    Host,
    /// The container side, in `CNI_NETNS`.
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
    /// Creates the veth pair: `host` here, `container` directly inside the namespace at `netns`.
    CreateVeth {
        host: String,
        container: String,
        netns: String,
    },
    /// Writes `/proc/sys/<path>` in the namespace of `side`.
    SetSysctl {
        side: Side,
        path: String,
        value: String,
    },
    /// Sets the container side's MAC (before it is up, so its IPv6 link-local address
    /// follows).
    SetMac { mac: [u8; 6] },
    /// Sets one end up.
    SetUp { side: Side },
    /// Sets the MTU of both ends, the host side first.
    SetMtu { mtu: u32 },
    /// Adds an address (a /32 or /128) to the container side.
    AddAddress { address: IpNet },
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
    fn in_container(&self) -> bool {
        match self {
            Step::RemoveStaleVeth { .. } | Step::CreateVeth { .. } => false,
            Step::SetSysctl { side, .. } | Step::SetUp { side } => *side == Side::Container,
            Step::SetMtu { .. }
            | Step::SetMac { .. }
            | Step::AddAddress { .. }
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
        netns: String,
        rules: Vec<SourceRule>,
    },
}

/// A step and what undoes it once it has been done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub step: Step,
    pub undo: Option<Undo>,
}

/// Everything ADD changes in the kernel to plug a workload in, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlumbPlan {
    /// The host side's name.
    pub host: String,
    /// The container side's name (`CNI_IFNAME`).
    pub container: String,
    /// The container's namespace (`CNI_NETNS`).
    pub netns: String,
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

/// What one attachment (one `CNI_IFNAME` of a container) gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The host side's name.
    pub host: String,
    /// The container side's name (`CNI_IFNAME`).
    pub container: String,
    /// The container's namespace (`CNI_NETNS`).
    pub netns: String,
    pub addresses: Vec<IpAddr>,
    pub mtu: Option<u32>,
    /// The container side's MAC, when the runtime asks for one.
    pub mac: Option<[u8; 6]>,
    /// Where its IPv4 and IPv6 routes go (`routes::placement`).
    pub routes: RoutePlacement,
}

/// Where an attachment's routes go, per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutePlacement {
    pub v4: Placement,
    pub v6: Placement,
}

impl RoutePlacement {
    /// The first (or only) attachment of a container.
    pub const FIRST: RoutePlacement = RoutePlacement {
        v4: Placement::FIRST,
        v6: Placement::FIRST,
    };
}

/// The plan for an attachment: the veth (the container side created in its namespace), the
/// host-side settings, the MTU if any, then the container side's settings and MAC, its
/// addresses and its routes through 169.254.1.1 (IPv4) and the host side's link-local address
/// (IPv6), with source routing for a standby. Pure: no kernel, no root.
pub fn plan(attachment: &Attachment) -> PlumbPlan {
    let Attachment {
        host,
        container,
        netns,
        addresses,
        mtu,
        mac,
        routes: _,
    } = attachment;
    let (host, container, netns) = (host.as_str(), container.as_str(), netns.as_str());
    let mut steps = Vec::new();
    let mut push = |step: Step, undo: Option<Undo>| steps.push(Planned { step, undo });
    let ipv6 = addresses.iter().any(IpAddr::is_ipv6);
    let sysctl = |side: Side, path: String, value: &str| Step::SetSysctl {
        side,
        path,
        value: value.to_owned(),
    };

    push(
        Step::RemoveStaleVeth {
            host: host.to_owned(),
        },
        None,
    );
    push(
        Step::CreateVeth {
            host: host.to_owned(),
            container: container.to_owned(),
            netns: netns.to_owned(),
        },
        Some(Undo::DeleteLink {
            host: host.to_owned(),
        }),
    );
    // The same host-side settings Felix applies (one list, in `calico_linux`).
    let mut settings = workload_interface_sysctls(host, Family::V4);
    if ipv6 {
        settings.extend(workload_interface_sysctls(host, Family::V6));
    }
    for (path, value) in settings {
        push(sysctl(Side::Host, path, value), None);
    }
    push(Step::SetUp { side: Side::Host }, None);
    if let Some(mtu) = *mtu {
        push(Step::SetMtu { mtu }, None);
    }
    if ipv6 {
        for (path, value) in [
            (format!("net/ipv6/conf/{container}/disable_ipv6"), "0"),
            (format!("net/ipv6/conf/{container}/accept_dad"), "0"),
        ] {
            push(sysctl(Side::Container, path, value), None);
        }
    }
    if let Some(mac) = mac {
        push(Step::SetMac { mac: *mac }, None);
    }
    push(
        Step::SetUp {
            side: Side::Container,
        },
        None,
    );
    for ip in addresses {
        push(
            Step::AddAddress {
                address: IpNet::from(*ip),
            },
            None,
        );
    }
    for family in [Family::V4, Family::V6] {
        if let Some((step, undo)) = family_routes(attachment, family) {
            push(step, undo);
        }
    }
    PlumbPlan {
        host: host.to_owned(),
        container: container.to_owned(),
        netns: netns.to_owned(),
        steps,
    }
}

/// The routes of one family (none without an address of it): the gateway routes in the main
/// table with the attachment's metric, and for a standby the same routes in its own table
/// (numbered as the metric) and a source rule per address (see [`crate::routes`]).
fn family_routes(attachment: &Attachment, family: Family) -> Option<(Step, Option<Undo>)> {
    let v4 = family == Family::V4;
    let addresses = attachment.addresses.iter().filter(|ip| ip.is_ipv4() == v4);
    // No address of this family, no routes of it.
    addresses.clone().next()?;
    let placement = if v4 {
        attachment.routes.v4
    } else {
        attachment.routes.v6
    };
    let gateway_routes: Vec<(IpNet, Gateway)> = if v4 {
        let gateway = IpAddr::V4(IPV4_GATEWAY);
        vec![
            (IpNet::from(gateway), Gateway::OnLink),
            ("0.0.0.0/0".parse().expect("valid"), Gateway::Via(gateway)),
        ]
    } else {
        vec![("::/0".parse().expect("valid"), Gateway::HostLinkLocal)]
    };
    let mut tables = vec![MAIN_TABLE];
    let mut rules = Vec::new();
    if placement.standby {
        tables.push(placement.metric);
        rules.extend(addresses.map(|&from| SourceRule {
            from,
            table: placement.metric,
        }));
    }
    let routes = tables
        .iter()
        .flat_map(|&table| {
            gateway_routes
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
