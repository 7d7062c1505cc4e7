//! Plugging a workload in, as data: [`plan`] computes a [`PlumbPlan`] (the veth, the
//! host-side settings, MTU, the container's addresses and routes, each step with its undo)
//! without touching anything, and [`execute`] runs it against the kernel, undoing the steps
//! already done (in reverse order) when one fails.
//!
//! The plan is pure so that what ADD does to the kernel can be tested without root; the
//! executor is the only part that needs the kernel.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use calico_linux::{
    Family, GatewayRoute, Link, Netlink, Netns, set_sysctl, workload_interface_sysctls,
};
use ipnet::IpNet;

use crate::plugin::IPV4_GATEWAY;
use crate::spec::{CniError, code};

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
    /// Sets one end up.
    SetUp { side: Side },
    /// Sets the MTU of both ends, the host side first.
    SetMtu { mtu: u32 },
    /// Adds an address (a /32 or /128) to the container side.
    AddAddress { address: IpNet },
    /// Adds a route on the container side.
    AddGatewayRoute {
        destination: IpNet,
        gateway: Gateway,
    },
}

impl Step {
    /// Whether the step acts on the container side (which is looked up before the first one).
    fn in_container(&self) -> bool {
        match self {
            Step::RemoveStaleVeth { .. } | Step::CreateVeth { .. } => false,
            Step::SetSysctl { side, .. } | Step::SetUp { side } => *side == Side::Container,
            Step::SetMtu { .. } | Step::AddAddress { .. } | Step::AddGatewayRoute { .. } => true,
        }
    }
}

/// What undoes a step. Addresses, routes, MTU and settings go with the link, so only the veth
/// has an undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// Deletes the veth pair by its host side (both ends go).
    DeleteLink { host: String },
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

/// The plan for a workload: the veth `host`/`container` (created in the namespace at
/// `netns`), the host-side settings, the MTU if any, then the container side's settings,
/// addresses and routes through 169.254.1.1 (IPv4) and the host side's link-local address
/// (IPv6). Pure: no kernel, no root.
pub fn plan(
    host: &str,
    container: &str,
    netns: &str,
    addresses: &[IpAddr],
    mtu: Option<u32>,
) -> PlumbPlan {
    let mut steps = Vec::new();
    let mut push = |step: Step, undo: Option<Undo>| steps.push(Planned { step, undo });
    let ipv4 = addresses.iter().any(IpAddr::is_ipv4);
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
    if let Some(mtu) = mtu {
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
    if ipv4 {
        let gateway = IpAddr::V4(IPV4_GATEWAY);
        push(
            Step::AddGatewayRoute {
                destination: IpNet::from(gateway),
                gateway: Gateway::OnLink,
            },
            None,
        );
        push(
            Step::AddGatewayRoute {
                destination: "0.0.0.0/0".parse().expect("valid"),
                gateway: Gateway::Via(gateway),
            },
            None,
        );
    }
    if ipv6 {
        push(
            Step::AddGatewayRoute {
                destination: "::/0".parse().expect("valid"),
                gateway: Gateway::HostLinkLocal,
            },
            None,
        );
    }
    PlumbPlan {
        host: host.to_owned(),
        container: container.to_owned(),
        netns: netns.to_owned(),
        steps,
    }
}

/// What a plan made: both ends, and the undo of all of it (for a later failure of ADD).
#[derive(Debug)]
pub struct Plumbed {
    pub host: Link,
    pub container: Link,
    pub undo: Vec<Undo>,
}

/// Runs a plan in order. When a step fails, the undo of the steps already done runs in
/// reverse order (best effort, logged) and the step's error is returned.
pub async fn execute(plan: &PlumbPlan) -> Result<Plumbed, CniError> {
    let mut kernel = Kernel::connect(plan)?;
    let mut done: Vec<Undo> = Vec::new();
    for planned in &plan.steps {
        let mut outcome = kernel.apply(&planned.step).await;
        if outcome.is_ok() {
            // Done once its effect has landed, even if looking at the result fails.
            done.extend(planned.undo.clone());
            outcome = kernel.settle(&planned.step).await;
        }
        if let Err(error) = outcome {
            tracing::warn!("plugging {} in failed, undoing it: {error}", plan.host);
            undo(&done.iter().rev().cloned().collect::<Vec<_>>()).await;
            return Err(error);
        }
    }
    match (kernel.host_link, kernel.container_link) {
        (Some(host), Some((_, container))) => Ok(Plumbed {
            host,
            container,
            undo: done.into_iter().rev().collect(),
        }),
        _ => {
            undo(&done.iter().rev().cloned().collect::<Vec<_>>()).await;
            Err(CniError::new(
                code::KERNEL,
                format!("the plan for {} creates no veth", plan.host),
            ))
        }
    }
}

/// Runs an undo list in its order, best effort: failures are logged.
pub async fn undo(list: &[Undo]) {
    for item in list {
        match item {
            Undo::DeleteLink { host } => {
                let removed = async {
                    let netlink = Netlink::connect(&Netns::current())?;
                    netlink.delete_link(host).await
                };
                if let Err(e) = removed.await {
                    tracing::error!("undo: cannot delete {host}: {e}");
                }
            }
        }
    }
}

/// The kernel as the executor sees it: the host connection, and both ends once they exist.
struct Kernel<'a> {
    plan: &'a PlumbPlan,
    here: Netns,
    netns: Netns,
    host: Netlink,
    host_link: Option<Link>,
    container_link: Option<(Netlink, Link)>,
}

impl<'a> Kernel<'a> {
    fn connect(plan: &'a PlumbPlan) -> Result<Kernel<'a>, CniError> {
        let here = Netns::current();
        let host = Netlink::connect(&here).map_err(kernel)?;
        Ok(Kernel {
            plan,
            here,
            netns: Netns::at_path(&plan.netns),
            host,
            host_link: None,
            container_link: None,
        })
    }

    fn host_link(&self) -> Result<&Link, CniError> {
        self.host_link.as_ref().ok_or_else(|| {
            CniError::new(
                code::KERNEL,
                format!("{}: the plan uses it before creating it", self.plan.host),
            )
        })
    }

    /// The container side, looked up (once) before the first step that acts on it.
    async fn container(&mut self) -> Result<(&Netlink, &Link), CniError> {
        if self.container_link.is_none() {
            let container = Netlink::connect(&self.netns).map_err(kernel)?;
            let link = container
                .link_by_name(&self.plan.container)
                .await
                .map_err(kernel)?
                .ok_or_else(|| {
                    CniError::new(
                        code::KERNEL,
                        format!(
                            "{} did not appear in {}",
                            self.plan.container, self.plan.netns
                        ),
                    )
                })?;
            self.container_link = Some((container, link));
        }
        let (netlink, link) = self.container_link.as_ref().expect("looked up above");
        Ok((netlink, link))
    }

    /// The step's effect.
    async fn apply(&mut self, step: &Step) -> Result<(), CniError> {
        if step.in_container() {
            self.container().await?;
        }
        match step {
            Step::RemoveStaleVeth { host } => {
                if self.host.delete_link(host).await.map_err(kernel)? {
                    tracing::info!(
                        veth = %host,
                        "removed a veth left by an earlier container of this workload"
                    );
                }
            }
            Step::CreateVeth {
                host,
                container,
                netns,
            } => {
                self.host
                    .add_veth(host, container, &Netns::at_path(netns))
                    .await
                    .map_err(kernel)?;
            }
            Step::SetSysctl { side, path, value } => {
                let netns = match side {
                    Side::Host => &self.here,
                    Side::Container => &self.netns,
                };
                set_sysctl(netns, path, value)
                    .map_err(|e| CniError::new(code::KERNEL, e.to_string()))?;
            }
            Step::SetUp { side: Side::Host } => {
                let index = self.host_link()?.index;
                self.host.set_up(index).await.map_err(kernel)?;
            }
            Step::SetUp {
                side: Side::Container,
            } => {
                let (container, link) = self.container().await?;
                container.set_up(link.index).await.map_err(kernel)?;
            }
            Step::SetMtu { mtu } => {
                let index = self.host_link()?.index;
                self.host.set_mtu(index, *mtu).await.map_err(kernel)?;
                let (container, link) = self.container().await?;
                container.set_mtu(link.index, *mtu).await.map_err(kernel)?;
            }
            Step::AddAddress { address } => {
                let (container, link) = self.container().await?;
                container
                    .add_address(link.index, *address)
                    .await
                    .map_err(kernel)?;
            }
            Step::AddGatewayRoute {
                destination,
                gateway,
            } => {
                let gateway = match gateway {
                    Gateway::OnLink => None,
                    Gateway::Via(ip) => Some(*ip),
                    Gateway::HostLinkLocal => Some(IpAddr::V6(
                        host_link_local(&self.host, self.host_link()?).await?,
                    )),
                };
                let (container, link) = self.container().await?;
                let route = GatewayRoute {
                    destination: *destination,
                    gateway,
                    ifindex: link.index,
                };
                container.add_gateway_route(&route).await.map_err(kernel)?;
            }
        }
        Ok(())
    }

    /// What the executor learns once a step is done: the host side after its creation.
    async fn settle(&mut self, step: &Step) -> Result<(), CniError> {
        if let Step::CreateVeth { host, .. } = step {
            let link = self
                .host
                .link_by_name(host)
                .await
                .map_err(kernel)?
                .ok_or_else(|| {
                    CniError::new(code::KERNEL, format!("{host} vanished after creation"))
                })?;
            self.host_link = Some(link);
        }
        Ok(())
    }
}

/// The host side's link-local address: the IPv6 gateway of the workload. The kernel adds it
/// when the link comes up; until then (or if addresses are generated otherwise) it is derived
/// from the MAC as the kernel does by default (EUI-64).
async fn host_link_local(host: &Netlink, link: &Link) -> Result<Ipv6Addr, CniError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let addresses = host.addresses(link.index).await.map_err(kernel)?;
        let found = addresses.iter().find_map(|a| match a.addr() {
            IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some(v6),
            _ => None,
        });
        if let Some(v6) = found {
            return Ok(v6);
        }
        if std::time::Instant::now() > deadline {
            return link.mac.map(eui64_link_local).ok_or_else(|| {
                CniError::new(
                    code::KERNEL,
                    format!("{} has no link-local address", link.name),
                )
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn eui64_link_local(mac: [u8; 6]) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac;
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([a ^ 0x02, b]),
        u16::from_be_bytes([c, 0xff]),
        u16::from_be_bytes([0xfe, d]),
        u16::from_be_bytes([e, f]),
    )
}

fn kernel(error: calico_linux::NetlinkError) -> CniError {
    CniError::new(code::KERNEL, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "cali0123456789a";
    const NETNS: &str = "/run/netns/ctr";

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    fn steps(plan: &PlumbPlan) -> Vec<Step> {
        plan.steps.iter().map(|p| p.step.clone()).collect()
    }

    fn host_sysctls(families: &[Family]) -> Vec<Step> {
        families
            .iter()
            .flat_map(|f| workload_interface_sysctls(HOST, *f))
            .map(|(path, value)| Step::SetSysctl {
                side: Side::Host,
                path,
                value: value.to_owned(),
            })
            .collect()
    }

    fn head(families: &[Family]) -> Vec<Step> {
        let mut steps = vec![
            Step::RemoveStaleVeth { host: HOST.into() },
            Step::CreateVeth {
                host: HOST.into(),
                container: "eth0".into(),
                netns: NETNS.into(),
            },
        ];
        steps.extend(host_sysctls(families));
        steps.push(Step::SetUp { side: Side::Host });
        steps
    }

    fn container_ipv6_sysctls() -> Vec<Step> {
        ["disable_ipv6", "accept_dad"]
            .into_iter()
            .map(|name| Step::SetSysctl {
                side: Side::Container,
                path: format!("net/ipv6/conf/eth0/{name}"),
                value: "0".into(),
            })
            .collect()
    }

    fn ipv4_routes() -> Vec<Step> {
        vec![
            Step::AddGatewayRoute {
                destination: "169.254.1.1/32".parse().unwrap(),
                gateway: Gateway::OnLink,
            },
            Step::AddGatewayRoute {
                destination: "0.0.0.0/0".parse().unwrap(),
                gateway: Gateway::Via("169.254.1.1".parse().unwrap()),
            },
        ]
    }

    fn ipv6_route() -> Step {
        Step::AddGatewayRoute {
            destination: "::/0".parse().unwrap(),
            gateway: Gateway::HostLinkLocal,
        }
    }

    #[test]
    fn an_ipv4_workload_gets_a_veth_its_address_and_routes_through_169_254_1_1() {
        let plan = plan(HOST, "eth0", NETNS, &ips(&["10.65.0.2"]), None);
        let mut expected = head(&[Family::V4]);
        expected.push(Step::SetUp {
            side: Side::Container,
        });
        expected.push(Step::AddAddress {
            address: "10.65.0.2/32".parse().unwrap(),
        });
        expected.extend(ipv4_routes());
        assert_eq!(steps(&plan), expected);
        assert!(
            !steps(&plan)
                .iter()
                .any(|s| matches!(s, Step::SetMtu { .. }))
        );
    }

    #[test]
    fn an_ipv6_workload_routes_through_the_host_side_link_local_address() {
        let plan = plan(HOST, "eth0", NETNS, &ips(&["fd00::2"]), None);
        // The IPv4 host settings always apply, the IPv6 ones because of the address.
        let mut expected = head(&[Family::V4, Family::V6]);
        expected.extend(container_ipv6_sysctls());
        expected.push(Step::SetUp {
            side: Side::Container,
        });
        expected.push(Step::AddAddress {
            address: "fd00::2/128".parse().unwrap(),
        });
        expected.push(ipv6_route());
        assert_eq!(steps(&plan), expected);
    }

    #[test]
    fn a_dual_stack_workload_gets_both_gateways() {
        let plan = plan(HOST, "eth0", NETNS, &ips(&["10.65.0.2", "fd00::2"]), None);
        let mut expected = head(&[Family::V4, Family::V6]);
        expected.extend(container_ipv6_sysctls());
        expected.push(Step::SetUp {
            side: Side::Container,
        });
        expected.push(Step::AddAddress {
            address: "10.65.0.2/32".parse().unwrap(),
        });
        expected.push(Step::AddAddress {
            address: "fd00::2/128".parse().unwrap(),
        });
        expected.extend(ipv4_routes());
        expected.push(ipv6_route());
        assert_eq!(steps(&plan), expected);
    }

    #[test]
    fn a_custom_mtu_is_set_on_both_ends_once_the_host_side_is_up() {
        let plan = plan(HOST, "eth1", NETNS, &ips(&["10.65.0.2"]), Some(1400));
        let steps = steps(&plan);
        let up = steps
            .iter()
            .position(|s| *s == Step::SetUp { side: Side::Host })
            .unwrap();
        assert_eq!(steps[up + 1], Step::SetMtu { mtu: 1400 });
        assert_eq!(
            steps[up + 2],
            Step::SetUp {
                side: Side::Container
            }
        );
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, Step::SetMtu { .. }))
                .count(),
            1
        );
        assert!(matches!(
            &steps[1],
            Step::CreateVeth { container, .. } if container == "eth1"
        ));
    }

    #[test]
    fn only_the_veth_is_undone_and_the_undo_list_runs_backwards() {
        let plan = plan(
            HOST,
            "eth0",
            NETNS,
            &ips(&["10.65.0.2", "fd00::2"]),
            Some(1400),
        );
        let with_undo: Vec<_> = plan.steps.iter().filter(|p| p.undo.is_some()).collect();
        assert_eq!(with_undo.len(), 1);
        assert!(matches!(with_undo[0].step, Step::CreateVeth { .. }));
        assert_eq!(
            plan.undo_list(),
            vec![Undo::DeleteLink { host: HOST.into() }]
        );

        // Reverse order, over a plan with several undoable steps.
        let mut two = plan.clone();
        two.steps.push(Planned {
            step: Step::CreateVeth {
                host: "cali2".into(),
                container: "eth1".into(),
                netns: NETNS.into(),
            },
            undo: Some(Undo::DeleteLink {
                host: "cali2".into(),
            }),
        });
        assert_eq!(
            two.undo_list(),
            vec![
                Undo::DeleteLink {
                    host: "cali2".into()
                },
                Undo::DeleteLink { host: HOST.into() },
            ]
        );
    }

    #[test]
    fn the_ipv6_gateway_is_derived_from_the_mac_as_the_kernel_does() {
        let ll = eui64_link_local([0xee, 0xee, 0xee, 0xee, 0xee, 0xee]);
        assert_eq!(ll, "fe80::ecee:eeff:feee:eeee".parse::<Ipv6Addr>().unwrap());
    }
}
