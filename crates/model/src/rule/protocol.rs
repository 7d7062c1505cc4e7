//! The `protocol` match of a rule, and the IP version a rule is pinned to.
//!
//! JSON accepts the names `tcp`, `udp`, `icmp`, `icmpv6`, `sctp`, `udplite`, an integer 1-255, or
//! that integer as a string (`"6"`), as Felix 1.x did. Numbers that have a name are normalised to
//! the name (`6` → `tcp`), so a rule has one representation and `protocol: 6` with ports is
//! accepted like `tcp`. Names are lowercase only, as in Calico 1.x. 0 is refused: iptables cannot
//! match protocol 0.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IP protocol a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
    Sctp,
    Udplite,
    /// Any other protocol number, 1-255.
    Number(u8),
}

/// Named protocols and their IANA numbers.
const NAMED: [(Protocol, &str, u8); 6] = [
    (Protocol::Tcp, "tcp", 6),
    (Protocol::Udp, "udp", 17),
    (Protocol::Icmp, "icmp", 1),
    (Protocol::Icmpv6, "icmpv6", 58),
    (Protocol::Sctp, "sctp", 132),
    (Protocol::Udplite, "udplite", 136),
];

const EXPECTED: &str = "tcp, udp, icmp, icmpv6, sctp, udplite or a number 1-255";

impl Protocol {
    /// The protocol for an IANA number, by name where it has one.
    pub fn from_number(number: u8) -> Protocol {
        NAMED
            .iter()
            .find(|(_, _, n)| *n == number)
            .map_or(Protocol::Number(number), |(p, _, _)| *p)
    }

    /// Parses a name or a decimal number, as accepted in JSON.
    pub fn parse(text: &str) -> Result<Protocol, String> {
        if let Some((p, _, _)) = NAMED.iter().find(|(_, name, _)| *name == text) {
            return Ok(*p);
        }
        match text.parse::<u8>() {
            Ok(n) if n > 0 => Ok(Protocol::from_number(n)),
            _ => Err(format!("invalid protocol {text:?}: expected {EXPECTED}")),
        }
    }

    /// The IANA protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Number(n) => n,
            named => NAMED
                .iter()
                .find(|(p, _, _)| *p == named)
                .map_or(0, |e| e.2),
        }
    }

    /// The name, for the protocols that have one.
    pub fn name(self) -> Option<&'static str> {
        NAMED.iter().find(|(p, _, _)| *p == self).map(|e| e.1)
    }

    /// Whether `src_ports` / `dst_ports` may be used with this protocol: the protocols that
    /// iptables' `multiport` match supports, bar DCCP, which Calico never documented.
    pub fn has_ports(self) -> bool {
        matches!(
            self,
            Protocol::Tcp | Protocol::Udp | Protocol::Sctp | Protocol::Udplite
        )
    }

    /// Whether `icmp_type` / `icmp_code` may be used with this protocol.
    pub fn is_icmp(self) -> bool {
        matches!(self, Protocol::Icmp | Protocol::Icmpv6)
    }

    /// The IP version the protocol only exists in: ICMP is IPv4, ICMPv6 is IPv6.
    pub fn ip_version(self) -> Option<IpVersion> {
        match self {
            Protocol::Icmp => Some(IpVersion::V4),
            Protocol::Icmpv6 => Some(IpVersion::V6),
            _ => None,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}", self.number()),
        }
    }
}

impl Serialize for Protocol {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.name() {
            Some(name) => serializer.serialize_str(name),
            None => serializer.serialize_u8(self.number()),
        }
    }
}

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ProtocolVisitor)
    }
}

struct ProtocolVisitor;

impl Visitor<'_> for ProtocolVisitor {
    type Value = Protocol;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Protocol, E> {
        match u8::try_from(v) {
            Ok(n) if n > 0 => Ok(Protocol::from_number(n)),
            _ => Err(E::custom(format!(
                "invalid protocol {v}: expected {EXPECTED}"
            ))),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Protocol, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!(
                "invalid protocol {v}: expected {EXPECTED}"
            ))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Protocol, E> {
        Protocol::parse(v).map_err(E::custom)
    }
}

/// IPv4 or IPv6: the workspace's one IP version (`calico_dataplane::iptables::IpVersion` is this
/// type re-exported). Only `calico_linux::Family` is a separate copy, because `linux` depends on
/// none of the workspace's crates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpVersion {
    V4,
    V6,
}

impl IpVersion {
    /// The version of a network.
    pub fn of_net(net: &IpNet) -> IpVersion {
        match net {
            IpNet::V4(_) => IpVersion::V4,
            IpNet::V6(_) => IpVersion::V6,
        }
    }

    /// `4` or `6`.
    pub fn number(self) -> u8 {
        match self {
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }

    /// The version of an address.
    pub fn of_addr(addr: &IpAddr) -> IpVersion {
        match addr {
            IpAddr::V4(_) => IpVersion::V4,
            IpAddr::V6(_) => IpVersion::V6,
        }
    }
}

impl fmt::Display for IpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IpVersion::V4 => "IPv4",
            IpVersion::V6 => "IPv6",
        })
    }
}

/// In JSON a rule's `ip_version` is the number `4` or `6`, as Felix 1.x read it.
impl Serialize for IpVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.number())
    }
}

impl<'de> Deserialize<'de> for IpVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IpVersionVisitor)
    }
}

struct IpVersionVisitor;

impl Visitor<'_> for IpVersionVisitor {
    type Value = IpVersion;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the number 4 or 6")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<IpVersion, E> {
        match v {
            4 => Ok(IpVersion::V4),
            6 => Ok(IpVersion::V6),
            _ => Err(E::custom(format!(
                "invalid IP version {v}: expected 4 or 6"
            ))),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<IpVersion, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!(
                "invalid IP version {v}: expected 4 or 6"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_names_become_names() {
        assert_eq!(Protocol::parse("6"), Ok(Protocol::Tcp));
        assert_eq!(Protocol::from_number(58), Protocol::Icmpv6);
        assert_eq!(Protocol::parse("47"), Ok(Protocol::Number(47)));
        assert_eq!(Protocol::Udplite.number(), 136);
        assert!(
            Protocol::parse("0")
                .unwrap_err()
                .contains("expected tcp, udp")
        );
        assert!(
            Protocol::parse("TCP")
                .unwrap_err()
                .contains("expected tcp, udp")
        );
    }

    #[test]
    fn json_forms() {
        let p: Protocol = serde_json::from_str("132").unwrap();
        assert_eq!(p, Protocol::Sctp);
        assert_eq!(serde_json::to_string(&Protocol::Number(47)).unwrap(), "47");
        assert_eq!(serde_json::to_string(&Protocol::Icmp).unwrap(), "\"icmp\"");
        let err = serde_json::from_str::<Protocol>("256").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid protocol 256: expected tcp")
        );
    }
}
