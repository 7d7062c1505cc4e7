//! The translation prefix: where a private space's IPv4 addresses live on the IPv6 fabric.
//!
//! `W.X.Y.Z` in space `<ID>` is `<prefix>:<ID>::W.X.Y.Z` (seed 000 §7.1.2): the prefix's `P`
//! bits, then the ID in the next `min(16, 96 - P)` bits, zeros up to bit 96, and the IPv4
//! address in the last 32 bits. The translator (`calico-xlat`'s mapping) owns the bits; the
//! model owns the rule an object can be refused by: which IDs fit ([`TranslationPrefix::max_id`]).
//! With a /48 the ID is the fourth group (`fd5a:5a5a:0:7::10.0.0.5`); a /80 or shorter leaves
//! IDs up to 65535, a /81 to /95 fewer.

use std::fmt;
use std::str::FromStr;

use ipnet::Ipv6Net;
use serde::{Deserialize, Serialize};

/// The longest prefix: one bit of room (space 1) is the least that makes sense.
pub const MAX_LEN: u8 = 95;
/// An ID is at most one group of the address.
pub const MAX_ID_BITS: u8 = 16;

/// An IPv6 network of length at most /95 whose room before bit 96 numbers the spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct TranslationPrefix(Ipv6Net);

impl TranslationPrefix {
    pub fn net(&self) -> Ipv6Net {
        self.0
    }

    /// The bits of the ID: 16, or fewer for a prefix longer than /80.
    pub fn id_bits(&self) -> u8 {
        MAX_ID_BITS.min(96 - self.0.prefix_len())
    }

    /// The largest ID that fits (IDs start at 1).
    pub fn max_id(&self) -> u32 {
        (1u32 << self.id_bits()) - 1
    }

    /// Whether `id` fits the prefix's room; the reason names both when it does not.
    pub fn check_id(&self, id: u32) -> Result<(), String> {
        if (1..=self.max_id()).contains(&id) {
            return Ok(());
        }
        Err(format!(
            "{id} is outside the room of the translation prefix {self}: its {}-bit IDs run \
             from 1 to {}",
            self.id_bits(),
            self.max_id()
        ))
    }

    /// The rules of the prefix itself: no host bits, a length leaving room, unicast.
    pub fn check(&self) -> Result<(), String> {
        let net = self.0;
        if net.trunc() != net {
            return Err(format!(
                "{net} has host bits set; the network is {}",
                net.trunc()
            ));
        }
        let len = net.prefix_len();
        if len > MAX_LEN {
            return Err(format!(
                "{net} is a /{len}: the prefix must be at most /{MAX_LEN}, so that a space ID \
                 fits between it and the IPv4 address in the last 32 bits"
            ));
        }
        let first = net.network().segments()[0];
        let special = if first & 0xff00 == 0xff00 {
            Some("multicast")
        } else if first & 0xffc0 == 0xfe80 {
            Some("link-local")
        } else if first == 0 {
            Some("reserved (::/16 holds the unspecified, loopback and IPv4-mapped addresses)")
        } else {
            None
        };
        match special {
            Some(what) => Err(format!(
                "{net} is {what}: use a unicast prefix of your own (a ULA such as fd5a:5a5a::/80)"
            )),
            None => Ok(()),
        }
    }
}

impl fmt::Display for TranslationPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for TranslationPrefix {
    type Err = String;

    /// Parses an IPv6 CIDR; the rules of [`check`](Self::check) are the caller's.
    fn from_str(text: &str) -> Result<Self, String> {
        text.parse()
            .map(TranslationPrefix)
            .map_err(|_| format!("{text:?} is not an IPv6 CIDR (e.g. fd5a:5a5a::/80)"))
    }
}

impl TryFrom<String> for TranslationPrefix {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<TranslationPrefix> for String {
    fn from(prefix: TranslationPrefix) -> String {
        prefix.to_string()
    }
}
