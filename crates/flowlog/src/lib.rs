//! Flow logs on the wire, for both sides of `calico-flows` (docs/observability.md): the
//! aggregator's HTTP protocol, the filter its queries, streams and hints share, Felix's sender
//! that never blocks, and the query client `calicoctl flows` uses. The records themselves are
//! `calico_model::flow`.
//!
//! | module | owns |
//! | --- | --- |
//! | `protocol` | paths and JSON bodies: `Batch`, `IngestReply` (+ `Refusal`, `Dropped`), `FlowList`, `FlowResult`, `Hints`, `Stats`, `Lagged`, `ErrorReply` |
//! | `filter` | `FlowFilter`: URL query parameters to and from, and `matches` |
//! | `sender` | `FlowSender` (Felix): bounded queue, batches, drop with a counter, backoff |
//! | `query` | `QueryClient`: `list`, `hints`, `stats`, `stream` (server-sent events) |
//! | `http` | one HTTP/1 connection (hyper), the `http://host:port` address |
//! | `error` | `FlowLogError`, `FilterError` |

pub mod error;
pub mod filter;
mod http;
pub mod protocol;
pub mod query;
pub mod sender;

pub use error::{FilterError, FlowLogError};
pub use filter::FlowFilter;
pub use http::Address;
pub use query::{FlowStream, QueryClient, StreamEvent};
pub use sender::{FlowSender, SenderConfig, SenderStats};
