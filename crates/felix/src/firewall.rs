//! When Felix programs the firewall (iptables and IP sets, or nf_tables) and how much: nothing
//! until the datastore snapshot is in, a full sync first and after any failure, then only the
//! calculator's changes, and a periodic check that rewrites only what drifted (the kernel is
//! read off the update path, and the snapshot waits here for the pending changes to go first).
//!
//! The decisions are [`Firewall`]'s, part of the agent's core (`core.rs`): it hands out
//! [`Work`] as data and learns the [`Outcome`]; [`execute`] carries the work out on a
//! [`Backend`], in the agent's executor or, in tests, over the in-memory kernel.
//!
//! ```text
//!  AwaitingSnapshot ──snapshot──► NeedsFullSync ──sync ok──► InStep ──apply fails──┐
//!                                      ▲   └──sync fails: stays (retried)          │
//!                                      └───────────────────────────────────────────┘
//!                                   (also: a failed drift repair, a new backend)
//! ```

use std::time::{Duration, Instant};

use calico_calc::{Changes, DesiredState};
use calico_dataplane::{Backend, BackendSnapshot, DataplaneError, Repairs};

/// Where the firewall stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The datastore snapshot has not come yet: nothing is programmed (a half-read datastore
    /// would open or close the wrong things).
    AwaitingSnapshot,
    /// A full sync is due: at start-up, after a failed change, after a live configuration
    /// change.
    NeedsFullSync,
    /// In step with the calculator: only its changes are applied.
    InStep,
}

/// One piece of work for the backend.
#[derive(Debug)]
pub enum Work {
    /// Make the kernel equal to the desired state (writing only what differs).
    FullSync,
    /// Apply a batch of the calculator's changes.
    Apply(Changes),
    /// Rewrite what drifted since this snapshot of the kernel was read.
    RepairDrift(Box<BackendSnapshot>),
}

/// What one piece of work did.
#[derive(Debug)]
pub enum Outcome {
    /// A full sync ran; what it repaired beyond reloading.
    Synced { repairs: Repairs, took: Duration },
    /// A batch of changes was applied.
    Applied { took: Duration },
    /// The drift check's repair ran; what it rewrote (often nothing).
    Repaired { repairs: Repairs, took: Duration },
    /// The kernel refused; a full sync is due.
    Failed(DataplaneError),
}

/// Where the firewall stands, and the drift check's snapshot waiting for its turn.
#[derive(Debug)]
pub struct Firewall {
    stage: Stage,
    drift: Option<Box<BackendSnapshot>>,
}

impl Default for Firewall {
    fn default() -> Self {
        Firewall::new()
    }
}

impl Firewall {
    pub fn new() -> Firewall {
        Firewall {
            stage: Stage::AwaitingSnapshot,
            drift: None,
        }
    }

    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The datastore snapshot is complete: the first full sync is due.
    pub fn snapshot_received(&mut self) {
        if self.stage == Stage::AwaitingSnapshot {
            self.stage = Stage::NeedsFullSync;
        }
    }

    /// A full sync is due (unless nothing has been programmed yet): a new backend took over.
    pub fn needs_full_sync(&mut self) {
        if self.stage != Stage::AwaitingSnapshot {
            self.stage = Stage::NeedsFullSync;
        }
    }

    /// Whether a drift check may read the kernel now (only in step: otherwise a full sync is
    /// due anyway).
    pub fn may_read(&self) -> bool {
        self.stage == Stage::InStep
    }

    /// The drift check's read came back: the repair runs after the pending changes.
    pub fn drift_read(&mut self, snapshot: BackendSnapshot) {
        self.drift = Some(Box::new(snapshot));
    }

    /// What to do for a batch of `changes`: a full sync when one is due (it covers the
    /// changes and any drift), else the changes, else a waiting drift repair.
    pub fn work(&mut self, changes: Changes) -> Option<Work> {
        match self.stage {
            Stage::AwaitingSnapshot => None,
            Stage::NeedsFullSync => {
                self.drift = None;
                Some(Work::FullSync)
            }
            Stage::InStep if changes.is_empty() => self.follow_up(),
            Stage::InStep => Some(Work::Apply(changes)),
        }
    }

    /// What follows a piece of work that went well: the waiting drift repair, if any.
    pub fn follow_up(&mut self) -> Option<Work> {
        match self.stage {
            Stage::InStep => self.drift.take().map(Work::RepairDrift),
            _ => None,
        }
    }

    /// Learns how a piece of work went.
    pub fn settle(&mut self, outcome: &Outcome) {
        self.stage = match outcome {
            Outcome::Synced { .. } | Outcome::Applied { .. } | Outcome::Repaired { .. } => {
                Stage::InStep
            }
            Outcome::Failed(_) => {
                self.drift = None;
                Stage::NeedsFullSync
            }
        };
    }
}

/// Carries out `work` on `backend` for `state` (blocking: iptables-restore, ipset, netlink).
pub fn execute(backend: &mut Backend, work: Work, state: &DesiredState) -> Outcome {
    let started = Instant::now();
    let result = match work {
        Work::FullSync => backend.sync(state).map(|repairs| Outcome::Synced {
            repairs,
            took: started.elapsed(),
        }),
        Work::Apply(changes) => backend.apply(state, &changes).map(|()| Outcome::Applied {
            took: started.elapsed(),
        }),
        Work::RepairDrift(snapshot) => {
            backend
                .repair_drift(&snapshot, state)
                .map(|repairs| Outcome::Repaired {
                    repairs,
                    took: started.elapsed(),
                })
        }
    };
    result.unwrap_or_else(Outcome::Failed)
}

#[cfg(test)]
mod tests {
    use calico_calc::Calculator;
    use calico_dataplane::{BackendKind, Dataplane, NftDataplane, RenderConfig, calico_table};
    use calico_linux::fake::{FakeKernel, FakeNft};
    use calico_linux::{Family, FirewallTables, IpSets};

    use super::*;

    const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
    const WEB_BODY: &str = r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"]}"#;
    const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";
    const DB_BODY: &str = r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.0.0.2/32"]}"#;

    fn iptables(kernel: &FakeKernel, nft: &FakeNft) -> Backend {
        Backend::Iptables {
            dataplane: Box::new(Dataplane::with_kernel(
                Box::new(kernel.clone()),
                Box::new(kernel.clone()),
                RenderConfig::default(),
            )),
            other: Box::new(nft.clone()),
        }
    }

    fn nftables(kernel: &FakeKernel, nft: &FakeNft) -> Backend {
        Backend::Nftables {
            dataplane: Box::new(NftDataplane::with_kernel(
                Box::new(nft.clone()),
                RenderConfig::default(),
            )),
            iptables: Box::new(kernel.clone()),
            ipsets: Box::new(kernel.clone()),
        }
    }

    /// The decisions, the backend they run on, and the calculator they follow.
    struct Bench {
        firewall: Firewall,
        backend: Backend,
        calc: Calculator,
    }

    impl Bench {
        fn new() -> (Bench, FakeKernel) {
            let kernel = FakeKernel::new();
            let nft = FakeNft::new(calico_table());
            let mut calc = Calculator::new("h1");
            calc.apply(WEB, Some(WEB_BODY));
            calc.apply(DB, Some(DB_BODY));
            let backend = iptables(&kernel, &nft);
            let firewall = Firewall::new();
            (
                Bench {
                    firewall,
                    backend,
                    calc,
                },
                kernel,
            )
        }

        /// One step as the agent takes it: the work due for the calculator's changes, carried
        /// out and learnt from; `None` when nothing was due.
        fn program(&mut self) -> Option<Outcome> {
            let work = self.firewall.work(self.calc.take_changes())?;
            Some(self.run(work))
        }

        fn run(&mut self, work: Work) -> Outcome {
            let outcome = execute(&mut self.backend, work, self.calc.state());
            self.firewall.settle(&outcome);
            outcome
        }

        /// The drift check: the kernel read, then the repair once nothing else is pending.
        fn check_drift(&mut self) -> Option<Outcome> {
            let snapshot = self.backend.reader().read().unwrap();
            self.firewall.drift_read(snapshot);
            self.program()
        }
    }

    #[test]
    fn a_new_backend_takes_over_and_removes_the_other() {
        let (mut bench, kernel) = Bench::new();
        let nft = FakeNft::new(calico_table());
        bench.firewall.snapshot_received();
        bench.program();
        assert!(kernel.dump().contains(":cali-wi-caliweb"));

        bench.backend = nftables(&kernel, &nft);
        bench.firewall.needs_full_sync();
        assert_eq!(bench.backend.kind(), BackendKind::Nftables);
        let Some(Outcome::Synced { repairs, .. }) = bench.program() else {
            panic!("a new backend starts with a full sync");
        };
        let table = nft.snapshot().expect("the nftables backend made its table");
        assert!(table.chains.contains_key("to-wl-caliweb"), "{table:?}");
        assert!(
            !kernel.dump().contains("cali"),
            "the iptables backend's chains, jumps and sets are gone: {}",
            kernel.dump()
        );
        assert!(
            repairs
                .stale_chains
                .iter()
                .any(|c| c.contains("cali-wi-caliweb"))
        );

        bench.backend = iptables(&kernel, &nft);
        bench.firewall.needs_full_sync();
        bench.program();
        assert!(kernel.dump().contains(":cali-wi-caliweb"));
        assert_eq!(nft.snapshot(), None, "and back: the table is gone");
    }

    #[test]
    fn nothing_is_programmed_before_the_snapshot() {
        let (mut bench, kernel) = Bench::new();
        assert!(bench.program().is_none());
        assert!(!bench.firewall.may_read());
        bench.firewall.needs_full_sync();
        assert_eq!(bench.firewall.stage(), Stage::AwaitingSnapshot);
        assert!(kernel.log().is_empty(), "{:?}", kernel.log());
    }

    #[test]
    fn a_full_sync_first_then_only_the_changes() {
        let (mut bench, kernel) = Bench::new();
        bench.firewall.snapshot_received();
        let Some(Outcome::Synced { repairs, .. }) = bench.program() else {
            panic!("the first step is a full sync");
        };
        assert_eq!(repairs.jumps.len(), 16, "{repairs:?}");
        assert_eq!(bench.firewall.stage(), Stage::InStep);
        assert!(kernel.dump().contains(":cali-wi-caliweb"));

        kernel.clear_log();
        bench.calc.apply(
            "/calico/v1/policy/profile/web/rules",
            Some(r#"{"inbound_rules": [{"action": "deny"}]}"#),
        );
        let outcome = bench.program();
        assert!(
            matches!(outcome, Some(Outcome::Applied { .. })),
            "{outcome:?}"
        );
        let restored: String = kernel.log().into_iter().map(|(_, input)| input).collect();
        let profile = calico_dataplane::profile_chain(true, "web");
        assert!(restored.contains(&format!(":{profile}")), "{restored}");
        assert!(
            !restored.contains("calidb"),
            "an endpoint the change does not touch is not rewritten: {restored}"
        );

        kernel.clear_log();
        assert!(bench.program().is_none(), "no change, no work");
        assert!(kernel.log().is_empty());
    }

    #[test]
    fn a_failure_makes_the_next_step_a_full_sync() {
        let (mut bench, kernel) = Bench::new();
        bench.firewall.snapshot_received();
        bench.program();

        bench.calc.apply(WEB, None);
        kernel.fail_next("iptables-restore");
        let outcome = bench.program();
        assert!(matches!(outcome, Some(Outcome::Failed(_))), "{outcome:?}");
        assert_eq!(bench.firewall.stage(), Stage::NeedsFullSync);
        assert!(
            kernel.dump().contains(":cali-wi-caliweb"),
            "the failed batch left the endpoint's chain"
        );

        // No new change: the retry is a full sync all the same, and it catches up.
        let outcome = bench.program();
        assert!(
            matches!(outcome, Some(Outcome::Synced { .. })),
            "{outcome:?}"
        );
        assert!(!kernel.dump().contains("caliweb"), "{}", kernel.dump());
        assert_eq!(bench.firewall.stage(), Stage::InStep);
    }

    #[test]
    fn the_drift_repair_waits_for_the_pending_changes_and_rewrites_what_drifted() {
        let (mut bench, kernel) = Bench::new();
        bench.firewall.snapshot_received();
        bench.program();
        assert!(bench.firewall.may_read());
        let outcome = bench.check_drift();
        assert!(
            matches!(&outcome, Some(Outcome::Repaired { repairs, .. }) if repairs.is_empty()),
            "{outcome:?}"
        );

        // A change arrives while the kernel is read: it goes first, then the repair.
        let drift = "*filter\n-I cali-wi-caliweb 1 -j ACCEPT\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
        let snapshot = bench.backend.reader().read().unwrap();
        bench.firewall.drift_read(snapshot);
        bench.calc.apply(DB, None);
        let outcome = bench.program();
        assert!(
            matches!(outcome, Some(Outcome::Applied { .. })),
            "{outcome:?}"
        );
        let Some(Outcome::Repaired { repairs, .. }) =
            bench.firewall.follow_up().map(|w| bench.run(w))
        else {
            panic!("the repair follows the changes");
        };
        assert_eq!(repairs.drifted_chains, ["V4 filter cali-wi-caliweb"]);
        assert!(bench.firewall.follow_up().is_none(), "one repair per read");

        // A repair the kernel refuses: a full sync is due, and no check reads until then.
        IpSets::restore(&kernel, "create cali4-x hash:ip\n").unwrap();
        let snapshot = bench.backend.reader().read().unwrap();
        bench.firewall.drift_read(snapshot);
        kernel.fail_next("ipset");
        let outcome = bench.program();
        assert!(matches!(outcome, Some(Outcome::Failed(_))), "{outcome:?}");
        assert_eq!(bench.firewall.stage(), Stage::NeedsFullSync);
        assert!(!bench.firewall.may_read());
        assert!(matches!(bench.program(), Some(Outcome::Synced { .. })));
    }
}
