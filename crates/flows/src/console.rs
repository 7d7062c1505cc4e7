//! The web console: three static files compiled into the binary (no build step, nothing
//! fetched from elsewhere), served with a Content-Security-Policy that allows only them. The
//! page itself only ever turns names into text (console.js); the policy is a second wall.

use std::sync::Arc;

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::aggregator::Aggregator;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// Scripts, styles and connections from this origin only; no inline script, no plugins, no
/// framing.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                      connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn routes() -> Router<Arc<Aggregator>> {
    Router::new()
        .route(
            "/",
            get(|| async { page(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/console.js",
            get(|| async { page(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console.css",
            get(|| async { page(STYLE, "text/css; charset=utf-8") }),
        )
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    let headers = [
        (CONTENT_TYPE, content_type),
        (HeaderName::from_static("content-security-policy"), POLICY),
        (HeaderName::from_static("x-content-type-options"), "nosniff"),
        (CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}
