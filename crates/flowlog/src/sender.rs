//! Felix's side: hands records to the aggregator without ever making its caller wait.
//!
//! ```text
//!   Felix ── send() ──► bounded queue ──► task: a batch of `batch` records, or what came
//!            (full: dropped,                   within `linger` ── POST /api/v1/flows ──► aggregator
//!             counted)                         failed: the batch is dropped (counted), the
//!                                              connection replaced after a backoff
//! ```
//!
//! Nothing is resent: a batch that did not get through is counted and forgotten, so an
//! aggregator that is down costs Felix a bounded queue and some counters, never memory or time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use calico_model::flow::FlowRecord;
use hyper::Method;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::FlowLogError;
use crate::http::{Address, Connection, read_ok, timed_out};
use crate::protocol::{Batch, FLOWS_PATH, IngestReply};

/// How the sender talks to the aggregator.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// `http://host:port` of `calico-flows`.
    pub url: String,
    /// Records waiting to be sent; more are dropped (and counted).
    pub queue: usize,
    /// Records per POST (the aggregator's `--max-batch-records` must allow it).
    pub batch: usize,
    /// How long a partial batch waits for more records.
    pub linger: Duration,
    /// Connecting, and each POST, give up after this.
    pub timeout: Duration,
    /// The wait after a failure, doubled on each failure up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// Sent as `Authorization: Bearer <token>` when the aggregator asks for one.
    pub token: Option<String>,
}

impl SenderConfig {
    /// The defaults for `url`: 10,000 queued records, batches of 500, 0.1 s linger (a new connection's record must show within a second), 5 s timeout,
    /// backoff from 0.1 s to 10 s.
    pub fn new(url: &str) -> SenderConfig {
        SenderConfig {
            url: url.to_owned(),
            queue: 10_000,
            batch: 500,
            linger: Duration::from_millis(100),
            timeout: Duration::from_secs(5),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            token: None,
        }
    }
}

/// What became of the records given to [`FlowSender::send`], since it started. Every record
/// queued ends up sent or `dropped_unreachable` (or is still queued or in flight); every record
/// sent was accepted, refused or dropped by the aggregator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub queued: u64,
    /// Not queued: the queue was full.
    pub dropped_queue_full: u64,
    /// In a batch the aggregator answered.
    pub sent: u64,
    pub accepted: u64,
    /// Refused by the aggregator (malformed; or the whole batch, e.g. unauthorised).
    pub refused: u64,
    /// Valid, but dropped by the aggregator (older than its window or retention).
    pub dropped_by_aggregator: u64,
    /// In a batch that did not get through (aggregator down, timeout).
    pub dropped_unreachable: u64,
    /// POSTs that failed.
    pub failures: u64,
}

#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    dropped_queue_full: AtomicU64,
    sent: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    dropped_by_aggregator: AtomicU64,
    dropped_unreachable: AtomicU64,
    failures: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> SenderStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SenderStats {
            queued: get(&self.queued),
            dropped_queue_full: get(&self.dropped_queue_full),
            sent: get(&self.sent),
            accepted: get(&self.accepted),
            refused: get(&self.refused),
            dropped_by_aggregator: get(&self.dropped_by_aggregator),
            dropped_unreachable: get(&self.dropped_unreachable),
            failures: get(&self.failures),
        }
    }
}

/// Sends records to the aggregator from a task of its own; dropping it stops the task (what is
/// still queued is lost, see [`close`](Self::close)).
#[derive(Debug)]
pub struct FlowSender {
    queue: Option<mpsc::Sender<FlowRecord>>,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl Drop for FlowSender {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FlowSender {
    /// Starts the sending task on the current tokio runtime. Fails only for a bad URL; an
    /// aggregator that is not there is not an error (records are counted as they drop).
    pub fn start(config: SenderConfig) -> Result<FlowSender, FlowLogError> {
        let address = Address::parse(&config.url)?;
        let (queue, receiver) = mpsc::channel(config.queue.max(1));
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(Task::new(config, address, counters.clone()).run(receiver));
        Ok(FlowSender {
            queue: Some(queue),
            counters,
            task,
        })
    }

    /// Queues `record`; never waits. `false` when the queue was full and the record dropped.
    pub fn send(&self, record: FlowRecord) -> bool {
        let queued = self
            .queue
            .as_ref()
            .is_some_and(|queue| queue.try_send(record).is_ok());
        let counter = match queued {
            true => &self.counters.queued,
            false => &self.counters.dropped_queue_full,
        };
        Counters::add(counter, 1);
        queued
    }

    /// The counters so far.
    pub fn stats(&self) -> SenderStats {
        self.counters.snapshot()
    }

    /// Sends what is queued, waiting at most `within`, then stops. Returns the final counters.
    pub async fn close(mut self, within: Duration) -> SenderStats {
        self.queue = None;
        let _ = tokio::time::timeout(within, &mut self.task).await;
        self.counters.snapshot()
    }
}

struct Task {
    config: SenderConfig,
    address: Address,
    counters: Arc<Counters>,
    connection: Option<Connection>,
    backoff: Duration,
    /// Records dropped since the current outage began (for the recovery log line).
    outage: Option<u64>,
}

impl Task {
    fn new(config: SenderConfig, address: Address, counters: Arc<Counters>) -> Task {
        let backoff = config.min_backoff;
        Task {
            config,
            address,
            counters,
            connection: None,
            backoff,
            outage: None,
        }
    }

    async fn run(mut self, mut receiver: mpsc::Receiver<FlowRecord>) {
        let mut batch = Vec::with_capacity(self.config.batch.max(1));
        loop {
            let open = collect(
                &mut receiver,
                &mut batch,
                self.config.batch,
                self.config.linger,
            );
            let open = open.await;
            if !batch.is_empty() {
                self.deliver(&batch).await;
                batch.clear();
            }
            if !open {
                return;
            }
        }
    }

    async fn deliver(&mut self, batch: &[FlowRecord]) {
        let body = serde_json::to_vec(&Batch { records: batch })
            .expect("flow records always serialise to JSON");
        match self.post(Bytes::from(body)).await {
            Ok(reply) => self.answered(batch.len(), &reply),
            Err(error) => self.failed(batch.len(), &error).await,
        }
    }

    fn answered(&mut self, sent: usize, reply: &IngestReply) {
        let c = &self.counters;
        Counters::add(&c.sent, sent);
        Counters::add(&c.accepted, reply.accepted as usize);
        Counters::add(&c.refused, reply.refused.len());
        Counters::add(&c.dropped_by_aggregator, reply.dropped.len());
        if let Some(first) = reply.refused.first() {
            tracing::warn!(
                refused = reply.refused.len(),
                "flow aggregator refused records, the first: {first}"
            );
        }
        if let Some(lost) = self.outage.take() {
            tracing::info!(lost, "flow aggregator reachable again");
        }
        self.backoff = self.config.min_backoff;
    }

    async fn failed(&mut self, lost: usize, error: &FlowLogError) {
        self.connection = None;
        let c = &self.counters;
        Counters::add(&c.failures, 1);
        match error {
            // The aggregator answered and refused the batch as a whole (unauthorised, too
            // large): it is up, but will not take these.
            FlowLogError::Status { status, .. } if *status < 500 => {
                Counters::add(&c.sent, lost);
                Counters::add(&c.refused, lost);
            }
            _ => Counters::add(&c.dropped_unreachable, lost),
        }
        match &mut self.outage {
            Some(count) => *count += lost as u64,
            None => {
                tracing::warn!("flow records dropped, retrying after a backoff: {error}");
                self.outage = Some(lost as u64);
            }
        }
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(self.config.max_backoff);
    }

    /// POSTs one batch; a kept-alive connection that turns out closed is replaced once.
    async fn post(&mut self, body: Bytes) -> Result<IngestReply, FlowLogError> {
        let timeout = self.config.timeout;
        let attempt = async {
            let reused = self.connection.is_some();
            let result = self.post_once(body.clone()).await;
            match result {
                Err(FlowLogError::Http { .. }) if reused => {
                    self.connection = None;
                    self.post_once(body).await
                }
                other => other,
            }
        };
        tokio::time::timeout(timeout, attempt)
            .await
            .map_err(|_| timed_out(&self.address, timeout))?
    }

    async fn post_once(&mut self, body: Bytes) -> Result<IngestReply, FlowLogError> {
        if self.connection.is_none() {
            let opened = Connection::open(&self.address, self.config.timeout).await?;
            self.connection = Some(opened);
        }
        let connection = self.connection.as_mut().expect("opened above");
        let token = self.config.token.as_deref();
        let response = connection
            .send(Method::POST, FLOWS_PATH, Some(body), token)
            .await?;
        let body = read_ok(&self.address, response).await?;
        serde_json::from_slice(&body).map_err(|e| FlowLogError::Decode {
            address: self.address.authority.clone(),
            what: "an ingest reply",
            reason: e.to_string(),
        })
    }
}

/// Waits for a first record, then takes more until the batch is full or `linger` has passed.
/// `false` once the queue is closed and empty.
async fn collect(
    receiver: &mut mpsc::Receiver<FlowRecord>,
    batch: &mut Vec<FlowRecord>,
    size: usize,
    linger: Duration,
) -> bool {
    match receiver.recv().await {
        Some(record) => batch.push(record),
        None => return false,
    }
    let deadline = Instant::now() + linger;
    while batch.len() < size.max(1) {
        match tokio::time::timeout_at(deadline, receiver.recv()).await {
            Ok(Some(record)) => batch.push(record),
            Ok(None) => return false,
            Err(_) => break,
        }
    }
    true
}
