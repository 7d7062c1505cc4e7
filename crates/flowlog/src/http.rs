//! A small HTTP/1 client for the aggregator (plain HTTP on the cluster network): one kept-alive
//! connection, replaced when it fails.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::error::FlowLogError;

/// The largest answer read into memory (a query of 10,000 flows is a few MiB).
pub(crate) const MAX_ANSWER: usize = 64 << 20;

/// Where the aggregator is: `http://host:port` or `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// `host:port`.
    pub authority: String,
}

impl Address {
    pub fn parse(url: &str) -> Result<Address, FlowLogError> {
        let bad = |reason: &str| FlowLogError::Url {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if url.starts_with("https://") {
            return Err(bad(
                "https is not served: use http:// on the cluster network",
            ));
        }
        let rest = url.strip_prefix("http://").unwrap_or(url);
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') || authority.contains('@') {
            return Err(bad("expected http://HOST:PORT"));
        }
        let port = authority
            .rsplit_once(':')
            .map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(p)) if p > 0) {
            return Err(bad("expected http://HOST:PORT with a port"));
        }
        Ok(Address {
            authority: authority.to_owned(),
        })
    }
}

/// One HTTP/1 connection; its driver task ends when it is dropped.
#[derive(Debug)]
pub(crate) struct Connection {
    address: Address,
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Connection {
    pub async fn open(address: &Address, timeout: Duration) -> Result<Connection, FlowLogError> {
        let connect = TcpStream::connect(&address.authority);
        let stream = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| timed_out(address, timeout))?
            .map_err(|source| FlowLogError::Connect {
                address: address.authority.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http_error(address, e))?;
        let driver = tokio::spawn(async move {
            // The connection ends when the server closes it or the sender is dropped.
            let _ = connection.await;
        });
        Ok(Connection {
            address: address.clone(),
            sender,
            driver,
        })
    }

    /// Sends one request; the answer's body is left to the caller.
    pub async fn send(
        &mut self,
        method: Method,
        path_and_query: &str,
        body: Option<Bytes>,
        token: Option<&str>,
    ) -> Result<Response<Incoming>, FlowLogError> {
        let mut request = Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(HOST, &self.address.authority);
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(token) = token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| http_error(&self.address, e))?;
        self.sender
            .ready()
            .await
            .map_err(|e| http_error(&self.address, e))?;
        self.sender
            .send_request(request)
            .await
            .map_err(|e| http_error(&self.address, e))
    }
}

/// Reads a whole answer (at most [`MAX_ANSWER`] bytes) and refuses a status other than 200,
/// with the aggregator's `error` text.
pub(crate) async fn read_ok(
    address: &Address,
    response: Response<Incoming>,
) -> Result<Bytes, FlowLogError> {
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| FlowLogError::Http {
            address: address.authority.clone(),
            reason: format!("reading the answer: {e}"),
        })?
        .to_bytes();
    if status.is_success() {
        return Ok(body);
    }
    let message = serde_json::from_slice::<crate::protocol::ErrorReply>(&body)
        .map(|reply| reply.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body).chars().take(500).collect());
    Err(FlowLogError::Status {
        address: address.authority.clone(),
        status: status.as_u16(),
        message,
    })
}

pub(crate) fn timed_out(address: &Address, timeout: Duration) -> FlowLogError {
    FlowLogError::Timeout {
        address: address.authority.clone(),
        seconds: timeout.as_secs().max(1),
    }
}

fn http_error(address: &Address, error: impl std::fmt::Display) -> FlowLogError {
    FlowLogError::Http {
        address: address.authority.clone(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert_eq!(
            Address::parse("http://10.99.0.1:7480/").unwrap().authority,
            "10.99.0.1:7480"
        );
        assert_eq!(
            Address::parse("flows:7480").unwrap().authority,
            "flows:7480"
        );
        for (url, reason) in [
            ("https://flows:7480", "https is not served"),
            ("http://flows", "with a port"),
            ("http://flows:0", "with a port"),
            ("http://flows:7480/api", "expected http://HOST:PORT"),
            ("", "expected http://HOST:PORT"),
        ] {
            let error = Address::parse(url).unwrap_err().to_string();
            assert!(error.contains(reason), "{url}: {error}");
        }
    }
}
