//! The one thing the driver asks dockerd: a network's name, which names its profile.
//! `CreateNetwork` carries only the network's id, and the network is not in dockerd's API until
//! that call has returned, so the name is looked up at the first `CreateEndpoint` and cached.
//!
//! One `GET /networks/<id>` over dockerd's unix socket, through the workspace's HTTP client
//! (`calico_http::unix`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use calico_http::{Request, unix};
use serde::Deserialize;

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
        let answer = unix::send(&self.socket, Request::get(path))
            .await
            .map_err(|e| self.error(format!("GET {path}: {e}; check --docker-socket")))?;
        if answer.status != 200 {
            let status = answer.status;
            let body = answer.body.trim();
            return Err(self.error(format!("GET {path}: status {status}: {body}")));
        }
        Ok(answer.body)
    }

    fn error(&self, reason: String) -> DriverError {
        DriverError::Docker {
            socket: self.socket.display().to_string(),
            reason,
        }
    }
}
