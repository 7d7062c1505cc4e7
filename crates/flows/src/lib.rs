//! `calico-flows`, the flow aggregator (docs/observability.md): every Felix sends it flow
//! records; it keeps a bounded window of them and serves queries, a live stream, filter hints,
//! Prometheus metrics and the web console. It holds no state but memory and needs no etcd:
//! Felix names both ends of a flow from its own copy of the datastore.
//!
//! | module | owns |
//! | --- | --- |
//! | `window` | the bounded window (pure): insert and sum per key and bucket, evict, expire, query, hints |
//! | `ingest` | a batch body → each record validated on its own, refused by field and reason |
//! | `server` | `Aggregator` (window + metrics + live stream), `Settings`, the routes, `serve` |
//! | `stream` | the live stream as server-sent events, filtered per subscriber |
//! | `metrics` | Prometheus counters and gauges, and the stats answer |
//! | `console` | the web console (`console/`: HTML, CSS, JS embedded in the binary) |

pub mod console;
pub mod ingest;
pub mod metrics;
pub mod server;
pub mod stream;
pub mod window;

pub use server::{Aggregator, Settings, router, serve};
pub use window::{Limits, Window};
