//! The address mapping of address spaces: IPv4 `W.X.Y.Z` in space `<ID>` is the IPv6 address
//! `<prefix>:<ID>::W.X.Y.Z`, for source and destination alike.
//!
//! Layout of the 128 bits, for a translation prefix of length `P` (at most /95):
//!
//! | bits                  | holds                                   |
//! | --------------------- | --------------------------------------- |
//! | `0 .. P`              | the cluster's translation prefix        |
//! | `P .. P+w`            | the space ID, `w = min(16, 96 - P)` bits |
//! | `P+w .. 96`           | zeros                                   |
//! | `96 .. 128`           | the IPv4 address                        |
//!
//! So a /48 gives `fd00:ca1:0:<ID>::10.0.0.5` with 16-bit IDs (the seed's picture), every
//! prefix up to /80 leaves room for IDs 0..=65535, and /81 to /95 leave `2^(96-P)` IDs. Each
//! space is one /96 (`Space::net`), and an IPv4 block `/n` of a space is one IPv6 route `/96+n`.
//!
//! Both addresses of a packet gain the same 96 bits, so a transport checksum changes by a
//! per-space constant (`Space::checksum_delta`): the translator never reads the payload.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use crate::error::MappingError;

/// Space IDs never need more than 16 bits: the seed's `<ID>` is one group of the address.
const MAX_ID_BITS: u8 = 16;

/// The cluster's translation prefix, checked to leave room for space IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    net: Ipv6Net,
}

impl Prefix {
    /// Checks that `net` has no host bits and leaves at least one bit for the ID.
    pub fn new(net: Ipv6Net) -> Result<Prefix, MappingError> {
        if net.prefix_len() > 95 {
            return Err(MappingError::PrefixTooLong { prefix: net });
        }
        if net.trunc() != net {
            return Err(MappingError::PrefixHostBits { prefix: net });
        }
        Ok(Prefix { net })
    }

    pub fn net(&self) -> Ipv6Net {
        self.net
    }

    /// How many bits the ID has under this prefix: 16, or fewer for prefixes longer than /80.
    pub fn id_bits(&self) -> u8 {
        MAX_ID_BITS.min(96 - self.net.prefix_len())
    }

    /// The largest ID this prefix leaves room for.
    pub fn max_id(&self) -> u16 {
        ((1u32 << self.id_bits()) - 1) as u16
    }

    /// The space with ID `id`, refused (naming the room) when the ID does not fit.
    pub fn space(&self, id: u32) -> Result<Space, MappingError> {
        if id > u32::from(self.max_id()) {
            return Err(MappingError::IdOutOfRoom {
                id,
                prefix: self.net,
                max: self.max_id(),
            });
        }
        Ok(Space {
            prefix: *self,
            id: id as u16,
        })
    }

    /// The space and IPv4 address a translated address stands for.
    pub fn split(&self, addr: Ipv6Addr) -> Result<(Space, Ipv4Addr), MappingError> {
        if !self.net.contains(&addr) {
            return Err(MappingError::OutsidePrefix {
                addr,
                prefix: self.net,
            });
        }
        let bits = u128::from(addr);
        let id_shift = self.id_shift();
        let zeros = (bits >> 32) & ((1u128 << (id_shift - 32)) - 1);
        if zeros != 0 {
            return Err(MappingError::NotTranslated { addr });
        }
        let id = (bits >> id_shift) as u32 & u32::from(self.max_id());
        Ok((self.space(id)?, Ipv4Addr::from(bits as u32)))
    }

    fn id_shift(&self) -> u32 {
        128 - u32::from(self.net.prefix_len()) - u32::from(self.id_bits())
    }
}

/// One address space under a prefix: the /96 its addresses live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Space {
    prefix: Prefix,
    id: u16,
}

impl Space {
    pub fn id(&self) -> u16 {
        self.id
    }

    pub fn prefix(&self) -> Prefix {
        self.prefix
    }

    /// The /96 that holds every address of this space.
    pub fn net(&self) -> Ipv6Net {
        let bits =
            u128::from(self.prefix.net.network()) | (u128::from(self.id) << self.prefix.id_shift());
        Ipv6Net::new(Ipv6Addr::from(bits), 96).expect("96 is a valid IPv6 prefix length")
    }

    /// The upper 96 bits (network byte order): what the translator writes before every address.
    pub fn upper96(&self) -> [u8; 12] {
        let octets = self.net().network().octets();
        let mut upper = [0; 12];
        upper.copy_from_slice(&octets[..12]);
        upper
    }

    /// `W.X.Y.Z` in this space.
    pub fn to_v6(&self, addr: Ipv4Addr) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.net().network()) | u128::from(u32::from(addr)))
    }

    /// The IPv4 address behind `addr`, refused when `addr` belongs to another space or none.
    pub fn to_v4(&self, addr: Ipv6Addr) -> Result<Ipv4Addr, MappingError> {
        let (space, v4) = self.prefix.split(addr)?;
        if space.id != self.id {
            return Err(MappingError::OtherSpace {
                addr,
                found: space.id,
                expected: self.id,
            });
        }
        Ok(v4)
    }

    /// An IPv4 block of this space as the one IPv6 route that covers it (a /26 is a /122).
    pub fn block(&self, block: Ipv4Net) -> Ipv6Net {
        let network = self.to_v6(block.network());
        Ipv6Net::new(network, 96 + block.prefix_len()).expect("96 + at most 32 is at most 128")
    }

    /// What translation adds to the one's-complement sum of a packet's two addresses (and so to
    /// its TCP/UDP checksum): twice the sum of the upper 96 bits, the same for every packet of
    /// the space.
    pub fn checksum_delta(&self) -> u16 {
        let once = ones_sum(&self.upper96());
        ones_add(once, once)
    }
}

/// The one's-complement sum of big-endian 16-bit words.
pub fn ones_sum(bytes: &[u8]) -> u16 {
    bytes
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))
        .fold(0, ones_add)
}

fn ones_add(a: u16, b: u16) -> u16 {
    let (sum, carry) = a.overflowing_add(b);
    sum + u16::from(carry)
}

#[cfg(test)]
mod tests;
