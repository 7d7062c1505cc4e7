//! The bench the core's tests run on: a `Core`, the firewall backend its work runs on (over
//! the in-memory kernel), and helpers that build inputs and read effects as lines.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;

use calico_dataplane::{
    Backend, BackendKind, BackendReader, Dataplane, NftDataplane, calico_table,
};
use calico_datastore::{KvPair, WatchEvent};
use calico_felix::config::NftablesMode;
use calico_felix::core::{Core, Effect, Input, Metric, RoutesSynced, Tick};
use calico_felix::encap::EncapChanges;
use calico_felix::firewall::{self, Outcome};
use calico_felix::{Config, Inputs};
use calico_linux::fake::{FakeKernel, FakeNft};
use calico_linux::{Family, NetlinkError};

/// `/calico/v1/Ready`.
pub const READY: &str = "/calico/v1/Ready";

/// The core, the firewall it programs, and what the test has seen.
pub struct Bench {
    pub core: Core,
    pub kernel: FakeKernel,
    pub nft: FakeNft,
    pub backend: Backend,
    pub metrics: Vec<Metric>,
    /// The drift check's read, started and not yet done.
    pub drift: Option<BackendReader>,
    pub revision: i64,
}

impl Bench {
    /// A core for host `h1` with `env` (`FELIX_*`) as its configuration.
    pub fn new(env: &[(&str, &str)]) -> Bench {
        let inputs = Inputs {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Inputs::default()
        };
        let config = Config::load(&inputs, "h1").expect("a valid configuration");
        let (kernel, nft) = (FakeKernel::new(), FakeNft::new(calico_table()));
        let backend = backend(&config, &kernel, &nft);
        let core = Core::new(config, inputs, backend.kind());
        let mut bench = Bench {
            core,
            kernel,
            nft,
            backend,
            metrics: Vec::new(),
            drift: None,
            revision: 0,
        };
        let start = bench.core.start();
        assert!(bench.run(start).is_empty(), "only metrics at start");
        assert_eq!(bench.metrics, [Metric::Backend(BackendKind::Iptables)]);
        bench
    }

    /// One input; the effects it led to, as lines.
    pub fn step(&mut self, input: Input) -> Vec<String> {
        let effects = self.core.step(input);
        self.run(effects)
    }

    /// The effects in order: the firewall's work and a new backend are carried out and their
    /// results fed back at once (their effects join the queue), as the agent's executor does;
    /// the rest are left for the test to answer.
    fn run(&mut self, effects: Vec<Effect>) -> Vec<String> {
        let mut queue = VecDeque::from(effects);
        let mut lines = Vec::new();
        while let Some(effect) = queue.pop_front() {
            let line = effect.to_string();
            let input = match effect {
                Effect::Metric(metric) => {
                    self.metrics.push(metric);
                    continue;
                }
                Effect::ProgramFirewall(work) => {
                    let outcome = firewall::execute(&mut self.backend, work, self.core.state());
                    lines.push(format!("{line} → {}", outcome_name(&outcome)));
                    Input::Firewall(outcome)
                }
                Effect::ReplaceBackend(config) => {
                    lines.push(line);
                    self.backend = backend(&config, &self.kernel, &self.nft);
                    Input::BackendReplaced(Ok(self.backend.kind()))
                }
                Effect::ReadDrift => {
                    lines.push(line);
                    self.drift = Some(self.backend.reader());
                    continue;
                }
                _ => {
                    lines.push(line);
                    continue;
                }
            };
            queue.extend(self.core.step(input));
        }
        lines
    }

    /// A batch of datastore events: puts (`Some`) and deletes (`None`).
    pub fn datastore(&mut self, changes: &[(&str, Option<&str>)]) -> Vec<String> {
        let events = changes.iter().map(|(k, v)| self.event(k, *v)).collect();
        self.step(Input::Datastore(events))
    }

    pub fn event(&mut self, key: &str, value: Option<&str>) -> WatchEvent {
        self.revision += 1;
        match value {
            Some(value) => WatchEvent::Put(KvPair {
                key: key.to_owned(),
                value: value.to_owned(),
                mod_revision: self.revision,
            }),
            None => WatchEvent::Delete {
                key: key.to_owned(),
                mod_revision: self.revision,
            },
        }
    }

    /// The snapshot (`changes`, then `InSync`) with Ready: returns the lines of the first
    /// pass, answering the addresses with `addresses`, routes with `up`, encapsulation with no
    /// change.
    pub fn start(
        &mut self,
        changes: &[(&str, Option<&str>)],
        addresses: &[(&str, &str)],
        up: &[&str],
    ) -> Vec<String> {
        let mut events: Vec<WatchEvent> = changes.iter().map(|(k, v)| self.event(k, *v)).collect();
        events.push(self.event(READY, Some("true")));
        events.push(WatchEvent::InSync {
            revision: self.revision,
        });
        let mut lines = self.step(Input::Datastore(events));
        lines.extend(self.step(addresses_read(addresses)));
        lines.extend(self.step(routes_synced(up)));
        lines.extend(self.step(Input::Encap(Ok(EncapChanges::default()))));
        lines
    }

    /// The drift check's read completes now.
    pub fn finish_drift_read(&mut self) -> Vec<String> {
        let reader = self.drift.take().expect("a drift read was started");
        let snapshot = reader.read().expect("the fake kernel reads");
        self.step(Input::DriftRead(Ok(snapshot)))
    }

    pub fn tick(&mut self, tick: Tick) -> Vec<String> {
        self.step(Input::Tick(tick))
    }

    pub fn failures(&self) -> Vec<&'static str> {
        let failed = |m: &Metric| match m {
            Metric::Failed(tool) => Some(*tool),
            _ => None,
        };
        self.metrics.iter().filter_map(failed).collect()
    }

    pub fn filter_rules(&self, chain: &str) -> Option<Vec<String>> {
        self.kernel.rules(Family::V4, "filter", chain)
    }
}

/// The backend `config` asks for, over the in-memory kernel.
fn backend(config: &Config, kernel: &FakeKernel, nft: &FakeNft) -> Backend {
    match config.nftables_mode {
        NftablesMode::Enabled => Backend::Nftables {
            dataplane: Box::new(NftDataplane::with_kernel(
                Box::new(nft.clone()),
                config.render(),
            )),
            iptables: Box::new(kernel.clone()),
            ipsets: Box::new(kernel.clone()),
        },
        _ => Backend::Iptables {
            dataplane: Box::new(Dataplane::with_kernel(
                Box::new(kernel.clone()),
                Box::new(kernel.clone()),
                config.render(),
            )),
            other: Box::new(nft.clone()),
        },
    }
}

fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Synced { .. } => "synced",
        Outcome::Applied { .. } => "applied",
        Outcome::Repaired { repairs, .. } if repairs.is_empty() => "nothing drifted",
        Outcome::Repaired { .. } => "repaired",
        Outcome::Failed(_) => "failed",
    }
}

pub fn addresses_read(addresses: &[(&str, &str)]) -> Input {
    let mut interfaces: BTreeMap<String, BTreeSet<IpAddr>> = BTreeMap::new();
    for (iface, address) in addresses {
        let held = interfaces.entry(iface.to_string()).or_default();
        if !address.is_empty() {
            held.insert(address.parse().unwrap());
        }
    }
    Input::InterfaceAddresses(Ok(interfaces))
}

pub fn routes_synced(up: &[&str]) -> Input {
    Input::Routes(Ok(RoutesSynced {
        changes: Default::default(),
        up: up.iter().map(|s| s.to_string()).collect(),
    }))
}

pub fn netlink_failure(operation: &str) -> NetlinkError {
    NetlinkError::Request {
        operation: operation.to_owned(),
        reason: "injected by the test".to_owned(),
    }
}

/// `write endpoint statuses: <key> <state> …` for these endpoints (status keys in order).
pub fn statuses(endpoints: &[(&str, &str)]) -> String {
    let mut line = "write endpoint statuses:".to_owned();
    for (key, state) in endpoints {
        line.push_str(&format!(" {key} {state}"));
    }
    line
}
