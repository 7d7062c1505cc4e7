//! The HTTP side: ingestion, queries and the routes over the shared state (`aggregator.rs`).
//!
//! ```text
//!   Felix ── POST /api/v1/flows ──► ingest::check (no lock) ──► Window (one mutex) ──► live
//!     ▲                                                         │  ▲                 (broadcast)
//!     └── 200 once durable ◄── Store (group commit, fsync) ◄────┘  │                      │
//!   console, calicoctl ── GET flows | hints | stats ──────────────┘ (or the Store, for   │
//!                                                                    a start before it)  │
//!   console, calicoctl ── GET flows/stream ◄── stream::events (filter per subscriber) ◄──┘
//!   expiry tick (1 s) ──► Window::expire
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use calico_flowlog::protocol::{FLOWS_PATH, HINTS_PATH, STATS_PATH, STREAM_PATH};
use calico_flowlog::{FilterError, FlowFilter, filter};
use tokio::net::TcpListener;

use crate::aggregator::{Aggregator, Settings, now};
use crate::reply::{error_reply, json};
use crate::{console, stream};

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
    let settings = aggregator.settings();
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
    let turn = aggregator.batch_turn().await;
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return too_large("is over (or was cut off before)");
    };
    // Checking thousands of records is CPU work: off the threads that serve streams and queries.
    let worker = aggregator.clone();
    let arrived = now();
    let checked = tokio::task::spawn_blocking(move || worker.ingest(&bytes, arrived)).await;
    let taken = match checked.expect("ingesting never panics") {
        Ok(taken) => taken,
        Err(error) => return refuse(StatusCode::BAD_REQUEST, "not-a-batch", error.to_string()),
    };
    // The next batch is checked while this one is written: the store's queue bounds the rows.
    drop(turn);
    if let (Some(store), Some(row)) = (aggregator.store(), taken.row)
        && let Err(error) = store.append(arrived, row).await
    {
        let error = format!("the records were not kept on disk ({error}): send them again");
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "not-stored", error);
    }
    json(StatusCode::OK, &taken.reply)
}

async fn list(State(aggregator): State<Arc<Aggregator>>, RawQuery(query): RawQuery) -> Response {
    let (filter, limit) =
        match list_query(query.as_deref().unwrap_or_default(), aggregator.settings()) {
            Ok(asked) => asked,
            Err(error) => return error_reply(StatusCode::BAD_REQUEST, error.to_string()),
        };
    if aggregator.in_window(&filter) {
        return json(StatusCode::OK, &aggregator.query(&filter, limit));
    }
    // Reading the store takes a while: on a thread of its own, not the one that checks batches.
    let (answer, answered) = tokio::sync::oneshot::channel();
    let reader = aggregator.clone();
    std::thread::spawn(move || {
        let _ = answer.send(reader.query_store(&filter, limit));
    });
    match answered.await {
        Ok(Ok(flows)) => json(StatusCode::OK, &flows),
        Ok(Err(error)) => error_reply(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
        Err(_) => error_reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the store's reader stopped".into(),
        ),
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
