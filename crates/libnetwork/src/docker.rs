//! The one thing the driver asks dockerd: a network's name, which names its profile.
//! `CreateNetwork` carries only the network's id, and the network is not in dockerd's API until
//! that call has returned, so the name is looked up at the first `CreateEndpoint` and cached.
//!
//! One `GET /networks/<id>` over dockerd's unix socket, HTTP/1.0 so the answer is neither
//! chunked nor kept alive: too small a need for an HTTP client crate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::error::DriverError;

/// How long dockerd may take to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Network names from dockerd, cached by network id.
#[derive(Debug)]
pub struct DockerApi {
    socket: PathBuf,
    names: Mutex<HashMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct NetworkInspect {
    name: String,
}

impl DockerApi {
    pub fn new(socket: PathBuf) -> DockerApi {
        DockerApi {
            socket,
            names: Mutex::new(HashMap::new()),
        }
    }

    /// The name of network `id`.
    pub async fn network_name(&self, id: &str) -> Result<String, DriverError> {
        if let Some(name) = self.names.lock().expect("names lock").get(id) {
            return Ok(name.clone());
        }
        if !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(DriverError::invalid(
                "NetworkID",
                id,
                "expected letters and digits",
            ));
        }
        let body = tokio::time::timeout(TIMEOUT, self.get(&format!("/networks/{id}")))
            .await
            .map_err(|_| self.error(format!("no answer within {TIMEOUT:?}")))??;
        let inspect: NetworkInspect = serde_json::from_str(&body)
            .map_err(|e| self.error(format!("network {id}: unexpected answer: {e}")))?;
        self.names
            .lock()
            .expect("names lock")
            .insert(id.to_owned(), inspect.name.clone());
        Ok(inspect.name)
    }

    /// Forgets a deleted network.
    pub fn forget(&self, id: &str) {
        self.names.lock().expect("names lock").remove(id);
    }

    async fn get(&self, path: &str) -> Result<String, DriverError> {
        let mut stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| self.error(format!("cannot connect: {e}; check --docker-socket")))?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| self.error(format!("GET {path}: {e}")))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|e| self.error(format!("GET {path}: {e}")))?;
        let answer = String::from_utf8_lossy(&answer);
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| self.error(format!("GET {path}: answer without a header end")))?;
        let status = head.split_whitespace().nth(1).unwrap_or_default();
        if status != "200" {
            return Err(self.error(format!("GET {path}: status {status}: {}", body.trim())));
        }
        Ok(body.to_owned())
    }

    fn error(&self, reason: String) -> DriverError {
        DriverError::Docker {
            socket: self.socket.display().to_string(),
            reason,
        }
    }
}
