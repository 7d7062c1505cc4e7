//! The results of a pass's effects: each changes what the core knows (stage, stale flags,
//! addresses, plans applied), is logged and counted once here, and moves the pass on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_dataplane::{BackendKind, BackendSnapshot, DataplaneError, RoutingError};
use calico_datastore::DatastoreError;
use calico_linux::NetlinkError;

use super::host_endpoints;
use super::phase::{Job, Pass};
use super::reload::{self, Reload};
use super::{ConfigValues, Core, DriftReadError, Effect, Metric, RoutesSynced};
use crate::encap::EncapChanges;
use crate::firewall::Outcome;

impl Core {
    pub(super) fn config_read(
        &mut self,
        read: Result<ConfigValues, DatastoreError>,
        out: &mut Vec<Effect>,
    ) {
        match reload::reload(&self.config, &mut self.inputs, &mut self.warned, read) {
            Reload::Same => self.advance(Pass::Reloading, out, Core::resolve),
            Reload::Live(new) => {
                out.push(Effect::Retime {
                    refresh: new.iptables_refresh,
                    route_refresh: new.route_refresh,
                });
                out.push(Effect::ReplaceBackend(new.clone()));
                self.config = *new;
                if self.pass == Pass::Reloading {
                    self.pass = Pass::Replacing;
                }
            }
            Reload::Restart(names) => {
                tracing::warn!(
                    "configuration changed in etcd ({}): restarting Felix to apply it; the \
                     dataplane stays as it is meanwhile",
                    names.join(", ")
                );
                out.push(Effect::Exit { restart: names });
                self.exiting = true;
            }
        }
    }

    pub(super) fn backend_replaced(
        &mut self,
        result: Result<BackendKind, String>,
        out: &mut Vec<Effect>,
    ) {
        match result {
            Ok(kind) => {
                self.backend = kind;
                self.firewall.needs_full_sync();
                out.push(Effect::Metric(Metric::Backend(kind)));
            }
            Err(error) => tracing::error!(
                "the new configuration cannot be applied, the firewall stays as it is: {error}"
            ),
        }
        self.advance(Pass::Replacing, out, Core::resolve);
    }

    pub(super) fn addresses_read(
        &mut self,
        result: Result<BTreeMap<String, BTreeSet<IpAddr>>, RoutingError>,
        out: &mut Vec<Effect>,
    ) {
        match result {
            Ok(addresses) => {
                self.calc.set_interface_addresses(addresses);
                self.host_interfaces = host_endpoints::resolve(&self.calc, &self.host_interfaces);
            }
            Err(error) => {
                tracing::error!("reading interface addresses failed (will retry): {error}");
                out.push(Effect::Metric(Metric::Failed(error.tool())));
                self.stale.interfaces = true;
            }
        }
        self.advance(Pass::Resolving, out, Core::dispatch);
    }

    pub(super) fn firewall_done(&mut self, outcome: Outcome, out: &mut Vec<Effect>) {
        let job = match &self.pass {
            Pass::Programming(pending) => pending.firewall.unwrap_or(Job::Program),
            _ => Job::Program,
        };
        if let Some(metric) = say_outcome(&outcome, job) {
            out.push(Effect::Metric(metric));
        }
        self.firewall.settle(&outcome);
        if let Some(work) = self.firewall.follow_up() {
            self.settled(out, |pending| pending.firewall = Some(Job::of(&work)));
            out.push(Effect::ProgramFirewall(work));
            return;
        }
        self.settled(out, |pending| pending.firewall = None);
    }

    /// The drift check's read is back: the repair goes after the pending changes, and routes
    /// are checked on the same beat.
    pub(super) fn drift_read(
        &mut self,
        read: Result<BackendSnapshot, DriftReadError>,
        out: &mut Vec<Effect>,
    ) {
        self.drift_reading = false;
        match read {
            Ok(snapshot) => self.firewall.drift_read(snapshot),
            Err(error) => {
                tracing::error!("{error} (will retry)");
                if let DriftReadError::Kernel(error) = &error {
                    out.push(Effect::Metric(Metric::Failed(tool_of(error))));
                }
            }
        }
        self.stale.routes = true;
        self.program(out);
        if std::mem::take(&mut self.drift_again) {
            self.check_drift(out);
        }
    }

    pub(super) fn routes_done(
        &mut self,
        result: Result<RoutesSynced, RoutingError>,
        out: &mut Vec<Effect>,
    ) {
        match result {
            Ok(synced) => {
                if !synced.changes.is_empty() {
                    tracing::info!(changed = ?synced.changes, "routes and interfaces programmed");
                }
                self.up = synced.up;
                self.stale.statuses = true;
            }
            Err(error) => {
                tracing::error!("programming routes failed (will retry): {error}");
                out.push(Effect::Metric(Metric::Failed(error.tool())));
                self.stale.routes = true;
            }
        }
        self.settled(out, |pending| pending.routes = false);
    }

    pub(super) fn encap_done(
        &mut self,
        result: Result<EncapChanges, NetlinkError>,
        out: &mut Vec<Effect>,
    ) {
        match result {
            Ok(changes) => self.encap.applied(&changes, self.calc.cluster()),
            Err(error) => {
                tracing::error!("programming VXLAN or IPIP failed (will retry): {error}");
                out.push(Effect::Metric(Metric::Failed("netlink")));
                self.encap.failed();
            }
        }
        self.settled(out, |pending| pending.encap = false);
    }
}

/// Logs what the firewall did; the metric it moves, if any.
fn say_outcome(outcome: &Outcome, job: Job) -> Option<Metric> {
    match outcome {
        Outcome::Synced { repairs, took } => {
            tracing::info!(?repairs, elapsed = ?took, "dataplane programmed");
            Some(Metric::FullSync(*took))
        }
        Outcome::Applied { took } => {
            tracing::debug!(elapsed = ?took, "changes applied");
            Some(Metric::Applied(*took))
        }
        Outcome::Repaired { repairs, .. } if repairs.is_empty() => None,
        Outcome::Repaired { repairs, took } => {
            tracing::warn!(?repairs, elapsed = ?took, "repaired dataplane drift");
            Some(Metric::Repaired)
        }
        Outcome::Failed(error) if job == Job::Repair => {
            tracing::error!("repairing drift failed (a full sync follows): {error}");
            Some(Metric::Failed(tool_of(error)))
        }
        Outcome::Failed(error) => {
            tracing::error!("programming the firewall failed (will retry): {error}");
            Some(Metric::Failed(tool_of(error)))
        }
    }
}

/// `iptables`, `ipset`, `nftables`, ... from a failure of the firewall.
pub(super) fn tool_of(error: &DataplaneError) -> &'static str {
    let command = match error {
        DataplaneError::Iptables(error) => &error.command,
        DataplaneError::Nftables(_) => return "nftables",
    };
    let program = command.split_whitespace().next().unwrap_or("");
    if program.starts_with("ip6tables") || program.starts_with("iptables") {
        "iptables"
    } else if program.starts_with("ipset") {
        "ipset"
    } else {
        "other"
    }
}
