//! A programming pass: the configuration read again if it changed, the host's addresses if
//! they may have moved, then the firewall, routes and encapsulation together, then readiness
//! and statuses. Each phase hands out effects and waits for their results (handled in
//! `results.rs`); the loop answers them before it takes the next event, so a pass never
//! interleaves with another input.
//!
//! | phase | effects | waits for |
//! | --- | --- | --- |
//! | `Reloading` | `ReadConfig` | `ConfigRead`: same → on; live → `Retime`, `ReplaceBackend`; restart → `Exit` |
//! | `Replacing` | `ReplaceBackend` | `BackendReplaced`: a full sync is due on the new backend |
//! | `Resolving` | `ReadInterfaceAddresses` | `InterfaceAddresses`: host endpoints follow their addresses |
//! | `Programming` | `ProgramFirewall`, `SyncRoutes`, `SyncEncap` (those due) | each result; a drift repair after the changes |
//! | done | `Ready`, `Metric::Programmed`, `WriteEndpointStatuses` (after a routing sync) | – |

use super::phase::{Job, Pass, Pending};
use super::{Core, Effect, Metric};
use crate::firewall::Stage;
use crate::status::desired_statuses;

impl Core {
    /// Asks for a pass; one under way takes the request up when it ends.
    pub(super) fn program(&mut self, out: &mut Vec<Effect>) {
        if self.pass != Pass::Idle {
            self.again = true;
            return;
        }
        self.begin(out);
    }

    /// Whether something failed and waits for the heartbeat's retry.
    pub(super) fn retry_due(&self) -> bool {
        self.firewall.stage() != Stage::InStep
            || self.stale.routes
            || self.stale.interfaces
            || self.stale.statuses
            || self.encap.dirty()
    }

    fn begin(&mut self, out: &mut Vec<Effect>) {
        if std::mem::take(&mut self.stale.config) {
            out.push(Effect::ReadConfig);
            self.pass = Pass::Reloading;
            return;
        }
        self.resolve(out);
    }

    pub(super) fn resolve(&mut self, out: &mut Vec<Effect>) {
        if !self.gate.is_open() {
            return self.finish(out);
        }
        if std::mem::take(&mut self.stale.interfaces) {
            out.push(Effect::ReadInterfaceAddresses);
            self.pass = Pass::Resolving;
            return;
        }
        self.dispatch(out);
    }

    /// The firewall's work for the calculator's changes, routes when endpoints or links
    /// changed, the encapsulation when its plans did.
    pub(super) fn dispatch(&mut self, out: &mut Vec<Effect>) {
        let changes = self.calc.take_changes();
        self.stale.routes |= !changes.endpoints.is_empty();
        self.flow_names_stale |= !changes.is_empty();
        let mut pending = Pending::default();
        if let Some(work) = self.firewall.work(changes) {
            pending.firewall = Some(Job::of(&work));
            out.push(Effect::ProgramFirewall(work));
        }
        if std::mem::take(&mut self.stale.routes) {
            pending.routes = true;
            out.push(Effect::SyncRoutes);
        }
        if let Some(plans) = self.encap.due(self.calc.cluster()) {
            pending.encap = true;
            out.push(Effect::SyncEncap(Box::new(plans)));
        }
        self.pass = Pass::Programming(pending);
        self.settled(out, |_| {});
    }

    /// Done, or not, when nothing is pending: readiness, the applied revision, and the
    /// endpoint statuses if a routing sync may have changed them. Then a pass asked for
    /// meanwhile.
    fn finish(&mut self, out: &mut Vec<Effect>) {
        self.pass = Pass::Idle;
        let done = self.gate.is_open()
            && self.firewall.stage() == Stage::InStep
            && !self.stale.routes
            && !self.encap.dirty();
        if done != self.ready {
            self.ready = done;
            out.push(Effect::Ready(done));
        }
        if done {
            let programmed = Metric::Programmed {
                revision: self.gate.revision(),
                endpoints: self.calc.state().endpoints.len(),
            };
            out.push(Effect::Metric(programmed));
            // Statuses change only with endpoints or interfaces, both of which go through the
            // routing sync; a policy-only batch writes nothing to the datastore.
            if std::mem::take(&mut self.stale.statuses) {
                let up = |iface: &str| self.up.contains(iface);
                let desired = desired_statuses(self.calc.state(), up);
                out.push(Effect::WriteEndpointStatuses(desired));
            }
        }
        if done {
            self.send_flow_names(out);
        }
        if std::mem::take(&mut self.again) {
            self.begin(out);
        }
    }

    /// Moves on from `phase` with `next`, if that is where the pass stands (a result out of
    /// turn changes what it is about, not the pass).
    pub(super) fn advance(
        &mut self,
        phase: Pass,
        out: &mut Vec<Effect>,
        next: fn(&mut Core, &mut Vec<Effect>),
    ) {
        if self.pass == phase {
            next(self, out);
        }
    }

    /// One result of the programming phase is in; the pass finishes with the last.
    pub(super) fn settled(&mut self, out: &mut Vec<Effect>, clear: impl FnOnce(&mut Pending)) {
        if let Pass::Programming(pending) = &mut self.pass {
            clear(pending);
            if pending.is_empty() {
                self.finish(out);
            }
        }
    }
}
