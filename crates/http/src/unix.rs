//! HTTP over a unix socket (dockerd's API).

use std::path::Path;

use tokio::net::UnixStream;

use crate::error::HttpError;
use crate::exchange::send_on;
use crate::message::{Request, Response};

/// Sends `request` to the server listening on `socket`.
pub async fn send(socket: &Path, request: Request) -> Result<Response, HttpError> {
    let server = socket.display().to_string();
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| HttpError::Connect {
            server: server.clone(),
            reason: e.to_string(),
        })?;
    // The Host header of a unix socket names nothing; "localhost" is what curl sends.
    send_on(stream, "localhost", request)
        .await
        .map_err(|e| match e {
            HttpError::Protocol { reason, .. } => HttpError::Protocol { server, reason },
            other => other,
        })
}
