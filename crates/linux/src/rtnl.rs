//! Routes, neighbours and links over rtnetlink, in the current or a named network namespace.
//!
//! A netlink socket belongs to the namespace it was made in: for a named namespace the socket
//! is made on a short-lived thread that entered it first ([`in_netns`]), and keeps working from
//! any thread afterwards.

use std::net::IpAddr;

use futures::{StreamExt, TryStreamExt};
use ipnet::IpNet;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, State};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol, RouteScope};
use rtnetlink::sys::AsyncSocket;
use rtnetlink::{Handle, MulticastGroup, RouteMessageBuilder};

use crate::Netns;

mod dump;
mod monitor;
mod plumb;
mod routes;
mod rules;
mod tunnel;
pub use monitor::{MainRoute, RouteEvent, RouteEvents};
pub use plumb::GatewayRoute;
pub use routes::TableRoute;
pub use rules::PolicyRule;
pub use tunnel::{FdbEntry, TUNNEL_ROUTE_PROTOCOL, TunnelRoute, VxlanDevice};

/// The routing protocol number Calico's routes carry (`ip route … proto 80`): how Felix tells
/// its routes from everyone else's, also after a restart.
pub const ROUTE_PROTOCOL: u8 = 80;

/// The main routing table.
const MAIN_TABLE: u8 = 254;

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Option<[u8; 6]>,
    pub up: bool,
    pub mtu: u32,
    /// Operationally up (`IFLA_OPERSTATE` up, or unknown as for dummy and tun devices): a veth
    /// whose peer is down, or back in this namespace unused, is not.
    pub running: bool,
}

/// A Calico route: a destination through an interface (scope link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    pub destination: IpNet,
    pub ifindex: u32,
}

/// A static (permanent) ARP or NDP entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Neighbour {
    pub ip: IpAddr,
    pub mac: [u8; 6],
    pub ifindex: u32,
}

/// A link came or went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// A new link, or a change of one (up/down, address).
    Changed(Link),
    Removed {
        index: u32,
        name: String,
    },
    /// An address was added to or removed from the link with this index.
    Address {
        index: u32,
    },
}

/// A netlink operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("cannot open a netlink socket in {netns}: {reason}")]
    Open { netns: String, reason: String },
    #[error("netlink {operation} failed: {reason}")]
    Request { operation: String, reason: String },
}

fn request_error(operation: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
    let operation = operation.into();
    move |e| NetlinkError::Request {
        operation,
        reason: e.to_string(),
    }
}

/// Whether the error says the object does not exist (ENOENT, ESRCH, ENODEV).
fn is_missing(error: &rtnetlink::Error) -> bool {
    matches!(error, rtnetlink::Error::NetlinkError(m) if matches!(-m.raw_code(), 2 | 3 | 19))
}

/// A deletion's outcome: an object that is already gone counts as deleted.
fn deleted(
    result: Result<(), rtnetlink::Error>,
    operation: impl FnOnce() -> String,
) -> Result<(), NetlinkError> {
    match result {
        Err(e) if !is_missing(&e) => Err(request_error(operation())(e)),
        _ => Ok(()),
    }
}

/// Runs `f` on a thread inside `netns` (or right here for the current namespace).
pub fn in_netns<T: Send>(
    netns: &Netns,
    f: impl FnOnce() -> std::io::Result<T> + Send,
) -> std::io::Result<T> {
    let Some(path) = netns.path() else {
        return f();
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = std::fs::File::open(&path)?;
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(std::io::Error::from)?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("namespace thread panicked")))
    })
}

fn describe(netns: &Netns) -> String {
    netns.to_string()
}

/// A netlink connection for routes, neighbours and links.
#[derive(Debug, Clone)]
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// Opens a connection in `netns`. Call inside a tokio runtime (it spawns the connection).
    pub fn connect(netns: &Netns) -> Result<Netlink, NetlinkError> {
        let runtime = tokio::runtime::Handle::current();
        let (connection, handle, _) = in_netns(netns, || {
            let _entered = runtime.enter();
            rtnetlink::new_connection()
        })
        .map_err(|e| NetlinkError::Open {
            netns: describe(netns),
            reason: e.to_string(),
        })?;
        tokio::spawn(connection);
        Ok(Netlink { handle })
    }

    /// Every link.
    pub async fn links(&self) -> Result<Vec<Link>, NetlinkError> {
        let messages: Vec<LinkMessage> = self
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(request_error("list links"))?;
        Ok(messages.iter().filter_map(link_of).collect())
    }

    /// The link called `name`, if there is one.
    pub async fn link_by_name(&self, name: &str) -> Result<Option<Link>, NetlinkError> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        match stream.try_next().await {
            Ok(message) => Ok(message.as_ref().and_then(link_of)),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(request_error(format!("get link {name}"))(e)),
        }
    }

    fn route_message(route: &Route) -> Result<RouteMessage, NetlinkError> {
        let net = route.destination;
        RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(net.addr(), net.prefix_len())
            .map(|b| {
                b.output_interface(route.ifindex)
                    .protocol(RouteProtocol::from(ROUTE_PROTOCOL))
                    .scope(RouteScope::Link)
                    .table_id(u32::from(MAIN_TABLE))
                    .build()
            })
            .map_err(|e| NetlinkError::Request {
                operation: format!("route to {net}"),
                reason: e.to_string(),
            })
    }

    /// `ip route replace <destination> dev <ifindex> scope link proto 80`.
    pub async fn replace_route(&self, route: &Route) -> Result<(), NetlinkError> {
        let message = Netlink::route_message(route)?;
        self.handle
            .route()
            .add(message)
            .replace()
            .execute()
            .await
            .map_err(request_error(format!(
                "add route {} dev #{}",
                route.destination, route.ifindex
            )))
    }

    /// Deletes a route; one already gone is fine.
    pub async fn delete_route(&self, route: &Route) -> Result<(), NetlinkError> {
        let message = Netlink::route_message(route)?;
        deleted(self.handle.route().del(message).execute().await, || {
            format!("delete route {} dev #{}", route.destination, route.ifindex)
        })
    }

    /// `ip neigh replace <ip> lladdr <mac> dev <ifindex> nud permanent`.
    pub async fn replace_neighbour(&self, n: &Neighbour) -> Result<(), NetlinkError> {
        self.handle
            .neighbours()
            .add(n.ifindex, n.ip)
            .link_layer_address(&n.mac)
            .state(NeighbourState::Permanent)
            .replace()
            .execute()
            .await
            .map_err(request_error(format!(
                "add neighbour {} dev #{}",
                n.ip, n.ifindex
            )))
    }

    /// Deletes a neighbour entry; one already gone is fine.
    pub async fn delete_neighbour(&self, n: &Neighbour) -> Result<(), NetlinkError> {
        let mut message = NeighbourMessage::default();
        message.header.family = match n.ip {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        message.header.ifindex = n.ifindex;
        message
            .attributes
            .push(NeighbourAttribute::Destination(match n.ip {
                IpAddr::V4(a) => NeighbourAddress::Inet(a),
                IpAddr::V6(a) => NeighbourAddress::Inet6(a),
            }));
        deleted(
            self.handle.neighbours().del(message).execute().await,
            || format!("delete neighbour {} dev #{}", n.ip, n.ifindex),
        )
    }

    /// Permanent neighbour entries with a link-layer address, IPv4 and IPv6.
    pub async fn permanent_neighbours(&self) -> Result<Vec<Neighbour>, NetlinkError> {
        let mut all = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let messages: Vec<NeighbourMessage> = self
                .handle
                .neighbours()
                .get()
                .set_address_family(family)
                .execute()
                .try_collect()
                .await
                .map_err(request_error("list neighbours"))?;
            all.extend(messages.iter().filter_map(permanent_neighbour));
        }
        Ok(all)
    }
}

fn link_of(message: &LinkMessage) -> Option<Link> {
    let mut name = None;
    let mut mac = None;
    let mut mtu = 0;
    let mut running = true;
    for attribute in &message.attributes {
        match attribute {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Address(a) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            LinkAttribute::Mtu(m) => mtu = *m,
            LinkAttribute::OperState(state) => {
                running = matches!(state, State::Up | State::Unknown);
            }
            _ => {}
        }
    }
    Some(Link {
        index: message.header.index,
        name: name?,
        mac,
        up: message.header.flags.contains(LinkFlags::Up),
        mtu,
        running,
    })
}

fn permanent_neighbour(message: &NeighbourMessage) -> Option<Neighbour> {
    if message.header.state != NeighbourState::Permanent {
        return None;
    }
    let mut ip = None;
    let mut mac = None;
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => ip = Some(IpAddr::V4(*a)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                ip = Some(IpAddr::V6(*a))
            }
            NeighbourAttribute::LinkLayerAddress(a) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            _ => {}
        }
    }
    Some(Neighbour {
        ip: ip?,
        mac: mac?,
        ifindex: message.header.ifindex,
    })
}

/// Bytes of link events the kernel may queue for us: a pod namespace going takes its veths in
/// one batch, and 200 links at once overflowed the default (~200 KiB), losing events (the
/// periodic route refresh would put things right only seconds later).
const LINK_EVENT_BUFFER: usize = 8 << 20;

/// Raises the socket's receive buffer past `rmem_max` if we may (root), else as far as allowed.
fn enlarge_receive_buffer(socket: &rtnetlink::sys::Socket) {
    use nix::sys::socket::{setsockopt, sockopt};
    if setsockopt(socket, sockopt::RcvBufForce, &LINK_EVENT_BUFFER).is_err() {
        let _ = socket.set_rx_buf_sz(LINK_EVENT_BUFFER as i32);
    }
}

/// The rtnetlink notifications of a subscription, as they arrive.
type Notifications = futures::channel::mpsc::UnboundedReceiver<(
    NetlinkMessage<RouteNetlinkMessage>,
    rtnetlink::sys::SocketAddr,
)>;

/// Subscribes to `groups` of a namespace's rtnetlink notifications (inside a tokio runtime);
/// the subscription ends when its receiver is dropped.
fn subscribe(netns: &Netns, groups: &[MulticastGroup]) -> Result<Notifications, NetlinkError> {
    let runtime = tokio::runtime::Handle::current();
    let (mut connection, _handle, messages) = in_netns(netns, || {
        let _entered = runtime.enter();
        rtnetlink::new_multicast_connection(groups)
    })
    .map_err(|e| NetlinkError::Open {
        netns: describe(netns),
        reason: e.to_string(),
    })?;
    enlarge_receive_buffer(connection.socket_mut().socket_ref());
    tokio::spawn(connection);
    Ok(messages)
}

/// Link additions, changes and removals, and address changes, in a namespace.
#[derive(Debug)]
pub struct LinkEvents {
    messages: Notifications,
}

impl LinkEvents {
    /// Subscribes to the namespace's link notifications. Call inside a tokio runtime.
    pub fn subscribe(netns: &Netns) -> Result<LinkEvents, NetlinkError> {
        let groups = [
            MulticastGroup::Link,
            MulticastGroup::Ipv4Ifaddr,
            MulticastGroup::Ipv6Ifaddr,
        ];
        Ok(LinkEvents {
            messages: subscribe(netns, &groups)?,
        })
    }

    /// The next event; `None` once the socket is closed.
    pub async fn next(&mut self) -> Option<LinkEvent> {
        loop {
            let (message, _) = self.messages.next().await?;
            match message.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => {
                    if let Some(link) = link_of(&link) {
                        return Some(LinkEvent::Changed(link));
                    }
                }
                NetlinkPayload::InnerMessage(
                    RouteNetlinkMessage::NewAddress(address)
                    | RouteNetlinkMessage::DelAddress(address),
                ) => {
                    return Some(LinkEvent::Address {
                        index: address.header.index,
                    });
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(link)) => {
                    if let Some(link) = link_of(&link) {
                        return Some(LinkEvent::Removed {
                            index: link.index,
                            name: link.name,
                        });
                    }
                }
                _ => {}
            }
        }
    }
}
