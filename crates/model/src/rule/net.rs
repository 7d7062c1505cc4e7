//! Reading networks from JSON: a CIDR (`10.0.0.0/8`) or a bare address, which means the host
//! network (`/32` or `/128`), as Felix 1.x read them. Used with `#[serde(deserialize_with)]` by
//! rules and endpoints; serialising uses `IpNet`'s own CIDR form.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// Parses a CIDR or a bare address (a host network). Host bits are kept as written; callers
/// that want the network address call `trunc()`.
pub fn parse_net(text: &str) -> Result<IpNet, String> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net);
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("invalid network {text:?}: expected a CIDR or an IP address"))
}

/// For `Option<IpNet>` fields (use with `#[serde(default)]`).
pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IpNet>, D::Error> {
    Ok(Option::<Net>::deserialize(d)?.map(|n| n.0))
}

/// For `Vec<IpNet>` fields (use with `#[serde(default)]`).
pub fn deserialize_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    Ok(Vec::<Net>::deserialize(d)?
        .into_iter()
        .map(|n| n.0)
        .collect())
}

/// One network read by [`parse_net`]; only a deserialisation vehicle.
struct Net(IpNet);

impl<'de> Deserialize<'de> for Net {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(NetVisitor)
    }
}

struct NetVisitor;

impl Visitor<'_> for NetVisitor {
    type Value = Net;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a CIDR or an IP address")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Net, E> {
        parse_net(v).map(Net).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_addresses_are_host_networks() {
        assert_eq!(parse_net("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert_eq!(
            parse_net("2001:db8::1").unwrap().to_string(),
            "2001:db8::1/128"
        );
        assert_eq!(parse_net("10.1.2.3/8").unwrap().to_string(), "10.1.2.3/8");
        assert!(
            parse_net("10.0.0.0/33")
                .unwrap_err()
                .contains("expected a CIDR or an IP address")
        );
        assert!(
            parse_net("eth0")
                .unwrap_err()
                .contains("expected a CIDR or an IP address")
        );
    }
}
