//! The aggregator's HTTP API: paths, and the JSON bodies both sides read and write
//! (docs/observability.md, "The API").
//!
//! | method and path | body | answer |
//! | --- | --- | --- |
//! | `POST /api/v1/flows` | [`Batch`] | [`IngestReply`] (200), or [`ErrorReply`] for a body that is no batch (400), too large (413) or unauthorised (401) |
//! | `GET /api/v1/flows?FILTER&limit=N` | — | [`FlowList`] |
//! | `GET /api/v1/flows/stream?FILTER` | — | server-sent events: `flow` ([`FlowResult`]) and `lagged` ([`Lagged`]) |
//! | `GET /api/v1/hints?FILTER` | — | [`Hints`] |
//! | `GET /api/v1/stats` | — | [`Stats`] |
//! | `GET /metrics`, `GET /health` | — | Prometheus text; `ok` |

use std::fmt;

use calico_model::flow::FlowRecord;
use serde::{Deserialize, Serialize};

/// `POST` a [`Batch`] here; `GET` a [`FlowList`].
pub const FLOWS_PATH: &str = "/api/v1/flows";
/// `GET`: server-sent events of the records as they arrive.
pub const STREAM_PATH: &str = "/api/v1/flows/stream";
/// `GET`: the distinct values of the flows in the window.
pub const HINTS_PATH: &str = "/api/v1/hints";
/// `GET`: what the aggregator holds and has counted.
pub const STATS_PATH: &str = "/api/v1/stats";

/// What a Felix sends: records, each validated on its own.
#[derive(Debug, Clone, Serialize)]
pub struct Batch<'a> {
    pub records: &'a [FlowRecord],
}

/// The answer to a batch: every record is accepted, refused or dropped, by its index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestReply {
    pub accepted: u64,
    #[serde(default)]
    pub refused: Vec<Refusal>,
    #[serde(default)]
    pub dropped: Vec<Dropped>,
}

/// A record refused: malformed or hostile, never kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Its index in the batch.
    pub index: usize,
    /// The field path, from the batch: `records[3].source.key`.
    pub field: String,
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// A valid record the window had no room for (`older-than-window`) or that was already past the
/// retention (`expired`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub index: usize,
    pub reason: String,
}

/// Why a request was refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: String,
}

/// One flow of the window: the records of one key summed over the time asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowResult {
    /// 16 hex digits naming the flow's key: the same for the same key in every answer and
    /// stream event of one aggregator version (a string: JSON numbers lose 64-bit precision).
    pub id: String,
    /// How many records were summed.
    pub records: u64,
    /// The key's fields; `start_time` the earliest, `end_time` the latest, counters summed,
    /// profiles and labels of the latest record.
    pub flow: FlowRecord,
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowList {
    /// Newest first (by `end_time`), at most `limit`.
    pub flows: Vec<FlowResult>,
    /// How many flows matched before the limit.
    pub total: usize,
}

/// A stream subscriber fell behind and missed this many records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lagged {
    pub missed: u64,
}

/// The distinct values of the flows matching a filter, sorted, each list at most
/// [`MAX_HINTS`] long: what a filter box can offer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hints {
    pub reporters: Vec<String>,
    pub endpoints: Vec<String>,
    pub profiles: Vec<String>,
    pub tiers: Vec<String>,
    pub policies: Vec<String>,
    pub actions: Vec<String>,
}

/// The longest list of one kind of hint.
pub const MAX_HINTS: usize = 1000;

/// The aggregator's state and counters since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Flows (one key in one bucket) in the window, and their estimated memory.
    pub flows: u64,
    pub memory_bytes: u64,
    pub max_flows: u64,
    pub max_memory_bytes: u64,
    /// Records received, and what became of each.
    pub received: u64,
    pub accepted: u64,
    pub refused: u64,
    pub dropped: u64,
    /// Flows removed to stay under the caps, and because they passed the retention.
    pub evicted: u64,
    pub expired: u64,
    /// Bodies refused as a whole (not a batch, too large, unauthorised).
    pub batches_refused: u64,
}
