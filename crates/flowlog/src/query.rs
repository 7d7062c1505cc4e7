//! The reading side, for `calicoctl flows` and tests: a query, the filter hints, the counters,
//! and the live stream of server-sent events.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Method;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

use crate::error::FlowLogError;
use crate::filter::FlowFilter;
use crate::http::{Address, Connection, read_ok, timed_out};
use crate::protocol::{
    FLOWS_PATH, FlowList, FlowResult, HINTS_PATH, Hints, Lagged, STATS_PATH, STREAM_PATH, Stats,
};

/// Asks one aggregator; each call opens its own connection.
#[derive(Debug, Clone)]
pub struct QueryClient {
    address: Address,
    timeout: Duration,
}

impl QueryClient {
    /// A client of `url` (`http://host:port`); requests give up after 10 s.
    pub fn new(url: &str) -> Result<QueryClient, FlowLogError> {
        Ok(QueryClient {
            address: Address::parse(url)?,
            timeout: Duration::from_secs(10),
        })
    }

    /// The flows matching `filter`, newest first, at most `limit` (the aggregator's default
    /// when `None`).
    pub async fn list(
        &self,
        filter: &FlowFilter,
        limit: Option<usize>,
    ) -> Result<FlowList, FlowLogError> {
        let mut query = filter.to_query();
        if let Some(limit) = limit {
            let sep = if query.is_empty() { "" } else { "&" };
            query = format!("{query}{sep}limit={limit}");
        }
        self.get(FLOWS_PATH, &query, "a flow list").await
    }

    /// The distinct values of the flows matching `filter`.
    pub async fn hints(&self, filter: &FlowFilter) -> Result<Hints, FlowLogError> {
        self.get(HINTS_PATH, &filter.to_query(), "filter hints")
            .await
    }

    /// The aggregator's counters.
    pub async fn stats(&self) -> Result<Stats, FlowLogError> {
        self.get(STATS_PATH, "", "statistics").await
    }

    /// Records matching `filter` as they arrive, from now on.
    pub async fn stream(&self, filter: &FlowFilter) -> Result<FlowStream, FlowLogError> {
        let mut connection = Connection::open(&self.address, self.timeout).await?;
        let target = with_query(STREAM_PATH, &filter.to_query());
        let response = tokio::time::timeout(
            self.timeout,
            connection.send(Method::GET, &target, None, None),
        )
        .await
        .map_err(|_| timed_out(&self.address, self.timeout))??;
        if !response.status().is_success() {
            read_ok(&self.address, response).await?;
            unreachable!("read_ok refuses a status other than success");
        }
        Ok(FlowStream {
            address: self.address.clone(),
            _connection: connection,
            body: response.into_body(),
            buffer: String::new(),
        })
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &str,
        what: &'static str,
    ) -> Result<T, FlowLogError> {
        let exchange = async {
            let mut connection = Connection::open(&self.address, self.timeout).await?;
            let target = with_query(path, query);
            let response = connection.send(Method::GET, &target, None, None).await?;
            read_ok(&self.address, response).await
        };
        let body = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| timed_out(&self.address, self.timeout))??;
        decode(&self.address, &body, what)
    }
}

fn with_query(path: &str, query: &str) -> String {
    match query.is_empty() {
        true => path.to_owned(),
        false => format!("{path}?{query}"),
    }
}

fn decode<T: DeserializeOwned>(
    address: &Address,
    body: &[u8],
    what: &'static str,
) -> Result<T, FlowLogError> {
    serde_json::from_slice(body).map_err(|e| FlowLogError::Decode {
        address: address.authority.clone(),
        what,
        reason: e.to_string(),
    })
}

/// One event of the live stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A record as it arrived (`records` is 1).
    Flow(Box<FlowResult>),
    /// This subscriber fell behind; records were skipped.
    Lagged(Lagged),
}

/// The live stream; ends when the aggregator goes away.
#[derive(Debug)]
pub struct FlowStream {
    address: Address,
    _connection: Connection,
    body: Incoming,
    buffer: String,
}

impl FlowStream {
    /// The next event, `None` when the stream has ended.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, FlowLogError>> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse_event(&self.address, &block) {
                    return Some(event);
                }
            }
            match self.body.frame().await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        self.push(data);
                    }
                }
                Err(e) => {
                    return Some(Err(FlowLogError::Http {
                        address: self.address.authority.clone(),
                        reason: format!("the stream broke: {e}"),
                    }));
                }
            }
        }
    }

    fn push(&mut self, data: Bytes) {
        // Events are UTF-8 JSON; the server never splits a character across writes it flushes,
        // and a lossy decode only affects a broken stream.
        self.buffer
            .push_str(&String::from_utf8_lossy(&data).replace("\r\n", "\n"));
    }
}

/// One event block (`event:` and `data:` lines); `None` for comments (keep-alives) and events
/// this client does not know.
fn parse_event(address: &Address, block: &str) -> Option<Result<StreamEvent, FlowLogError>> {
    let mut name = "message";
    let mut data = Vec::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            name = value.trim();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    let data = data.join("\n");
    match name {
        "flow" => Some(decode(address, data.as_bytes(), "a flow event").map(StreamEvent::Flow)),
        "lagged" => {
            Some(decode(address, data.as_bytes(), "a lagged event").map(StreamEvent::Lagged))
        }
        _ => None,
    }
}
