//! The one HTTP/1.1 client stack of the workspace (hyper, rustls with ring): `calicoctl` (etcd
//! v2, Felix's health), the Docker driver (dockerd's API on its unix socket) and the lab
//! (Felix's metrics inside a host's namespace) use it, and so can every other client: a
//! request, its answer, and errors that name the server and the reason.
//!
//! | module | owns |
//! | --- | --- |
//! | `endpoint` | [`Endpoint`]: a base URL (`http(s)://HOST:PORT/prefix`) parsed, the port filled in |
//! | `tls` | [`Tls`]: what https trusts (a CA file or the system's bundle) and the client certificate |
//! | `message` | [`Request`] and [`Response`] |
//! | `exchange` | one request on an open connection ([`send_on`]: a unix socket, a socket made in another namespace) |
//! | `client` | [`Client`]: requests over TCP, plain or TLS, with idle connections kept for reuse |
//! | `error` | [`HttpError`] |
//!
//! ```text
//! Client::send(endpoint, request) ─► idle connection? ─► exchange ─► Response
//!                                    └─ TCP (+ TLS) ────┘
//! send_on(stream, authority, request) ─► exchange ─► Response      (any AsyncRead + AsyncWrite)
//! unix::send(socket, request) ─► UnixStream ─► send_on
//! ```

mod client;
mod endpoint;
mod error;
mod exchange;
mod message;
mod tls;
pub mod unix;

pub use client::{Client, DEFAULT_TIMEOUT};
pub use endpoint::Endpoint;
pub use error::HttpError;
pub use exchange::send_on;
pub use message::{Request, Response};
pub use tls::{SYSTEM_CA_BUNDLE, Tls};
