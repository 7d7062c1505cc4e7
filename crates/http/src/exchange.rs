//! One request and its answer on an open HTTP/1.1 connection.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::HttpError;
use crate::message::{Request, Response};

/// The largest answer read into memory.
pub(crate) const MAX_BODY: usize = 64 << 20;

/// Sends `request` on `stream` (connected by the caller: a unix socket, a socket made inside
/// another network namespace) and reads the whole answer; the connection is closed after.
/// `authority` is the `Host` header and names the server in errors.
pub async fn send_on<S>(stream: S, authority: &str, request: Request) -> Result<Response, HttpError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut sender = handshake(stream, authority).await?;
    let (response, _) = roundtrip(&mut sender, authority, build(authority, "", request)?).await?;
    Ok(response)
}

/// A new HTTP/1.1 connection on `stream`; its task ends when the connection closes or its
/// sender is dropped.
pub(crate) async fn handshake<S>(
    stream: S,
    server: &str,
) -> Result<SendRequest<Full<Bytes>>, HttpError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| HttpError::protocol(server, e))?;
    tokio::spawn(async move {
        // Ends with the server's close or the sender's drop; nothing to report either way.
        let _ = connection.await;
    });
    Ok(sender)
}

/// The hyper request: `prefix` (an endpoint's path) before the request's path, `Host` set.
pub(crate) fn build(
    authority: &str,
    prefix: &str,
    request: Request,
) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let mut builder = hyper::Request::builder()
        .method(request.method.as_str())
        .uri(format!("{prefix}{}", request.path))
        .header(hyper::header::HOST, authority);
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
        .body(Full::new(Bytes::from(request.body)))
        .map_err(|e| HttpError::protocol(authority, e))
}

/// Sends and reads the whole answer; with whether the connection may be reused.
pub(crate) async fn roundtrip(
    sender: &mut SendRequest<Full<Bytes>>,
    server: &str,
    request: hyper::Request<Full<Bytes>>,
) -> Result<(Response, bool), HttpError> {
    let error = |e: hyper::Error| HttpError::protocol(server, e);
    sender.ready().await.map_err(error)?;
    let response = sender.send_request(request).await.map_err(error)?;
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| HttpError::protocol(server, format!("reading the answer: {e}")))?
        .to_bytes();
    let response = Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let reusable = !response
        .header("connection")
        .is_some_and(|c| c.eq_ignore_ascii_case("close"));
    Ok((response, reusable))
}
