//! Why a request got no answer. Each message names the server (or the file) and the reason;
//! an answer with any status is not an error here: the caller decides what a status means.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The URL is not one this client can use.
    #[error("{url:?}: {reason}")]
    Url { url: String, reason: String },
    /// The TLS settings cannot be used: a file missing or unreadable, a certificate without
    /// its key.
    #[error("{reason}")]
    Settings { reason: String },
    /// No connection: nothing listens, no route, a socket missing.
    #[error("{server}: cannot connect: {reason}")]
    Connect { server: String, reason: String },
    /// The TLS handshake failed; `certificate` when the server's certificate was refused (a
    /// setting to fix, not a server away).
    #[error("{server}: TLS handshake: {reason} (certificates are checked against {trusted})")]
    Tls {
        server: String,
        reason: String,
        trusted: String,
        certificate: bool,
    },
    /// An https URL for a client made for plain http.
    #[error("{server} is https: give the CA certificate file")]
    NoTls { server: String },
    #[error("{server}: no answer within {timeout:?}")]
    Timeout { server: String, timeout: Duration },
    /// The connection broke, or the answer is not HTTP/1.1 or is too large.
    #[error("{server}: {reason}")]
    Protocol { server: String, reason: String },
}

impl HttpError {
    /// Whether the server's certificate was refused.
    pub fn is_certificate(&self) -> bool {
        matches!(
            self,
            HttpError::Tls {
                certificate: true,
                ..
            }
        )
    }

    pub(crate) fn protocol(server: &str, reason: impl std::fmt::Display) -> HttpError {
        HttpError::Protocol {
            server: server.to_owned(),
            reason: reason.to_string(),
        }
    }
}
