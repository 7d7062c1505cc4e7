//! VXLAN encapsulation of workload traffic between hosts, for pools with `vxlan_mode`: across
//! networks that do not route workload addresses, without BGP.
//!
//! [`plan`] is pure: from the hosts' tunnel endpoints (`/calico/v1/host/<h>/vxlan_tunnel`), the
//! pools and every workload endpoint, what this host needs. [`Vxlan::sync`] makes the kernel
//! match a plan and changes only what differs:
//!
//! - the device `vxlan.calico` (VNI 4096, UDP 4789, learning off, the host's tunnel MAC and
//!   address, MTU 50 below the underlying interface's), on the interface holding the host's
//!   own address;
//! - for each other host encapsulated to: a permanent neighbour entry (its tunnel address →
//!   its tunnel MAC) and a forwarding entry (its tunnel MAC → its address on the underlying
//!   network);
//! - a route to each address of the remote workloads in VXLAN pools, and to each peer's tunnel
//!   address, `via <peer tunnel address> dev vxlan.calico onlink proto 81` (more specific than
//!   any block route BGP may have, and not learned by BIRD).
//!
//! `cross-subnet` pools encapsulate only to hosts whose underlying address is outside this
//! host's underlying network; traffic to the others is routed as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use calico_calc::{Endpoint, EndpointKey};
use calico_linux::{FdbEntry, Neighbour, Netlink, NetlinkError, TunnelRoute, VxlanDevice};
use calico_model::pool::{IpPool, VxlanMode};
use calico_model::tunnel::VxlanTunnel;
use ipnet::{IpNet, Ipv4Net};

/// The tunnel device's name.
pub const DEVICE: &str = "vxlan.calico";
/// The VXLAN network identifier every host uses.
pub const VNI: u32 = 4096;
/// The IANA VXLAN port.
pub const PORT: u16 = 4789;
/// Outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14) headers.
pub const OVERHEAD: u32 = 50;

/// What one host needs for VXLAN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VxlanPlan {
    /// This host's tunnel endpoint; `None`: no device (no VXLAN pool, or no endpoint yet).
    pub local: Option<VxlanTunnel>,
    /// The other hosts traffic is encapsulated to, by hostname.
    pub peers: BTreeMap<String, VxlanTunnel>,
    /// Destination → the peer tunnel address it is routed through.
    pub routes: BTreeMap<Ipv4Net, Ipv4Addr>,
}

/// Whether traffic to a pool's workloads on `peer` is encapsulated, seen from `local`.
fn encapsulates(mode: VxlanMode, local: &VxlanTunnel, peer: &VxlanTunnel) -> bool {
    match mode {
        VxlanMode::Never => false,
        VxlanMode::Always => true,
        VxlanMode::CrossSubnet => !local
            .parent_address
            .trunc()
            .contains(&peer.parent_address.addr()),
    }
}

/// The VXLAN plan of `hostname`.
pub fn plan<'a>(
    hostname: &str,
    tunnels: &BTreeMap<String, VxlanTunnel>,
    pools: &BTreeMap<IpNet, IpPool>,
    endpoints: impl IntoIterator<Item = (&'a EndpointKey, &'a Endpoint)>,
) -> VxlanPlan {
    let vxlan_pools: Vec<(Ipv4Net, VxlanMode)> = pools
        .values()
        .filter(|p| !p.vxlan_mode.is_never())
        .filter_map(|p| match p.cidr {
            IpNet::V4(net) => Some((net, p.vxlan_mode)),
            IpNet::V6(_) => None,
        })
        .collect();
    let Some(local) = tunnels.get(hostname).filter(|_| !vxlan_pools.is_empty()) else {
        return VxlanPlan::default();
    };
    let mut plan = VxlanPlan {
        local: Some(local.clone()),
        ..VxlanPlan::default()
    };
    let peers = || tunnels.iter().filter(|(host, _)| host.as_str() != hostname);
    for (host, peer) in peers() {
        if vxlan_pools
            .iter()
            .any(|(_, mode)| encapsulates(*mode, local, peer))
        {
            plan.peers.insert(host.clone(), peer.clone());
            plan.routes
                .insert(Ipv4Net::from(peer.address), peer.address);
        }
    }
    for (key, endpoint) in endpoints {
        let EndpointKey::Workload(id) = key else {
            continue;
        };
        let Some(peer) = plan.peers.get(&id.hostname) else {
            continue;
        };
        for address in &endpoint.addresses {
            let IpAddr::V4(v4) = address else {
                continue;
            };
            let mode = vxlan_pools
                .iter()
                .find(|(net, _)| net.contains(v4))
                .map(|(_, mode)| *mode);
            if mode.is_some_and(|m| encapsulates(m, local, peer)) {
                plan.routes.insert(Ipv4Net::from(*v4), peer.address);
            }
        }
    }
    plan
}

/// What a sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VxlanChanges {
    /// The device was created (or re-created with new settings).
    pub device_created: bool,
    pub device_removed: bool,
    pub peers_added: Vec<Ipv4Addr>,
    pub peers_removed: Vec<Ipv4Addr>,
    pub routes_added: Vec<Ipv4Net>,
    pub routes_removed: Vec<Ipv4Net>,
}

impl VxlanChanges {
    pub fn is_empty(&self) -> bool {
        *self == VxlanChanges::default()
    }
}

/// Makes the tunnel routes (proto 81) through the device `ifindex` exactly `wanted`
/// (destination → gateway); routes through other devices are left alone. Returns the
/// destinations added and removed.
pub(crate) async fn sync_routes(
    netlink: &Netlink,
    ifindex: u32,
    wanted: &BTreeMap<Ipv4Net, Ipv4Addr>,
) -> Result<(Vec<Ipv4Net>, Vec<Ipv4Net>), NetlinkError> {
    let wanted: BTreeSet<TunnelRoute> = wanted
        .iter()
        .map(|(destination, gateway)| TunnelRoute {
            destination: *destination,
            gateway: *gateway,
            ifindex,
        })
        .collect();
    let current: BTreeSet<TunnelRoute> = netlink
        .tunnel_routes()
        .await?
        .into_iter()
        .filter(|r| r.ifindex == ifindex)
        .collect();
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for gone in current.difference(&wanted) {
        netlink.delete_tunnel_route(gone).await?;
        removed.push(gone.destination);
    }
    for new in wanted.difference(&current) {
        netlink.replace_tunnel_route(new).await?;
        added.push(new.destination);
    }
    Ok((added, removed))
}

/// Applies VXLAN plans to a network namespace.
#[derive(Debug)]
pub struct Vxlan {
    netlink: Netlink,
}

impl Vxlan {
    pub fn new(netlink: Netlink) -> Vxlan {
        Vxlan { netlink }
    }

    /// Makes the kernel match `plan`.
    pub async fn sync(&self, plan: &VxlanPlan) -> Result<VxlanChanges, NetlinkError> {
        let mut changes = VxlanChanges::default();
        let existing = self.netlink.vxlan_device(DEVICE).await?;
        let Some(local) = &plan.local else {
            // Its neighbours, forwarding entries and routes go with it.
            if existing.is_some() {
                self.netlink.delete_link(DEVICE).await?;
                changes.device_removed = true;
            }
            return Ok(changes);
        };
        let wanted = self.device_for(local).await?;
        let tunnel_address = IpNet::V4(Ipv4Net::from(local.address));
        let index = match existing {
            Some((index, device))
                if device == wanted && self.ipv4_addresses(index).await? == [tunnel_address] =>
            {
                index
            }
            existing => {
                if existing.is_some() {
                    self.netlink.delete_link(DEVICE).await?;
                }
                let index = self.netlink.add_vxlan(DEVICE, &wanted).await?;
                self.netlink.add_address(index, tunnel_address).await?;
                changes.device_created = true;
                index
            }
        };

        let neighbours: BTreeSet<Neighbour> = plan
            .peers
            .values()
            .map(|p| Neighbour {
                ip: IpAddr::V4(p.address),
                mac: p.mac.0,
                ifindex: index,
            })
            .collect();
        let current: BTreeSet<Neighbour> = self
            .netlink
            .permanent_neighbours()
            .await?
            .into_iter()
            .filter(|n| n.ifindex == index)
            .collect();
        for gone in current.difference(&neighbours) {
            self.netlink.delete_neighbour(gone).await?;
            if let IpAddr::V4(ip) = gone.ip {
                changes.peers_removed.push(ip);
            }
        }
        for new in neighbours.difference(&current) {
            self.netlink.replace_neighbour(new).await?;
            if let IpAddr::V4(ip) = new.ip {
                changes.peers_added.push(ip);
            }
        }

        let fdb: BTreeSet<FdbEntry> = plan
            .peers
            .values()
            .map(|p| FdbEntry {
                mac: p.mac.0,
                destination: p.parent_address.addr(),
                ifindex: index,
            })
            .collect();
        let current: BTreeSet<FdbEntry> =
            self.netlink.fdb_entries(index).await?.into_iter().collect();
        for gone in current.difference(&fdb) {
            self.netlink.delete_fdb(gone).await?;
        }
        for new in fdb.difference(&current) {
            self.netlink.replace_fdb(new).await?;
        }

        (changes.routes_added, changes.routes_removed) =
            sync_routes(&self.netlink, index, &plan.routes).await?;
        Ok(changes)
    }

    /// The IPv4 addresses of a link (the kernel gives the device an IPv6 link-local one too).
    async fn ipv4_addresses(&self, index: u32) -> Result<Vec<IpNet>, NetlinkError> {
        let all = self.netlink.addresses(index).await?;
        Ok(all
            .into_iter()
            .filter(|a| matches!(a, IpNet::V4(_)))
            .collect())
    }

    /// The device for this host's tunnel endpoint, on the interface holding its address.
    async fn device_for(&self, local: &VxlanTunnel) -> Result<VxlanDevice, NetlinkError> {
        let parent = local.parent_address.addr();
        let holders = self.netlink.all_addresses().await?;
        let parent_index = holders
            .iter()
            .find(|(_, held)| held.contains(&IpAddr::V4(parent)))
            .map(|(index, _)| *index)
            .ok_or_else(|| NetlinkError::Request {
                operation: format!("find the interface holding {parent}"),
                reason: format!(
                    "no interface has this host's VXLAN parent address {parent} (from its \
                     vxlan_tunnel record): VXLAN cannot be set up"
                ),
            })?;
        let mtu = self
            .netlink
            .links()
            .await?
            .into_iter()
            .find(|l| l.index == parent_index)
            .map_or(1500, |l| l.mtu);
        Ok(VxlanDevice {
            vni: VNI,
            port: PORT,
            local: parent,
            parent_index,
            mac: local.mac.0,
            mtu: mtu.saturating_sub(OVERHEAD),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use calico_calc::EndpointMap;
    use calico_model::endpoint::MacAddr;
    use calico_model::key::WorkloadEndpointId;

    fn tunnel(address: &str, mac: u8, parent: &str) -> VxlanTunnel {
        VxlanTunnel {
            address: address.parse().unwrap(),
            mac: MacAddr([0x66, 0, 0, 0, 0, mac]),
            parent_address: parent.parse().unwrap(),
        }
    }

    fn pool(cidr: &str, mode: VxlanMode) -> (IpNet, IpPool) {
        let cidr: IpNet = cidr.parse().unwrap();
        let mut pool = IpPool::new(cidr);
        pool.vxlan_mode = mode;
        (cidr, pool)
    }

    /// An active workload `name` on `host` with `addresses` (a plan's input).
    pub(crate) fn workload(host: &str, name: &str, addresses: &[&str]) -> (EndpointKey, Endpoint) {
        let key = EndpointKey::Workload(WorkloadEndpointId {
            hostname: host.to_owned(),
            orchestrator: "cni".to_owned(),
            workload: name.to_owned(),
            endpoint: "eth0".to_owned(),
        });
        let endpoint = Endpoint {
            interface: Some(format!("cali{name}")),
            active: true,
            profile_ids: Default::default(),
            labels: Default::default(),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
            mac: None,
            nat: Vec::new(),
        };
        (key, endpoint)
    }

    /// h1 and h2 share 10.99.0.0/24; h3 is on 10.99.1.0/24.
    fn tunnels() -> BTreeMap<String, VxlanTunnel> {
        BTreeMap::from([
            ("h1".to_owned(), tunnel("10.65.0.1", 1, "10.99.0.11/24")),
            ("h2".to_owned(), tunnel("10.65.0.2", 2, "10.99.0.12/24")),
            ("h3".to_owned(), tunnel("10.65.0.3", 3, "10.99.1.13/24")),
        ])
    }

    /// The cluster's endpoints, in the store Felix passes.
    fn endpoints() -> EndpointMap {
        [
            workload("h1", "a", &["10.65.1.1"]),
            workload("h2", "b", &["10.65.2.1", "fd00:65::2"]),
            workload("h3", "c", &["10.65.3.1", "10.66.3.1"]),
            workload("h4", "d", &["10.65.4.1"]),
        ]
        .into_iter()
        .collect()
    }

    fn net(text: &str) -> Ipv4Net {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn always_routes_every_remote_workload_in_the_pool_through_its_host() {
        let pools = BTreeMap::from([
            pool("10.65.0.0/16", VxlanMode::Always),
            pool("10.66.0.0/16", VxlanMode::Never),
        ]);
        let plan = plan("h1", &tunnels(), &pools, &endpoints());
        assert_eq!(plan.local, tunnels().get("h1").cloned());
        assert_eq!(
            plan.peers.keys().collect::<Vec<_>>(),
            ["h2", "h3"],
            "every other host with a tunnel endpoint"
        );
        assert_eq!(
            plan.routes,
            BTreeMap::from([
                (net("10.65.0.2/32"), ip("10.65.0.2")),
                (net("10.65.0.3/32"), ip("10.65.0.3")),
                (net("10.65.2.1/32"), ip("10.65.0.2")),
                (net("10.65.3.1/32"), ip("10.65.0.3")),
            ]),
            "local workloads, IPv6, the non-VXLAN pool and hosts without a tunnel are left out"
        );
    }

    #[test]
    fn cross_subnet_encapsulates_only_to_other_subnets() {
        let pools = BTreeMap::from([pool("10.65.0.0/16", VxlanMode::CrossSubnet)]);
        let plan = plan("h1", &tunnels(), &pools, &endpoints());
        assert_eq!(plan.peers.keys().collect::<Vec<_>>(), ["h3"]);
        assert_eq!(
            plan.routes.keys().copied().collect::<Vec<_>>(),
            [net("10.65.0.3/32"), net("10.65.3.1/32")]
        );
    }

    #[test]
    fn no_vxlan_pool_or_no_local_endpoint_means_no_device() {
        let never = BTreeMap::from([pool("10.65.0.0/16", VxlanMode::Never)]);
        assert_eq!(
            plan("h1", &tunnels(), &never, &endpoints()),
            VxlanPlan::default()
        );
        let always = BTreeMap::from([pool("10.65.0.0/16", VxlanMode::Always)]);
        assert_eq!(
            plan("h4", &tunnels(), &always, &endpoints()),
            VxlanPlan::default()
        );
    }
}
