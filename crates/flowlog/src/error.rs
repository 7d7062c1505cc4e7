//! Errors of the flow-log protocol and its clients.

/// A query parameter refused: which, its value, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query parameter {name}={value:?}: {reason}")]
pub struct FilterError {
    pub name: String,
    pub value: String,
    pub reason: String,
}

impl FilterError {
    pub fn new(name: &str, value: &str, reason: String) -> FilterError {
        FilterError {
            name: name.to_owned(),
            value: value.to_owned(),
            reason,
        }
    }
}

/// Why a request to the aggregator failed.
#[derive(Debug, thiserror::Error)]
pub enum FlowLogError {
    #[error("aggregator address {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("cannot connect to the flow aggregator at {address}: {source}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    #[error("flow aggregator at {address}: {reason}")]
    Http { address: String, reason: String },
    #[error("flow aggregator at {address} did not answer within {seconds} s")]
    Timeout { address: String, seconds: u64 },
    #[error("flow aggregator at {address} answered {status}: {message}")]
    Status {
        address: String,
        status: u16,
        message: String,
    },
    #[error("flow aggregator at {address} sent an answer that is not {what}: {reason}")]
    Decode {
        address: String,
        what: &'static str,
        reason: String,
    },
    #[error(transparent)]
    Filter(#[from] FilterError),
}
