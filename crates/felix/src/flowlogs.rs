//! Flow logs (`FlowLogsEnabled`): the firewall logs every step that takes an action on a new
//! connection to NFLOG (crates/dataplane/src/flowlog.rs says how); [`Collector`] puts each
//! connection's steps together into its policy trail, counts its packets and bytes from
//! conntrack, and every `FlowLogsFlushInterval` turns what it saw into flow records for the
//! aggregator (`calico-flows`).
//!
//! ```text
//!   NFLOG group (thread) ──packets──► Collector::logged ─┐
//!   conntrack dump (each flush) ─────► Collector::counted ├─► Collector::flush ─► FlowSender
//!   the agent's desired state ───────► FlowNames ────────┘     (never blocks: a full queue drops)
//! ```
//!
//! The collector is pure: tests feed it logged packets and conntrack entries and read records.
//! One key per (local endpoint and its address, direction, other side and its address,
//! protocol, destination port, verdict, trail): source ports are aggregated away, as the
//! records' contract says; each side's address is the packet's (after any DNAT).
//!
//! Counting: a connection is one per tuple however often its SYN is retransmitted (until a
//! reply, each retransmission is ct state new again, so the firewall logs it again); a denied
//! attempt stays one until conntrack would forget it unreplied (`attempt_secs`). Packets
//! are what was sent, at both ends: a denied flow's from the log, an allowed one's from
//! conntrack plus what the log saw and conntrack did not (it never accounts a retransmitted
//! SYN). An end-of-tier step names the tier's first enforced policy that applies to the
//! endpoint (upstream's trigger).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_calc::{Cluster, DesiredState, EndpointKey};
use calico_dataplane::flowlog::{Decoder, Logged, NFLOG_GROUP};
use calico_flowlog::{FlowSender, SenderConfig};
use calico_linux::nflog::{LoggedPacket, Nflog, PacketHeader};
use calico_linux::{Connection, Netns, Tuple};
use calico_model::flow::{FlowDirection, FlowEndpoint, FlowRecord, PolicyTrail, Verdict};
use calico_model::labels::LabelMap;
use calico_model::rule::Protocol;
use ipnet::IpNet;
use tokio::sync::{mpsc, watch};

mod trail;
use trail::{trail_of, verdict_of};

/// How long the steps of a packet whose trail never completed are kept (the steps of one
/// packet come in one NFLOG batch, so this is generous).
const STALE_STEPS_SECS: u64 = 5;

/// How often the connections that started since the last records are sent on their own
/// (with what the log saw of them), so that a new connection shows within a second whatever
/// `FlowLogsFlushInterval` is; the rest waits for the flush.
pub const NEW_FLOWS_EVERY: Duration = Duration::from_millis(250);

/// How long a denied attempt lasts without a packet: as long as conntrack keeps an unreplied
/// entry (`nf_conntrack_tcp_timeout_syn_sent`, 120 s; `nf_conntrack_udp_timeout`, 30 s, for
/// the rest). A TCP client's retransmitted SYNs (1, 2, 4, ... 32 s apart) stay one attempt,
/// also across flushes.
fn attempt_secs(protocol: u8) -> u64 {
    if protocol == 6 { 120 } else { 30 }
}

/// What the collector needs to know of the cluster: the names behind the log prefixes, and who
/// owns each address.
#[derive(Debug, Default)]
pub struct FlowNames {
    pub decoder: Decoder,
    /// Every endpoint's addresses, cluster-wide.
    pub owners: HashMap<IpAddr, EndpointKey>,
    /// Profiles and labels of each endpoint.
    pub endpoints: HashMap<EndpointKey, (Vec<String>, LabelMap)>,
    /// The first enforced policy of each tier that applies to a local endpoint: what an
    /// end-of-tier step names (`end of tier default (policy web applied)`).
    pub triggers: HashMap<(EndpointKey, String), String>,
    pub hostname: String,
}

impl FlowNames {
    /// From the calculation's cluster and desired state.
    pub fn of(hostname: &str, cluster: &Cluster, state: &DesiredState) -> FlowNames {
        let mut names = FlowNames {
            decoder: Decoder::of(state),
            hostname: hostname.to_owned(),
            ..FlowNames::default()
        };
        for (key, endpoint) in cluster.endpoints.iter() {
            for address in &endpoint.addresses {
                names.owners.entry(*address).or_insert_with(|| key.clone());
            }
            let labels = cluster
                .effective_labels(endpoint)
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let profiles = endpoint.profile_ids.iter().map(|p| p.to_string()).collect();
            names.endpoints.insert(key.clone(), (profiles, labels));
        }
        for (key, program) in &state.endpoints {
            // Untracked tiers first, so that a tracked tier of the same name wins.
            for tier in program.untracked_tiers.iter().chain(&program.tiers) {
                if let Some(first) = tier.policies.first() {
                    let at = (key.clone(), tier.name.clone());
                    names.triggers.insert(at, first.name.clone());
                }
            }
        }
        names
    }

    /// The policy an end-of-tier step of `local`'s `tier` names.
    fn trigger(&self, local: &EndpointKey, tier: &str) -> Option<String> {
        self.triggers
            .get(&(local.clone(), tier.to_owned()))
            .cloned()
    }

    fn side(&self, side: &Side) -> FlowEndpoint {
        match side {
            Side::Endpoint(key) => {
                let (profiles, labels) = self.endpoints.get(key).cloned().unwrap_or_default();
                match key {
                    EndpointKey::Workload(id) => FlowEndpoint::workload(id, profiles, labels),
                    EndpointKey::Host(id) => FlowEndpoint::host(id, profiles, labels),
                }
            }
            Side::Net(address) => FlowEndpoint::net(IpNet::from(*address)),
        }
    }
}

/// The other side of a flow: an endpoint Calico knows, or an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Side {
    Endpoint(EndpointKey),
    Net(IpAddr),
}

/// What one flow record aggregates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FlowKey {
    local: EndpointKey,
    /// The addresses the packets used: two addresses of one endpoint are two flows.
    local_address: IpAddr,
    direction: FlowDirection,
    remote: Side,
    remote_address: IpAddr,
    protocol: u8,
    dst_port: Option<u16>,
    action: Verdict,
    trail: PolicyTrail,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    /// The second the first of what these totals hold happened (the record's start).
    since: u64,
    connections: u64,
    packets_in: u64,
    bytes_in: u64,
    packets_out: u64,
    bytes_out: u64,
}

/// An allowed connection being counted: its flows (one per direction this host evaluated),
/// and whether a dump saw a reply (then a logged packet of its tuple is a new connection).
#[derive(Debug, Clone, Default)]
struct Counted {
    flows: Vec<Counting>,
    replied: bool,
}

/// One flow of an allowed connection. Until the reply, every packet of the original direction
/// is ct state new, so the log sees each one; conntrack does not account a retransmitted SYN
/// (a SYN_SENT entry says 1 packet after any number of them). `missed` is what the log saw
/// and conntrack did not, added to conntrack's original-direction counters.
#[derive(Debug, Clone)]
struct Counting {
    flow: FlowKey,
    /// Original-direction packets and bytes logged.
    logged: (u64, u64),
    /// Of those, what came after the first (the retransmissions).
    retried: (u64, u64),
    /// Known once a dump saw the connection unreplied (exactly what conntrack missed).
    missed: Option<(u64, u64)>,
    /// The counters (original packets, bytes, reply packets, bytes) at the last dump.
    last: (u64, u64, u64, u64),
}

impl Counting {
    fn new(flow: FlowKey, length: u64) -> Counting {
        Counting {
            flow,
            logged: (1, length),
            retried: (0, 0),
            missed: None,
            last: (0, 0, 0, 0),
        }
    }

    /// What conntrack did not count of what the log saw: exact while the connection is
    /// unreplied; after the reply (if no dump saw it before), a TCP connection's packets
    /// logged after the first are the SYNs conntrack ignored, and nothing else was missed.
    fn missed(&mut self, connection: &Connection, tcp: bool) -> (u64, u64) {
        if connection.packets_back == 0 {
            let missed = (
                self.logged.0.saturating_sub(connection.packets_out),
                self.logged.1.saturating_sub(connection.bytes_out),
            );
            self.missed = Some(missed);
            return missed;
        }
        let retried = if tcp { self.retried } else { (0, 0) };
        *self.missed.get_or_insert(retried)
    }
}

/// What the collector counted beside the records, for Felix's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectorStats {
    /// Logged packets whose prefix is not a flow step of the current state.
    pub unknown_prefix: u64,
    /// Logged packets whose local end is no endpoint of this host.
    pub unknown_endpoint: u64,
    /// Trails completed (new connections seen).
    pub trails: u64,
}

/// The flow logs of one host, between flushes.
#[derive(Debug, Default)]
pub struct Collector {
    /// Steps of packets whose trail is not complete yet, with when the first came.
    open: HashMap<(PacketHeader, bool), (u64, Vec<Logged>)>,
    /// What each flow has that no record carried yet.
    flows: HashMap<FlowKey, Totals>,
    /// Allowed connections by their original tuple.
    connections: HashMap<Tuple, Counted>,
    /// Denied connection attempts, with when their last packet came: a retransmitted SYN is
    /// the same attempt until [`attempt_secs`] pass without one.
    denied: HashMap<(PacketHeader, bool), u64>,
    pub stats: CollectorStats,
    interval_start: u64,
}

impl Collector {
    pub fn new(now: u64) -> Collector {
        Collector {
            interval_start: now,
            ..Collector::default()
        }
    }

    /// A packet the firewall logged at `now` (unix seconds).
    pub fn logged(&mut self, names: &FlowNames, packet: &LoggedPacket, now: u64) {
        let Some(header) = packet.header else {
            return;
        };
        let Some(step) = names.decoder.decode(&packet.prefix) else {
            self.stats.unknown_prefix += 1;
            return;
        };
        let inbound = step.inbound;
        let verdict = verdict_of(&step);
        let entry = self
            .open
            .entry((key_of(header), inbound))
            .or_insert_with(|| (now, Vec::new()));
        entry.1.push(step);
        let Some(action) = verdict else {
            return;
        };
        let (_, steps) = self
            .open
            .remove(&(key_of(header), inbound))
            .expect("just added");
        self.stats.trails += 1;
        self.complete(names, header, inbound, action, steps, now);
    }

    /// A connection's trail is complete: count it.
    fn complete(
        &mut self,
        names: &FlowNames,
        header: PacketHeader,
        inbound: bool,
        action: Verdict,
        steps: Vec<Logged>,
        now: u64,
    ) {
        let (local_address, remote_address) = if inbound {
            (header.dst, header.src)
        } else {
            (header.src, header.dst)
        };
        let Some(local) = names
            .owners
            .get(&local_address)
            .filter(|key| key.hostname() == names.hostname)
        else {
            self.stats.unknown_endpoint += 1;
            return;
        };
        let remote = match names.owners.get(&remote_address) {
            Some(key) => Side::Endpoint(key.clone()),
            None => Side::Net(remote_address),
        };
        let flow = FlowKey {
            local: local.clone(),
            local_address,
            remote_address,
            direction: if inbound {
                FlowDirection::Ingress
            } else {
                FlowDirection::Egress
            },
            remote,
            protocol: header.protocol,
            dst_port: header.dst_port.filter(|_| has_ports(header.protocol)),
            action,
            trail: trail_of(&steps, |tier| names.trigger(local, tier)),
        };
        let totals = self.flows.entry(flow.clone()).or_insert(Totals {
            since: now,
            ..Totals::default()
        });
        match action {
            Verdict::Deny => {
                // What reached the endpoint's policy and was dropped: counted from the log.
                let attempt = (key_of(header), inbound);
                let fresh = self
                    .denied
                    .insert(attempt, now)
                    .is_none_or(|last| now.saturating_sub(last) >= attempt_secs(header.protocol));
                if fresh {
                    totals.connections += 1;
                }
                let length = u64::from(header.length);
                if inbound {
                    totals.packets_in += 1;
                    totals.bytes_in += length;
                } else {
                    totals.packets_out += 1;
                    totals.bytes_out += length;
                }
            }
            Verdict::Allow => {
                let length = u64::from(header.length);
                let counted = self.connections.entry(tuple_of(header)).or_default();
                if counted.replied {
                    // A new connection on the tuple of one that got its reply (conntrack
                    // made a new entry, counting from 0).
                    *counted = Counted::default();
                }
                let counting = match counted.flows.iter().position(|c| c.flow == flow) {
                    // Unreplied, so still ct state new: the same connection, sent again.
                    Some(at) => {
                        let counting = &mut counted.flows[at];
                        counting.logged.0 += 1;
                        counting.logged.1 += length;
                        counting.retried.0 += 1;
                        counting.retried.1 += length;
                        counting
                    }
                    None => {
                        totals.connections += 1;
                        counted.flows.push(Counting::new(flow, length));
                        counted.flows.last_mut().expect("just pushed")
                    }
                };
                // What the log saw goes out with the next records; a dump adds only what
                // conntrack has beyond it (`last` counts what was reported).
                counting.last.0 += 1;
                counting.last.1 += length;
                if inbound {
                    totals.packets_in += 1;
                    totals.bytes_in += length;
                } else {
                    totals.packets_out += 1;
                    totals.bytes_out += length;
                }
            }
        }
    }

    /// The tracked connections as a conntrack dump found them: the packets and bytes since the
    /// last dump go to their flows; connections no longer tracked are forgotten.
    pub fn counted(&mut self, dump: &[Connection]) {
        let mut by_tuple: HashMap<Tuple, &Connection> = HashMap::new();
        for connection in dump {
            by_tuple.insert(connection.original, connection);
            // A DNATed connection: the log saw the translated destination, which is the
            // reply's source.
            by_tuple
                .entry(reversed(&connection.reply))
                .or_insert(connection);
        }
        let mut gone = Vec::new();
        for (tuple, counted) in &mut self.connections {
            let Some(connection) = by_tuple.get(tuple) else {
                gone.push(*tuple);
                continue;
            };
            let tcp = tuple.protocol == 6;
            for counting in &mut counted.flows {
                let missed = counting.missed(connection, tcp);
                let now = (
                    connection.packets_out + missed.0,
                    connection.bytes_out + missed.1,
                    connection.packets_back,
                    connection.bytes_back,
                );
                let last = counting.last;
                let delta = (
                    now.0.saturating_sub(last.0),
                    now.1.saturating_sub(last.1),
                    now.2.saturating_sub(last.2),
                    now.3.saturating_sub(last.3),
                );
                // Never back: what was reported (the log's packets) is not reported again.
                counting.last = (
                    last.0.max(now.0),
                    last.1.max(now.1),
                    last.2.max(now.2),
                    last.3.max(now.3),
                );
                let flow = &counting.flow;
                let since = self.interval_start;
                let totals = self.flows.entry(flow.clone()).or_insert(Totals {
                    since,
                    ..Totals::default()
                });
                // The original direction is the client's: into the endpoint for ingress.
                let (forward, back) = ((delta.0, delta.1), (delta.2, delta.3));
                let ((p_in, b_in), (p_out, b_out)) = match flow.direction {
                    FlowDirection::Ingress => (forward, back),
                    FlowDirection::Egress => (back, forward),
                };
                totals.packets_in += p_in;
                totals.bytes_in += b_in;
                totals.packets_out += p_out;
                totals.bytes_out += b_out;
            }
            counted.replied |= connection.packets_back > 0;
        }
        for tuple in gone {
            self.connections.remove(&tuple);
        }
    }

    /// The records of the interval that ends `now` (after [`counted`](Self::counted)), and a
    /// new interval: every flow with something no record carried yet. Each record covers from
    /// when its first packet came (or the last flush, for conntrack's counts) to `now`.
    pub fn flush(&mut self, names: &FlowNames, now: u64) -> Vec<FlowRecord> {
        self.interval_start = now;
        self.denied
            .retain(|(header, _), last| now.saturating_sub(*last) < attempt_secs(header.protocol));
        self.open
            .retain(|_, (first, _)| now.saturating_sub(*first) < STALE_STEPS_SECS);
        let flows = std::mem::take(&mut self.flows);
        flows
            .into_iter()
            .filter(|(_, t)| t.has_counts())
            .map(|(flow, totals)| record(names, &flow, totals, now))
            .collect()
    }

    /// The records of the flows that had a new connection since their last record, with what
    /// the log saw (no conntrack dump): what a user waits for, sent every [`NEW_FLOWS_EVERY`].
    /// What they carry is taken out, so a later flush carries only what came since, and the
    /// aggregator's sums count each connection and packet once.
    pub fn flush_new(&mut self, names: &FlowNames, now: u64) -> Vec<FlowRecord> {
        let fresh: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, t)| t.connections > 0)
            .map(|(flow, _)| flow.clone())
            .collect();
        fresh
            .into_iter()
            .filter_map(|flow| {
                let totals = self.flows.remove(&flow)?;
                Some(record(names, &flow, totals, now))
            })
            .collect()
    }
}

impl Totals {
    fn has_counts(&self) -> bool {
        Totals { since: 0, ..*self } != Totals::default()
    }
}

fn record(names: &FlowNames, flow: &FlowKey, totals: Totals, now: u64) -> FlowRecord {
    let (start, end) = (totals.since, now.max(totals.since + 1));
    let local = names
        .side(&Side::Endpoint(flow.local.clone()))
        .with_address(flow.local_address);
    let remote = names.side(&flow.remote).with_address(flow.remote_address);
    let (source, destination) = match flow.direction {
        FlowDirection::Ingress => (remote, local),
        FlowDirection::Egress => (local, remote),
    };
    FlowRecord {
        reporter: names.hostname.clone(),
        start_time: start,
        end_time: end,
        source,
        destination,
        protocol: Protocol::from_number(flow.protocol),
        dst_port: flow.dst_port,
        direction: flow.direction,
        action: flow.action,
        policies: flow.trail.clone(),
        packets_in: totals.packets_in,
        bytes_in: totals.bytes_in,
        packets_out: totals.packets_out,
        bytes_out: totals.bytes_out,
        connections_started: totals.connections,
    }
}

fn has_ports(protocol: u8) -> bool {
    matches!(protocol, 6 | 17 | 132 | 136)
}

/// A packet's header without its length: the same for every packet of a connection attempt.
fn key_of(header: PacketHeader) -> PacketHeader {
    PacketHeader {
        length: 0,
        ..header
    }
}

fn tuple_of(header: PacketHeader) -> Tuple {
    Tuple {
        src: header.src,
        dst: header.dst,
        protocol: header.protocol,
        src_port: header.src_port,
        dst_port: header.dst_port,
    }
}

fn reversed(tuple: &Tuple) -> Tuple {
    Tuple {
        src: tuple.dst,
        dst: tuple.src,
        protocol: tuple.protocol,
        src_port: tuple.dst_port,
        dst_port: tuple.src_port,
    }
}

/// What the flow logs counted, for Felix's metrics.
#[derive(Debug, Default)]
pub struct FlowLogCounters {
    /// Logged packets read from NFLOG.
    pub packets: AtomicU64,
    /// Logged packets dropped because the collector fell behind (never the data path's).
    pub packets_dropped: AtomicU64,
    /// Records handed to the sender, and dropped because its queue was full.
    pub records: AtomicU64,
    pub records_dropped: AtomicU64,
}

/// The running flow logs of one host: a thread reading NFLOG and a task that collects,
/// flushes and sends. Dropping it stops both.
#[derive(Debug)]
pub struct FlowLogs {
    names: watch::Sender<Arc<FlowNames>>,
    pub counters: Arc<FlowLogCounters>,
    sender: Arc<FlowSender>,
    task: tokio::task::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl Drop for FlowLogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.abort();
    }
}

impl FlowLogs {
    /// Starts the flow logs of `netns`: connection accounting on, the NFLOG group bound, and
    /// records sent to `aggregator` (`host:port` or `http://host:port`) every `flush`.
    pub fn start(
        netns: &Netns,
        hostname: &str,
        aggregator: &str,
        flush: Duration,
    ) -> Result<FlowLogs, String> {
        calico_linux::set_sysctl(netns, "net/netfilter/nf_conntrack_acct", "1")
            .map_err(|e| format!("cannot turn on connection accounting: {e}"))?;
        let nflog = Nflog::bind(netns, NFLOG_GROUP).map_err(|e| e.to_string())?;
        nflog
            .set_read_timeout(Duration::from_millis(250))
            .map_err(|e| e.to_string())?;
        let url = if aggregator.contains("://") {
            aggregator.to_owned()
        } else {
            format!("http://{aggregator}")
        };
        let sender = FlowSender::start(SenderConfig::new(&url)).map_err(|e| e.to_string())?;
        let sender = Arc::new(sender);
        let counters = Arc::new(FlowLogCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (packets, received) = mpsc::channel(16_384);
        read_log(nflog, packets, counters.clone(), stop.clone());
        let (names, watched) = watch::channel(Arc::new(FlowNames {
            hostname: hostname.to_owned(),
            ..FlowNames::default()
        }));
        let task = tokio::spawn(collect(
            netns.clone(),
            flush,
            received,
            watched,
            sender.clone(),
            counters.clone(),
        ));
        Ok(FlowLogs {
            names,
            counters,
            sender,
            task,
            stop,
        })
    }

    /// Every count so far, by name: the collector's and the sender's.
    pub fn totals(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let c = &self.counters;
        let s = self.sender.stats();
        vec![
            ("packets_logged", get(&c.packets)),
            ("packets_dropped", get(&c.packets_dropped)),
            ("records", get(&c.records)),
            ("records_dropped_queue_full", get(&c.records_dropped)),
            ("records_sent", s.sent),
            ("records_accepted", s.accepted),
            ("records_refused", s.refused),
            ("records_dropped_by_aggregator", s.dropped_by_aggregator),
            ("records_dropped_unreachable", s.dropped_unreachable),
        ]
    }

    /// The names and addresses of the current desired state (after each programming pass
    /// that changed it).
    pub fn update_names(&self, names: FlowNames) {
        self.names.send_replace(Arc::new(names));
    }
}

/// The NFLOG reader: a thread of its own (reads block), handing packets to the collector and
/// dropping (with a count) what the collector cannot take.
fn read_log(
    mut nflog: Nflog,
    packets: mpsc::Sender<(LoggedPacket, u64)>,
    counters: Arc<FlowLogCounters>,
    stop: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) && !packets.is_closed() {
            let batch = match nflog.receive() {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!("flow logs: {error}");
                    std::thread::sleep(Duration::from_millis(250));
                    continue;
                }
            };
            let now = unix_now();
            for packet in batch {
                counters.packets.fetch_add(1, Ordering::Relaxed);
                if packets.try_send((packet, now)).is_err() {
                    counters.packets_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
}

async fn collect(
    netns: Netns,
    flush: Duration,
    mut packets: mpsc::Receiver<(LoggedPacket, u64)>,
    names: watch::Receiver<Arc<FlowNames>>,
    sender: Arc<FlowSender>,
    counters: Arc<FlowLogCounters>,
) {
    let mut collector = Collector::new(unix_now());
    let mut tick = tokio::time::interval(flush);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut fresh = tokio::time::interval(NEW_FLOWS_EVERY.min(flush));
    fresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    fresh.tick().await;
    let send = |records: Vec<FlowRecord>| {
        for record in records {
            counters.records.fetch_add(1, Ordering::Relaxed);
            if !sender.send(record) {
                counters.records_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    loop {
        tokio::select! {
            packet = packets.recv() => {
                let Some((packet, at)) = packet else { return };
                let names = names.borrow().clone();
                collector.logged(&names, &packet, at);
            }
            _ = tick.tick() => {
                match calico_linux::connections(&netns).await {
                    Ok(dump) => collector.counted(&dump),
                    Err(error) => tracing::warn!("flow logs: reading conntrack: {error}"),
                }
                let names = names.borrow().clone();
                send(collector.flush(&names, unix_now()));
            }
            _ = fresh.tick() => {
                let names = names.borrow().clone();
                send(collector.flush_new(&names, unix_now()));
            }
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
