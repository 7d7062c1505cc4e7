//! Following a namespace's main routing table over netlink (what `ip monitor route` shows):
//! the table read once ([`Netlink::main_routes`]), then every route added, replaced or deleted
//! ([`RouteEvents`]). Routes of other tables, and local, broadcast, anycast and multicast
//! routes, are not part of it.

use std::net::IpAddr;

use futures::StreamExt;
use ipnet::IpNet;
use rtnetlink::MulticastGroup;
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::route::{RouteMessage, RouteType};

use super::dump::KernelRoute;
use super::{MAIN_TABLE, Netlink, NetlinkError, Notifications, subscribe};
use crate::{Family, Netns};

/// A route of the main table: where it goes, and through which gateway (`None` for a route
/// on a link, or one that goes nowhere: blackhole, unreachable, prohibit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MainRoute {
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
}

/// A change of the main table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteEvent {
    /// Added, or replaced.
    Added(MainRoute),
    Deleted {
        destination: IpNet,
    },
}

/// The main-table route a route message describes, if it is one.
pub(crate) fn main_route_of(message: &RouteMessage) -> Option<MainRoute> {
    KernelRoute::of(message).as_ref().and_then(main_route)
}

/// A route of the main table that goes somewhere or nowhere on purpose (not local,
/// broadcast, anycast or multicast).
fn main_route(route: &KernelRoute) -> Option<MainRoute> {
    let kinds = [
        RouteType::Unicast,
        RouteType::BlackHole,
        RouteType::Unreachable,
        RouteType::Prohibit,
    ];
    (kinds.contains(&route.kind) && route.table == u32::from(MAIN_TABLE)).then_some(MainRoute {
        destination: route.destination,
        gateway: route.gateway,
    })
}

impl Netlink {
    /// The main table of both families (`ip route show` and `ip -6 route show`).
    pub async fn main_routes(&self) -> Result<Vec<MainRoute>, NetlinkError> {
        let routes = self.dump_routes(&[Family::V4, Family::V6]).await?;
        Ok(routes.iter().filter_map(main_route).collect())
    }
}

/// The main table's changes in a namespace, as the kernel announces them.
#[derive(Debug)]
pub struct RouteEvents {
    messages: Notifications,
}

impl RouteEvents {
    /// Subscribes to the namespace's route notifications (both families). Call inside a tokio
    /// runtime; the subscription ends when this is dropped.
    pub fn subscribe(netns: &Netns) -> Result<RouteEvents, NetlinkError> {
        let groups = [MulticastGroup::Ipv4Route, MulticastGroup::Ipv6Route];
        Ok(RouteEvents {
            messages: subscribe(netns, &groups)?,
        })
    }

    /// The next change of the main table; `None` once the socket is closed.
    pub async fn next(&mut self) -> Option<RouteEvent> {
        loop {
            let (message, _) = self.messages.next().await?;
            let event = match message.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(route)) => {
                    main_route_of(&route).map(RouteEvent::Added)
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelRoute(route)) => {
                    main_route_of(&route).map(|r| RouteEvent::Deleted {
                        destination: r.destination,
                    })
                }
                _ => None,
            };
            if event.is_some() {
                return event;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::RouteMessageBuilder;

    fn message(
        kind: RouteType,
        destination: &str,
        gateway: Option<&str>,
        table: u8,
    ) -> RouteMessage {
        let net: IpNet = destination.parse().unwrap();
        let mut builder = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(net.addr(), net.prefix_len())
            .unwrap()
            .kind(kind)
            .table_id(u32::from(table));
        if let Some(gateway) = gateway {
            builder = builder.gateway(gateway.parse().unwrap()).unwrap();
        }
        let mut message = builder.build();
        message.header.table = table;
        message
    }

    #[test]
    fn main_table_routes_are_read_with_their_gateway() {
        let via = message(
            RouteType::Unicast,
            "10.65.213.0/26",
            Some("10.99.0.13"),
            254,
        );
        assert_eq!(
            main_route_of(&via),
            Some(MainRoute {
                destination: "10.65.213.0/26".parse().unwrap(),
                gateway: Some("10.99.0.13".parse().unwrap()),
            })
        );
        let hole = message(RouteType::BlackHole, "fd00:65::/122", None, 254);
        assert_eq!(main_route_of(&hole).unwrap().gateway, None);
        let default = message(RouteType::Unicast, "::/0", Some("fd00:99::1"), 254);
        assert_eq!(
            main_route_of(&default).unwrap().destination,
            "::/0".parse::<IpNet>().unwrap()
        );
        let local = message(RouteType::Local, "10.65.0.1/32", None, 255);
        assert_eq!(main_route_of(&local), None);
        let other_table = message(RouteType::Unicast, "0.0.0.0/0", Some("10.0.0.1"), 100);
        assert_eq!(main_route_of(&other_table), None);
    }
}
