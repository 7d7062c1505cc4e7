//! IPIP encapsulation (pools with `"ipip": "tunl0"` and `IpInIpEnabled`), as Calico 1.x had
//! it: traffic to the pool's workloads on other hosts goes through the tunnel device, straight
//! to the other host's address (its registered BGP address).
//!
//! [`plan`] is pure: the device and a route per remote workload address in an IPIP pool,
//! `<addr>/32 via <host address> dev tunl0 onlink proto 81`. [`Ipip::sync`] applies it. The
//! device comes with the kernel's `ipip` module (Felix does not load modules): when it is
//! missing, nothing is programmed and the sync says so, naming the device, so the agent can
//! report it once and carry on with everything else.
//!
//! Unlike Calico 1.x, the tunnel device gets no address of its own: workload traffic does not
//! need one; traffic the host itself sends to a remote workload leaves with the address of
//! another of its interfaces.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use calico_calc::{Endpoint, EndpointKey};
use calico_linux::{Netlink, NetlinkError};
use calico_model::pool::IpPool;
use ipnet::{IpNet, Ipv4Net};

use crate::vxlan::sync_routes;

/// The device Calico 1.x used (the one the `ipip` module makes).
pub const DEVICE: &str = "tunl0";

/// What one host needs for IPIP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpipPlan {
    /// The tunnel device; `None` when no pool uses IPIP (or `IpInIpEnabled` is off).
    pub device: Option<String>,
    /// The pools asking for IPIP.
    pub pools: Vec<Ipv4Net>,
    /// Remote workload address → its host's address.
    pub routes: BTreeMap<Ipv4Net, Ipv4Addr>,
}

/// The IPIP plan of `hostname`: `hosts` are every host's registered IPv4 address.
pub fn plan<'a>(
    hostname: &str,
    enabled: bool,
    hosts: &BTreeMap<String, Ipv4Addr>,
    pools: &BTreeMap<IpNet, IpPool>,
    endpoints: impl IntoIterator<Item = (&'a EndpointKey, &'a Endpoint)>,
) -> IpipPlan {
    let ipip_pools: Vec<(Ipv4Net, &str)> = pools
        .values()
        .filter_map(|p| match (p.cidr, &p.ipip) {
            (IpNet::V4(net), Some(device)) => Some((net, device.as_str())),
            _ => None,
        })
        .collect();
    let Some((_, device)) = ipip_pools.first().filter(|_| enabled) else {
        return IpipPlan::default();
    };
    let mut plan = IpipPlan {
        device: Some((*device).to_owned()),
        pools: ipip_pools.iter().map(|(net, _)| *net).collect(),
        routes: BTreeMap::new(),
    };
    for (key, endpoint) in endpoints {
        let EndpointKey::Workload(id) = key else {
            continue;
        };
        let Some(host) = hosts.get(&id.hostname).filter(|_| id.hostname != hostname) else {
            continue;
        };
        for address in &endpoint.addresses {
            if let IpAddr::V4(v4) = address
                && plan.pools.iter().any(|net| net.contains(v4))
            {
                plan.routes.insert(Ipv4Net::from(*v4), *host);
            }
        }
    }
    plan
}

/// What an IPIP sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpipChanges {
    /// The plan's device does not exist: the kernel has no `ipip` module loaded. Nothing was
    /// programmed.
    pub missing_device: Option<String>,
    pub routes_added: Vec<Ipv4Net>,
    pub routes_removed: Vec<Ipv4Net>,
}

/// Applies IPIP plans to a network namespace.
#[derive(Debug)]
pub struct Ipip {
    netlink: Netlink,
}

impl Ipip {
    pub fn new(netlink: Netlink) -> Ipip {
        Ipip { netlink }
    }

    /// Makes the routes through the tunnel device match `plan` (and the device up). Without a
    /// device in the plan, the routes through `tunl0` that an earlier plan made go.
    pub async fn sync(&self, plan: &IpipPlan) -> Result<IpipChanges, NetlinkError> {
        let mut changes = IpipChanges::default();
        let name = plan.device.as_deref().unwrap_or(DEVICE);
        let Some(link) = self.netlink.link_by_name(name).await? else {
            changes.missing_device = plan.device.clone();
            return Ok(changes);
        };
        if plan.device.is_some() && !link.up {
            self.netlink.set_up(link.index).await?;
        }
        (changes.routes_added, changes.routes_removed) =
            sync_routes(&self.netlink, link.index, &plan.routes).await?;
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workload on `host` (named after it), through the VXLAN tests' fixture.
    fn workload(host: &str, addresses: &[&str]) -> (EndpointKey, Endpoint) {
        crate::vxlan::tests::workload(host, &format!("on-{host}"), addresses)
    }

    fn pools(ipip: bool) -> BTreeMap<IpNet, IpPool> {
        let mut tunnelled = IpPool::new("10.65.0.0/16".parse().unwrap());
        tunnelled.ipip = ipip.then(|| "tunl0".to_owned());
        let plain = IpPool::new("10.66.0.0/16".parse().unwrap());
        BTreeMap::from([(tunnelled.cidr, tunnelled), (plain.cidr, plain)])
    }

    fn hosts() -> BTreeMap<String, Ipv4Addr> {
        BTreeMap::from([
            ("h1".to_owned(), "10.99.0.11".parse().unwrap()),
            ("h2".to_owned(), "10.99.1.12".parse().unwrap()),
        ])
    }

    /// The cluster's endpoints, in the store Felix passes.
    fn endpoints() -> calico_calc::EndpointMap {
        [
            workload("h1", &["10.65.1.1"]),
            workload("h2", &["10.65.2.1", "10.66.2.1", "fd00:65::2"]),
            workload("h3", &["10.65.3.1"]),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn remote_workloads_in_ipip_pools_go_through_the_tunnel_to_their_host() {
        let plan = plan("h1", true, &hosts(), &pools(true), &endpoints());
        assert_eq!(plan.device.as_deref(), Some("tunl0"));
        assert_eq!(plan.pools, ["10.65.0.0/16".parse::<Ipv4Net>().unwrap()]);
        assert_eq!(
            plan.routes,
            BTreeMap::from([(
                "10.65.2.1/32".parse().unwrap(),
                "10.99.1.12".parse().unwrap()
            )]),
            "not the local workload, not the plain pool, not IPv6, not a host with no address"
        );
    }

    #[test]
    fn nothing_without_ipip_enabled_or_an_ipip_pool() {
        assert_eq!(
            plan("h1", false, &hosts(), &pools(true), &endpoints()),
            IpipPlan::default()
        );
        assert_eq!(
            plan("h1", true, &hosts(), &pools(false), &endpoints()),
            IpipPlan::default()
        );
    }
}
