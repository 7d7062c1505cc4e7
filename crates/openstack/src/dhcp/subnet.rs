//! Pure: a Neutron subnet as the DHCP agent reads it, and what of it dnsmasq can serve.
//!
//! | Neutron field | served as |
//! | --- | --- |
//! | `cidr` | the dnsmasq range (static: only the ports' own addresses) |
//! | `gateway_ip` | the interface address dnsmasq serves from, and DHCP option 3 (router) |
//! | `dns_nameservers` | option 6 (IPv4), option 23 (DHCPv6) |
//! | `host_routes` | option 121 (classless static routes), plus the default route via the gateway |
//! | `ipv6_address_mode` | `dhcpv6-stateful`: DHCPv6 addresses; `dhcpv6-stateless`: SLAAC + DHCPv6 options; `slaac`: RA only |
//! | `ipv6_ra_mode` | set: dnsmasq sends router advertisements on the TAPs |

use std::net::IpAddr;

use ipnet::IpNet;

use super::NotServed;
pub use crate::neutron::{HostRoute, Subnet as DhcpSubnet};

/// How dnsmasq serves a subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// DHCPv4, addresses by MAC.
    V4,
    /// DHCPv6 addresses by MAC (`dhcpv6-stateful`).
    Stateful,
    /// SLAAC addresses, DHCPv6 for DNS only (`dhcpv6-stateless`).
    Stateless,
    /// SLAAC only, no DHCPv6 (`slaac`).
    Slaac,
}

/// A subnet dnsmasq can serve, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub id: String,
    /// Its network's id: the VMs of one network are served from that network's interface.
    pub network: String,
    /// The subnet, host bits cleared.
    pub net: IpNet,
    /// The interface address: the gateway with the subnet's prefix length.
    pub gateway: IpAddr,
    pub dns: Vec<IpAddr>,
    /// Destination and next hop of each host route (IPv4 only).
    pub routes: Vec<(IpNet, IpAddr)>,
    pub mode: Mode,
    /// Whether dnsmasq advertises the prefix (IPv6 with `ipv6_ra_mode` set).
    pub router_advertisements: bool,
}

impl Served {
    /// The dnsmasq tag of the subnet's range and options.
    pub fn tag(&self) -> String {
        format!("subnet-{}", self.id)
    }

    /// The address the agent puts on its interface.
    pub fn interface_address(&self) -> IpNet {
        IpNet::new(self.gateway, self.net.prefix_len()).unwrap_or(self.net)
    }
}

/// What of `subnet` dnsmasq serves, or why it cannot serve it. The `Vec` names parts of the
/// subnet that are left out (the subnet itself is served).
pub fn served(subnet: &DhcpSubnet) -> Result<(Served, Vec<NotServed>), NotServed> {
    let fail = |reason: String| NotServed::subnet(&subnet.id, reason);
    if !subnet.enable_dhcp {
        return Err(fail("enable_dhcp is false".into()));
    }
    let net: IpNet = subnet
        .cidr
        .parse()
        .map_err(|_| fail(format!("cidr {:?}: not a CIDR", subnet.cidr)))?;
    let net = net.trunc();
    let version = if net.addr().is_ipv4() { 4 } else { 6 };
    if subnet.ip_version != version {
        return Err(fail(format!(
            "ip_version {} does not match cidr {}",
            subnet.ip_version, subnet.cidr
        )));
    }
    let gateway = gateway(subnet, &net).map_err(fail)?;
    let dns = addresses(&subnet.dns_nameservers, version).map_err(fail)?;
    let (mode, router_advertisements) = mode(subnet, version).map_err(fail)?;
    let mut partial = Vec::new();
    let routes = if version == 4 {
        routes(&subnet.host_routes).map_err(fail)?
    } else {
        if !subnet.host_routes.is_empty() {
            partial.push(fail(
                "host_routes: DHCPv6 has no option for routes; they are not served".into(),
            ));
        }
        Vec::new()
    };
    let served = Served {
        id: subnet.id.clone(),
        network: subnet.network_id.clone(),
        net,
        gateway,
        dns,
        routes,
        mode,
        router_advertisements,
    };
    Ok((served, partial))
}

fn gateway(subnet: &DhcpSubnet, net: &IpNet) -> Result<IpAddr, String> {
    let text = match subnet.gateway_ip.as_deref() {
        None | Some("") => {
            return Err("no gateway_ip: the agent serves a subnet from its gateway address".into());
        }
        Some(text) => text,
    };
    let gateway: IpAddr = text
        .parse()
        .map_err(|_| format!("gateway_ip {text:?}: not an IP address"))?;
    if !net.contains(&gateway) {
        return Err(format!("gateway_ip {gateway} is outside cidr {net}"));
    }
    Ok(gateway)
}

fn addresses(texts: &[String], version: u8) -> Result<Vec<IpAddr>, String> {
    let mut out = Vec::new();
    for (index, text) in texts.iter().enumerate() {
        let addr: IpAddr = text
            .parse()
            .map_err(|_| format!("dns_nameservers[{index}] {text:?}: not an IP address"))?;
        if addr.is_ipv4() != (version == 4) {
            return Err(format!(
                "dns_nameservers[{index}] {addr}: not an IPv{version} address"
            ));
        }
        out.push(addr);
    }
    Ok(out)
}

fn routes(routes: &[HostRoute]) -> Result<Vec<(IpNet, IpAddr)>, String> {
    let mut out = Vec::new();
    for (index, route) in routes.iter().enumerate() {
        let field = format!("host_routes[{index}]");
        let destination: IpNet = route
            .destination
            .parse()
            .map_err(|_| format!("{field}.destination {:?}: not a CIDR", route.destination))?;
        let nexthop: IpAddr = route
            .nexthop
            .parse()
            .map_err(|_| format!("{field}.nexthop {:?}: not an IP address", route.nexthop))?;
        if !destination.addr().is_ipv4() || !nexthop.is_ipv4() {
            return Err(format!("{field}: not IPv4 in an IPv4 subnet"));
        }
        out.push((destination.trunc(), nexthop));
    }
    Ok(out)
}

fn mode(subnet: &DhcpSubnet, version: u8) -> Result<(Mode, bool), String> {
    if version == 4 {
        return Ok((Mode::V4, false));
    }
    let address = subnet.ipv6_address_mode.as_deref();
    let ra = subnet.ipv6_ra_mode.as_deref();
    let mode = match address {
        Some("dhcpv6-stateful") => Mode::Stateful,
        Some("dhcpv6-stateless") => Mode::Stateless,
        Some("slaac") => Mode::Slaac,
        None => {
            return Err(
                "ipv6_address_mode is not set: Neutron leaves this subnet's addresses to a \
                 router outside OpenStack"
                    .into(),
            );
        }
        Some(other) => return Err(format!("ipv6_address_mode {other:?}: not known")),
    };
    match ra {
        Some(ra) if Some(ra) != address => Err(format!(
            "ipv6_ra_mode {ra:?} differs from ipv6_address_mode {:?}",
            address.unwrap_or_default()
        )),
        None if mode == Mode::Slaac => Err(
            "ipv6_address_mode slaac without ipv6_ra_mode: another router advertises the \
             prefix, nothing to serve"
                .into(),
        ),
        _ => Ok((mode, ra.is_some())),
    }
}
