//! The client: TLS settings, a deadline per request, and idle connections kept for reuse (a
//! TLS handshake per request would cost more than most answers). A GET that fails on a kept
//! connection (the server closed it meanwhile) is sent once more on a new one; other methods
//! are never sent twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::endpoint::Endpoint;
use crate::error::HttpError;
use crate::exchange::{build, handshake, roundtrip};
use crate::message::{Request, Response};
use crate::tls::{Connector, Tls};

/// How long one request may take, connection and TLS handshake included, unless set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per server.
const IDLE_PER_SERVER: usize = 4;

/// Connections kept for reuse, by `scheme://authority`.
type Idle = Arc<Mutex<HashMap<String, Vec<SendRequest<Full<Bytes>>>>>>;

/// An HTTP/1.1 client. Clones share the kept connections.
#[derive(Clone)]
pub struct Client {
    tls: Option<Arc<Connector>>,
    timeout: Duration,
    user_agent: String,
    idle: Idle,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("trusted", &self.trusted())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for Client {
    fn default() -> Client {
        Client::plain()
    }
}

impl Client {
    /// A client for plain http only.
    pub fn plain() -> Client {
        Client {
            tls: None,
            timeout: DEFAULT_TIMEOUT,
            user_agent: "calico-rs".to_owned(),
            idle: Arc::default(),
        }
    }

    /// A client that speaks https as `tls` says (and plain http).
    pub fn new(tls: &Tls) -> Result<Client, HttpError> {
        Ok(Client {
            tls: tls.connector()?.map(Arc::new),
            ..Client::plain()
        })
    }

    /// With another deadline per request.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// With the `User-Agent` its requests carry.
    pub fn named(mut self, user_agent: &str) -> Client {
        self.user_agent = user_agent.to_owned();
        self
    }

    /// What https certificates are checked against, for messages.
    pub fn trusted(&self) -> &str {
        self.tls
            .as_ref()
            .map_or("nothing (plain http only)", |c| c.trusted.as_str())
    }

    /// GET `path` from `base` (`http(s)://HOST:PORT`).
    pub async fn get(&self, base: &str, path: &str) -> Result<Response, HttpError> {
        let endpoint = Endpoint::parse(base).map_err(|reason| HttpError::Url {
            url: base.to_owned(),
            reason,
        })?;
        self.send(&endpoint, Request::get(path)).await
    }

    /// Sends `request` to `endpoint` (its path prefix before the request's path): the answer,
    /// whatever its status, or why there is none.
    pub async fn send(&self, endpoint: &Endpoint, request: Request) -> Result<Response, HttpError> {
        let request = request.header("user-agent", &self.user_agent);
        tokio::time::timeout(self.timeout, self.exchange(endpoint, request))
            .await
            .map_err(|_| HttpError::Timeout {
                server: endpoint.base(),
                timeout: self.timeout,
            })?
    }

    async fn exchange(&self, endpoint: &Endpoint, request: Request) -> Result<Response, HttpError> {
        let server = endpoint.url("");
        let authority = endpoint.authority();
        let prefix = endpoint.prefix();
        if request.is_idempotent()
            && let Some(mut sender) = self.take_idle(&server)
        {
            let hyper = build(authority, prefix, request.clone())?;
            // The server may have closed it meanwhile: then once more on a new one.
            if let Ok(answer) = roundtrip(&mut sender, &server, hyper).await {
                self.keep(&server, sender, answer.1);
                return Ok(answer.0);
            }
        }
        let mut sender = self.connect(endpoint).await?;
        let (response, reusable) =
            roundtrip(&mut sender, &server, build(authority, prefix, request)?).await?;
        self.keep(&server, sender, reusable);
        Ok(response)
    }

    fn take_idle(&self, server: &str) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let senders = idle.get_mut(server)?;
        while let Some(sender) = senders.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps the connection for the next request unless the server is closing it.
    fn keep(&self, server: &str, sender: SendRequest<Full<Bytes>>, reusable: bool) {
        if !reusable || sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let senders = idle.entry(server.to_owned()).or_default();
        if senders.len() < IDLE_PER_SERVER {
            senders.push(sender);
        }
    }

    async fn connect(&self, endpoint: &Endpoint) -> Result<SendRequest<Full<Bytes>>, HttpError> {
        let server = endpoint.base();
        if endpoint.is_https() && self.tls.is_none() {
            return Err(HttpError::NoTls { server });
        }
        let stream = TcpStream::connect(endpoint.authority())
            .await
            .map_err(|e| HttpError::Connect {
                server: server.clone(),
                reason: e.to_string(),
            })?;
        let _ = stream.set_nodelay(true);
        if !endpoint.is_https() {
            return handshake(stream, &server).await;
        }
        let Some(connector) = &self.tls else {
            return Err(HttpError::NoTls { server });
        };
        let name =
            ServerName::try_from(endpoint.host().to_owned()).map_err(|e| HttpError::Url {
                url: server.clone(),
                reason: e.to_string(),
            })?;
        let stream = connector.tls.connect(name, stream).await.map_err(|e| {
            let certificate = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| {
                    matches!(
                        e,
                        rustls::Error::InvalidCertificate(_)
                            | rustls::Error::NoCertificatesPresented
                    )
                });
            HttpError::Tls {
                server: server.clone(),
                reason: e.to_string(),
                trusted: connector.trusted.clone(),
                certificate,
            }
        })?;
        handshake(stream, &server).await
    }
}
