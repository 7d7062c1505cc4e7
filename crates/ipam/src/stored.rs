//! What was read from the datastore: a value with the revision it was read at (what a
//! transaction compares), and the blocks that could not be read.

use calico_model::ipam::AllocationBlock;
use calico_model::pool::IpPool;
use ipnet::IpNet;

use crate::dialect::Dialect;

/// A stored object and the revision it was read at.
#[derive(Debug, Clone)]
pub(crate) struct Stored<T> {
    pub(crate) value: T,
    pub(crate) revision: i64,
}

/// A stored pool, its key and the revision it was read at.
#[derive(Debug, Clone)]
pub(crate) struct StoredPool {
    pub(crate) value: IpPool,
    pub(crate) key: String,
    pub(crate) revision: i64,
}

/// A stored block, the revision it was read at and the dialect it is written in.
#[derive(Debug, Clone)]
pub(crate) struct StoredBlock {
    pub(crate) value: AllocationBlock,
    pub(crate) revision: i64,
    pub(crate) dialect: Dialect,
}

/// A block key whose value cannot be read: kept out of assignments, reported by `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBlock {
    pub key: String,
    pub cidr: IpNet,
    /// The field and why (`affinity: "node1" is not of the form host:<hostname>`).
    pub reason: String,
}

/// Every block of one version: those that read, and those that do not.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    pub(crate) valid: Vec<StoredBlock>,
    pub(crate) invalid: Vec<InvalidBlock>,
}
