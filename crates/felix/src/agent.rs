//! The agent loop: configuration from etcd, waiting for `/calico/v1/Ready`, then datastore
//! updates into the calculator and the calculator's changes into the dataplane, with a periodic
//! full sync that repairs drift, and a status report into etcd.
//!
//! ```text
//!  etcd watch /calico/v1/ ─────► handle() ──► Calculator, Encapsulation; marks Stale::config
//!  etcd watch /calico/bgp/v1/host/ ─► host_event() ──► Encapsulation (hosts' addresses)
//!  link and address events ────► interface_event() ──► marks Stale::routes, Stale::interfaces
//!  timers: refresh ─► drift check: kernel read on a blocking thread ─► repair_drift()
//!          route refresh ─► Stale::routes   heartbeat ─► retry
//!          report ─► status key with a TTL
//!                          │ after each batch: program()
//!                          ▼
//!  Firewall (firewall.rs)      nothing before the snapshot, then a full sync, then only the
//!                              calculator's changes; any failure: a full sync next time
//!  Stale::interfaces           host endpoints follow their addresses (Calculator)
//!  Stale::routes               Routing::sync ──► Stale::statuses
//!  Encapsulation               VXLAN and IPIP plans applied when they changed
//!  all done                    ready, felix_applied_revision, endpoint statuses written
//! ```
//!
//! A configuration change in etcd is applied live (a new [`calico_dataplane::Backend`] and a full sync) or ends
//! the loop for the supervisor to restart Felix.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use calico_calc::{Calculator, EndpointKey};
use calico_dataplane::{
    BackendSnapshot, DataplaneError, InterfacePrefixes, Ipip, Routing, Vxlan, Written,
};
use calico_datastore::{
    Datastore, DatastoreError, EtcdConfig, EtcdDatastore, FanoutClient, WatchEvent,
};
use calico_linux::{LinkEvent, LinkEvents, Netlink, Netns};
use calico_model::Key;
use tokio::net::TcpListener;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{MissedTickBehavior, interval, sleep, timeout};

use crate::config::{Bootstrap, Config, Inputs, unknown_names};
use crate::encap::Encapsulation;
use crate::firewall::{Firewall, Outcome, Stage};
use crate::metrics::{Health, Metrics, health_routes, metrics_routes, serve};
use crate::status::{StatusReporter, desired_statuses};

/// How often "wait-for-ready" is logged while `/calico/v1/Ready` is not true.
const READY_LOG_EVERY: Duration = Duration::from_secs(10);

/// How to reach etcd, from the bootstrap parameters.
pub fn etcd_config(bootstrap: &Bootstrap) -> EtcdConfig {
    EtcdConfig {
        endpoints: bootstrap.etcd_endpoints.clone(),
        ca_file: bootstrap.etcd_ca_file.clone(),
        cert_file: bootstrap.etcd_cert_file.clone(),
        key_file: bootstrap.etcd_key_file.clone(),
        ..EtcdConfig::default()
    }
}

/// Connects to etcd, retrying with the shared bounded backoff (one warning per attempt) until it
/// answers. Only a settings error (a TLS file missing) ends the wait.
pub async fn connect(bootstrap: &Bootstrap) -> Result<EtcdDatastore, DatastoreError> {
    calico_datastore::connect_retrying(&etcd_config(bootstrap), "calico-felix", None).await
}

/// Reads the global and this host's config from etcd into `inputs`.
pub async fn read_etcd_config(
    store: &dyn Datastore,
    inputs: &mut Inputs,
    hostname: &str,
) -> anyhow::Result<()> {
    inputs.etcd_global = config_values(store, "/calico/v1/config/").await?;
    let host = format!("/calico/v1/host/{hostname}/config/");
    inputs.etcd_host = config_values(store, &host).await?;
    Ok(())
}

/// Reads the config from etcd and loads the whole configuration; warns once about each name
/// that is not a parameter.
pub async fn load_config(
    store: &dyn Datastore,
    inputs: &mut Inputs,
    hostname: &str,
    bootstrap: &Bootstrap,
) -> anyhow::Result<Config> {
    read_etcd_config(store, inputs, &bootstrap.hostname).await?;
    Ok(Config::load(inputs, hostname)?)
}

/// Warns about each name in the inputs that is not a Felix parameter (once per name and place).
fn warn_unknown(inputs: &Inputs, warned: &mut BTreeSet<String>) {
    for (name, source) in unknown_names(inputs) {
        if warned.insert(format!("{name} {source}")) {
            tracing::warn!(
                "ignoring {name:?} from {source}: not a Felix parameter that can be set there \
                 (see docs/configuration.md)"
            );
        }
    }
}

async fn config_values(
    store: &dyn Datastore,
    prefix: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let pairs = store.list(prefix).await?;
    Ok(pairs
        .into_iter()
        .filter_map(|p| {
            let name = p.key.strip_prefix(prefix)?;
            (!name.contains('/')).then(|| (name.to_owned(), p.value))
        })
        .collect())
}

/// Waits until `/calico/v1/Ready` is `true`.
pub async fn wait_for_ready(store: &dyn Datastore) {
    let mut last_log: Option<Instant> = None;
    loop {
        let ready = store
            .get("/calico/v1/Ready")
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.value.trim() == "true");
        if ready {
            tracing::info!("datastore is ready");
            return;
        }
        if last_log.is_none_or(|t| t.elapsed() >= READY_LOG_EVERY) {
            tracing::info!("wait-for-ready: /calico/v1/Ready is not true yet");
            last_log = Some(Instant::now());
        }
        sleep(Duration::from_millis(500)).await;
    }
}

/// Runs until the process is stopped, or until a configuration change in etcd needs a restart
/// (then it returns `Ok`, and the supervisor starts Felix again, as for Felix 1.x).
pub async fn run(
    store: &dyn Datastore,
    config: Config,
    mut inputs: Inputs,
    netns: Netns,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let health = Health::default();
    health.beat();
    start_servers(&config, &metrics, &health).await?;
    let hostname = config.bootstrap.hostname.clone();
    let mut warned = BTreeSet::new();
    warn_unknown(&inputs, &mut warned);
    let started = Instant::now();
    let mut links = LinkEvents::subscribe(&netns).context("watching interfaces")?;
    // What every dataplane (the first, and each after a live reload) writes, for the metrics.
    let written = Arc::new(Written::default());
    let dataplane = |config: &Config| crate::backend::build(&netns, config, &written);
    let mut felix = Felix {
        store,
        hostname: hostname.clone(),
        statuses: StatusReporter::new(&hostname),
        calc: Calculator::new(&hostname),
        firewall: Firewall::new(dataplane(&config).map_err(anyhow::Error::msg)?),
        written: written.clone(),
        routing: Routing::new(netns.clone(), &config.interface_prefixes)
            .context("opening netlink")?,
        metrics,
        health,
        prefixes: config.interface_prefixes.clone(),
        stale: Stale {
            routes: true,
            interfaces: true,
            statuses: true,
            config: false,
        },
        host_interfaces: BTreeMap::new(),
        encap: {
            let netlink = Netlink::connect(&netns).context("opening netlink")?;
            Encapsulation::new(
                &hostname,
                config.ip_in_ip_enabled,
                Vxlan::new(netlink.clone()),
                Ipip::new(netlink),
            )
        },
        seen_revision: 0,
    };
    let mut config = config;
    // The watches come from etcd, or from a calico-fanout that holds etcd's watch for many
    // hosts; writes (statuses) always go to etcd.
    let fanout = config.fanout_addr.as_deref().map(FanoutClient::new);
    if let Some(address) = &config.fanout_addr {
        tracing::info!(%address, "reading the datastore through calico-fanout");
    }
    let watch_of = async |prefix: &str| match &fanout {
        Some(fanout) => Ok::<_, DatastoreError>(fanout.watch(prefix)),
        None => store.watch(prefix).await,
    };
    let mut watch = watch_of("/calico/v1/").await?;
    // The hosts' registered addresses: where IPIP sends to.
    let mut hosts = watch_of("/calico/bgp/v1/host/").await?;
    let mut refresh = ticker(config.iptables_refresh);
    let mut route_refresh = ticker(config.route_refresh);
    let mut report = ticker(config.reporting_interval);
    let mut heartbeat = ticker(HEARTBEAT);
    let mut first_report = true;
    let mut drift_read: Option<JoinHandle<Result<BackendSnapshot, DataplaneError>>> = None;
    loop {
        tokio::select! {
            event = watch.next() => {
                let Some(event) = event else {
                    anyhow::bail!("the datastore watch ended");
                };
                felix.handle(event);
                // Take whatever else is already waiting, then program once for the batch.
                while let Ok(Some(event)) = timeout(Duration::ZERO, watch.next()).await {
                    felix.handle(event);
                }
                if felix.stale.config {
                    felix.stale.config = false;
                    match reload(store, &config, &mut inputs, &mut warned).await {
                        Reload::Same => {}
                        Reload::Live(new) => {
                            match dataplane(&new) {
                                Ok(backend) => felix.firewall.replace(backend),
                                Err(error) => tracing::error!(
                                    "the new configuration cannot be applied, the firewall \
                                     stays as it is: {error}"
                                ),
                            }
                            refresh = ticker(new.iptables_refresh);
                            route_refresh = ticker(new.route_refresh);
                            config = *new;
                        }
                        Reload::Restart(names) => {
                            tracing::warn!(
                                "configuration changed in etcd ({}): restarting Felix to apply \
                                 it; the dataplane stays as it is meanwhile",
                                names.join(", ")
                            );
                            return Ok(());
                        }
                    }
                }
                felix.program().await;
            }
            event = hosts.next() => {
                let Some(event) = event else {
                    anyhow::bail!("the datastore watch of the hosts' addresses ended");
                };
                felix.host_event(event);
                while let Ok(Some(event)) = timeout(Duration::ZERO, hosts.next()).await {
                    felix.host_event(event);
                }
                if felix.encap.dirty() {
                    felix.program().await;
                }
            }
            event = links.next() => {
                let Some(event) = event else {
                    anyhow::bail!("the interface watch ended");
                };
                tracing::debug!(?event, "interface event");
                felix.interface_event(&event);
                // Batch a burst of events (a veth pair comes with several).
                while let Ok(Some(event)) = timeout(Duration::from_millis(5), links.next()).await {
                    felix.interface_event(&event);
                }
                if felix.stale.routes || felix.stale.interfaces {
                    felix.program().await;
                }
            }
            _ = refresh.tick() => {
                // The drift check reads the kernel on a blocking thread; updates go on.
                if drift_read.is_none()
                    && let Some(reader) = felix.firewall.reader()
                {
                    drift_read = Some(tokio::task::spawn_blocking(move || reader.read()));
                }
            }
            read = async { drift_read.as_mut().expect("guarded by the condition").await },
                if drift_read.is_some() =>
            {
                drift_read = None;
                felix.repair_drift(read).await;
            }
            _ = route_refresh.tick() => {
                felix.stale.routes = true;
                felix.encap.refresh();
                felix.program().await;
            }
            _ = heartbeat.tick() => {
                felix.health.beat();
                // Retry what failed.
                if felix.firewall.stage() != Stage::InStep || felix.stale.routes || felix.encap.dirty() {
                    felix.program().await;
                }
            }
            _ = report.tick() => {
                let status =
                    status_json(started.elapsed(), first_report, felix.firewall.backend().name());
                let key = format!("/calico/felix/v1/host/{hostname}/status");
                match store.put_with_ttl(&key, &status, config.reporting_ttl).await {
                    Ok(_) => first_report = false,
                    Err(error) => tracing::warn!(%error, "cannot write status"),
                }
            }
        }
    }
}

/// A tick every `period`, the first at once; late ticks are not bunched up.
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// What a configuration change in etcd means for the running Felix.
enum Reload {
    /// Nothing Felix uses changed (or the new configuration is invalid: it keeps the old).
    Same,
    /// Only parameters Felix applies while running changed.
    Live(Box<Config>),
    /// These parameters changed and apply only at start.
    Restart(Vec<&'static str>),
}

/// Reads the configuration in etcd again and compares it with the running one.
async fn reload(
    store: &dyn Datastore,
    running: &Config,
    inputs: &mut Inputs,
    warned: &mut BTreeSet<String>,
) -> Reload {
    let hostname = running.bootstrap.hostname.clone();
    if let Err(error) = read_etcd_config(store, inputs, &hostname).await {
        tracing::warn!("cannot read the configuration in etcd (keeping the running one): {error}");
        return Reload::Same;
    }
    warn_unknown(inputs, warned);
    let new = match Config::load(inputs, &hostname) {
        Ok(new) => new,
        Err(error) => {
            tracing::warn!("{error}: keeping the running configuration");
            return Reload::Same;
        }
    };
    for warning in &new.warnings {
        if warned.insert(warning.clone()) {
            tracing::warn!("{warning}");
        }
    }
    let restart = running.restart_needed(&new);
    if !restart.is_empty() {
        return Reload::Restart(restart);
    }
    let live = running.live_changes(&new);
    if live.is_empty() {
        return Reload::Same;
    }
    for name in &live {
        let value = new.report.iter().find(|(n, ..)| n == name);
        if let Some((_, value, source)) = value {
            tracing::info!("config {name} = {value:?} ({source}): applied while running");
        }
    }
    Reload::Live(Box::new(new))
}

/// How often the loop proves it is alive and retries what failed.
const HEARTBEAT: Duration = Duration::from_secs(1);

async fn start_servers(config: &Config, metrics: &Metrics, health: &Health) -> anyhow::Result<()> {
    let mut servers = Vec::new();
    if config.health_enabled {
        servers.push(("health", config.health_port, health_routes(health.clone())));
    }
    if config.metrics_enabled {
        servers.push((
            "metrics",
            config.metrics_port,
            metrics_routes(metrics.clone()),
        ));
    }
    for (what, port, routes) in servers {
        let listener = TcpListener::bind(("0.0.0.0", port))
            .await
            .with_context(|| format!("cannot serve {what} on port {port}"))?;
        tracing::info!("serving {what} on port {port}");
        tokio::spawn(serve(listener, routes));
    }
    Ok(())
}

/// What needs a look on the next pass: set by events, cleared once done.
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

/// The agent's state between events.
struct Felix<'a> {
    store: &'a dyn Datastore,
    hostname: String,
    /// Endpoint statuses in etcd.
    statuses: StatusReporter,
    calc: Calculator,
    firewall: Firewall,
    routing: Routing,
    metrics: Metrics,
    health: Health,
    prefixes: InterfacePrefixes,
    stale: Stale,
    /// The interfaces each host endpoint given by address resolved to, as last logged.
    host_interfaces: BTreeMap<EndpointKey, Vec<String>>,
    /// VXLAN and IPIP: tunnel endpoints, hosts' addresses and the plans applied.
    encap: Encapsulation,
    /// The revision of the last datastore update received.
    seen_revision: i64,
    /// What the firewall wrote to the kernel so far.
    written: Arc<Written>,
}

impl Felix<'_> {
    /// Feeds one watch event to the calculator.
    fn handle(&mut self, event: WatchEvent) {
        match event {
            WatchEvent::Put(pair) => {
                self.seen_revision = self.seen_revision.max(pair.mod_revision);
                self.update(&pair.key, Some(&pair.value));
            }
            WatchEvent::Delete { key, mod_revision } => {
                self.seen_revision = self.seen_revision.max(mod_revision);
                self.update(&key, None);
            }
            WatchEvent::InSync { revision } => {
                tracing::info!(revision, "in sync with the datastore");
                self.metrics.resyncs.inc();
                self.seen_revision = self.seen_revision.max(revision);
                self.firewall.snapshot_received();
            }
        }
    }

    /// One put (`Some`) or delete (`None`): the key is parsed once, then goes to whichever of
    /// the configuration, the encapsulation and the calculator it concerns.
    fn update(&mut self, key: &str, value: Option<&str>) {
        self.metrics.updates.inc();
        let Ok(parsed) = Key::parse(key) else {
            return;
        };
        self.stale.config |= is_config(&parsed, &self.hostname);
        self.encap.update(key, &parsed, value);
        // The one WARNING for an invalid update (the calculator does not log it).
        if let calico_calc::Applied::Invalid { reason } = self.calc.apply_parsed(parsed, value) {
            tracing::warn!("{}", calico_model::invalid_warning(key, &reason));
        }
    }

    /// A change of a host's registered address (only IPIP needs them).
    fn host_event(&mut self, event: WatchEvent) {
        match event {
            WatchEvent::Put(pair) => {
                if let Ok(parsed) = Key::parse(&pair.key) {
                    self.encap.update(&pair.key, &parsed, Some(&pair.value));
                }
            }
            WatchEvent::Delete { key, .. } => {
                if let Ok(parsed) = Key::parse(&key) {
                    self.encap.update(&key, &parsed, None);
                }
            }
            WatchEvent::InSync { .. } => {}
        }
    }

    /// Notes what an interface event makes stale: a workload interface needs its routes and
    /// settings; any other interface, or an address anywhere, may move a host endpoint.
    fn interface_event(&mut self, event: &LinkEvent) {
        match event {
            LinkEvent::Changed(link) if self.prefixes.matches(&link.name) => {
                self.stale.routes = true;
            }
            LinkEvent::Removed { name, .. } if self.prefixes.matches(name) => {
                self.stale.routes = true;
            }
            // A host interface going up or down changes its host endpoint's status.
            LinkEvent::Changed(_) | LinkEvent::Removed { .. } => {
                self.stale.routes = true;
                self.stale.interfaces = true;
            }
            LinkEvent::Address { .. } => self.stale.interfaces = true,
        }
    }

    /// Reads the host's interface addresses so that host endpoints given only by their
    /// expected addresses apply to the interface holding them; logs where each one went.
    async fn resolve_host_endpoints(&mut self) {
        match self.routing.interface_addresses().await {
            Ok(addresses) => {
                self.calc.set_interface_addresses(addresses);
                self.stale.interfaces = false;
            }
            Err(error) => {
                tracing::error!("reading interface addresses failed (will retry): {error}");
                self.metrics.failed(error.tool());
                return;
            }
        }
        let mut resolved = BTreeMap::new();
        for key in self.calc.state().endpoints.keys() {
            let Some(endpoint) = self.calc.cluster().endpoints.get(key) else {
                continue;
            };
            if !matches!(key, EndpointKey::Host(_)) || endpoint.interface.is_some() {
                continue;
            }
            let holders: Vec<String> = self
                .calc
                .interfaces_of(key)
                .into_iter()
                .map(str::to_owned)
                .collect();
            if self.host_interfaces.get(key) != Some(&holders) {
                match holders.as_slice() {
                    [] => tracing::warn!(
                        endpoint = %key,
                        addresses = ?endpoint.addresses,
                        "no interface holds the host endpoint's expected addresses: no policy \
                         applies to it and it is reported down"
                    ),
                    [one] => {
                        tracing::info!(endpoint = %key, interface = one, "host endpoint found by address")
                    }
                    [first, ..] => tracing::warn!(
                        endpoint = %key,
                        interfaces = ?holders,
                        "the host endpoint's expected addresses are on several interfaces; it \
                         applies to {first} only (give it a \"name\" to choose)"
                    ),
                }
            }
            resolved.insert(key.clone(), holders);
        }
        self.host_interfaces = resolved;
    }

    /// Programs the dataplane: a full sync the first time (and after a failure), then only the
    /// calculator's changes; routes when endpoints or links changed. Failures are logged,
    /// counted, and retried on the next heartbeat; the dataplane is left as it was.
    async fn program(&mut self) {
        if self.firewall.stage() == Stage::AwaitingSnapshot {
            return;
        }
        if self.stale.interfaces {
            self.resolve_host_endpoints().await;
        }
        let changes = self.calc.take_changes();
        if !changes.endpoints.is_empty() {
            self.stale.routes = true;
        }
        // iptables-restore and ipset block: tell the runtime, so that nothing else waits on
        // this thread meanwhile.
        let outcome =
            tokio::task::block_in_place(|| self.firewall.program(self.calc.state(), &changes));
        match outcome {
            Outcome::Idle => {}
            Outcome::Synced { repairs, took } => {
                tracing::info!(?repairs, elapsed = ?took, "dataplane programmed");
                self.metrics.sync_seconds.observe(took.as_secs_f64());
            }
            Outcome::Applied { took } => {
                tracing::debug!(elapsed = ?took, "changes applied");
                self.metrics.apply_seconds.observe(took.as_secs_f64());
            }
            Outcome::Failed(error) => {
                tracing::error!("programming the firewall failed (will retry): {error}");
                self.metrics.failed(tool_of(&error));
            }
        }
        self.metrics.count_written(&self.written);
        self.metrics.set_backend(self.firewall.backend().name());
        if self.stale.routes {
            match self.routing.sync(self.calc.state()).await {
                Ok(changed) => {
                    if !changed.is_empty() {
                        tracing::info!(?changed, "routes and interfaces programmed");
                    }
                    self.stale.routes = false;
                    self.stale.statuses = true;
                }
                Err(error) => {
                    tracing::error!("programming routes failed (will retry): {error}");
                    self.metrics.failed(error.tool());
                }
            }
        }
        if let Err(error) = self.encap.sync(self.calc.cluster()).await {
            tracing::error!("programming VXLAN failed (will retry): {error}");
            self.metrics.failed("netlink");
        }
        let done =
            self.firewall.stage() == Stage::InStep && !self.stale.routes && !self.encap.dirty();
        self.health.set_ready(done);
        if done {
            self.metrics.applied_revision.set(self.seen_revision);
            self.metrics
                .endpoints
                .set(self.calc.state().endpoints.len() as i64);
            // Statuses change only with endpoints or interfaces, both of which go through the
            // routing sync; a policy-only batch does no datastore I/O here.
            if self.stale.statuses {
                let desired =
                    desired_statuses(self.calc.state(), |iface| self.routing.interface_up(iface));
                self.stale.statuses = !self.statuses.report(self.store, desired).await;
            }
        }
    }

    /// The second half of the periodic check, once the kernel has been read: pending changes
    /// first (the check compares with what was written), then only what drifted is rewritten;
    /// routes are checked on the same beat.
    async fn repair_drift(
        &mut self,
        read: Result<Result<BackendSnapshot, DataplaneError>, JoinError>,
    ) {
        self.program().await;
        match read {
            Ok(Ok(snapshot)) => match self.firewall.repair_drift(&snapshot, self.calc.state()) {
                Outcome::Synced { repairs, took } if !repairs.is_empty() => {
                    tracing::warn!(?repairs, elapsed = ?took, "repaired dataplane drift");
                    self.metrics.repairs.inc();
                }
                Outcome::Failed(error) => {
                    tracing::error!("repairing drift failed (a full sync follows): {error}");
                    self.metrics.failed(tool_of(&error));
                }
                _ => {}
            },
            Ok(Err(error)) => {
                tracing::error!(
                    "reading the firewall for the drift check failed (will retry): {error}"
                );
                self.metrics.failed(tool_of(&error));
            }
            Err(error) => tracing::error!("the drift check's reader stopped: {error}"),
        }
        self.stale.routes = true;
        self.program().await;
    }
}

/// `iptables`, `ipset`, `nftables`, ... from a failure of the firewall.
fn tool_of(error: &DataplaneError) -> &'static str {
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

/// Whether a key is global or this host's Felix configuration.
fn is_config(key: &Key, hostname: &str) -> bool {
    match key {
        Key::GlobalConfig { .. } => true,
        Key::HostConfig { hostname: h, .. } => h == hostname,
        _ => false,
    }
}

/// `{"time": ..., "uptime": ..., "first_update": ...}` as Felix 1.x wrote it, and the firewall
/// backend that runs.
fn status_json(uptime: Duration, first_update: bool, dataplane: &str) -> String {
    let status = calico_model::status::FelixStatus {
        time: rfc3339(SystemTime::now()),
        uptime: (uptime.as_secs_f64() * 10.0).round() / 10.0,
        first_update,
        dataplane: Some(dataplane.to_owned()),
    };
    serde_json::to_string(&status).expect("a status serializes")
}

/// `2016-06-01T12:00:00Z` for a time (UTC, whole seconds).
fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::UNIX_EPOCH;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_464_782_400); // 2016-06-01T12:00:00Z
        assert_eq!(rfc3339(t), "2016-06-01T12:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(&rfc3339(leap)[..10], "2000-02-29");
    }
}
