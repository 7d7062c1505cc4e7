//! The agent's core: every decision Felix takes, as a synchronous state machine. It is fed
//! [`Input`]s (datastore watch events, link and address events, ticks, and the results of
//! what it asked for) and answers with [`Effect`]s (program the firewall, sync routes, write a
//! status, exit for a restart, …) as data. It does no I/O: the loop in `agent.rs` translates
//! events into inputs and carries the effects out; the tests (`tests/core/`) feed inputs
//! and answer effects step by step, without root.
//!
//! ```text
//!  Input::Datastore(batch) ─► calc, encap, Ready gate; config key? ──┐
//!  Input::HostAddresses ────► encap                                   │ program(): one pass
//!  Input::Links ────────────► Stale::routes / Stale::interfaces       │
//!  Tick::RouteRefresh ──────► Stale::routes, encap refresh            │
//!  Tick::Heartbeat ─────────► Alive; retry what failed ───────────────┤
//!  Tick::Refresh ───────────► ReadDrift ─ … ─► Input::DriftRead ──────┤
//!  Input::FirewallChanged ──► ReadDrift now (again after a read under way)
//!  Tick::Report ────────────► WriteFelixStatus                        ▼
//!
//!  a pass (pass.rs), each phase waiting for the result of its effects:
//!   Reloading   ReadConfig ─► same | Retime + ReplaceBackend | Exit
//!   Resolving   ReadInterfaceAddresses ─► host endpoints follow their addresses
//!   Programming ProgramFirewall (full sync | apply changes, then a drift repair),
//!               SyncRoutes, SyncEncap
//!   done        Ready, Metric::Programmed, WriteEndpointStatuses (after a routing sync)
//! ```
//!
//! Nothing is programmed until the datastore snapshot is in and `/calico/v1/Ready` is `true`
//! (`gate.rs`); a failure of any kernel step leaves its flag stale and the heartbeat
//! retries it (the firewall with a full sync).

mod datastore;
mod effect;
mod gate;
mod host_endpoints;
mod input;
mod pass;
mod phase;
mod reload;
mod results;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use calico_calc::{Calculator, DesiredState, EndpointKey};
use calico_dataplane::BackendKind;
use calico_datastore::DatastoreError;
use calico_linux::LinkEvent;
use calico_model::status::FelixStatus;

use crate::config::{Config, Inputs};
use crate::encap::Encapsulation;
use crate::firewall::Firewall;
use crate::flowlogs::FlowNames;

pub use effect::{Effect, Metric};
pub use input::{ConfigValues, DriftReadError, Input, RoutesSynced, Tick};

use gate::Gate;
use phase::Pass;

/// What needs a look on the next pass: set by events, cleared when the work is handed out,
/// set again when it fails.
#[derive(Debug)]
struct Stale {
    /// Routes, neighbours and interface settings (endpoints or links changed).
    routes: bool,
    /// The host's interface addresses (an address or a host interface changed): host endpoints
    /// given by address follow them.
    interfaces: bool,
    /// Endpoint statuses in etcd (routes were synced, or a status write failed).
    statuses: bool,
    /// Felix's configuration in etcd changed: read it again.
    config: bool,
}

/// The agent's state between inputs.
#[derive(Debug)]
pub struct Core {
    hostname: String,
    config: Config,
    /// Where the configuration came from; the etcd part is read again on a change.
    inputs: Inputs,
    /// Unknown names and invalid values already warned about.
    warned: BTreeSet<String>,
    calc: Calculator,
    /// VXLAN and IPIP: tunnel endpoints, hosts' addresses and the plans applied.
    encap: Encapsulation,
    firewall: Firewall,
    /// The datastore snapshot and `/calico/v1/Ready`.
    gate: Gate,
    stale: Stale,
    pass: Pass,
    /// A pass was asked for while one was under way.
    again: bool,
    /// The interfaces each host endpoint given by address resolved to, as last logged.
    host_interfaces: BTreeMap<EndpointKey, Vec<String>>,
    /// Interfaces up (with a carrier) at the last routing sync.
    up: BTreeSet<String>,
    /// A drift check's read is out.
    drift_reading: bool,
    /// The firewall changed while a drift check's read was out: read again when it is back.
    drift_again: bool,
    backend: BackendKind,
    /// Readiness as last said.
    ready: bool,
    /// No status report has been written yet.
    first_update: bool,
    /// An exit was asked for: nothing more is done.
    exiting: bool,
    /// A report tick came before the datastore was ready: report as soon as it is.
    report_skipped: bool,
    /// Flow logs: the names and addresses they decode with have changed since last sent.
    flow_names_stale: bool,
    /// Flow names were sent since the last heartbeat (at most one build per heartbeat).
    flow_names_sent: bool,
}

impl Core {
    /// The core for `config` (read from `inputs`), with `backend` programming the firewall.
    pub fn new(config: Config, inputs: Inputs, backend: BackendKind) -> Core {
        let hostname = config.bootstrap.hostname.clone();
        Core {
            calc: Calculator::new(&hostname),
            encap: Encapsulation::new(&hostname, config.ip_in_ip_enabled),
            hostname,
            config,
            inputs,
            warned: BTreeSet::new(),
            firewall: Firewall::new(),
            gate: Gate::default(),
            stale: Stale {
                routes: true,
                interfaces: true,
                statuses: true,
                config: false,
            },
            pass: Pass::Idle,
            again: false,
            host_interfaces: BTreeMap::new(),
            up: BTreeSet::new(),
            drift_reading: false,
            drift_again: false,
            backend,
            ready: false,
            first_update: true,
            exiting: false,
            report_skipped: false,
            flow_names_stale: true,
            flow_names_sent: false,
        }
    }

    /// What to do before the first input: warn about unknown names, say which backend runs.
    pub fn start(&mut self) -> Vec<Effect> {
        reload::warn_unknown(&self.inputs, &mut self.warned);
        vec![Effect::Metric(Metric::Backend(self.backend))]
    }

    /// Takes one input; returns what to do, in order.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.exiting {
            return out;
        }
        match input {
            Input::Datastore(events) => self.datastore(events, &mut out),
            Input::HostAddresses(events) => self.host_addresses(events, &mut out),
            Input::Links(events) => self.links(&events, &mut out),
            Input::Tick(tick) => self.tick(tick, &mut out),
            Input::FirewallChanged => self.firewall_changed(&mut out),
            Input::ConfigRead(read) => self.config_read(read, &mut out),
            Input::BackendReplaced(result) => self.backend_replaced(result, &mut out),
            Input::InterfaceAddresses(result) => self.addresses_read(result, &mut out),
            Input::Firewall(outcome) => self.firewall_done(outcome, &mut out),
            Input::DriftRead(read) => self.drift_read(read, &mut out),
            Input::Routes(result) => self.routes_done(result, &mut out),
            Input::Encap(result) => self.encap_done(result, &mut out),
            Input::StatusesWritten(ok) => self.stale.statuses |= !ok,
            Input::FelixStatusWritten(result) => self.felix_status_written(result),
        }
        out
    }

    /// The desired state the effects are about.
    pub fn state(&self) -> &DesiredState {
        self.calc.state()
    }

    /// Notes what interface events make stale: a workload interface needs its routes and
    /// settings; any other interface, or an address anywhere, may move a host endpoint.
    fn links(&mut self, events: &[LinkEvent], out: &mut Vec<Effect>) {
        for event in events {
            let workload = match event {
                LinkEvent::Changed(link) => self.config.interface_prefixes.matches(&link.name),
                LinkEvent::Removed { name, .. } => self.config.interface_prefixes.matches(name),
                LinkEvent::Address { .. } => {
                    self.stale.interfaces = true;
                    continue;
                }
            };
            self.stale.routes = true;
            // A host interface going up or down changes its host endpoint's status.
            self.stale.interfaces |= !workload;
        }
        if self.stale.routes || self.stale.interfaces {
            self.program(out);
        }
    }

    fn tick(&mut self, tick: Tick, out: &mut Vec<Effect>) {
        match tick {
            Tick::Refresh => self.check_drift(out),
            Tick::RouteRefresh => {
                self.stale.routes = true;
                self.encap.refresh();
                self.program(out);
            }
            Tick::Heartbeat => {
                out.push(Effect::Alive);
                self.gate.heartbeat();
                self.flow_names_sent = false;
                self.send_flow_names(out);
                if self.retry_due() {
                    self.program(out);
                }
            }
            Tick::Report { time, uptime } => self.report(time, uptime, out),
        }
    }

    /// The drift check reads the kernel off the update path: one read at a time, and only
    /// while the firewall is in step.
    fn check_drift(&mut self, out: &mut Vec<Effect>) {
        if !self.drift_reading && self.gate.is_open() && self.firewall.may_read() {
            self.drift_reading = true;
            out.push(Effect::ReadDrift);
        }
    }

    /// Someone changed the firewall: check it now. A read under way may have been taken
    /// before the change, so another follows it.
    fn firewall_changed(&mut self, out: &mut Vec<Effect>) {
        if self.drift_reading {
            self.drift_again = true;
        } else {
            self.check_drift(out);
        }
    }

    /// Felix's status key, once the datastore is ready: `first_update` until a report has
    /// been written.
    fn report(&mut self, time: SystemTime, uptime: Duration, out: &mut Vec<Effect>) {
        if !self.gate.started() {
            self.report_skipped = true;
            return;
        }
        let status = FelixStatus {
            time: humantime::format_rfc3339_seconds(time).to_string(),
            uptime: (uptime.as_secs_f64() * 10.0).round() / 10.0,
            first_update: self.first_update,
            dataplane: Some(self.backend.name().to_owned()),
        };
        let ttl = self.config.reporting_ttl;
        out.push(Effect::WriteFelixStatus { status, ttl });
    }

    /// The datastore is ready for the first time: the report a tick skipped is due now.
    fn first_open(&mut self, out: &mut Vec<Effect>) {
        if std::mem::take(&mut self.report_skipped) {
            out.push(Effect::ReportNow);
        }
    }

    /// With flow logs on, the names and addresses they decode with, when they changed: at
    /// most once between two heartbeats (building them costs in proportion to the cluster).
    fn send_flow_names(&mut self, out: &mut Vec<Effect>) {
        if !self.config.flow_logs || !self.flow_names_stale || self.flow_names_sent {
            return;
        }
        let names = FlowNames::of(&self.hostname, self.calc.cluster(), self.calc.state());
        out.push(Effect::FlowNames(Box::new(names)));
        self.flow_names_stale = false;
        self.flow_names_sent = true;
    }

    fn felix_status_written(&mut self, result: Result<(), DatastoreError>) {
        match result {
            Ok(()) => self.first_update = false,
            Err(error) => tracing::warn!(%error, "cannot write status"),
        }
    }
}
