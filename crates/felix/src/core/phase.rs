//! Where a programming pass stands (`pass.rs` moves it on): the phase, and in the programming
//! phase the results still out.

use crate::firewall::Work;

/// Where the pass stands.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pass {
    Idle,
    Reloading,
    Replacing,
    Resolving,
    Programming(Pending),
}

/// The results a pass still waits for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) firewall: Option<Job>,
    pub(super) routes: bool,
    pub(super) encap: bool,
}

/// What the firewall is doing, for the log when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    Program,
    Repair,
}

impl Job {
    pub(super) fn of(work: &Work) -> Job {
        match work {
            Work::RepairDrift(_) => Job::Repair,
            Work::FullSync | Work::Apply(_) => Job::Program,
        }
    }
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        *self == Pending::default()
    }
}
