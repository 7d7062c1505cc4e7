//! Errors of the mapping, the translator object and the executor. Messages name the field, the
//! bad value and the reason.

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;

/// An address, prefix or ID that the `<prefix>:<ID>::W.X.Y.Z` mapping cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error(
        "prefix {prefix}: a /{} leaves no bits for an address space id before the IPv4 address \
         in the last 32 bits; use /95 or shorter (/80 or shorter for 16-bit ids)",
        prefix.prefix_len()
    )]
    PrefixTooLong { prefix: Ipv6Net },
    #[error("prefix {prefix}: bits beyond /{} are set; write it as {}", prefix.prefix_len(), prefix.trunc())]
    PrefixHostBits { prefix: Ipv6Net },
    #[error("id {id}: the prefix {prefix} leaves room for address space ids 0..={max}")]
    IdOutOfRoom { id: u32, prefix: Ipv6Net, max: u16 },
    #[error("address {addr}: not under the translation prefix {prefix}")]
    OutsidePrefix { addr: Ipv6Addr, prefix: Ipv6Net },
    #[error(
        "address {addr}: not a translated address, bits between the address space id and the \
         IPv4 address (the zeros of <prefix>:<ID>::W.X.Y.Z) are set"
    )]
    NotTranslated { addr: Ipv6Addr },
    #[error("address {addr}: in address space {found}, not {expected}")]
    OtherSpace {
        addr: Ipv6Addr,
        found: u16,
        expected: u16,
    },
}

/// The embedded eBPF object does not have the shape the patcher expects (a build problem).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("translator object: marker {marker:#010x} for the space's /96 not found")]
    MarkerMissing { marker: u32 },
}

/// A step of a plan that the kernel refused.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{step}: {stderr}")]
    Refused { step: String, stderr: String },
    #[error("{step}: cannot run: {source}")]
    Spawn {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing translator object {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
