//! Routes of any table, with their metric: what a workload's namespace holds when it has more
//! than one interface (each attachment's default route at its own metric, a standby's copy in
//! its own table). Building and reading the messages is pure; [`Netlink`] sends them.

use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol, RouteScope, RouteType};

use super::dump::KernelRoute;
use super::{Netlink, NetlinkError, deleted, request_error};
use crate::Family;

/// A unicast route through one interface, in any table, with its metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableRoute {
    pub destination: IpNet,
    /// `None` for an on-link route (scope link).
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    /// The route's priority (`ip route … metric`); 0 when it has none.
    pub metric: u32,
    /// The routing table (254 is `main`).
    pub table: u32,
}

impl std::fmt::Display for TableRoute {
    /// As `ip route` takes it, the interface by index.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.destination)?;
        match self.gateway {
            Some(gateway) => write!(f, " via {gateway} dev #{}", self.ifindex)?,
            None => write!(f, " dev #{} scope link", self.ifindex)?,
        }
        write!(f, " metric {} table {}", self.metric, self.table)
    }
}

/// The request for `route`, as `ip route add` makes it: protocol `boot`, scope link without a
/// gateway, universe with one.
pub(crate) fn table_route_message(route: &TableRoute) -> Result<RouteMessage, String> {
    let net = route.destination;
    let mut builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(net.addr(), net.prefix_len())
        .map_err(|e| e.to_string())?
        .output_interface(route.ifindex)
        .protocol(RouteProtocol::Boot)
        .priority(route.metric)
        .table_id(route.table);
    builder = match route.gateway {
        Some(gateway) => builder.gateway(gateway).map_err(|e| e.to_string())?,
        None => builder.scope(RouteScope::Link),
    };
    let mut message = builder.build();
    if route.table > 255 {
        // The table is in the attribute; the header says so (as `ip` does).
        message.header.table = 0;
    }
    Ok(message)
}

/// A route of a dump, if it is a unicast route through one interface (not multipath, not
/// local, broadcast or blackhole).
fn table_route(route: &KernelRoute) -> Option<TableRoute> {
    if route.kind != RouteType::Unicast {
        return None;
    }
    Some(TableRoute {
        destination: route.destination,
        gateway: route.gateway,
        ifindex: route.ifindex?,
        metric: route.metric,
        table: route.table,
    })
}

impl Netlink {
    /// Every unicast route of one family through one interface, in every table
    /// (`ip route show table all`).
    pub async fn table_routes(&self, family: Family) -> Result<Vec<TableRoute>, NetlinkError> {
        let routes = self.dump_routes(&[family]).await?;
        Ok(routes.iter().filter_map(table_route).collect())
    }

    /// Adds a route (`ip route add`): an equal route already there is an error (EEXIST), never
    /// replaced.
    pub async fn add_table_route(&self, route: &TableRoute) -> Result<(), NetlinkError> {
        let operation = || format!("add route {route}");
        let message = table_route_message(route).map_err(|reason| NetlinkError::Request {
            operation: operation(),
            reason,
        })?;
        self.handle
            .route()
            .add(message)
            .execute()
            .await
            .map_err(request_error(operation()))
    }

    /// Deletes a route, whoever added it (any protocol and scope, as `ip route del`); one
    /// already gone is fine.
    pub async fn delete_table_route(&self, route: &TableRoute) -> Result<(), NetlinkError> {
        let operation = || format!("delete route {route}");
        let mut message = table_route_message(route).map_err(|reason| NetlinkError::Request {
            operation: operation(),
            reason,
        })?;
        message.header.protocol = RouteProtocol::Unspec;
        message.header.scope = RouteScope::NoWhere;
        deleted(self.handle.route().del(message).execute().await, operation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::RouteAttribute;

    fn table_route_of(message: &RouteMessage) -> Option<TableRoute> {
        KernelRoute::of(message).as_ref().and_then(table_route)
    }

    fn route(destination: &str, gateway: Option<&str>, metric: u32, table: u32) -> TableRoute {
        TableRoute {
            destination: destination.parse().unwrap(),
            gateway: gateway.map(|g| g.parse().unwrap()),
            ifindex: 7,
            metric,
            table,
        }
    }

    #[test]
    fn a_route_reads_back_as_it_was_built() {
        for r in [
            route("169.254.1.1/32", None, 1025, 254),
            route("0.0.0.0/0", Some("169.254.1.1"), 1025, 1025),
            route("::/0", Some("fe80::1"), 1024, 254),
            route("10.0.0.0/8", Some("10.1.0.1"), 0, 100),
        ] {
            let message = table_route_message(&r).unwrap();
            assert_eq!(table_route_of(&message), Some(r), "{r}");
        }
    }

    #[test]
    fn on_link_routes_have_scope_link_and_large_tables_an_attribute() {
        let message = table_route_message(&route("169.254.1.1/32", None, 1, 1025)).unwrap();
        assert_eq!(message.header.scope, RouteScope::Link);
        assert_eq!(message.header.protocol, RouteProtocol::Boot);
        assert_eq!(message.header.table, 0);
        assert!(message.attributes.contains(&RouteAttribute::Table(1025)));
        let via = table_route_message(&route("0.0.0.0/0", Some("169.254.1.1"), 1, 254)).unwrap();
        assert_eq!(via.header.scope, RouteScope::Universe);
        assert_eq!(via.header.table, 254);
        assert_eq!(
            route("0.0.0.0/0", Some("169.254.1.1"), 1025, 1025).to_string(),
            "0.0.0.0/0 via 169.254.1.1 dev #7 metric 1025 table 1025"
        );
    }

    #[test]
    fn local_routes_and_routes_without_an_interface_are_not_listed() {
        let mut local = table_route_message(&route("10.0.0.5/32", None, 0, 255)).unwrap();
        local.header.kind = RouteType::Local;
        assert_eq!(table_route_of(&local), None);
        let mut no_oif = table_route_message(&route("10.0.0.0/8", None, 0, 254)).unwrap();
        no_oif
            .attributes
            .retain(|a| !matches!(a, RouteAttribute::Oif(_)));
        assert_eq!(table_route_of(&no_oif), None);
    }
}
