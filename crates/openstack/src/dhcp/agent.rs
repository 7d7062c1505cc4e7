//! The agent: a state machine fed etcd's endpoint events and Neutron's subnets
//! ([`Agent`], no I/O), and the loop that feeds it and applies its plan ([`run`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use calico_datastore::{Backoff, Datastore, Watch, WatchEvent};
use calico_model::key::Prefix;
use tokio::time::{Instant, sleep_until};

use super::dnsmasq::Dnsmasq;
use super::interface::Interfaces;
use super::names::{self, Names};
use super::plan::{Plan, plan_with_names};
use super::render::{Setting, render};
use super::subnet::DhcpSubnet;
use super::{DhcpError, NotServed};
use crate::client::Client;
use crate::translate::ORCHESTRATOR;

/// Changes that arrive together are applied together: the first waits this long for the rest.
const BATCH: Duration = Duration::from_millis(20);
/// An address in no known subnet asks Neutron again, but not sooner than this after a read.
const EARLY_POLL: Duration = Duration::from_millis(500);
/// dnsmasq that ran this long before dying is restarted without delay.
const HEALTHY_RUN: Duration = Duration::from_secs(10);

/// This host's endpoints and Neutron's subnets: what dnsmasq should serve.
#[derive(Debug)]
pub struct Agent {
    prefix: String,
    endpoints: BTreeMap<String, String>,
    /// `None` until Neutron answered once: nothing is served before.
    subnets: Option<Vec<DhcpSubnet>>,
    /// Subnets Neutron listed that did not decode.
    undecodable: Vec<NotServed>,
    /// This host's ports' names (Neutron's DNS integration).
    names: Names,
    /// What was left out at the last plan, so each is logged once, when it appears.
    logged: BTreeSet<NotServed>,
}

impl Agent {
    pub fn new(host: &str) -> Agent {
        Agent {
            prefix: Prefix::Workloads {
                hostname: host.to_owned(),
                orchestrator: ORCHESTRATOR.to_owned(),
            }
            .to_string(),
            endpoints: BTreeMap::new(),
            subnets: None,
            undecodable: Vec::new(),
            names: Names::new(),
            logged: BTreeSet::new(),
        }
    }

    /// The etcd prefix of this host's OpenStack endpoints.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Records an etcd event; returns whether anything changed.
    pub fn on_watch(&mut self, event: WatchEvent) -> bool {
        match event {
            WatchEvent::Put(kv) => {
                let old = self.endpoints.insert(kv.key, kv.value.clone());
                old.as_deref() != Some(kv.value.as_str())
            }
            WatchEvent::Delete { key, .. } => self.endpoints.remove(&key).is_some(),
            WatchEvent::InSync { .. } => false,
        }
    }

    /// Records Neutron's subnets; returns whether they changed.
    pub fn on_subnets(&mut self, subnets: Vec<DhcpSubnet>, undecodable: Vec<NotServed>) -> bool {
        let changed = self.subnets.as_ref() != Some(&subnets) || self.undecodable != undecodable;
        self.subnets = Some(subnets);
        self.undecodable = undecodable;
        changed
    }

    /// Records this host's ports' names; returns whether they changed.
    pub fn on_names(&mut self, names: Names) -> bool {
        let changed = self.names != names;
        self.names = names;
        changed
    }

    /// What to serve, once the subnets are known.
    pub fn plan(&self) -> Option<Plan> {
        let mut plan = plan_with_names(&self.endpoints, self.subnets.as_ref()?, &self.names);
        plan.left_out.extend(self.undecodable.iter().cloned());
        Some(plan)
    }

    /// Logs what `plan` leaves out that the last plan did not.
    pub fn log_left_out(&mut self, plan: &Plan) {
        let now: BTreeSet<NotServed> = plan.left_out.iter().cloned().collect();
        for new in now.difference(&self.logged) {
            new.log();
        }
        self.logged = now;
    }
}

/// Where and how the agent serves.
#[derive(Debug, Clone)]
pub struct Options {
    pub host: String,
    pub interface: String,
    pub tap_prefix: String,
    pub state_dir: PathBuf,
    pub dnsmasq: PathBuf,
    pub lease_time: Duration,
    pub neutron_poll_interval: Duration,
    /// dnsmasq's DNS port (0: no DNS).
    pub dns_port: u16,
}

/// The loop's timers and the parts it drives.
struct Runner<'a> {
    options: &'a Options,
    agent: Agent,
    neutron: Client,
    interfaces: Interfaces,
    dnsmasq: Dnsmasq,
    /// When to apply the plan (set by a change, or a failed apply's retry).
    apply_at: Option<Instant>,
    apply_backoff: Backoff,
    next_poll: Instant,
    last_poll: Option<Instant>,
    poll_backoff: Backoff,
    /// Whether Neutron's lack of a DNS integration was said (once).
    said_no_names: bool,
    /// When to restart a dnsmasq that died, and when the current one started.
    restart_at: Option<Instant>,
    started_at: Instant,
    restart_backoff: Backoff,
}

/// Serves until `shutdown` completes, then stops dnsmasq. Neutron or etcd away: what is served
/// stays served, and each is retried with backoff.
pub async fn run(
    options: &Options,
    neutron: Client,
    store: &dyn Datastore,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DhcpError> {
    let state = &options.state_dir;
    std::fs::create_dir_all(state).map_err(|source| DhcpError::File {
        path: state.display().to_string(),
        source,
    })?;
    let interfaces = Interfaces {
        prefix: options.interface.clone(),
    };
    let mut runner = Runner {
        options,
        agent: Agent::new(&options.host),
        neutron,
        interfaces,
        dnsmasq: Dnsmasq::new(&options.dnsmasq, state),
        apply_at: None,
        apply_backoff: Backoff::default(),
        next_poll: Instant::now(),
        last_poll: None,
        poll_backoff: Backoff::default(),
        said_no_names: false,
        restart_at: None,
        started_at: Instant::now(),
        restart_backoff: Backoff::default(),
    };
    runner.dnsmasq.stop_stale().await;
    // `ip` checked at start; what a previous run left stays (no flap on a restart) until the
    // first plan says which interfaces are wanted.
    runner.interfaces.check()?;
    tokio::pin!(shutdown);
    let mut watch = None;
    let (mut watch_at, mut watch_backoff) = (Instant::now(), Backoff::default());
    loop {
        let watching = watch.is_some();
        let (poll_at, apply_at, restart_at) =
            (runner.next_poll, runner.apply_at, runner.restart_at);
        let wake = tokio::select! {
            () = &mut shutdown => break,
            () = sleep_until(watch_at), if !watching => Wake::Watch,
            event = next(&mut watch), if watching => Wake::Event(event),
            () = sleep_until(poll_at) => Wake::Poll,
            () = sleep_until(apply_at.unwrap_or_else(far)), if apply_at.is_some() => Wake::Apply,
            status = runner.dnsmasq.exited() => Wake::Exited(status),
            () = sleep_until(restart_at.unwrap_or_else(far)), if restart_at.is_some() => Wake::Restart,
        };
        match wake {
            Wake::Watch => match store.watch(runner.agent.prefix()).await {
                Ok(started) => {
                    watch_backoff.reset();
                    watch = Some(started);
                }
                Err(e) => {
                    let delay = watch_backoff.next_delay();
                    let prefix = runner.agent.prefix();
                    tracing::warn!("etcd: cannot watch {prefix}: {e}; retrying in {delay:?}");
                    watch_at = Instant::now() + delay;
                }
            },
            Wake::Event(Some(event)) => runner.on_watch(event),
            // The watch task ended (it does not on its own): watch again.
            Wake::Event(None) => (watch, watch_at) = (None, Instant::now()),
            Wake::Poll => runner.poll().await,
            Wake::Apply => runner.apply().await,
            Wake::Exited(status) => runner.on_exit(status),
            Wake::Restart => runner.restart(),
        }
    }
    runner.dnsmasq.stop().await;
    Ok(())
}

/// What woke the loop.
enum Wake {
    Watch,
    Event(Option<WatchEvent>),
    Poll,
    Apply,
    Exited(std::process::ExitStatus),
    Restart,
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(86400)
}

async fn next(watch: &mut Option<Watch>) -> Option<WatchEvent> {
    match watch {
        Some(watch) => watch.next().await,
        None => std::future::pending().await,
    }
}

impl Runner<'_> {
    fn on_watch(&mut self, event: WatchEvent) {
        if self.agent.on_watch(event) {
            self.schedule_apply(BATCH);
        }
    }

    fn schedule_apply(&mut self, after: Duration) {
        let at = Instant::now() + after;
        self.apply_at = Some(self.apply_at.map_or(at, |t| t.min(at)));
    }

    /// The subnets and this host's ports' names.
    async fn read(
        &self,
    ) -> Result<(Vec<serde_json::Value>, Vec<serde_json::Value>), crate::NeutronError> {
        let subnets = self.neutron.list("/v2.0/subnets", "subnets").await?;
        let host = &self.options.host;
        let path = format!("/v2.0/ports?binding:host_id={host}&fields=id&fields=dns_assignment");
        let ports = self.neutron.list(&path, "ports").await?;
        Ok((subnets, ports))
    }

    async fn poll(&mut self) {
        let now = Instant::now();
        self.last_poll = Some(now);
        match self.read().await {
            Ok((subnets, ports)) => {
                self.poll_backoff.reset();
                self.next_poll = now + self.options.neutron_poll_interval;
                let (subnets, undecodable) = decode_subnets(subnets);
                let (names, integrated) = names::from_listing(ports);
                if !integrated && !ports_empty(&self.agent) && !self.said_no_names {
                    self.said_no_names = true;
                    tracing::info!(
                        "neutron lists this host's ports without dns_assignment (no DNS \
                         integration: extension driver dns or dns_domain_ports): no host names served"
                    );
                }
                let changed = self.agent.on_subnets(subnets, undecodable);
                if self.agent.on_names(names) || changed {
                    self.schedule_apply(Duration::ZERO);
                }
            }
            Err(e) => {
                let delay = self.poll_backoff.next_delay();
                tracing::warn!("{e}; serving what was read before, retrying in {delay:?}");
                self.next_poll = now + delay;
            }
        }
    }

    async fn apply(&mut self) {
        self.apply_at = None;
        let Some(plan) = self.agent.plan() else {
            return;
        };
        self.agent.log_left_out(&plan);
        if plan.unknown_subnet {
            // A port on a subnet created since the last read: ask Neutron again soon.
            let early = self.last_poll.map_or(Instant::now(), |t| t + EARLY_POLL);
            self.next_poll = self.next_poll.min(early);
        }
        match self.serve(&plan).await {
            Ok(()) => self.apply_backoff.reset(),
            Err(e) => {
                let delay = self.apply_backoff.next_delay();
                tracing::warn!("{e}; retrying in {delay:?}");
                self.schedule_apply(delay);
            }
        }
    }

    async fn serve(&mut self, plan: &Plan) -> Result<(), DhcpError> {
        let setting = Setting {
            interface: &self.options.interface,
            tap_prefix: &self.options.tap_prefix,
            state_dir: &self.options.state_dir,
            lease_time: self.options.lease_time,
            dns_port: self.options.dns_port,
        };
        let rendered = render(plan, &setting);
        self.interfaces.sync_all(&rendered.interfaces)?;
        let before = self.dnsmasq.pid();
        self.dnsmasq
            .apply(&rendered, !plan.subnets.is_empty())
            .await?;
        if self.dnsmasq.pid() != before && self.dnsmasq.pid().is_some() {
            self.started_at = Instant::now();
        }
        tracing::info!(
            subnets = plan.subnets.len(),
            ports = plan.hosts.len(),
            left_out = plan.left_out.len(),
            "serving"
        );
        Ok(())
    }

    fn on_exit(&mut self, status: std::process::ExitStatus) {
        if self.started_at.elapsed() >= HEALTHY_RUN {
            self.restart_backoff.reset();
        }
        let delay = self.restart_backoff.next_delay();
        tracing::warn!("dnsmasq exited ({status}); restarting it in {delay:?}");
        self.restart_at = Some(Instant::now() + delay);
    }

    fn restart(&mut self) {
        self.restart_at = None;
        self.started_at = Instant::now();
        if let Err(e) = self.dnsmasq.restart() {
            let delay = self.restart_backoff.next_delay();
            tracing::warn!("{e}; retrying in {delay:?}");
            self.restart_at = Some(Instant::now() + delay);
        }
    }
}

/// Whether the agent knows no endpoint of this host (then Neutron lists no port to name).
fn ports_empty(agent: &Agent) -> bool {
    agent.endpoints.is_empty()
}

/// Decodes each subnet alone: one Neutron lists that does not decode is named and left out.
fn decode_subnets(items: Vec<serde_json::Value>) -> (Vec<DhcpSubnet>, Vec<NotServed>) {
    let mut bad = Vec::new();
    let subnets = crate::client::decode_each(items, "subnet", &mut bad);
    let bad = bad
        .into_iter()
        .map(|e| NotServed::new(e.kind, &e.id, e.reason));
    (subnets, bad.collect())
}

#[cfg(test)]
mod tests {
    use calico_datastore::KvPair;

    use super::*;

    fn put(key: &str, value: &str) -> WatchEvent {
        WatchEvent::Put(KvPair {
            key: key.into(),
            value: value.into(),
            mod_revision: 1,
        })
    }

    #[test]
    fn nothing_is_served_until_neutron_answered_and_changes_are_noticed() {
        let mut agent = Agent::new("compute1");
        assert_eq!(
            agent.prefix(),
            "/calico/v1/host/compute1/workload/openstack/"
        );
        let key = "/calico/v1/host/compute1/workload/openstack/vm/endpoint/port-1";
        let value = r#"{"state":"active","name":"tapport-1","mac":"fa:16:3e:00:00:01","profile_ids":[],"ipv4_nets":["10.65.0.11/32"]}"#;
        assert!(agent.on_watch(put(key, value)));
        assert!(
            !agent.on_watch(put(key, value)),
            "the same value is no change"
        );
        assert!(!agent.on_watch(WatchEvent::InSync { revision: 2 }));
        assert_eq!(agent.plan(), None);
        assert!(agent.on_subnets(Vec::new(), Vec::new()));
        assert!(!agent.on_subnets(Vec::new(), Vec::new()));
        let plan = agent.plan().unwrap();
        assert_eq!(
            plan.left_out[0].to_string(),
            "port port-1: address 10.65.0.11: in no Neutron subnet"
        );
        let delete = WatchEvent::Delete {
            key: key.into(),
            mod_revision: 3,
        };
        assert!(agent.on_watch(delete));
        assert_eq!(agent.plan().unwrap(), Plan::default());
    }

    #[test]
    fn a_subnet_that_does_not_decode_is_named() {
        let (subnets, bad) = decode_subnets(vec![
            serde_json::json!({"id": "good", "ip_version": 4, "cidr": "10.0.0.0/24"}),
            serde_json::json!({"id": "bad", "ip_version": "four"}),
        ]);
        assert_eq!(subnets.len(), 1);
        assert_eq!(bad[0].id, "bad");
        assert!(bad[0].reason.starts_with("not understood"), "{}", bad[0]);
    }
}
