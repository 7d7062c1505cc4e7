//! BGP configuration: AS numbers, the node-to-node mesh switch and explicit peers.
//!
//! AS numbers are stored as plain text at `as_num` keys (`64511`) and as a JSON number or string
//! in peer objects; both the plain (`4200000000`) and the dotted (`65000.10`) notation are read.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Validate, ValidationError};

/// A 4-byte BGP AS number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AsNumber(pub u32);

impl FromStr for AsNumber {
    type Err = String;

    fn from_str(text: &str) -> Result<AsNumber, String> {
        let bad = || {
            format!(
                "invalid AS number {text:?}: expected 0-4294967295 or the dotted form 1-65535.0-65535"
            )
        };
        let text = text.trim();
        let number = match text.split_once('.') {
            Some((high, low)) => {
                let high: u16 = high.parse().map_err(|_| bad())?;
                let low: u16 = low.parse().map_err(|_| bad())?;
                (u32::from(high) << 16) | u32::from(low)
            }
            None => text.parse().map_err(|_| bad())?,
        };
        Ok(AsNumber(number))
    }
}

impl fmt::Display for AsNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for AsNumber {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for AsNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        let text = match Raw::deserialize(deserializer)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(text) => text,
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `/calico/bgp/v1/global/node_mesh` (or `/calico/v1/config/bgp_node_mesh`). When the key is
/// missing, the mesh is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMesh {
    pub enabled: bool,
}

impl Validate for NodeMesh {
    fn validate(&mut self) -> Result<(), ValidationError> {
        Ok(())
    }
}

/// An explicit BGP peer, global or for one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BgpPeer {
    pub ip: IpAddr,
    pub as_num: AsNumber,
}

impl Validate for BgpPeer {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.ip.is_unspecified() || self.ip.is_multicast() {
            let reason = format!("{} cannot be a BGP peer", self.ip);
            return Err(ValidationError::new("ip", reason));
        }
        Ok(())
    }
}

/// The BIRD log levels confd understands at the `loglevel` keys.
pub const BGP_LOG_LEVELS: [&str; 5] = ["none", "debug", "info", "warning", "error"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    #[test]
    fn as_numbers_come_as_numbers_strings_or_dotted() {
        let peer: BgpPeer = from_json(r#"{"ip": "192.0.2.1", "as_num": "65000.10"}"#).unwrap();
        assert_eq!(peer.as_num, AsNumber(65000 * 65536 + 10));
        let peer: BgpPeer = from_json(r#"{"ip": "192.0.2.1", "as_num": 64512}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&peer).unwrap(),
            r#"{"ip":"192.0.2.1","as_num":64512}"#
        );
        let err = from_json::<BgpPeer>(r#"{"ip": "192.0.2.1", "as_num": 4294967296}"#);
        assert_eq!(err.unwrap_err().field, "as_num");
    }
}
