//! The aggregator's state: the window behind one mutex, the counters, the live stream, and
//! what it is configured with. The routes that serve it are in `server.rs`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use calico_flowlog::FlowFilter;
use calico_flowlog::protocol::{Dropped, FlowList, FlowResult, Hints, IngestReply, Stats};
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};

use crate::ingest::{self, BatchLimits, NotABatch};
use crate::metrics::Metrics;
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
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Aggregator {
    pub fn new(settings: Settings) -> Arc<Aggregator> {
        Arc::new(Aggregator {
            window: Mutex::new(Window::new(settings.limits)),
            metrics: Metrics::new(),
            live: broadcast::channel(settings.stream_buffer.max(1)).0,
            settings,
            batches: Semaphore::new(CONCURRENT_BATCHES),
        })
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        // A panic while holding the lock leaves a consistent window (each step is whole).
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a batch body: every record accepted, refused or dropped, by index.
    pub fn ingest(&self, body: &[u8], now: u64) -> Result<IngestReply, NotABatch> {
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
        let mut window = self.window();
        for (index, record) in checked.records {
            let event = live.then(|| (key_hash(&record), record.clone()));
            match window.insert(record, now) {
                Outcome::Added | Outcome::Merged => {
                    reply.accepted += 1;
                    published.extend(event);
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
        Ok(reply)
    }

    pub fn query(&self, filter: &FlowFilter, limit: usize) -> FlowList {
        self.window().query(filter, now(), limit)
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
