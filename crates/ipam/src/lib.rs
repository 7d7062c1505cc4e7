//! IP address management in the Calico datastore (seeds 001, 003, 004).
//!
//! | module | owns |
//! | --- | --- |
//! | `block` | pure operations on one allocation block: ordinals, assign, release, counts, strict affinity |
//! | `dialect` | a block's JSON as Calico 1.4 (libcalico 0.15) and we write it, read and written back faithfully |
//! | `config` | [`IpamSettings`]: `strict_affinity` and `auto_allocate_blocks` at `/calico/ipam/v2/config` |
//! | `allocator` | [`Ipam`]: auto-assign, assign one address, release by address or handle |
//! | `plan` | the assignment planner: which blocks and addresses an automatic assignment takes, from what was read |
//! | `batch` | per-host lanes: concurrent assignments and releases of one host in one transaction |
//! | `lane` | the lanes as data: the jobs an allocator hands its host's lane |
//! | `hint` | what the process last saw of blocks and affinities: what to read, never the answer |
//! | `host_lock` | [`HostLock`]: the per-host lock file the CNI runs of one host take in turn |
//! | `affinity` | claiming and releasing a host's affinity to blocks |
//! | `store` | the IPAM keys: reads with revisions, block-and-handle transactions, the settings |
//! | `stored` | what was read: values with their revisions, blocks that do not read |
//! | `check` | the consistency audit behind `calicoctl ipam check` and its repairs |
//! | `error` | [`IpamError`] |
//!
//! Pools live at `/calico/v1/ipam/v4|v6/pool/<cidr>`; each host claims /26 (IPv4) or /122
//! (IPv6) blocks of them at `/calico/ipam/v2/assignment/…/block/<cidr>`, recording its affinity
//! at `/calico/ipam/v2/host/<host>/…/block/<cidr>`; every allocation belongs to a handle whose
//! record at `/calico/ipam/v2/handle/<id>` counts its addresses per block.

pub mod affinity;
pub mod allocator;
mod batch;
pub mod block;
pub mod check;
pub mod config;
pub mod dialect;
pub mod error;
mod hint;
pub mod host_lock;
mod lane;
mod plan;
mod store;
mod stored;

pub use affinity::AffinityOutcome;
pub use allocator::{AssignRequest, Assigned, DEFAULT_ATTEMPTS, IpAssignment, Ipam};
pub use check::{
    Fixed, HandleMismatch, Invalid, Leak, Report, StaleEndpoint, audit, stale_endpoints,
};
pub use config::IpamSettings;
pub use error::IpamError;
pub use host_lock::{HostLock, HostLockGuard};
pub use stored::InvalidBlock;
