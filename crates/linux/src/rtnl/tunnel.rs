//! VXLAN over rtnetlink: the tunnel device, its forwarding database (which host a remote
//! tunnel MAC lives on) and the routes through it (to a remote workload via the remote tunnel
//! address, on-link).

use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt;
use ipnet::{IpNet, Ipv4Net};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::link::{InfoData, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol, RouteScope};
use rtnetlink::{LinkVxlan, RouteMessageBuilder};

use super::dump::KernelRoute;
use super::{MAIN_TABLE, Netlink, NetlinkError, deleted, is_missing, link_of, request_error};
use crate::Family;

/// The routing protocol number of routes through a tunnel (`proto 81`): Felix's, but not
/// learned by BIRD (which learns its workload routes, `proto 80`), so a host never announces
/// another host's workloads.
pub const TUNNEL_ROUTE_PROTOCOL: u8 = 81;

/// A VXLAN device as Felix wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanDevice {
    pub vni: u32,
    pub port: u16,
    /// The host's address on the underlying network (the outer source).
    pub local: Ipv4Addr,
    /// The interface that holds `local`.
    pub parent_index: u32,
    pub mac: [u8; 6],
    pub mtu: u32,
}

/// A forwarding database entry: frames for `mac` go, encapsulated, to `destination`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FdbEntry {
    pub mac: [u8; 6],
    pub destination: Ipv4Addr,
    pub ifindex: u32,
}

/// A route through a tunnel device: `destination via gateway dev <ifindex> onlink proto 81`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelRoute {
    pub destination: Ipv4Net,
    pub gateway: Ipv4Addr,
    pub ifindex: u32,
}

impl Netlink {
    /// The VXLAN device called `name` as the kernel has it: its index and settings (`None` if
    /// there is no link of that name; an error if it is not a VXLAN device).
    pub async fn vxlan_device(
        &self,
        name: &str,
    ) -> Result<Option<(u32, VxlanDevice)>, NetlinkError> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        let message = match stream.try_next().await {
            Ok(Some(message)) => message,
            Ok(None) => return Ok(None),
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(request_error(format!("get link {name}"))(e)),
        };
        let device = vxlan_of(&message).ok_or_else(|| NetlinkError::Request {
            operation: format!("read link {name}"),
            reason: "it exists but is not a VXLAN device: remove it or rename it".to_owned(),
        })?;
        Ok(Some((message.header.index, device)))
    }

    /// Creates the VXLAN device `name`, up, with learning off (Felix fills the forwarding
    /// database); returns its index.
    pub async fn add_vxlan(&self, name: &str, device: &VxlanDevice) -> Result<u32, NetlinkError> {
        let message = LinkVxlan::new(name, device.vni)
            .dev(device.parent_index)
            .local(device.local)
            .port(device.port)
            .learning(false)
            .address(device.mac.to_vec())
            .mtu(device.mtu)
            .up()
            .build();
        self.handle
            .link()
            .add(message)
            .execute()
            .await
            .map_err(request_error(format!("add VXLAN device {name}")))?;
        let link = self
            .link_by_name(name)
            .await?
            .ok_or_else(|| NetlinkError::Request {
                operation: format!("add VXLAN device {name}"),
                reason: "the device is not there after it was added".to_owned(),
            })?;
        Ok(link.index)
    }

    /// The forwarding database entries of a device that send to a remote address.
    pub async fn fdb_entries(&self, ifindex: u32) -> Result<Vec<FdbEntry>, NetlinkError> {
        let messages: Vec<NeighbourMessage> = self
            .handle
            .neighbours()
            .get()
            .set_address_family(AddressFamily::Bridge)
            .execute()
            .try_collect()
            .await
            .map_err(request_error("list forwarding database entries"))?;
        Ok(messages
            .iter()
            .filter(|m| m.header.ifindex == ifindex)
            .filter_map(fdb_entry)
            .collect())
    }

    /// `bridge fdb replace <mac> dev <ifindex> dst <destination> self permanent`.
    pub async fn replace_fdb(&self, entry: &FdbEntry) -> Result<(), NetlinkError> {
        self.handle
            .neighbours()
            .add_bridge(entry.ifindex, &entry.mac)
            .destination(IpAddr::V4(entry.destination))
            .flags(NeighbourFlags::Own)
            .state(NeighbourState::Permanent)
            .replace()
            .execute()
            .await
            .map_err(request_error(format!(
                "add forwarding entry to {} dev #{}",
                entry.destination, entry.ifindex
            )))
    }

    /// Deletes a forwarding database entry; one already gone is fine.
    pub async fn delete_fdb(&self, entry: &FdbEntry) -> Result<(), NetlinkError> {
        let mut message = NeighbourMessage::default();
        message.header.family = AddressFamily::Bridge;
        message.header.ifindex = entry.ifindex;
        message.header.flags = NeighbourFlags::Own;
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(entry.mac.to_vec()));
        message
            .attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
                entry.destination,
            )));
        deleted(
            self.handle.neighbours().del(message).execute().await,
            || {
                format!(
                    "delete forwarding entry to {} dev #{}",
                    entry.destination, entry.ifindex
                )
            },
        )
    }

    /// The routes through tunnels ([`TUNNEL_ROUTE_PROTOCOL`]) in the main table.
    pub async fn tunnel_routes(&self) -> Result<Vec<TunnelRoute>, NetlinkError> {
        let routes = self.dump_routes(&[Family::V4]).await?;
        Ok(routes.iter().filter_map(tunnel_route).collect())
    }

    fn tunnel_route_message(route: &TunnelRoute) -> RouteMessage {
        let net = route.destination;
        RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(net.addr(), net.prefix_len())
            .gateway(route.gateway)
            .output_interface(route.ifindex)
            .onlink()
            .protocol(RouteProtocol::from(TUNNEL_ROUTE_PROTOCOL))
            .scope(RouteScope::Universe)
            .table_id(u32::from(MAIN_TABLE))
            .build()
    }

    /// `ip route replace <destination> via <gateway> dev <ifindex> onlink proto 81`.
    pub async fn replace_tunnel_route(&self, route: &TunnelRoute) -> Result<(), NetlinkError> {
        self.handle
            .route()
            .add(Netlink::tunnel_route_message(route))
            .replace()
            .execute()
            .await
            .map_err(request_error(format!(
                "add route {} via {} dev #{}",
                route.destination, route.gateway, route.ifindex
            )))
    }

    /// Deletes a tunnel route; one already gone is fine.
    pub async fn delete_tunnel_route(&self, route: &TunnelRoute) -> Result<(), NetlinkError> {
        let message = Netlink::tunnel_route_message(route);
        deleted(self.handle.route().del(message).execute().await, || {
            format!("delete route {} via {}", route.destination, route.gateway)
        })
    }
}

fn vxlan_of(message: &LinkMessage) -> Option<VxlanDevice> {
    let link = link_of(message)?;
    let mut device = VxlanDevice {
        vni: 0,
        port: 0,
        local: Ipv4Addr::UNSPECIFIED,
        parent_index: 0,
        mac: link.mac?,
        mtu: link.mtu,
    };
    let mut is_vxlan = false;
    let infos = message.attributes.iter().filter_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => Some(infos),
        _ => None,
    });
    for info in infos.flatten() {
        let LinkInfo::Data(InfoData::Vxlan(data)) = info else {
            continue;
        };
        is_vxlan = true;
        for item in data {
            match item {
                InfoVxlan::Id(vni) => device.vni = *vni,
                InfoVxlan::Port(port) => device.port = *port,
                InfoVxlan::Local(local) => device.local = *local,
                InfoVxlan::Link(index) => device.parent_index = *index,
                _ => {}
            }
        }
    }
    is_vxlan.then_some(device)
}

fn fdb_entry(message: &NeighbourMessage) -> Option<FdbEntry> {
    let mut mac = None;
    let mut destination = None;
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::LinkLayerAddress(a) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            // In the bridge family the kernel's IPv4 destination is parsed as raw bytes.
            NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => destination = Some(*ip),
            NeighbourAttribute::Destination(NeighbourAddress::Other(bytes)) => {
                destination = <[u8; 4]>::try_from(bytes.as_slice())
                    .ok()
                    .map(Ipv4Addr::from);
            }
            _ => {}
        }
    }
    Some(FdbEntry {
        mac: mac?,
        destination: destination?,
        ifindex: message.header.ifindex,
    })
}

/// A route through a tunnel: IPv4, [`TUNNEL_ROUTE_PROTOCOL`], on-link via a gateway.
fn tunnel_route(route: &KernelRoute) -> Option<TunnelRoute> {
    if route.protocol != TUNNEL_ROUTE_PROTOCOL || !route.onlink {
        return None;
    }
    let (IpNet::V4(destination), Some(IpAddr::V4(gateway))) = (route.destination, route.gateway)
    else {
        return None;
    };
    Some(TunnelRoute {
        destination,
        gateway,
        ifindex: route.ifindex?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::RouteType;

    fn kernel_route(destination: &str, gateway: &str, protocol: u8, onlink: bool) -> KernelRoute {
        KernelRoute {
            kind: RouteType::Unicast,
            protocol,
            onlink,
            table: 254,
            destination: destination.parse().unwrap(),
            gateway: Some(gateway.parse().unwrap()),
            ifindex: Some(9),
            metric: 0,
        }
    }

    #[test]
    fn tunnel_routes_are_ipv4_on_link_via_a_gateway_with_our_protocol() {
        let ours = kernel_route("10.65.1.0/26", "10.65.1.0", TUNNEL_ROUTE_PROTOCOL, true);
        assert_eq!(
            tunnel_route(&ours),
            Some(TunnelRoute {
                destination: "10.65.1.0/26".parse().unwrap(),
                gateway: "10.65.1.0".parse().unwrap(),
                ifindex: 9,
            })
        );
        let workload = kernel_route("10.65.1.0/26", "10.65.1.0", 80, true);
        assert_eq!(tunnel_route(&workload), None);
        let not_onlink = kernel_route("10.65.1.0/26", "10.65.1.0", TUNNEL_ROUTE_PROTOCOL, false);
        assert_eq!(tunnel_route(&not_onlink), None);
        let v6 = kernel_route("fd00:65::/122", "fd00:65::1", TUNNEL_ROUTE_PROTOCOL, true);
        assert_eq!(tunnel_route(&v6), None);
        let no_gateway = KernelRoute {
            gateway: None,
            ..ours
        };
        assert_eq!(tunnel_route(&no_gateway), None);
    }
}
