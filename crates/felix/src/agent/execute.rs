//! The executor: each of the core's effects carried out with etcd and the kernel, its result
//! fed back to the core before the next effect (so that a pass reads as one sequence).
//! Blocking kernel work (iptables-restore, ipset, nf_tables) runs in `block_in_place`; the
//! drift check's read on a blocking thread of its own (`Events::start_drift_read`).

use std::collections::VecDeque;
use std::time::Duration;

use calico_calc::DesiredState;
use calico_dataplane::{BackendKind, RoutingError};
use calico_datastore::DatastoreError;
use calico_model::status::FelixStatus;

use super::{Agent, Flow};
use crate::core::{Core, Effect, Input, RoutesSynced};
use crate::encap;
use crate::firewall::{self, Outcome, Work};

impl Agent<'_> {
    /// Carries out `effects` in order; each result goes to `core` at once and the effects it
    /// answers with join the queue.
    pub(super) async fn execute(&mut self, core: &mut Core, effects: Vec<Effect>) -> Flow {
        let mut queue = VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            tracing::trace!(%effect, "effect");
            if matches!(effect, Effect::Exit { .. }) {
                return Flow::Exit;
            }
            if let Some(input) = self.carry_out(effect, core.state()).await {
                queue.extend(core.step(input));
            }
        }
        Flow::Continue
    }

    /// One effect; the input that reports its result, if it has one.
    async fn carry_out(&mut self, effect: Effect, state: &DesiredState) -> Option<Input> {
        let store = self.store;
        let input = match effect {
            Effect::ReadConfig => {
                Input::ConfigRead(super::read_config_values(store, &self.hostname).await)
            }
            Effect::ReplaceBackend(config) => Input::BackendReplaced(self.replace_backend(&config)),
            Effect::ReadInterfaceAddresses => {
                Input::InterfaceAddresses(self.routing.interface_addresses().await)
            }
            Effect::ProgramFirewall(work) => Input::Firewall(self.program_firewall(work, state)),
            Effect::SyncRoutes => Input::Routes(self.sync_routes(state).await),
            Effect::SyncEncap(plans) => {
                Input::Encap(encap::apply(&plans, &self.vxlan, &self.ipip).await)
            }
            Effect::WriteEndpointStatuses(desired) => {
                Input::StatusesWritten(self.statuses.report(store, desired).await)
            }
            Effect::WriteFelixStatus { status, ttl } => {
                Input::FelixStatusWritten(self.write_status(&status, ttl).await)
            }
            Effect::ReportNow => Input::Tick(crate::core::Tick::Report {
                time: std::time::SystemTime::now(),
                uptime: self.events.uptime(),
            }),
            effect => {
                self.apply(effect);
                return None;
            }
        };
        Some(input)
    }

    /// The effects that report nothing back (or, for the drift read, later, through the
    /// loop's select: off the update path).
    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::ReadDrift => self.events.start_drift_read(self.backend.reader()),
            Effect::Retime {
                refresh,
                route_refresh,
            } => self.events.retime(refresh, route_refresh),
            Effect::Ready(ready) => self.health.set_ready(ready),
            Effect::Alive => {
                self.health.beat();
                if let Some(flow_logs) = &self.flow_logs {
                    self.metrics.count_flow_logs(flow_logs);
                }
            }
            Effect::FlowNames(names) => {
                if let Some(flow_logs) = &self.flow_logs {
                    flow_logs.update_names(*names);
                }
            }
            Effect::Metric(metric) => self.metrics.record(&metric),
            // `execute` stops the loop before an exit gets here; the others have results.
            Effect::Exit { .. }
            | Effect::ReadConfig
            | Effect::ReplaceBackend(_)
            | Effect::ReadInterfaceAddresses
            | Effect::ProgramFirewall(_)
            | Effect::SyncRoutes
            | Effect::SyncEncap(_)
            | Effect::WriteEndpointStatuses(_)
            | Effect::WriteFelixStatus { .. }
            | Effect::ReportNow => {}
        }
    }

    fn replace_backend(&mut self, config: &crate::Config) -> Result<BackendKind, String> {
        let backend = crate::backend::build(&self.netns, config, &self.written)?;
        let kind = backend.kind();
        self.backend = backend;
        match (config.flow_logs, self.flow_logs.is_some()) {
            (true, false) => self.flow_logs = super::start_flow_logs(&self.netns, config),
            (false, true) => {
                tracing::info!("flow logs off (FlowLogsEnabled)");
                self.flow_logs = None;
            }
            _ => {}
        }
        Ok(kind)
    }

    /// iptables-restore and ipset block: tell the runtime, so that nothing else waits on this
    /// thread meanwhile.
    fn program_firewall(&mut self, work: Work, state: &DesiredState) -> Outcome {
        let outcome =
            tokio::task::block_in_place(|| firewall::execute(&mut self.backend, work, state));
        self.metrics.count_written(&self.written);
        outcome
    }

    async fn sync_routes(&mut self, state: &DesiredState) -> Result<RoutesSynced, RoutingError> {
        let changes = self.routing.sync(state).await?;
        let up = state
            .endpoints
            .values()
            .filter_map(|program| program.interface.as_deref())
            .filter(|iface| self.routing.interface_up(iface))
            .map(str::to_owned)
            .collect();
        Ok(RoutesSynced { changes, up })
    }

    async fn write_status(
        &self,
        status: &FelixStatus,
        ttl: Duration,
    ) -> Result<(), DatastoreError> {
        let value = serde_json::to_string(status).expect("a status serializes");
        self.store
            .put_with_ttl(&self.status_key, &value, ttl)
            .await
            .map(drop)
    }
}
