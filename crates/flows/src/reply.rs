//! JSON answers, and errors as the protocol's `ErrorReply`.

use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use calico_flowlog::protocol::ErrorReply;
use serde::Serialize;

pub(crate) fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let bytes = serde_json::to_vec(body).expect("answers always serialise");
    (status, [(CONTENT_TYPE, "application/json")], bytes).into_response()
}

pub(crate) fn error_reply(status: StatusCode, error: String) -> Response {
    json(status, &ErrorReply { error })
}
