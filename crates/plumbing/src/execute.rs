//! The executor of a [`PlumbPlan`]: runs its steps against the kernel in order and undoes
//! what it did when one fails.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use calico_linux::{Link, Netlink, Netns, set_sysctl};

use calico_model::MacAddr;

use crate::error::PlumbingError;
use crate::plan::{Gateway, PlannedRoute, PlumbPlan, Side, Step, Undo};
use crate::routes::{self, ContainerRoute, SourceRule};

/// What a plan made or acted on: both ends as they are now, and the undo of what it did (for
/// a later failure of the caller).
#[derive(Debug)]
pub struct Plumbed {
    pub host: Link,
    pub container: Link,
    pub undo: Vec<Undo>,
}

/// How long the host side's link-local address may take to appear once the container side is
/// up (CNI: the plan sets it up); the Docker driver asks before dockerd does, and derives it.
pub const LINK_LOCAL_WAIT: Duration = Duration::from_secs(2);

/// Runs a plan in order. When a step fails, the undo of the steps already done runs in
/// reverse order (best effort, logged) and the step's error is returned.
pub async fn execute(plan: &PlumbPlan) -> Result<Plumbed, PlumbingError> {
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
    let ends = async {
        let host = kernel.host_link().await?.clone();
        let (_, container) = kernel.container().await?;
        Ok::<_, PlumbingError>((host, container.clone()))
    };
    match ends.await {
        Ok((host, container)) => Ok(Plumbed {
            host,
            container,
            undo: done.into_iter().rev().collect(),
        }),
        Err(error) => {
            undo(&done.iter().rev().cloned().collect::<Vec<_>>()).await;
            Err(error)
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
            Undo::DeleteSourceRules { netns, rules } => match Netlink::connect(netns) {
                Ok(container) => delete_rules(&container, rules).await,
                Err(e) => tracing::error!("undo: cannot delete the rules in {netns}: {e}"),
            },
        }
    }
}

/// Deletes source rules, best effort: failures are logged.
async fn delete_rules(container: &Netlink, rules: &[SourceRule]) {
    for rule in rules {
        if let Err(e) = routes::delete_rule(container, rule).await {
            tracing::error!("undo: cannot delete the rule {rule}: {e}");
        }
    }
}

/// The kernel as the executor sees it: the host connection, and both ends once looked up.
struct Kernel<'a> {
    plan: &'a PlumbPlan,
    here: Netns,
    host: Netlink,
    host_link: Option<Link>,
    container_link: Option<(Netlink, Link)>,
}

impl<'a> Kernel<'a> {
    fn connect(plan: &'a PlumbPlan) -> Result<Kernel<'a>, PlumbingError> {
        let here = Netns::current();
        let host = Netlink::connect(&here)?;
        Ok(Kernel {
            plan,
            here,
            host,
            host_link: None,
            container_link: None,
        })
    }

    /// The host side: made by the plan, or (for a plan that acts on an existing attachment)
    /// looked up once.
    async fn host_link(&mut self) -> Result<&Link, PlumbingError> {
        if self.host_link.is_none() {
            let link = self.host.link_by_name(&self.plan.host).await?;
            self.host_link = Some(link.ok_or_else(|| {
                PlumbingError::Missing(format!("{}: no such host-side interface", self.plan.host))
            })?);
        }
        Ok(self.host_link.as_ref().expect("looked up above"))
    }

    /// The container side, looked up (once) before the first step that acts on it.
    async fn container(&mut self) -> Result<(&Netlink, &Link), PlumbingError> {
        if self.container_link.is_none() {
            let container = Netlink::connect(&self.plan.netns)?;
            let link = container
                .link_by_name(&self.plan.container)
                .await?
                .ok_or_else(|| {
                    PlumbingError::Missing(format!(
                        "{} did not appear in {}",
                        self.plan.container, self.plan.netns
                    ))
                })?;
            self.container_link = Some((container, link));
        }
        let (netlink, link) = self.container_link.as_ref().expect("looked up above");
        Ok((netlink, link))
    }

    /// The step's effect.
    async fn apply(&mut self, step: &Step) -> Result<(), PlumbingError> {
        if step.in_container() {
            self.container().await?;
        }
        match step {
            Step::RemoveStaleVeth { host } => {
                if self.host.delete_link(host).await? {
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
            } => self.host.add_veth(host, container, netns).await?,
            Step::SetSysctl { side, path, value } => {
                let netns = match side {
                    Side::Host => &self.here,
                    Side::Container => &self.plan.netns,
                };
                set_sysctl(netns, path, value)?;
            }
            Step::SetUp { side: Side::Host } => {
                let index = self.host_link().await?.index;
                self.host.set_up(index).await?;
            }
            Step::SetUp {
                side: Side::Container,
            } => {
                let (container, link) = self.container().await?;
                container.set_up(link.index).await?;
            }
            Step::SetMtu { mtu } => {
                let index = self.host_link().await?.index;
                self.host.set_mtu(index, *mtu).await?;
                let (container, link) = self.container().await?;
                container.set_mtu(link.index, *mtu).await?;
            }
            Step::AddAddress { address } => {
                let (container, link) = self.container().await?;
                container.add_address(link.index, *address).await?;
            }
            Step::SetMac { mac } => {
                let (container, link) = self.container().await?;
                let refused = |e: calico_linux::NetlinkError| PlumbingError::Refused {
                    command: format!("ip link set {} address {mac}", link.name),
                    reason: e.to_string(),
                };
                container
                    .set_mac(link.index, mac.octets())
                    .await
                    .map_err(refused)?;
            }
            Step::RemoveSourceRules { addresses } => {
                let (container, _) = self.container().await?;
                routes::delete_rules_from(container, addresses).await?;
            }
            Step::AddRoutes { routes, rules, .. } => {
                let mut resolved = Vec::new();
                for planned in routes {
                    resolved.push(self.resolve(planned).await?);
                }
                let (container, link) = self.container().await?;
                if let Err(e) = routes::add(container, link.index, &resolved, rules).await {
                    // Adding stops at the first failure: what came before stays, and the
                    // rules among it do not go with the link.
                    delete_rules(container, rules).await;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// A planned route with its gateway known.
    async fn resolve(&mut self, planned: &PlannedRoute) -> Result<ContainerRoute, PlumbingError> {
        let gateway = match planned.gateway {
            Gateway::OnLink => None,
            Gateway::Via(ip) => Some(ip),
            Gateway::HostLinkLocal => {
                let link = self.host_link().await?.clone();
                let ll = host_link_local(&self.host, &link, LINK_LOCAL_WAIT).await?;
                Some(IpAddr::V6(ll))
            }
        };
        Ok(ContainerRoute {
            destination: planned.destination,
            gateway,
            dev: self.plan.container.clone(),
            metric: planned.metric,
            table: planned.table,
        })
    }

    /// What the executor learns once a step is done: the host side after its creation, the
    /// container side's new MAC.
    async fn settle(&mut self, step: &Step) -> Result<(), PlumbingError> {
        if let (Step::SetMac { mac }, Some((_, link))) = (step, &mut self.container_link) {
            link.mac = Some(mac.octets());
        }
        if let Step::CreateVeth { host, .. } = step {
            let link =
                self.host.link_by_name(host).await?.ok_or_else(|| {
                    PlumbingError::Missing(format!("{host} vanished after creation"))
                })?;
            self.host_link = Some(link);
        }
        Ok(())
    }
}

/// The host side's link-local address: the IPv6 gateway of the workload. The kernel adds it
/// once the link has a carrier; until then (for at most `wait`), or if addresses are generated
/// otherwise, it is derived from the MAC as the kernel does by default (EUI-64).
pub async fn host_link_local(
    host: &Netlink,
    link: &Link,
    wait: Duration,
) -> Result<Ipv6Addr, PlumbingError> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let addresses = host.addresses(link.index).await?;
        let found = addresses.iter().find_map(|a| match a.addr() {
            IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some(v6),
            _ => None,
        });
        if let Some(v6) = found {
            return Ok(v6);
        }
        if std::time::Instant::now() >= deadline {
            return link
                .mac
                .map(|mac| MacAddr(mac).eui64_link_local())
                .ok_or_else(|| {
                    PlumbingError::Missing(format!("{} has no link-local address", link.name))
                });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
