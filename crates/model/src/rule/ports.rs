//! Port ranges of `src_ports` / `dst_ports`.
//!
//! JSON entries are integers (`80`) or strings: a range `"first:last"` (first ≤ last) or a single
//! decimal port (`"80"`, accepted for tools that quote everything). Ports are 0-65535. A range
//! of one port serialises back to an integer, so `"80:80"` and `80` are the same value.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An inclusive range of ports; a single port is a range of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    first: u16,
    last: u16,
}

impl PortRange {
    /// One port.
    pub fn single(port: u16) -> PortRange {
        PortRange {
            first: port,
            last: port,
        }
    }

    /// `first..=last`; refused when first is above last.
    pub fn new(first: u16, last: u16) -> Result<PortRange, String> {
        if first > last {
            return Err(format!(
                "invalid port range \"{first}:{last}\": first port is above last"
            ));
        }
        Ok(PortRange { first, last })
    }

    pub fn first(&self) -> u16 {
        self.first
    }

    pub fn last(&self) -> u16 {
        self.last
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// Parses `"80"` or `"1024:2048"`.
    pub fn parse(text: &str) -> Result<PortRange, String> {
        let port = |part: &str| {
            part.parse::<u16>().map_err(|_| {
                format!("invalid port {text:?}: expected a port 0-65535 or a range \"first:last\"")
            })
        };
        match text.split_once(':') {
            Some((first, last)) => PortRange::new(port(first)?, port(last)?),
            None => port(text).map(PortRange::single),
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}:{}", self.first, self.last)
        }
    }
}

impl Serialize for PortRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.first == self.last {
            serializer.serialize_u16(self.first)
        } else {
            serializer.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PortVisitor)
    }
}

struct PortVisitor;

impl Visitor<'_> for PortVisitor {
    type Value = PortRange;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a port 0-65535 or a range \"first:last\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<PortRange, E> {
        u16::try_from(v)
            .map(PortRange::single)
            .map_err(|_| E::custom(format!("invalid port {v}: expected a port 0-65535")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortRange, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!(
                "invalid port {v}: expected a port 0-65535"
            ))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<PortRange, E> {
        PortRange::parse(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ports_and_ranges() {
        assert_eq!(PortRange::parse("80"), Ok(PortRange::single(80)));
        assert_eq!(PortRange::parse("2048:4000"), PortRange::new(2048, 4000));
        assert!(
            PortRange::parse("4000:2048")
                .unwrap_err()
                .contains("first port is above last")
        );
        assert!(
            PortRange::parse("1:65536")
                .unwrap_err()
                .contains("expected a port 0-65535")
        );
        assert!(
            PortRange::parse("http")
                .unwrap_err()
                .contains("expected a port 0-65535")
        );
        assert!(PortRange::new(5, 6).unwrap().contains(6));
    }

    #[test]
    fn single_ports_serialise_as_integers() {
        let ports: Vec<PortRange> = serde_json::from_str(r#"[80, "80:80", "1:2"]"#).unwrap();
        assert_eq!(serde_json::to_string(&ports).unwrap(), r#"[80,80,"1:2"]"#);
        let err = serde_json::from_str::<PortRange>("-1").unwrap_err();
        assert!(err.to_string().starts_with("invalid port -1"));
    }
}
