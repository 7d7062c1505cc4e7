//! The agent loop: it translates events into the core's inputs and carries the core's effects
//! out with etcd and the kernel (`agent/execute.rs`), and nothing else; every decision is the
//! core's (`core.rs`).
//!
//! ```text
//!  etcd watch /calico/v1/ (or calico-fanout) ─ waiting events ─► Input::Datastore ───┐
//!  etcd watch /calico/bgp/v1/host/ ─────────── waiting events ─► Input::HostAddresses │
//!  rtnetlink link and address events ─────── a 5 ms burst ─────► Input::Links         │
//!  nf_tables changes by others (monitor.rs) ─ a 50 ms burst ────► Input::FirewallChanged
//!  timers: refresh, route refresh, heartbeat, report ──────────► Input::Tick          ├► Core::step
//!  drift check's read (spawn_blocking, off the update path) ───► Input::DriftRead ────┘     │
//!                                                                                           ▼
//!  execute.rs: each effect in order: etcd (config, statuses), the firewall backend          effects
//!  (block_in_place), routing and encapsulation (netlink), health, metrics; its result goes
//!  back into Core::step at once, before the next event is taken
//! ```
//!
//! The loop ends with an error when a watch ends, and with `Ok` when the core asks for an exit
//! (a configuration change that applies only at start: the supervisor starts Felix again).

mod execute;
mod setup;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use calico_dataplane::{
    Backend, BackendReader, BackendSnapshot, DataplaneError, Ipip, Routing, Vxlan, Written,
};
use calico_datastore::{Datastore, DatastoreError, FanoutClient, Watch, WatchEvent};
use calico_linux::nft::{FirewallEvent, FirewallEvents};
use calico_linux::{LinkEvent, LinkEvents, Netlink, Netns};
use calico_model::Key;
use tokio::task::JoinHandle;
use tokio::time::{Interval, MissedTickBehavior, interval, timeout};

use crate::config::{Config, Inputs};
use crate::core::{Core, DriftReadError, Input, Tick};
use crate::flowlogs::FlowLogs;
use crate::metrics::{Health, Metrics};
use crate::status::StatusReporter;

pub use setup::{connect, etcd_config, load_config, read_config_values};

/// How often the loop proves it is alive and retries what failed.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Link events closer together than this are one burst (a veth pair comes with several).
const LINK_BURST: Duration = Duration::from_millis(5);

/// Changes to the firewall closer together than this are one burst, one drift check (a
/// `nft flush ruleset` comes as hundreds of notifications).
const FIREWALL_BURST: Duration = Duration::from_millis(50);

/// The tables whose changes make Felix check its firewall at once: its own nf_tables table,
/// and the kernel tables iptables-nft writes, where the iptables backend's chains and jumps
/// are.
const WATCHED_TABLES: [(&str, &str); 9] = [
    ("inet", "calico"),
    ("ip", "filter"),
    ("ip", "nat"),
    ("ip", "raw"),
    ("ip", "mangle"),
    ("ip6", "filter"),
    ("ip6", "nat"),
    ("ip6", "raw"),
    ("ip6", "mangle"),
];

/// Runs until the process is stopped, or until a configuration change in etcd needs a restart
/// (then it returns `Ok`, and the supervisor starts Felix again, as for Felix 1.x).
pub async fn run(
    store: &dyn Datastore,
    config: Config,
    inputs: Inputs,
    netns: Netns,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let health = Health::default();
    health.beat();
    setup::start_servers(&config, &metrics, &health).await?;
    let mut agent = Agent::new(store, &config, netns, metrics, health).await?;
    let mut core = Core::new(config, inputs, agent.backend.kind());
    let mut effects = core.start();
    loop {
        if agent.execute(&mut core, effects).await == Flow::Exit {
            return Ok(());
        }
        effects = core.step(agent.events.next().await?);
    }
}

/// Whether the loop goes on.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// The executor's side: the datastore, the kernel, health and metrics, and the event sources.
struct Agent<'a> {
    store: &'a dyn Datastore,
    netns: Netns,
    /// `/calico/felix/v1/host/<host>/status`.
    status_key: String,
    hostname: String,
    backend: Backend,
    /// What every backend (the first, and each after a live change) writes, for the metrics.
    written: Arc<Written>,
    routing: Routing,
    vxlan: Vxlan,
    ipip: Ipip,
    statuses: StatusReporter,
    metrics: Metrics,
    health: Health,
    events: Events,
    /// The flow logs' reader, collector and sender, while `FlowLogsEnabled`.
    flow_logs: Option<FlowLogs>,
}

impl<'a> Agent<'a> {
    async fn new(
        store: &'a dyn Datastore,
        config: &Config,
        netns: Netns,
        metrics: Metrics,
        health: Health,
    ) -> anyhow::Result<Agent<'a>> {
        let hostname = config.bootstrap.hostname.clone();
        let written = Arc::new(Written::default());
        let backend =
            crate::backend::build(&netns, config, &written).map_err(anyhow::Error::msg)?;
        let netlink = Netlink::connect(&netns).context("opening netlink")?;
        Ok(Agent {
            store,
            status_key: Key::FelixStatus {
                hostname: hostname.clone(),
            }
            .to_string(),
            statuses: StatusReporter::new(&hostname),
            hostname,
            backend,
            written,
            routing: Routing::new(netns.clone(), &config.interface_prefixes)
                .context("opening netlink")?,
            vxlan: Vxlan::new(netlink.clone()),
            ipip: Ipip::new(netlink),
            metrics,
            health,
            events: Events::open(store, config, &netns).await?,
            flow_logs: start_flow_logs(&netns, config),
            netns,
        })
    }
}

/// The flow logs `config` asks for; none when off, or (said in one error line) when they
/// cannot start: the data path never waits for them.
fn start_flow_logs(netns: &Netns, config: &Config) -> Option<FlowLogs> {
    if !config.flow_logs {
        return None;
    }
    let aggregator = config.flow_logs_aggregator.as_deref()?;
    let hostname = &config.bootstrap.hostname;
    match FlowLogs::start(netns, hostname, aggregator, config.flow_logs_flush) {
        Ok(flow_logs) => {
            tracing::info!(
                %aggregator,
                interval = ?config.flow_logs_flush,
                "flow logs on: every decision is logged to NFLOG and flows are sent"
            );
            Some(flow_logs)
        }
        Err(error) => {
            tracing::error!("flow logs are on but cannot start, so no flow is reported: {error}");
            None
        }
    }
}

/// Where inputs come from.
struct Events {
    watch: Watch,
    /// The hosts' registered addresses: where IPIP sends to.
    hosts: Watch,
    links: LinkEvents,
    /// Changes others make to nf_tables; `None` when the kernel cannot tell (or stopped).
    firewall: Option<FirewallEvents>,
    refresh: Interval,
    route_refresh: Interval,
    report: Interval,
    heartbeat: Interval,
    started: Instant,
    /// The drift check's read, on a blocking thread.
    drift_read: Option<JoinHandle<Result<BackendSnapshot, DataplaneError>>>,
}

impl Events {
    /// The watches come from etcd, or from a calico-fanout that holds etcd's watch for many
    /// hosts; writes (statuses) always go to etcd.
    async fn open(store: &dyn Datastore, config: &Config, netns: &Netns) -> anyhow::Result<Events> {
        let fanout = config.fanout_addr.as_deref().map(FanoutClient::new);
        if let Some(address) = &config.fanout_addr {
            tracing::info!(%address, "reading the datastore through calico-fanout");
        }
        let watch_of = async |prefix: &str| match &fanout {
            Some(fanout) => Ok::<_, DatastoreError>(fanout.watch(prefix)),
            None => store.watch(prefix).await,
        };
        Ok(Events {
            watch: watch_of("/calico/v1/").await?,
            hosts: watch_of("/calico/bgp/v1/host/").await?,
            links: LinkEvents::subscribe(netns).context("watching interfaces")?,
            firewall: monitor(netns),
            refresh: ticker(config.iptables_refresh),
            route_refresh: ticker(config.route_refresh),
            report: ticker(config.reporting_interval),
            heartbeat: ticker(HEARTBEAT),
            started: Instant::now(),
            drift_read: None,
        })
    }

    /// The next input: a batch of whatever events are waiting, a tick, or the drift read.
    async fn next(&mut self) -> anyhow::Result<Input> {
        let Events {
            watch,
            hosts,
            links,
            firewall,
            refresh,
            route_refresh,
            report,
            heartbeat,
            started,
            drift_read,
        } = self;
        loop {
            return Ok(tokio::select! {
                event = async { firewall.as_mut().expect("guarded by the condition").next().await },
                    if firewall.is_some() =>
                {
                    match changed(event, firewall).await {
                        Some(input) => input,
                        None => continue,
                    }
                }
                event = watch.next() => Input::Datastore(waiting(event, watch, "/calico/v1/").await?),
                event = hosts.next() => {
                    Input::HostAddresses(waiting(event, hosts, "/calico/bgp/v1/host/").await?)
                }
                event = links.next() => Input::Links(burst(event, links).await?),
                read = async { drift_read.as_mut().expect("guarded by the condition").await },
                    if drift_read.is_some() =>
                {
                    *drift_read = None;
                    Input::DriftRead(match read {
                        Ok(read) => read.map_err(DriftReadError::Kernel),
                        Err(error) => Err(DriftReadError::Stopped(error.to_string())),
                    })
                }
                _ = refresh.tick() => Input::Tick(Tick::Refresh),
                _ = route_refresh.tick() => Input::Tick(Tick::RouteRefresh),
                _ = heartbeat.tick() => Input::Tick(Tick::Heartbeat),
                _ = report.tick() => Input::Tick(Tick::Report {
                    time: SystemTime::now(),
                    uptime: started.elapsed(),
                }),
            });
        }
    }

    /// Reads the kernel's firewall on a blocking thread; updates go on meanwhile.
    fn start_drift_read(&mut self, reader: BackendReader) {
        self.drift_read = Some(tokio::task::spawn_blocking(move || reader.read()));
    }

    /// How long the loop has run.
    fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    fn retime(&mut self, refresh: Duration, route_refresh: Duration) {
        self.refresh = ticker(refresh);
        self.route_refresh = ticker(route_refresh);
    }
}

/// The first event and whatever else is already waiting: one batch, one programming pass.
async fn waiting(
    first: Option<WatchEvent>,
    watch: &mut Watch,
    prefix: &str,
) -> anyhow::Result<Vec<WatchEvent>> {
    let Some(first) = first else {
        anyhow::bail!("the datastore watch of {prefix} ended");
    };
    let mut batch = vec![first];
    while let Ok(Some(event)) = timeout(Duration::ZERO, watch.next()).await {
        batch.push(event);
    }
    Ok(batch)
}

/// The first link event and those that follow within [`LINK_BURST`] of each other.
async fn burst(first: Option<LinkEvent>, links: &mut LinkEvents) -> anyhow::Result<Vec<LinkEvent>> {
    let Some(first) = first else {
        anyhow::bail!("the interface watch ended");
    };
    tracing::debug!(event = ?first, "interface event");
    let mut burst = vec![first];
    while let Ok(Some(event)) = timeout(LINK_BURST, links.next()).await {
        tracing::debug!(?event, "interface event");
        burst.push(event);
    }
    Ok(burst)
}

/// The nf_tables monitor of `netns`, or none (said once) when the kernel will not have one:
/// then only the periodic check sees changes.
fn monitor(netns: &Netns) -> Option<FirewallEvents> {
    FirewallEvents::subscribe(netns)
        .inspect_err(|error| {
            tracing::warn!(
                "{error}: changes to the firewall are found only by the check every \
                 IptablesRefreshInterval"
            )
        })
        .ok()
}

/// A burst of firewall changes (the first and those within [`FIREWALL_BURST`] of each other)
/// as one input, if any concerns a table Felix watches. A monitor that stopped is dropped,
/// and said; what it may have missed is checked.
async fn changed(
    first: Option<FirewallEvent>,
    firewall: &mut Option<FirewallEvents>,
) -> Option<Input> {
    let Some(first) = first else {
        tracing::error!(
            "the nf_tables monitor stopped: changes to the firewall are found only by the check \
             every IptablesRefreshInterval from now on"
        );
        *firewall = None;
        return Some(Input::FirewallChanged);
    };
    let events = firewall.as_mut().expect("it gave the first event");
    let mut relevant = first.concerns(&WATCHED_TABLES);
    while let Ok(Some(event)) = timeout(FIREWALL_BURST, events.next()).await {
        relevant |= event.concerns(&WATCHED_TABLES);
    }
    if relevant {
        tracing::debug!(event = ?first, "the firewall was changed by someone else: checking it");
    }
    relevant.then_some(Input::FirewallChanged)
}

/// A tick every `period`, the first at once; late ticks are not bunched up.
fn ticker(period: Duration) -> Interval {
    let mut ticker = interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}
