//! Keystone's and Neutron's HTTP, on the workspace's one client stack (`calico_http`: hyper,
//! rustls with ring, kept connections): what these two APIs need of it, trusting a CA file or,
//! without one, the system's bundle.

use std::path::Path;

use calico_http::{Client, Request, Tls};

pub use calico_http::{Endpoint, SYSTEM_CA_BUNDLE};

/// An answer: the status, the headers the callers read, and the body.
#[derive(Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Keystone's `X-Subject-Token` (a credential: never logged).
    pub subject_token: Option<String>,
    pub body: String,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("subject_token", &self.subject_token.as_ref().map(|_| "…"))
            .field("body", &self.body)
            .finish()
    }
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct HttpError {
    pub reason: String,
    /// The server's certificate was refused: a setting to fix, not a server away.
    pub certificate: bool,
}

/// The client. Clones share the kept connections.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client,
}

impl Http {
    /// A client trusting the certificates in `ca_file` (PEM), or the system's bundle without
    /// one. The error names the file and the reason.
    pub fn new(ca_file: Option<&Path>) -> Result<Http, String> {
        let tls = Tls {
            ca_file: ca_file.map(Path::to_path_buf),
            system_bundle: true,
            ..Tls::default()
        };
        let client = Client::new(&tls).map_err(|e| e.to_string())?;
        Ok(Http {
            client: client.named("calico-openstack"),
        })
    }

    /// With another deadline per request (the default is calico_http's, 10 s).
    pub fn with_timeout(self, timeout: std::time::Duration) -> Http {
        Http {
            client: self.client.with_timeout(timeout),
        }
    }

    /// What https certificates are checked against, for error messages.
    pub fn trusted(&self) -> &str {
        self.client.trusted()
    }

    /// One request to `endpoint`'s `path` with `headers` and a JSON `body`: the answer, or why
    /// there is none (no connection, TLS, no answer in time).
    pub async fn send(
        &self,
        method: &str,
        endpoint: &Endpoint,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Result<Response, HttpError> {
        let mut request = Request::new(method, path).header("accept", "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let answer = self
            .client
            .send(endpoint, request)
            .await
            .map_err(|e| HttpError {
                certificate: e.is_certificate(),
                reason: e.to_string(),
            })?;
        Ok(Response {
            status: answer.status,
            subject_token: answer.header("x-subject-token").map(str::to_owned),
            body: answer.body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_named() {
        let error = Http::new(Some(Path::new("/nonexistent/ca.pem"))).unwrap_err();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = Http::new(Some(&empty)).unwrap_err();
        assert!(error.contains("empty.pem"), "{error}");
    }
}
