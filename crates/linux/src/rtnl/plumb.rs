//! Plugging a workload in: a veth pair whose far end is created inside the workload's
//! namespace, addresses, routes through a gateway, and removing a link.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth};
use rtnetlink::packet_route::route::RouteScope;
use rtnetlink::{LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder};

use super::{Netlink, NetlinkError, is_missing, request_error};
use crate::Netns;

/// A route for a workload's namespace: to `destination` through `gateway`, or on-link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayRoute {
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
}

impl Netlink {
    /// Creates a veth pair: `name` in this connection's namespace, `peer` directly inside
    /// `peer_netns` (so a `peer` name like `eth0` never clashes with this namespace's links).
    pub async fn add_veth(
        &self,
        name: &str,
        peer: &str,
        peer_netns: &Netns,
    ) -> Result<(), NetlinkError> {
        let operation = || format!("add veth {name} (peer {peer} in {peer_netns})");
        let mut peer_message = LinkMessageBuilder::<LinkUnspec>::new().name(peer.to_owned());
        let file = match peer_netns.path() {
            Some(path) => Some(
                std::fs::File::open(&path).map_err(|e| NetlinkError::Request {
                    operation: operation(),
                    reason: format!("cannot open {}: {e}", path.display()),
                })?,
            ),
            None => None,
        };
        if let Some(file) = &file {
            peer_message = peer_message.setns_by_fd(file.as_raw_fd());
        }
        let message = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(name.to_owned())
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_message.build())))
            .build();
        let result = self.handle.link().add(message).execute().await;
        drop(file);
        result.map_err(request_error(operation()))
    }

    /// Sets a link up.
    pub async fn set_up(&self, index: u32) -> Result<(), NetlinkError> {
        let message = LinkUnspec::new_with_index(index).up().build();
        self.handle
            .link()
            .set(message)
            .execute()
            .await
            .map_err(request_error(format!("set link #{index} up")))
    }

    /// Sets a link's MTU.
    pub async fn set_mtu(&self, index: u32, mtu: u32) -> Result<(), NetlinkError> {
        let message = LinkUnspec::new_with_index(index).mtu(mtu).build();
        self.handle
            .link()
            .set(message)
            .execute()
            .await
            .map_err(request_error(format!("set mtu {mtu} on link #{index}")))
    }

    /// Sets a link's MAC address (`ip link set … address`).
    pub async fn set_mac(&self, index: u32, mac: [u8; 6]) -> Result<(), NetlinkError> {
        let message = LinkUnspec::new_with_index(index)
            .address(mac.to_vec())
            .build();
        self.handle
            .link()
            .set(message)
            .execute()
            .await
            .map_err(request_error(format!(
                "set the MAC address of link #{index}"
            )))
    }

    /// Deletes a link by name; returns whether it existed. Deleting one end of a veth pair
    /// deletes both.
    pub async fn delete_link(&self, name: &str) -> Result<bool, NetlinkError> {
        let Some(link) = self.link_by_name(name).await? else {
            return Ok(false);
        };
        match self.handle.link().del(link.index).execute().await {
            Ok(()) => Ok(true),
            Err(e) if is_missing(&e) => Ok(false),
            Err(e) => Err(request_error(format!("delete link {name}"))(e)),
        }
    }

    /// Adds an address (with its prefix) to a link.
    pub async fn add_address(&self, index: u32, address: IpNet) -> Result<(), NetlinkError> {
        self.handle
            .address()
            .add(index, address.addr(), address.prefix_len())
            .replace()
            .execute()
            .await
            .map_err(request_error(format!(
                "add address {address} to link #{index}"
            )))
    }

    /// The addresses of a link (all scopes).
    pub async fn addresses(&self, index: u32) -> Result<Vec<IpNet>, NetlinkError> {
        let messages: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(index)
            .execute()
            .try_collect()
            .await
            .map_err(request_error(format!("list addresses of link #{index}")))?;
        Ok(messages
            .iter()
            .filter(|m| m.header.index == index)
            .filter_map(|m| {
                m.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => IpNet::new(*ip, m.header.prefix_len).ok(),
                    _ => None,
                })
            })
            .collect())
    }

    /// Every address of every link (IPv4 and IPv6, all scopes), by link index.
    pub async fn all_addresses(&self) -> Result<BTreeMap<u32, BTreeSet<IpAddr>>, NetlinkError> {
        let messages: Vec<_> = self
            .handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(request_error("list addresses"))?;
        let mut by_link: BTreeMap<u32, BTreeSet<IpAddr>> = BTreeMap::new();
        for message in &messages {
            let address = message.attributes.iter().find_map(|a| match a {
                AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            });
            if let Some(ip) = address {
                by_link.entry(message.header.index).or_default().insert(ip);
            }
        }
        Ok(by_link)
    }

    /// Adds a route in the main table: through `gateway`, or on-link (scope link) without one.
    pub async fn add_gateway_route(&self, route: &GatewayRoute) -> Result<(), NetlinkError> {
        let operation = || {
            let via = route
                .gateway
                .map(|g| format!(" via {g}"))
                .unwrap_or_default();
            format!(
                "add route {}{via} dev #{}",
                route.destination, route.ifindex
            )
        };
        let invalid = |e: String| NetlinkError::Request {
            operation: operation(),
            reason: e,
        };
        let mut builder = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(route.destination.addr(), route.destination.prefix_len())
            .map_err(|e| invalid(e.to_string()))?
            .output_interface(route.ifindex);
        builder = match route.gateway {
            Some(gateway) => builder
                .gateway(gateway)
                .map_err(|e| invalid(e.to_string()))?,
            None => builder.scope(RouteScope::Link),
        };
        self.handle
            .route()
            .add(builder.build())
            .replace()
            .execute()
            .await
            .map_err(request_error(operation()))
    }
}
