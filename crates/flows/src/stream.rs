//! The live stream: server-sent events of the records as they are accepted, filtered per
//! subscriber. A subscriber that falls more than `--stream-buffer` records behind gets a
//! `lagged` event saying how many it missed (and the counter `stream_missed_records` grows):
//! nothing is skipped silently.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use calico_flowlog::FlowFilter;
use calico_flowlog::protocol::{FlowResult, Lagged};
use prometheus_client::metrics::gauge::Gauge;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use crate::aggregator::{Aggregator, now};
use crate::reply::error_reply;

/// Counts a subscriber while its stream lives.
struct Subscriber(Gauge);

impl Subscriber {
    fn new(gauge: &Gauge) -> Subscriber {
        gauge.inc();
        Subscriber(gauge.clone())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.dec();
    }
}

pub async fn events(
    State(aggregator): State<Arc<Aggregator>>,
    RawQuery(query): RawQuery,
) -> Response {
    let filter = match FlowFilter::from_query(query.as_deref().unwrap_or_default()) {
        Ok(filter) => filter,
        Err(error) => return error_reply(StatusCode::BAD_REQUEST, error.to_string()),
    };
    let subscriber = Subscriber::new(&aggregator.metrics.subscribers);
    let missed = aggregator.metrics.stream_missed.clone();
    let events = BroadcastStream::new(aggregator.subscribe()).filter_map(move |item| {
        let _alive = &subscriber;
        let event = match item {
            Ok(flow) => flow_event(&filter, &flow)?,
            Err(BroadcastStreamRecvError::Lagged(count)) => {
                missed.inc_by(count);
                let data = serde_json::to_string(&Lagged { missed: count }).ok()?;
                Event::default().event("lagged").data(data)
            }
        };
        Some(Ok::<_, Infallible>(event))
    });
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(15));
    Sse::new(events).keep_alive(keep_alive).into_response()
}

fn flow_event(filter: &FlowFilter, flow: &FlowResult) -> Option<Event> {
    if !filter.matches(&flow.flow, now()) {
        return None;
    }
    let data = serde_json::to_string(flow).ok()?;
    Some(Event::default().event("flow").data(data))
}
