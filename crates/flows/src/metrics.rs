//! What the aggregator tells monitoring (Prometheus text at `/metrics`, prefix `calico_flows`)
//! and the console (`/api/v1/stats`): every record received is counted once as accepted,
//! refused (by field) or dropped (by reason); every flow that left the window as evicted (by
//! cap) or expired.

use std::sync::Arc;

use calico_flowlog::protocol::Stats;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::window::{Removed, Window};

type Labels = Vec<(String, String)>;

fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_owned(), value.to_owned())]
}

/// The aggregator's metrics; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub received: Counter,
    pub accepted: Counter,
    /// By `field`: the record's top-level field at fault (`record` for the record as a whole).
    pub refused: Family<Labels, Counter>,
    /// The sum over `refused`'s fields (not exported: Prometheus sums the family).
    refused_total: Counter,
    /// By `reason`: `expired`, `older-than-window`.
    pub dropped: Family<Labels, Counter>,
    /// By `cap`: `max-flows`, `max-memory`.
    pub evicted: Family<Labels, Counter>,
    pub expired: Counter,
    /// Bodies refused whole, by `reason`: `not-a-batch`, `too-large`, `unauthorized`,
    /// `not-stored` (the store failed: the sender is told to send them again).
    pub batches_refused: Family<Labels, Counter>,
    pub flows: Gauge,
    pub memory: Gauge,
    pub subscribers: Gauge,
    /// Records stream subscribers missed because they fell behind.
    pub stream_missed: Counter,
    /// Bytes of records in the store (`store.rs`).
    pub store_bytes: Gauge,
    /// Group commits (each one fsync) of the store.
    pub store_commits: Counter,
    /// Records removed from the store, by `cause`: `retention`, `max-size`.
    pub store_removed: Family<Labels, Counter>,
    /// Records read back from the store into the window at start.
    pub store_loaded: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("calico_flows");
        let metrics = Metrics {
            registry: Arc::default(),
            received: Counter::default(),
            accepted: Counter::default(),
            refused: Family::default(),
            refused_total: Counter::default(),
            dropped: Family::default(),
            evicted: Family::default(),
            expired: Counter::default(),
            batches_refused: Family::default(),
            flows: Gauge::default(),
            memory: Gauge::default(),
            subscribers: Gauge::default(),
            stream_missed: Counter::default(),
            store_bytes: Gauge::default(),
            store_commits: Counter::default(),
            store_removed: Family::default(),
            store_loaded: Counter::default(),
        };
        let m = &metrics;
        r.register(
            "records_received",
            "Flow records received",
            m.received.clone(),
        );
        r.register(
            "records_accepted",
            "Flow records taken into the window",
            m.accepted.clone(),
        );
        r.register(
            "records_refused",
            "Flow records refused as malformed or hostile, by the field at fault",
            m.refused.clone(),
        );
        r.register(
            "records_dropped",
            "Valid flow records not kept, by reason (expired, older-than-window)",
            m.dropped.clone(),
        );
        r.register(
            "flows_evicted",
            "Flows removed oldest first to stay under a cap (max-flows, max-memory)",
            m.evicted.clone(),
        );
        r.register(
            "flows_expired",
            "Flows removed after the retention",
            m.expired.clone(),
        );
        r.register(
            "batches_refused",
            "Request bodies refused whole, by reason (not-a-batch, too-large, unauthorized, not-stored)",
            m.batches_refused.clone(),
        );
        r.register("window_flows", "Flows held in the window", m.flows.clone());
        r.register(
            "window_memory_bytes",
            "Estimated bytes of the flows held",
            m.memory.clone(),
        );
        r.register(
            "stream_subscribers",
            "Live stream subscribers",
            m.subscribers.clone(),
        );
        r.register(
            "stream_missed_records",
            "Records live stream subscribers missed because they fell behind",
            m.stream_missed.clone(),
        );
        r.register(
            "store_bytes",
            "Bytes of flow records kept in the store on disk",
            m.store_bytes.clone(),
        );
        r.register(
            "store_commits",
            "Commits of the store (each one fsync, for every batch that waited for it)",
            m.store_commits.clone(),
        );
        r.register(
            "store_removed_records",
            "Flow records removed from the store, by cause (retention, max-size)",
            m.store_removed.clone(),
        );
        r.register(
            "store_loaded_records",
            "Flow records read back from the store into the window at start",
            m.store_loaded.clone(),
        );
        Metrics {
            registry: Arc::new(r),
            ..metrics
        }
    }

    pub fn refuse(&self, field: &str) {
        self.refused.get_or_create(&label("field", field)).inc();
        self.refused_total.inc();
    }

    pub fn drop_record(&self, reason: &str) {
        self.dropped.get_or_create(&label("reason", reason)).inc();
    }

    pub fn store_removed(&self, cause: &str, records: u64) {
        self.store_removed
            .get_or_create(&label("cause", cause))
            .inc_by(records);
    }

    pub fn refuse_batch(&self, reason: &str) {
        self.batches_refused
            .get_or_create(&label("reason", reason))
            .inc();
    }

    /// Brings the window's gauges and removal counters up to date.
    pub fn observe(&self, window: &Window) {
        self.flows.set(window.len() as i64);
        self.memory.set(window.memory() as i64);
        let Removed {
            over_max_flows,
            over_max_memory,
            expired,
        } = window.removed();
        let catch_up = |counter: &Counter, total: u64| {
            counter.inc_by(total.saturating_sub(counter.get()));
        };
        catch_up(
            &self.evicted.get_or_create(&label("cap", "max-flows")),
            over_max_flows,
        );
        catch_up(
            &self.evicted.get_or_create(&label("cap", "max-memory")),
            over_max_memory,
        );
        catch_up(&self.expired, expired);
    }

    /// The counters as the stats answer.
    pub fn stats(&self, window: &Window) -> Stats {
        let sum = |family: &Family<Labels, Counter>, values: &[&str], name: &str| {
            values
                .iter()
                .map(|v| family.get_or_create(&label(name, v)).get())
                .sum::<u64>()
        };
        let removed = window.removed();
        let limits = window.limits();
        Stats {
            flows: window.len() as u64,
            memory_bytes: window.memory() as u64,
            max_flows: limits.max_flows as u64,
            max_memory_bytes: limits.max_memory as u64,
            received: self.received.get(),
            accepted: self.accepted.get(),
            refused: self.refused_total.get(),
            dropped: self.dropped_total(),
            evicted: removed.over_max_flows + removed.over_max_memory,
            expired: removed.expired,
            batches_refused: sum(
                &self.batches_refused,
                &["not-a-batch", "too-large", "unauthorized", "not-stored"],
                "reason",
            ),
        }
    }

    fn dropped_total(&self) -> u64 {
        ["expired", "older-than-window"]
            .iter()
            .map(|r| self.dropped.get_or_create(&label("reason", r)).get())
            .sum()
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
