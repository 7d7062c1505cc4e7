//! VXLAN over rtnetlink: the tunnel device, its forwarding database (which host a remote
//! tunnel MAC lives on) and the routes through it (to a remote workload via the remote tunnel
//! address, on-link).

use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::link::{InfoData, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteProtocol, RouteScope,
};
use rtnetlink::{LinkVxlan, RouteMessageBuilder};

use super::{MAIN_TABLE, Netlink, NetlinkError, deleted, is_missing, link_of, request_error};

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
        let messages: Vec<RouteMessage> = self
            .handle
            .route()
            .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
            .execute()
            .try_collect()
            .await
            .map_err(request_error("list routes"))?;
        Ok(messages.iter().filter_map(tunnel_route).collect())
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

fn tunnel_route(message: &RouteMessage) -> Option<TunnelRoute> {
    if message.header.protocol != RouteProtocol::from(TUNNEL_ROUTE_PROTOCOL)
        || !message.header.flags.contains(RouteFlags::Onlink)
    {
        return None;
    }
    let mut destination = None;
    let mut gateway = None;
    let mut ifindex = None;
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => destination = Some(*ip),
            RouteAttribute::Gateway(RouteAddress::Inet(ip)) => gateway = Some(*ip),
            RouteAttribute::Oif(index) => ifindex = Some(*index),
            _ => {}
        }
    }
    let net = Ipv4Net::new(destination?, message.header.destination_prefix_length).ok()?;
    Some(TunnelRoute {
        destination: net,
        gateway: gateway?,
        ifindex: ifindex?,
    })
}
