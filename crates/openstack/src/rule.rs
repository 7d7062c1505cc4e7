//! Pure: one Neutron security group rule → one Calico rule, or why Calico cannot express it.
//! The table is in docs/openstack.md ("Rules"); in short: every rule `allow`; the port range →
//! `dst_ports` (tcp, udp, sctp, udplite) or `icmp_type` / `icmp_code`; the remote prefix →
//! `src_net` / `dst_net`; the remote group → `src_tag` / `dst_tag`; the `ethertype` →
//! `ip_version` (4 or 6), as networking-calico writes it, so every rule applies to its own IP
//! version only. A prefix of the other version is refused here with the rule's id (the model
//! would refuse the mix too).

use std::net::IpAddr;

use calico_model::IpVersion;
use calico_model::Validate;
use calico_model::rule::{PortRange, Protocol, Rule};
use ipnet::IpNet;

use crate::error::TranslateError;
use crate::neutron::SecurityGroupRule;

/// Which list of a profile a rule goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `ingress`: packets to the endpoint.
    Inbound,
    /// `egress`: packets from the endpoint.
    Outbound,
}

/// One security group rule as a Calico rule, or why Calico cannot express it.
pub fn rule(neutron: &SecurityGroupRule) -> Result<(Direction, Rule), TranslateError> {
    let fail = |reason: String| TranslateError::rule(&neutron.id, reason);
    let direction = match neutron.direction.as_str() {
        "ingress" => Direction::Inbound,
        "egress" => Direction::Outbound,
        other => {
            return Err(fail(format!(
                "direction {other:?}: expected ingress or egress"
            )));
        }
    };
    let version = match neutron.ethertype.as_str() {
        "IPv4" => IpVersion::V4,
        "IPv6" => IpVersion::V6,
        other => return Err(fail(format!("ethertype {other:?}: expected IPv4 or IPv6"))),
    };
    let mut out = Rule {
        ip_version: Some(version),
        protocol: protocol(neutron.protocol.as_deref(), version).map_err(fail)?,
        ..Rule::default()
    };
    ports(neutron, &mut out).map_err(fail)?;
    remote(neutron, direction, version, &mut out).map_err(fail)?;
    out.validate().map_err(|e| fail(e.to_string()))?;
    Ok((direction, out))
}

/// Neutron's protocol names (neutron_lib's `IP_PROTOCOL_MAP`) and their numbers.
const NEUTRON_PROTOCOLS: [(&str, u8); 25] = [
    ("ah", 51),
    ("dccp", 33),
    ("egp", 8),
    ("esp", 50),
    ("gre", 47),
    ("hopopt", 0),
    ("icmp", 1),
    ("icmpv6", 58),
    ("igmp", 2),
    ("ip", 0),
    ("ipip", 4),
    ("ipv6-encap", 41),
    ("ipv6-frag", 44),
    ("ipv6-icmp", 58),
    ("ipv6-nonxt", 59),
    ("ipv6-opts", 60),
    ("ipv6-route", 43),
    ("ospf", 89),
    ("pgm", 113),
    ("rsvp", 46),
    ("sctp", 132),
    ("tcp", 6),
    ("udp", 17),
    ("udplite", 136),
    ("vrrp", 112),
];

/// A Neutron protocol (name, number as text, or none) as Calico's. ICMP in an IPv6 rule is
/// ICMPv6, as Neutron itself stores it.
fn protocol(text: Option<&str>, version: IpVersion) -> Result<Option<Protocol>, String> {
    let Some(text) = text else { return Ok(None) };
    let number = match NEUTRON_PROTOCOLS.iter().find(|(name, _)| *name == text) {
        Some((_, number)) => *number,
        None => text.parse::<u8>().map_err(|_| {
            format!("protocol {text:?}: neither a protocol name Neutron knows nor a number 0-255")
        })?,
    };
    match (number, version) {
        (0, _) => Err(format!(
            "protocol {text:?} (0): Calico cannot match protocol 0"
        )),
        (1 | 58, IpVersion::V6) => Ok(Some(Protocol::Icmpv6)),
        (58, IpVersion::V4) => Err(format!("protocol {text:?} (ICMPv6) in an IPv4 rule")),
        (n, _) => Ok(Some(Protocol::from_number(n))),
    }
}

/// `port_range_min` / `port_range_max`: destination ports, or ICMP type and code.
fn ports(neutron: &SecurityGroupRule, out: &mut Rule) -> Result<(), String> {
    let (min, max) = (neutron.port_range_min, neutron.port_range_max);
    if min.is_none() && max.is_none() {
        return Ok(());
    }
    let byte = |field: &str, value: u32| {
        u8::try_from(value).map_err(|_| format!("{field} {value}: an ICMP type or code is 0-255"))
    };
    let port = |field: &str, value: Option<u32>| match value.map(u16::try_from) {
        Some(Ok(port)) => Ok(port),
        Some(Err(_)) => Err(format!(
            "{field} {}: a port is 0-65535",
            value.unwrap_or_default()
        )),
        None => Err(format!("{field} is missing: a port range needs both ends")),
    };
    match out.protocol {
        Some(p) if p.is_icmp() => {
            let Some(min) = min else {
                return Err("port_range_max (ICMP code) without port_range_min (type)".to_owned());
            };
            out.icmp_type = Some(byte("port_range_min", min)?);
            out.icmp_code = max.map(|max| byte("port_range_max", max)).transpose()?;
            Ok(())
        }
        Some(p) if p.has_ports() => {
            let range = PortRange::new(port("port_range_min", min)?, port("port_range_max", max)?)?;
            out.dst_ports = vec![range];
            Ok(())
        }
        Some(p) => Err(format!(
            "a port range with protocol {:?} ({}): Calico matches ports of tcp, udp, sctp and \
             udplite only",
            neutron.protocol.as_deref().unwrap_or_default(),
            p.number()
        )),
        None => Err("a port range without a protocol".to_owned()),
    }
}

/// The remote side: a prefix or a group (Neutron allows one of them, or neither).
fn remote(
    neutron: &SecurityGroupRule,
    direction: Direction,
    version: IpVersion,
    out: &mut Rule,
) -> Result<(), String> {
    if let Some(group) = &neutron.remote_address_group_id {
        return Err(format!(
            "remote_address_group_id {group}: address groups are not supported"
        ));
    }
    if let Some(text) = neutron.remote_ip_prefix.as_deref() {
        let net = text
            .parse::<IpNet>()
            .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| format!("remote_ip_prefix {text:?}: not a CIDR"))?;
        if IpVersion::of_net(&net) != version {
            return Err(format!(
                "remote_ip_prefix {text}: not an {version} prefix but ethertype is"
            ));
        }
        let remote_net = match direction {
            Direction::Inbound => &mut out.src_net,
            Direction::Outbound => &mut out.dst_net,
        };
        *remote_net = Some(net.trunc());
    }
    if let Some(group) = &neutron.remote_group_id {
        let tag = match direction {
            Direction::Inbound => &mut out.src_tag,
            Direction::Outbound => &mut out.dst_tag,
        };
        *tag = Some(group.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
