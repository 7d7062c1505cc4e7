//! The HTTP side: the shared state, ingestion, queries and the routes.
//!
//! ```text
//!   Felix ── POST /api/v1/flows ──► ingest::check (no lock) ──► Window (one mutex) ──► live
//!                                                                 ▲                  (broadcast)
//!   console, calicoctl ── GET flows | hints | stats ─────────────┘                      │
//!   console, calicoctl ── GET flows/stream ◄── stream::events (filter per subscriber) ◄──┘
//!   expiry tick (1 s) ──► Window::expire
//! ```

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use calico_flowlog::protocol::{
    Dropped, ErrorReply, FLOWS_PATH, FlowList, FlowResult, HINTS_PATH, Hints, IngestReply,
    STATS_PATH, STREAM_PATH, Stats,
};
use calico_flowlog::{FilterError, FlowFilter, filter};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, broadcast};

use crate::ingest::{self, BatchLimits, NotABatch};
use crate::metrics::Metrics;
use crate::window::{Limits, Outcome, Window, flow_id, key_hash};
use crate::{console, stream};

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
}

/// Every route.
pub fn router(aggregator: Arc<Aggregator>) -> Router {
    Router::new()
        .route(FLOWS_PATH, get(list).post(post_flows))
        .route(STREAM_PATH, get(stream::events))
        .route(HINTS_PATH, get(hints))
        .route(STATS_PATH, get(stats))
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok\n" }))
        .merge(console::routes())
        .with_state(aggregator)
}

/// Serves until the listener fails; expires old flows every second meanwhile.
pub async fn serve(listener: TcpListener, aggregator: Arc<Aggregator>) -> std::io::Result<()> {
    let expiry = aggregator.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            expiry.expire(now());
        }
    });
    let served = axum::serve(listener, router(aggregator)).await;
    ticker.abort();
    served
}

async fn post_flows(
    State(aggregator): State<Arc<Aggregator>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let settings = &aggregator.settings;
    let refuse = |status, reason: &str, error: String| {
        aggregator.metrics.refuse_batch(reason);
        error_reply(status, error)
    };
    if let Some(token) = &settings.token {
        let given = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given != Some(&format!("Bearer {token}")) {
            let error = "missing or wrong Authorization: Bearer token (see --token)".to_owned();
            return refuse(StatusCode::UNAUTHORIZED, "unauthorized", error);
        }
    }
    let limit = settings.max_batch_bytes;
    let too_large = |detail: &str| {
        let error = format!(
            "the body {detail} the limit of {limit} bytes (--max-batch-bytes): send smaller batches"
        );
        refuse(StatusCode::PAYLOAD_TOO_LARGE, "too-large", error)
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return too_large("is over");
    }
    let _turn = aggregator
        .batches
        .acquire()
        .await
        .expect("the semaphore is never closed");
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return too_large("is over (or was cut off before)");
    };
    // Checking thousands of records is CPU work: off the threads that serve streams and queries.
    let worker = aggregator.clone();
    let checked = tokio::task::spawn_blocking(move || worker.ingest(&bytes, now())).await;
    match checked.expect("ingesting never panics") {
        Ok(reply) => json(StatusCode::OK, &reply),
        Err(error) => refuse(StatusCode::BAD_REQUEST, "not-a-batch", error.to_string()),
    }
}

async fn list(State(aggregator): State<Arc<Aggregator>>, RawQuery(query): RawQuery) -> Response {
    match list_query(query.as_deref().unwrap_or_default(), &aggregator.settings) {
        Ok((filter, limit)) => json(StatusCode::OK, &aggregator.query(&filter, limit)),
        Err(error) => error_reply(StatusCode::BAD_REQUEST, error.to_string()),
    }
}

/// A query's filter and `limit`.
fn list_query(query: &str, settings: &Settings) -> Result<(FlowFilter, usize), FilterError> {
    let mut filter = FlowFilter::default();
    let mut limit = settings.default_limit;
    for (name, value) in filter::parse_query(query)? {
        if name == "limit" {
            limit = parse_limit(&value, settings.max_limit)?;
        } else if !filter.set(&name, &value)? {
            return Err(filter::unknown_parameter(&name, &value));
        }
    }
    Ok((filter, limit))
}

fn parse_limit(value: &str, max: usize) -> Result<usize, FilterError> {
    match value.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(FilterError::new(
            "limit",
            value,
            format!("expected a number of flows from 1 to {max}"),
        )),
    }
}

async fn hints(State(aggregator): State<Arc<Aggregator>>, RawQuery(query): RawQuery) -> Response {
    match FlowFilter::from_query(query.as_deref().unwrap_or_default()) {
        Ok(filter) => json(StatusCode::OK, &aggregator.hints(&filter)),
        Err(error) => error_reply(StatusCode::BAD_REQUEST, error.to_string()),
    }
}

async fn stats(State(aggregator): State<Arc<Aggregator>>) -> Response {
    json(StatusCode::OK, &aggregator.stats())
}

async fn metrics(State(aggregator): State<Arc<Aggregator>>) -> Response {
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    let body = aggregator.metrics.render();
    ([(CONTENT_TYPE, content_type)], body).into_response()
}

pub(crate) fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let bytes = serde_json::to_vec(body).expect("answers always serialise");
    (status, [(CONTENT_TYPE, "application/json")], bytes).into_response()
}

pub(crate) fn error_reply(status: StatusCode, error: String) -> Response {
    json(status, &ErrorReply { error })
}
