//! When Felix programs the firewall (iptables and IP sets) and how much: nothing until the
//! datastore snapshot is in, a full sync first and after any failure, then only the
//! calculator's changes, and a periodic full sync that repairs drift. The outcome of each step
//! is a value the agent logs and counts; the decisions are tested here without root, against
//! the in-memory kernel.
//!
//! ```text
//!  AwaitingSnapshot ──snapshot──► NeedsFullSync ──sync ok──► InStep ──apply fails──┐
//!                                      ▲   └──sync fails: stays (retried)          │
//!                                      └───────────────────────────────────────────┘
//!                                        (also: a failed repair, a new configuration)
//! ```

use std::time::{Duration, Instant};

use calico_calc::{Changes, DesiredState};
use calico_dataplane::{Dataplane, Repairs};
use calico_linux::CommandError;

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
    Failed(CommandError),
}

/// The dataplane and where it stands.
#[derive(Debug)]
pub struct Firewall {
    dataplane: Dataplane,
    stage: Stage,
}

impl Firewall {
    pub fn new(dataplane: Dataplane) -> Firewall {
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

    /// A new configuration: the new dataplane takes over with a full sync.
    pub fn replace(&mut self, dataplane: Dataplane) {
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

    /// The periodic full sync that puts back what changed behind Felix's back; only when in
    /// step (otherwise the next [`Firewall::program`] syncs anyway).
    pub fn repair(&mut self, state: &DesiredState) -> Outcome {
        if self.stage != Stage::InStep {
            return Outcome::Idle;
        }
        let outcome = self.full_sync(state, Instant::now());
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
    use calico_dataplane::RenderConfig;
    use calico_linux::fake::FakeKernel;
    use calico_linux::{Family, FirewallTables};

    use super::*;

    const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
    const WEB_BODY: &str = r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"]}"#;
    const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";
    const DB_BODY: &str = r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.0.0.2/32"]}"#;

    fn firewall() -> (Firewall, FakeKernel, Calculator) {
        let kernel = FakeKernel::new();
        let dataplane = Dataplane::with_kernel(
            Box::new(kernel.clone()),
            Box::new(kernel.clone()),
            RenderConfig::default(),
        );
        let mut calc = Calculator::new("h1");
        calc.apply(WEB, Some(WEB_BODY));
        calc.apply(DB, Some(DB_BODY));
        (Firewall::new(dataplane), kernel, calc)
    }

    #[test]
    fn nothing_is_programmed_before_the_snapshot() {
        let (mut firewall, kernel, mut calc) = firewall();
        let changes = calc.take_changes();
        assert!(matches!(
            firewall.program(calc.state(), &changes),
            Outcome::Idle
        ));
        assert!(matches!(firewall.repair(calc.state()), Outcome::Idle));
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
    fn repair_puts_back_drift_and_a_failed_repair_is_retried() {
        let (mut firewall, kernel, mut calc) = firewall();
        firewall.snapshot_received();
        let changes = calc.take_changes();
        firewall.program(calc.state(), &changes);

        let drift = "*filter\n-D INPUT -j cali-INPUT\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
        let Outcome::Synced { repairs, .. } = firewall.repair(calc.state()) else {
            panic!("a repair is a full sync");
        };
        assert_eq!(repairs.jumps, ["V4 filter INPUT -> cali-INPUT"]);
        assert_eq!(
            kernel.rules(Family::V4, "filter", "INPUT").unwrap(),
            ["-j cali-INPUT"]
        );

        kernel.fail_next("ipset");
        assert!(matches!(firewall.repair(calc.state()), Outcome::Failed(_)));
        assert_eq!(firewall.stage(), Stage::NeedsFullSync);
        assert!(
            matches!(firewall.repair(calc.state()), Outcome::Idle),
            "not in step: the next program() syncs"
        );
        let none = calc.take_changes();
        assert!(matches!(
            firewall.program(calc.state(), &none),
            Outcome::Synced { .. }
        ));
    }
}
