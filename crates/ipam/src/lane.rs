//! The per-host lanes of `batch` as data: the jobs an allocator hands its host's lane, and
//! the lanes the clones of one `Ipam` share. The batching itself is `batch`'s.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use calico_model::IpVersion;
use calico_model::ipam::AllocationAttribute;
use ipnet::IpNet;
use tokio::sync::oneshot;

use crate::error::IpamError;

/// The lanes the clones of one `Ipam` share, by host.
#[derive(Default)]
pub(crate) struct Lanes {
    lanes: Mutex<HashMap<String, Arc<Lane>>>,
}

impl Lanes {
    pub(crate) fn lane(&self, host: &str) -> Arc<Lane> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        lanes.entry(host.to_owned()).or_default().clone()
    }
}

/// One host's lane: the jobs waiting, and the batch running.
#[derive(Default)]
pub(crate) struct Lane {
    pub(crate) pending: Mutex<Vec<Job>>,
    /// Held by the running batch until it has answered every job it took.
    pub(crate) busy: Arc<tokio::sync::Mutex<()>>,
}

/// Assign `wanted` addresses of one version to a handle, from the host's blocks first.
#[derive(Debug, Clone)]
pub(crate) struct AssignJob {
    pub(crate) host: String,
    pub(crate) handle: String,
    pub(crate) attribute: AllocationAttribute,
    pub(crate) version: IpVersion,
    pub(crate) wanted: usize,
    /// The requested pools (empty: every enabled pool).
    pub(crate) pools: Vec<IpNet>,
}

/// What an assignment did: its addresses (or why none), and the blocks it claimed.
pub(crate) type AssignOutcome = (Result<Vec<IpAddr>, IpamError>, Vec<IpNet>);
/// What a release did: the freed addresses with their handles.
pub(crate) type ReleaseOutcome = Result<Vec<(IpAddr, Option<String>)>, IpamError>;

/// A job waiting in a lane, with where its answer goes.
pub(crate) enum Job {
    Assign(AssignJob, oneshot::Sender<AssignOutcome>),
    Release {
        cidr: IpNet,
        ips: Vec<IpAddr>,
        reply: oneshot::Sender<ReleaseOutcome>,
    },
}
