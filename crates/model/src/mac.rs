//! The one MAC address type: what endpoints record (`mac`), what runtimes ask for (the CNI
//! `runtimeConfig.mac` and `MAC=`, Docker's `MacAddress`), what the kernel is given and what
//! Felix's static neighbour entries carry. `calico-linux` speaks the kernel's six bytes
//! (`[u8; 6]`, [`MacAddr::octets`]); everything that parses or prints one goes through here.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 48-bit MAC address. Parsed from six two-digit hex bytes separated by `:` or `-` (either
/// case); displayed and serialised in lowercase colon form, `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The six bytes, as the kernel takes and reports them.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }

    /// Whether an interface can have it: not a multicast (group) address, not all zeros.
    pub fn is_unicast(self) -> bool {
        self.0[0] & 1 == 0 && self.0 != [0; 6]
    }

    /// Parses an address an interface is to be given, refusing what no interface can have.
    pub fn parse_unicast(text: &str) -> Result<MacAddr, String> {
        let mac: MacAddr = text.parse()?;
        if mac.0[0] & 1 == 1 {
            return Err(format!(
                "{text:?} is a multicast address: an interface needs a unicast one"
            ));
        }
        if mac.0 == [0; 6] {
            return Err(format!("{text:?} is the all-zero address"));
        }
        Ok(mac)
    }

    /// The IPv6 link-local address the kernel derives from it (EUI-64, RFC 4291 appendix A):
    /// what a container's IPv6 default route goes through.
    pub fn eui64_link_local(self) -> Ipv6Addr {
        let [a, b, c, d, e, f] = self.0;
        Ipv6Addr::new(
            0xfe80,
            0,
            0,
            0,
            u16::from_be_bytes([a ^ 0x02, b]),
            u16::from_be_bytes([c, 0xff]),
            u16::from_be_bytes([0xfe, d]),
            u16::from_be_bytes([e, f]),
        )
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(octets: [u8; 6]) -> MacAddr {
        MacAddr(octets)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(mac: MacAddr) -> [u8; 6] {
        mac.0
    }
}

impl FromStr for MacAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<MacAddr, String> {
        let error = || format!("invalid MAC address {text:?}: expected the form aa:bb:cc:dd:ee:ff");
        let separator = if text.contains('-') { '-' } else { ':' };
        let mut bytes = [0u8; 6];
        let mut parts = text.split(separator);
        for byte in &mut bytes {
            let is_hex = |p: &&str| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit());
            let part = parts.next().filter(is_hex).ok_or_else(error)?;
            *byte = u8::from_str_radix(part, 16).map_err(|_| error())?;
        }
        match parts.next() {
            Some(_) => Err(error()),
            None => Ok(MacAddr(bytes)),
        }
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_in_either_spelling_and_printed_in_one() {
        let mac: MacAddr = "C2-11-22-33-44-55".parse().unwrap();
        assert_eq!(mac.to_string(), "c2:11:22:33:44:55");
        assert_eq!("c2:11:22:33:44:55".parse::<MacAddr>(), Ok(mac));
        for bad in [
            "zz",
            "c2:11:22:33:44",
            "c2:11:22:33:44:55:66",
            "c:1:2:3:4:5",
            "",
        ] {
            let error = bad.parse::<MacAddr>().unwrap_err();
            assert!(
                error.contains("expected the form aa:bb:cc:dd:ee:ff"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn an_interface_gets_only_a_unicast_address() {
        assert!(MacAddr::parse_unicast("c2:11:22:33:44:55").is_ok());
        let error = MacAddr::parse_unicast("01:00:5e:00:00:01").unwrap_err();
        assert!(error.contains("multicast"), "{error}");
        let error = MacAddr::parse_unicast("00:00:00:00:00:00").unwrap_err();
        assert!(error.contains("all-zero"), "{error}");
    }

    #[test]
    fn the_link_local_address_is_the_kernels() {
        let mac = MacAddr([0xc2, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(
            mac.eui64_link_local(),
            "fe80::c011:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap()
        );
    }
}
