//! When Felix programs the firewall (iptables and IP sets, or nf_tables) and how much: nothing until the
//! datastore snapshot is in, a full sync first and after any failure, then only the
//! calculator's changes, and a periodic check that rewrites only what drifted (the kernel is
//! read off the update path: [`Firewall::reader`], then [`Firewall::repair_drift`]). The outcome of each step
//! is a value the agent logs and counts; the decisions are tested here without root, against
//! the in-memory kernel.
//!
//! ```text
//!  AwaitingSnapshot ──snapshot──► NeedsFullSync ──sync ok──► InStep ──apply fails──┐
//!                                      ▲   └──sync fails: stays (retried)          │
//!                                      └───────────────────────────────────────────┘
//!                                   (also: a failed drift repair, a new configuration)
//! ```

use std::time::{Duration, Instant};

use calico_calc::{Changes, DesiredState};
use calico_dataplane::{Backend, BackendReader, BackendSnapshot, DataplaneError, Repairs};

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

/// What one step did.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing was due.
    Idle,
    /// A full sync ran; what it repaired beyond reloading.
    Synced { repairs: Repairs, took: Duration },
    /// A batch of changes was applied.
    Applied { took: Duration },
    /// The kernel refused; a full sync is due.
    Failed(DataplaneError),
}

/// The dataplane and where it stands.
#[derive(Debug)]
pub struct Firewall {
    dataplane: Backend,
    stage: Stage,
}

impl Firewall {
    pub fn new(dataplane: Backend) -> Firewall {
        Firewall {
            dataplane,
            stage: Stage::AwaitingSnapshot,
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

    /// A full sync is due (unless nothing has been programmed yet).
    pub fn needs_full_sync(&mut self) {
        if self.stage != Stage::AwaitingSnapshot {
            self.stage = Stage::NeedsFullSync;
        }
    }

    /// Which backend programs the kernel.
    pub fn backend(&self) -> calico_dataplane::BackendKind {
        self.dataplane.kind()
    }

    /// A new configuration: the new dataplane takes over with a full sync.
    pub fn replace(&mut self, dataplane: Backend) {
        self.dataplane = dataplane;
        self.needs_full_sync();
    }

    /// Brings the firewall in step with `state`: a full sync when one is due, else `changes`.
    pub fn program(&mut self, state: &DesiredState, changes: &Changes) -> Outcome {
        let started = Instant::now();
        let outcome = match self.stage {
            Stage::AwaitingSnapshot => return Outcome::Idle,
            Stage::NeedsFullSync => self.full_sync(state, started),
            Stage::InStep if changes.is_empty() => Outcome::Idle,
            Stage::InStep => match self.dataplane.apply(state, changes) {
                Ok(()) => Outcome::Applied {
                    took: started.elapsed(),
                },
                Err(error) => Outcome::Failed(error),
            },
        };
        self.settle(&outcome);
        outcome
    }

    /// A reader for the periodic drift check, to run off the update path; only when in step
    /// (otherwise a full sync is due anyway).
    pub fn reader(&self) -> Option<BackendReader> {
        (self.stage == Stage::InStep).then(|| self.dataplane.reader())
    }

    /// The second half of the drift check: rewrites only what drifted since the snapshot's
    /// chains and sets were last known good.
    pub fn repair_drift(&mut self, snapshot: &BackendSnapshot, state: &DesiredState) -> Outcome {
        if self.stage != Stage::InStep {
            return Outcome::Idle;
        }
        let started = Instant::now();
        let outcome = match self.dataplane.repair_drift(snapshot, state) {
            Ok(repairs) => Outcome::Synced {
                repairs,
                took: started.elapsed(),
            },
            Err(error) => Outcome::Failed(error),
        };
        self.settle(&outcome);
        outcome
    }

    fn full_sync(&mut self, state: &DesiredState, started: Instant) -> Outcome {
        match self.dataplane.sync(state) {
            Ok(repairs) => Outcome::Synced {
                repairs,
                took: started.elapsed(),
            },
            Err(error) => Outcome::Failed(error),
        }
    }

    fn settle(&mut self, outcome: &Outcome) {
        self.stage = match outcome {
            Outcome::Idle => self.stage,
            Outcome::Synced { .. } | Outcome::Applied { .. } => Stage::InStep,
            Outcome::Failed(_) => Stage::NeedsFullSync,
        };
    }
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

    fn firewall() -> (Firewall, FakeKernel, Calculator) {
        let kernel = FakeKernel::new();
        let nft = FakeNft::new(calico_table());
        let mut calc = Calculator::new("h1");
        calc.apply(WEB, Some(WEB_BODY));
        calc.apply(DB, Some(DB_BODY));
        (Firewall::new(iptables(&kernel, &nft)), kernel, calc)
    }

    #[test]
    fn a_new_backend_takes_over_and_removes_the_other() {
        let (mut firewall, kernel, mut calc) = firewall();
        let nft = FakeNft::new(calico_table());
        firewall.snapshot_received();
        let changes = calc.take_changes();
        firewall.program(calc.state(), &changes);
        assert!(kernel.dump().contains(":cali-wi-caliweb"));

        firewall.replace(nftables(&kernel, &nft));
        assert_eq!(firewall.backend(), BackendKind::Nftables);
        let none = calc.take_changes();
        let Outcome::Synced { repairs, .. } = firewall.program(calc.state(), &none) else {
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

        firewall.replace(iptables(&kernel, &nft));
        firewall.program(calc.state(), &none);
        assert!(kernel.dump().contains(":cali-wi-caliweb"));
        assert_eq!(nft.snapshot(), None, "and back: the table is gone");
    }

    #[test]
    fn nothing_is_programmed_before_the_snapshot() {
        let (mut firewall, kernel, mut calc) = firewall();
        let changes = calc.take_changes();
        assert!(matches!(
            firewall.program(calc.state(), &changes),
            Outcome::Idle
        ));
        assert!(firewall.reader().is_none());
        firewall.needs_full_sync();
        assert_eq!(firewall.stage(), Stage::AwaitingSnapshot);
        assert!(kernel.log().is_empty(), "{:?}", kernel.log());
    }

    #[test]
    fn a_full_sync_first_then_only_the_changes() {
        let (mut firewall, kernel, mut calc) = firewall();
        firewall.snapshot_received();
        let changes = calc.take_changes();
        let Outcome::Synced { repairs, .. } = firewall.program(calc.state(), &changes) else {
            panic!("the first step is a full sync");
        };
        assert_eq!(repairs.jumps.len(), 16, "{repairs:?}");
        assert_eq!(firewall.stage(), Stage::InStep);
        assert!(kernel.dump().contains(":cali-wi-caliweb"));

        kernel.clear_log();
        calc.apply(
            "/calico/v1/policy/profile/web/rules",
            Some(r#"{"inbound_rules": [{"action": "deny"}]}"#),
        );
        let changes = calc.take_changes();
        let outcome = firewall.program(calc.state(), &changes);
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
        let restored: String = kernel.log().into_iter().map(|(_, input)| input).collect();
        let profile = calico_dataplane::profile_chain(true, "web");
        assert!(restored.contains(&format!(":{profile}")), "{restored}");
        assert!(
            !restored.contains("calidb"),
            "an endpoint the change does not touch is not rewritten: {restored}"
        );

        kernel.clear_log();
        let none = calc.take_changes();
        assert!(matches!(
            firewall.program(calc.state(), &none),
            Outcome::Idle
        ));
        assert!(kernel.log().is_empty());
    }

    #[test]
    fn a_failure_makes_the_next_step_a_full_sync() {
        let (mut firewall, kernel, mut calc) = firewall();
        firewall.snapshot_received();
        let changes = calc.take_changes();
        firewall.program(calc.state(), &changes);

        calc.apply(WEB, None);
        let changes = calc.take_changes();
        kernel.fail_next("iptables-restore");
        let outcome = firewall.program(calc.state(), &changes);
        assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
        assert_eq!(firewall.stage(), Stage::NeedsFullSync);
        assert!(
            kernel.dump().contains(":cali-wi-caliweb"),
            "the failed batch left the endpoint's chain"
        );

        // No new change: the retry is a full sync all the same, and it catches up.
        let none = calc.take_changes();
        let outcome = firewall.program(calc.state(), &none);
        assert!(matches!(outcome, Outcome::Synced { .. }), "{outcome:?}");
        assert!(!kernel.dump().contains("caliweb"), "{}", kernel.dump());
        assert_eq!(firewall.stage(), Stage::InStep);
    }

    #[test]
    fn the_drift_check_reads_only_in_step_and_rewrites_what_drifted() {
        let (mut firewall, kernel, mut calc) = firewall();
        assert!(
            firewall.reader().is_none(),
            "nothing to check before the snapshot"
        );
        firewall.snapshot_received();
        let changes = calc.take_changes();
        firewall.program(calc.state(), &changes);
        let snapshot = firewall.reader().expect("in step").read().unwrap();
        assert!(matches!(
            firewall.repair_drift(&snapshot, calc.state()),
            Outcome::Synced { repairs, .. } if repairs.is_empty()
        ));
        let drift = "*filter\n-I cali-wi-caliweb 1 -j ACCEPT\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
        let snapshot = firewall.reader().unwrap().read().unwrap();
        let Outcome::Synced { repairs, .. } = firewall.repair_drift(&snapshot, calc.state()) else {
            panic!("the check repairs");
        };
        assert_eq!(repairs.drifted_chains, ["V4 filter cali-wi-caliweb"]);

        // A repair the kernel refuses: a full sync is due, and no check runs until then.
        IpSets::restore(&kernel, "create cali4-x hash:ip\n").unwrap();
        let snapshot = firewall.reader().unwrap().read().unwrap();
        kernel.fail_next("ipset");
        let outcome = firewall.repair_drift(&snapshot, calc.state());
        assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
        assert_eq!(firewall.stage(), Stage::NeedsFullSync);
        assert!(firewall.reader().is_none());
    }
}
