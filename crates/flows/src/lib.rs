//! `calico-flows`, the flow aggregator (docs/observability.md): every Felix sends it flow
//! records; it keeps a bounded window of them and serves queries, a live stream, filter hints,
//! Prometheus metrics and the web console. It keeps every record it accepts on disk (`store`)
//! and needs no etcd: Felix names both ends of a flow from its own copy of the datastore.
//!
//! | module | owns |
//! | --- | --- |
//! | `window` | the bounded window (pure): insert and sum per key and bucket, evict, expire, query, hints (`footprint`: what an entry costs, as malloc hands it out; `labels`: kept compact) |
//! | `ingest` | a batch body → each record validated on its own, refused by field and reason |
//! | `aggregator` | `Aggregator` (window + store + metrics + live stream), `Settings` |
//! | `store` | the records on disk (redb): group commit before the answer, retention by time and size, read back at start and for queries before the window |
//! | `server` | the routes over it, ingestion and queries, `serve` (`reply`: JSON answers and errors) |
//! | `stream` | the live stream as server-sent events, filtered per subscriber |
//! | `metrics` | Prometheus counters and gauges, and the stats answer |
//! | `console` | the web console (`console/`: HTML, CSS, JS embedded in the binary) |

pub mod aggregator;
pub mod console;
pub mod ingest;
pub mod metrics;
mod reply;
pub mod server;
pub mod store;
pub mod stream;
pub mod window;

pub use aggregator::{Aggregator, Settings};
pub use server::{router, serve};
pub use window::{Limits, Window};
