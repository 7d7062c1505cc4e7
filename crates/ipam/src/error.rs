//! Why an IPAM operation failed, in words that say what to do next.

use std::net::IpAddr;
use std::path::PathBuf;

use calico_datastore::DatastoreError;
use calico_model::IpVersion;
use ipnet::IpNet;

/// An IPAM operation failed; nothing it wrote is left half-done.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    #[error(transparent)]
    Datastore(#[from] DatastoreError),
    /// Fewer free addresses than asked for; what was assigned has been released again.
    #[error(
        "asked for {wanted} {version} address(es) for handle {handle}, but only {found} could be \
         assigned from pools {pools}{why}; add a pool or free addresses (calicoctl ipam show, \
         calicoctl ipam check)"
    )]
    Exhausted {
        version: IpVersion,
        handle: String,
        wanted: usize,
        found: usize,
        pools: String,
        /// Starts with `: `, or is empty.
        why: String,
    },
    /// No pool of this version hands out addresses.
    #[error(
        "no enabled {version} pool: add one at /calico/v1/ipam/{}/pool/<cidr>",
        family_segment(*version)
    )]
    NoPool { version: IpVersion },
    /// A requested pool does not exist.
    #[error("{field}: {cidr} is not a configured IP pool")]
    UnknownPool { field: &'static str, cidr: IpNet },
    /// A requested pool (or the pool of a requested address) is disabled.
    #[error("{field}: pool {cidr} is disabled: it gives out no new addresses")]
    DisabledPool { field: &'static str, cidr: IpNet },
    /// A specific address outside every pool.
    #[error("{ip} is in no configured IP pool")]
    NotInPool { ip: IpAddr },
    /// A specific address that is already assigned, or (`refused`) that this host may not
    /// assign because of strict affinity.
    #[error("{ip} {}", in_use(handle, refused))]
    InUse {
        ip: IpAddr,
        handle: Option<String>,
        /// Why the host may not assign the address (naming the block), when it is free.
        refused: Option<String>,
    },
    /// Concurrent writers kept changing what this operation read.
    #[error(
        "{operation}: gave up after {attempts} attempts, other writers kept changing {key}; try again"
    )]
    Contention {
        operation: &'static str,
        attempts: u32,
        key: String,
    },
    /// A stored IPAM object does not parse or validate.
    #[error(
        "{key} holds an invalid value: {reason}; repair it with calicoctl ipam check --fix or by hand"
    )]
    Corrupt { key: String, reason: String },
    /// The per-host lock (`host_lock`) could not be taken: the file is unusable, or (`busy`)
    /// another holder kept it too long.
    #[error("the per-host IPAM lock {}: {reason}", path.display())]
    Lock {
        path: PathBuf,
        reason: String,
        busy: bool,
    },
    /// A handle id that cannot be a key segment.
    #[error("handle {handle:?}: {reason}")]
    InvalidHandle { handle: String, reason: String },
}

fn in_use(handle: &Option<String>, refused: &Option<String>) -> String {
    match (refused, handle) {
        (Some(why), _) => format!("cannot be assigned: {why}"),
        (None, Some(handle)) => format!("is already assigned to handle {handle}"),
        (None, None) => "is already assigned".to_owned(),
    }
}

fn family_segment(version: IpVersion) -> &'static str {
    match version {
        IpVersion::V4 => "v4",
        IpVersion::V6 => "v6",
    }
}
