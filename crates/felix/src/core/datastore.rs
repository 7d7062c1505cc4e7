//! The datastore's side of the core: watch events into the Ready gate (`gate.rs`), the
//! configuration check, the encapsulation and the calculator.

use calico_datastore::WatchEvent;
use calico_model::Key;

use super::reload::is_config;
use super::{Core, Effect, Metric};

impl Core {
    /// A batch of `/calico/v1/` events, then one programming pass.
    pub(super) fn datastore(&mut self, events: Vec<WatchEvent>, out: &mut Vec<Effect>) {
        let mut updates = 0;
        for event in events {
            match event {
                WatchEvent::Put(pair) => {
                    self.gate.received(pair.mod_revision);
                    self.update(&pair.key, Some(&pair.value));
                    updates += 1;
                }
                WatchEvent::Delete { key, mod_revision } => {
                    self.gate.received(mod_revision);
                    self.update(&key, None);
                    updates += 1;
                }
                WatchEvent::InSync { revision } => {
                    tracing::info!(revision, "in sync with the datastore");
                    out.push(Effect::Metric(Metric::Resync));
                    self.gate.in_sync(revision);
                }
            }
        }
        if updates > 0 {
            out.push(Effect::Metric(Metric::Updates(updates)));
        }
        if self.gate.settle() {
            self.firewall.snapshot_received();
            self.first_open(out);
        }
        self.program(out);
    }

    /// One put (`Some`) or delete (`None`): the key is parsed once, then goes to whichever of
    /// the gate, the configuration, the encapsulation and the calculator it concerns.
    fn update(&mut self, key: &str, value: Option<&str>) {
        let Ok(parsed) = Key::parse(key) else {
            return;
        };
        if matches!(parsed, Key::Ready) {
            self.gate
                .ready_flag(value.is_some_and(|v| v.trim() == "true"));
        }
        if matches!(parsed, Key::StagedPolicy { .. }) && value.is_some() {
            self.staged_policy_seen();
        }
        self.stale.config |= is_config(&parsed, &self.hostname);
        self.encap.update(key, &parsed, value);
        // The one WARNING for an invalid update (the calculator does not log it).
        if let calico_calc::Applied::Invalid { reason } = self.calc.apply_parsed(parsed, value) {
            tracing::warn!("{}", calico_model::invalid_warning(key, &reason));
        }
    }

    /// Staged policies are only seen through the flow logs: with them off, say so once.
    fn staged_policy_seen(&mut self) {
        const NOTED: &str = "staged policies without flow logs";
        if self.config.flow_logs || !self.warned.insert(NOTED.to_owned()) {
            return;
        }
        tracing::info!(
            "staged policies are stored but only visible with flow logs: they never enforce, \
             and with FlowLogsEnabled=false nothing of them is programmed"
        );
    }

    /// A change of hosts' registered addresses (only IPIP needs them).
    pub(super) fn host_addresses(&mut self, events: Vec<WatchEvent>, out: &mut Vec<Effect>) {
        for event in events {
            let (key, value) = match event {
                WatchEvent::Put(pair) => (pair.key, Some(pair.value)),
                WatchEvent::Delete { key, .. } => (key, None),
                WatchEvent::InSync { .. } => continue,
            };
            if let Ok(parsed) = Key::parse(&key) {
                self.encap.update(&key, &parsed, value.as_deref());
            }
        }
        if self.encap.dirty() {
            self.program(out);
        }
    }
}
