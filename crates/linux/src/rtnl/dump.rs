//! The route dump, written once: every route of a family, in every table, read from the
//! kernel and parsed into a [`KernelRoute`]; each reader ([`Netlink::calico_routes`],
//! [`Netlink::main_routes`], [`Netlink::table_routes`], [`Netlink::tunnel_routes`]) keeps the
//! routes it knows with a pure conversion of its own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteType,
};

use super::{MAIN_TABLE, Netlink, NetlinkError, ROUTE_PROTOCOL, Route, request_error};
use crate::Family;

/// A route as the kernel reports it, of any table, kind and protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelRoute {
    pub kind: RouteType,
    /// `ip route … proto`.
    pub protocol: u8,
    /// The gateway is on the link whatever its address (`onlink`).
    pub onlink: bool,
    /// The routing table (254 is `main`), from the attribute when there is one.
    pub table: u32,
    /// The default route carries no destination: it is `0.0.0.0/0` or `::/0`.
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
    /// `None` for a multipath route, or one that goes nowhere (blackhole).
    pub ifindex: Option<u32>,
    /// `ip route … metric`; 0 when it has none.
    pub metric: u32,
}

impl KernelRoute {
    /// The route a message (of a dump, or a notification) describes; `None` when its
    /// destination is not an IP prefix.
    pub(crate) fn of(message: &RouteMessage) -> Option<KernelRoute> {
        let header = &message.header;
        let mut route = KernelRoute {
            kind: header.kind,
            protocol: u8::from(header.protocol),
            onlink: header.flags.contains(RouteFlags::Onlink),
            table: u32::from(header.table),
            destination: IpNet::default(),
            gateway: None,
            ifindex: None,
            metric: 0,
        };
        let mut destination = None;
        for attribute in &message.attributes {
            match attribute {
                RouteAttribute::Table(t) => route.table = *t,
                RouteAttribute::Destination(address) => destination = Some(ip_of(address)?),
                RouteAttribute::Gateway(address) => route.gateway = ip_of(address),
                RouteAttribute::Oif(i) => route.ifindex = Some(*i),
                RouteAttribute::Priority(m) => route.metric = *m,
                _ => {}
            }
        }
        let destination = destination.or(match header.address_family {
            AddressFamily::Inet => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            AddressFamily::Inet6 => Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            _ => None,
        })?;
        route.destination = IpNet::new(destination, header.destination_prefix_length).ok()?;
        Some(route)
    }
}

fn ip_of(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

impl Netlink {
    /// Every route of these families, in every table (`ip route show table all`).
    pub(crate) async fn dump_routes(
        &self,
        families: &[Family],
    ) -> Result<Vec<KernelRoute>, NetlinkError> {
        let mut routes = Vec::new();
        for &family in families {
            let dump = match family {
                Family::V4 => RouteMessageBuilder::<Ipv4Addr>::new().build(),
                Family::V6 => RouteMessageBuilder::<Ipv6Addr>::new().build(),
            };
            let messages: Vec<RouteMessage> = self
                .handle
                .route()
                .get(dump)
                .execute()
                .try_collect()
                .await
                .map_err(request_error(format!("list the {family:?} routes")))?;
            routes.extend(messages.iter().filter_map(KernelRoute::of));
        }
        Ok(routes)
    }
}

impl Netlink {
    /// Calico's routes ([`ROUTE_PROTOCOL`]) in the main table, IPv4 and IPv6.
    pub async fn calico_routes(&self) -> Result<Vec<Route>, NetlinkError> {
        let routes = self.dump_routes(&[Family::V4, Family::V6]).await?;
        Ok(routes.iter().filter_map(calico_route).collect())
    }
}

/// A route of Calico's, in the main table through an interface.
fn calico_route(route: &KernelRoute) -> Option<Route> {
    (route.protocol == ROUTE_PROTOCOL && route.table == u32::from(MAIN_TABLE)).then_some(Route {
        destination: route.destination,
        ifindex: route.ifindex?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::RouteProtocol;

    fn kernel_route(protocol: u8, table: u32, ifindex: Option<u32>) -> KernelRoute {
        KernelRoute {
            kind: RouteType::Unicast,
            protocol,
            onlink: false,
            table,
            destination: "10.65.0.3/32".parse().unwrap(),
            gateway: None,
            ifindex,
            metric: 0,
        }
    }

    #[test]
    fn calico_routes_are_ours_in_the_main_table_through_an_interface() {
        assert_eq!(
            calico_route(&kernel_route(ROUTE_PROTOCOL, 254, Some(7))),
            Some(Route {
                destination: "10.65.0.3/32".parse().unwrap(),
                ifindex: 7,
            })
        );
        assert_eq!(calico_route(&kernel_route(4, 254, Some(7))), None);
        assert_eq!(
            calico_route(&kernel_route(ROUTE_PROTOCOL, 100, Some(7))),
            None
        );
        assert_eq!(calico_route(&kernel_route(ROUTE_PROTOCOL, 254, None)), None);
    }

    #[test]
    fn a_message_is_read_with_every_field() {
        let mut message = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix("10.65.0.0".parse().unwrap(), 26)
            .unwrap()
            .gateway("10.99.0.13".parse().unwrap())
            .unwrap()
            .output_interface(7)
            .onlink()
            .protocol(RouteProtocol::from(81))
            .priority(1025)
            .table_id(1025)
            .build();
        message.header.table = 0;
        assert_eq!(
            KernelRoute::of(&message),
            Some(KernelRoute {
                kind: RouteType::Unicast,
                protocol: 81,
                onlink: true,
                table: 1025,
                destination: "10.65.0.0/26".parse().unwrap(),
                gateway: Some("10.99.0.13".parse().unwrap()),
                ifindex: Some(7),
                metric: 1025,
            })
        );
    }

    #[test]
    fn a_default_route_has_the_unspecified_destination_of_its_family() {
        let v4 = RouteMessageBuilder::<Ipv4Addr>::new().build();
        let v6 = RouteMessageBuilder::<Ipv6Addr>::new().build();
        let v4 = KernelRoute::of(&v4).unwrap();
        assert_eq!(v4.destination, "0.0.0.0/0".parse::<IpNet>().unwrap());
        assert_eq!(
            (v4.table, v4.ifindex, v4.gateway, v4.metric),
            (254, None, None, 0)
        );
        assert_eq!(
            KernelRoute::of(&v6).unwrap().destination,
            "::/0".parse::<IpNet>().unwrap()
        );
        let mut unknown = RouteMessageBuilder::<Ipv4Addr>::new().build();
        unknown.header.address_family = AddressFamily::Unspec;
        assert_eq!(KernelRoute::of(&unknown), None);
    }
}
