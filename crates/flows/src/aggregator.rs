//! The aggregator's state: the window behind one mutex (the hot cache), the store on disk, the
//! counters, the live stream, and what it is configured with. The routes that serve it are in
//! `server.rs`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use calico_flowlog::FlowFilter;
use calico_flowlog::protocol::{Dropped, FlowList, FlowResult, Hints, IngestReply, Stats};
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};

use calico_model::flow::FlowRecord;

use crate::ingest::{self, BatchLimits, NotABatch};
use crate::metrics::Metrics;
use crate::store::{self, Store, StoreError, StoreSettings};
use crate::window::{Limits, Outcome, Window, flow_id, key_hash};

/// Everything the aggregator is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub limits: Limits,
    pub batch: BatchLimits,
    /// The largest request body, in bytes.
    pub max_batch_bytes: usize,
    /// When set, batches must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Flows a query returns without `limit`, and the most it may ask for.
    pub default_limit: usize,
    pub max_limit: usize,
    /// Records a live subscriber may fall behind before it misses some.
    pub stream_buffer: usize,
    /// The store on disk; none: memory only.
    pub store: Option<StoreSettings>,
}

/// A batch taken: the answer, and the row the store is to keep before it is given.
#[derive(Debug)]
pub struct Taken {
    pub reply: IngestReply,
    /// The accepted records' texts (`store::row`); none without a store or when none was.
    pub row: Option<Vec<u8>>,
}

/// Batches read and checked at once; more wait their turn (their senders see a slower answer),
/// so a burst of large batches costs at most this many bodies of memory.
const CONCURRENT_BATCHES: usize = 4;

/// The aggregator: the window, the counters and the live stream.
#[derive(Debug)]
pub struct Aggregator {
    window: Mutex<Window>,
    pub metrics: Metrics,
    live: broadcast::Sender<Arc<FlowResult>>,
    settings: Settings,
    batches: Semaphore,
    store: Option<Store>,
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Aggregator {
    /// An aggregator in memory only (`settings.store` is not opened: see [`Aggregator::open`]).
    pub fn new(settings: Settings) -> Arc<Aggregator> {
        Arc::new(Aggregator::unopened(settings, Metrics::new(), None))
    }

    fn unopened(settings: Settings, metrics: Metrics, store: Option<Store>) -> Aggregator {
        Aggregator {
            window: Mutex::new(Window::new(settings.limits)),
            metrics,
            live: broadcast::channel(settings.stream_buffer.max(1)).0,
            settings,
            batches: Semaphore::new(CONCURRENT_BATCHES),
            store,
        }
    }

    /// The aggregator with its store opened (when configured) and the window filled back from
    /// it: every record kept that may still be in the window's retention.
    pub fn open(settings: Settings) -> Result<Arc<Aggregator>, StoreError> {
        let metrics = Metrics::new();
        let store = match &settings.store {
            Some(store) => Some(Store::open(store.clone(), &metrics)?),
            None => None,
        };
        let aggregator = Aggregator::unopened(settings, metrics, store);
        aggregator.load(now())?;
        Ok(Arc::new(aggregator))
    }

    /// Fills the window from the store: the batches that arrived within the retention (and
    /// the clock skew allowed) before `now`, in arrival order.
    fn load(&self, now: u64) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let (retention, skew) = (self.settings.limits.retention, self.settings.batch.max_skew);
        let from = match retention {
            0 => 0,
            r => now.saturating_sub(r + skew),
        };
        let mut window = self.window();
        let mut loaded = 0;
        let read = store.scan(from, |text| {
            if let Ok(record) = calico_model::from_json::<FlowRecord>(text)
                && matches!(window.insert(record, now), Outcome::Added | Outcome::Merged)
            {
                loaded += 1;
            }
        })?;
        // A record that started a skew after the oldest batch kept arrived after it: in the store.
        if let Some(oldest) = store.oldest()? {
            window.cover_from(oldest.saturating_add(1 + skew));
        }
        self.metrics.store_loaded.inc_by(loaded);
        self.metrics.observe(&window);
        tracing::info!(
            store = %store.path().display(),
            read,
            loaded,
            flows = window.len(),
            "the window is filled back from the store"
        );
        Ok(())
    }

    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        // A panic while holding the lock leaves a consistent window (each step is whole).
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a batch body: every record accepted, refused or dropped, by index. With a store,
    /// the answer may only be given once [`Taken::row`] is durable.
    pub fn ingest(&self, body: &[u8], now: u64) -> Result<Taken, NotABatch> {
        let checked = ingest::check(body, self.settings.batch, now)?;
        let m = &self.metrics;
        m.received
            .inc_by((checked.records.len() + checked.refused.len()) as u64);
        for refusal in &checked.refused {
            m.refuse(ingest::refused_field(refusal));
        }
        let live = self.live.receiver_count() > 0;
        let mut published = Vec::new();
        let mut reply = IngestReply {
            refused: checked.refused,
            ..IngestReply::default()
        };
        let mut kept = Vec::new();
        let mut window = self.window();
        for (index, record, text) in checked.records {
            let event = live.then(|| (key_hash(&record), record.clone()));
            match window.insert(record, now) {
                Outcome::Added | Outcome::Merged => {
                    reply.accepted += 1;
                    published.extend(event);
                    kept.push(text);
                }
                Outcome::Dropped(reason) => {
                    m.drop_record(reason.as_str());
                    let reason = reason.as_str().to_owned();
                    reply.dropped.push(Dropped { index, reason });
                }
            }
        }
        m.accepted.inc_by(reply.accepted);
        m.observe(&window);
        drop(window);
        for (hash, flow) in published {
            let id = flow_id(hash);
            // No receiver left is fine: nobody is watching.
            let _ = self.live.send(Arc::new(FlowResult {
                id,
                records: 1,
                flow,
            }));
        }
        let row = (self.store.is_some() && !kept.is_empty()).then(|| store::row(kept.into_iter()));
        Ok(Taken { reply, row })
    }

    /// Whether a query is answered by the window (the hot cache): it has no start bound, or
    /// the window holds everything since it. Otherwise it reads the store.
    pub fn in_window(&self, filter: &FlowFilter) -> bool {
        let now = now();
        let (from, _) = filter.bounds(now);
        filter.start_gte == 0 || self.store.is_none() || self.window().covers(from, now)
    }

    /// Answers from the window only.
    pub fn query(&self, filter: &FlowFilter, limit: usize) -> FlowList {
        self.window().query(filter, now(), limit)
    }

    /// Answers from the store: every batch that may hold a record starting at the filter's
    /// start, summed in a window of its own (the same caps as the hot one, no retention) and
    /// queried as the hot one is. Reads and parses every record kept since: seconds per
    /// million records.
    pub fn query_store(&self, filter: &FlowFilter, limit: usize) -> Result<FlowList, StoreError> {
        let Some(store) = &self.store else {
            return Ok(self.query(filter, limit));
        };
        let now = now();
        let (from, _) = filter.bounds(now);
        let limits = Limits {
            retention: 0,
            ..self.settings.limits
        };
        let mut window = Window::new(limits);
        // A record ends after it starts and arrives at most the skew before it ends.
        let arrived = from.saturating_sub(self.settings.batch.max_skew);
        store.scan(arrived, |text| {
            if let Ok(record) = calico_model::from_json::<FlowRecord>(text)
                && filter.matches(&record, now)
            {
                window.insert(record, now);
            }
        })?;
        if window.removed().over_max_flows + window.removed().over_max_memory > 0 {
            tracing::warn!(
                flows = window.len(),
                "a query of the store matched more flows than --max-flows/--max-memory: the \
                 oldest are left out of the answer"
            );
        }
        Ok(window.query(filter, now, limit))
    }

    pub fn hints(&self, filter: &FlowFilter) -> Hints {
        self.window().hints(filter, now())
    }

    pub fn stats(&self) -> Stats {
        self.metrics.stats(&self.window())
    }

    /// Removes what passed the retention.
    pub fn expire(&self, now: u64) {
        let mut window = self.window();
        if window.expire(now) > 0 {
            self.metrics.observe(&window);
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<FlowResult>> {
        self.live.subscribe()
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A turn to read and check a batch: at most `CONCURRENT_BATCHES` at once, the others wait.
    pub(crate) async fn batch_turn(&self) -> SemaphorePermit<'_> {
        self.batches
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }
}
