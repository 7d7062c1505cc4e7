//! The plugin's HTTP side: every call is `POST /<Api>.<Call>` with a JSON body, answered with
//! the call's response or `{"Err": "..."}` (status 500, as libnetwork's plugin helpers answer
//! errors). Served on two unix sockets, unlinked when the server stops (dockerd retries a
//! stale socket's calls for ~15 s each): the plugin's name (network and IPAM driver) and the
//! IPAM driver's second name (`calico-ipam`, as Calico's upstream plugin was called).
//!
//! ```text
//! dockerd ──POST──► <name>.sock      ─┐
//!         ──POST──► <name>-ipam.sock ─┴► axum (one task per connection) ──► dispatch ──► Driver
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as CallPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixListener;

use crate::api::{self, CONTENT_TYPE, Empty, ErrorResponse};
use crate::driver::Driver;
use crate::error::DriverError;
use crate::{endpoint, pool};

/// The network driver's scope. Local: dockerd 20.10 refuses to create a network of a
/// global-scope driver unless it is a swarm manager ("This node is not a swarm manager"), and
/// nothing needs dockerd to share networks between hosts: every host's driver shares one etcd,
/// so networks of the same name on several hosts share one profile, one pool and one policy
/// (docs/docker.md).
const SCOPE: &str = "local";

/// What a socket's name answers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The plugin's name: `--driver` and `--ipam-driver`.
    Both,
    /// The IPAM driver's second name: `--ipam-driver` only.
    Ipam,
}

impl Role {
    fn implements(self) -> Vec<&'static str> {
        match self {
            Role::Both => vec!["NetworkDriver", "IpamDriver"],
            Role::Ipam => vec!["IpamDriver"],
        }
    }
}

/// The router of the plugin's name over a driver.
pub fn router(driver: Arc<Driver>) -> Router {
    router_for(driver, Role::Both)
}

/// The router of one of the names.
pub fn router_for(driver: Arc<Driver>, role: Role) -> Router {
    Router::new()
        .route("/{call}", post(handle))
        .with_state((driver, role))
}

/// Where the two names are served.
#[derive(Debug, Clone)]
pub struct Sockets {
    pub network: PathBuf,
    pub ipam: PathBuf,
}

/// Serves both names until `shutdown` completes, then removes the sockets.
pub async fn serve(
    driver: Arc<Driver>,
    sockets: &Sockets,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let _unlink = [
        Unlink(sockets.network.clone()),
        Unlink(sockets.ipam.clone()),
    ];
    let network = UnixListener::bind(&sockets.network)?;
    let ipam = UnixListener::bind(&sockets.ipam)?;
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let stop = async move {
        tokio::select! {
            _ = shutdown => {}
            _ = STOP.notified() => {}
        }
        let _ = stopping.send(true);
        Ok(())
    };
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let serve = |listener, role| {
        axum::serve(listener, router_for(driver.clone(), role))
            .with_graceful_shutdown(until_stopped(stopped.clone()))
            .into_future()
    };
    tokio::try_join!(stop, serve(network, Role::Both), serve(ipam, Role::Ipam))?;
    Ok(())
}

/// Removes the socket file when dropped.
#[derive(Debug)]
struct Unlink(PathBuf);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn handle(
    State((driver, role)): State<(Arc<Driver>, Role)>,
    CallPath(call): CallPath<String>,
    body: Bytes,
) -> Response {
    tracing::debug!(call, ?role, body = %String::from_utf8_lossy(&body), "request");
    match dispatch(&driver, role, &call, &body).await {
        Ok(json) => {
            tracing::debug!(call, answer = %json, "answer");
            stop_if_asked(&call);
            reply(StatusCode::OK, json)
        }
        Err(e) => {
            e.log(&call);
            let json = serde_json::to_string(&ErrorResponse { err: e.to_string() })
                .unwrap_or_else(|_| "{}".to_owned());
            reply(StatusCode::INTERNAL_SERVER_ERROR, json)
        }
    }
}

/// The variable naming a call after whose answer the driver stops as on SIGTERM (the socket
/// unlinked, idle connections closed): for tests of what a restarted driver finishes.
pub const STOP_AFTER: &str = "CALICO_LIBNETWORK_STOP_AFTER";

/// Wakes [`serve`]'s shutdown when [`STOP_AFTER`] names the call just answered.
static STOP: tokio::sync::Notify = tokio::sync::Notify::const_new();

fn stop_if_asked(call: &str) {
    static AFTER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let after = AFTER.get_or_init(|| std::env::var(STOP_AFTER).ok());
    if after.as_deref() == Some(call) {
        tracing::warn!(call, "{STOP_AFTER}: stopping");
        STOP.notify_one();
    }
}

/// Every answer closes its connection: dockerd then opens a new one per call and never sends
/// a call on a kept-alive connection that a stopping driver is closing (its HTTP client retries
/// such a call on a new connection without the body, which no driver can answer).
fn reply(status: StatusCode, json: String) -> Response {
    let headers = [
        (header::CONTENT_TYPE, CONTENT_TYPE),
        (header::CONNECTION, "close"),
    ];
    (status, headers, json).into_response()
}

/// Parses a request body as `T`, naming the field that does not fit.
pub fn parse<T: DeserializeOwned>(call: &str, body: &[u8]) -> Result<T, DriverError> {
    if body.is_empty() {
        // dockerd's plugin client re-sends a call whose first attempt broke off (a driver
        // that died mid-call) with the body the first attempt drained: nothing says which
        // endpoint is meant. dockerd then undoes the operation; the user runs it again.
        return Err(DriverError::Malformed {
            call: call.to_owned(),
            path: ".".to_owned(),
            reason: "empty body (dockerd re-sent a call that broke off when a driver died \
                     mid-call): run the docker command again"
                .to_owned(),
        });
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| DriverError::Malformed {
        call: call.to_owned(),
        path: e.path().to_string(),
        reason: e.inner().to_string(),
    })
}

fn json(value: impl Serialize) -> Result<String, DriverError> {
    Ok(serde_json::to_string(&value).expect("responses serialize"))
}

async fn dispatch(
    driver: &Driver,
    role: Role,
    call: &str,
    body: &[u8],
) -> Result<String, DriverError> {
    match call {
        "Plugin.Activate" => json(api::ActivateResponse {
            implements: role.implements(),
        }),
        call if role == Role::Ipam && call.starts_with("NetworkDriver.") => {
            Err(DriverError::UnknownCall {
                call: format!("{call} (this socket serves only the IPAM driver's second name)"),
            })
        }
        "NetworkDriver.GetCapabilities" => json(api::NetworkCapabilities {
            scope: SCOPE,
            connectivity_scope: SCOPE,
        }),
        "IpamDriver.GetCapabilities" => json(api::IpamCapabilities {
            requires_mac_address: false,
        }),
        "IpamDriver.GetDefaultAddressSpaces" => json(api::AddressSpaces {
            local_default_address_space: pool::LOCAL_SPACE,
            global_default_address_space: pool::GLOBAL_SPACE,
        }),
        "NetworkDriver.DiscoverNew"
        | "NetworkDriver.DiscoverDelete"
        | "NetworkDriver.ProgramExternalConnectivity"
        | "NetworkDriver.RevokeExternalConnectivity" => json(Empty {}),
        call if call.starts_with("NetworkDriver.") => network_call(driver, call, body).await,
        call if call.starts_with("IpamDriver.") => ipam_call(driver, call, body).await,
        other => Err(DriverError::UnknownCall {
            call: other.to_owned(),
        }),
    }
}

async fn network_call(driver: &Driver, call: &str, body: &[u8]) -> Result<String, DriverError> {
    match call {
        "NetworkDriver.CreateNetwork" => {
            let request: api::CreateNetworkRequest = parse(call, body)?;
            endpoint::check_network(&request, &driver.pools().await?)?;
            json(Empty {})
        }
        "NetworkDriver.DeleteNetwork" => {
            let request: api::DeleteNetworkRequest = parse(call, body)?;
            driver.delete_network(&request.network_id);
            json(Empty {})
        }
        "NetworkDriver.CreateEndpoint" => {
            let request: api::CreateEndpointRequest = parse(call, body)?;
            let spec = endpoint::EndpointSpec::parse(&request)?;
            driver
                .create_endpoint(&request.network_id, &request.endpoint_id, spec)
                .await?;
            // Never echo the address: libnetwork refuses a driver that "modified" it.
            json(Empty {})
        }
        "NetworkDriver.EndpointOperInfo" => {
            // dockerd asks once `Join` has returned and the interface is in the sandbox: a
            // second network's routing is done by the time `docker network connect` returns.
            let request: api::EndpointRequest = parse(call, body)?;
            driver.standbys.wait(&request.endpoint_id).await;
            json(api::EndpointInfoResponse::default())
        }
        "NetworkDriver.Join" => {
            let request: api::JoinRequest = parse(call, body)?;
            let joined = driver
                .join(&request.endpoint_id, &request.sandbox_key)
                .await?;
            json(endpoint::join_response(
                &joined.veth.temp,
                joined.routes,
                joined.v6_gateway,
            ))
        }
        "NetworkDriver.Leave" | "NetworkDriver.DeleteEndpoint" => {
            let request: api::EndpointRequest = parse(call, body)?;
            let forget = call == "NetworkDriver.DeleteEndpoint";
            driver.remove_endpoint(&request.endpoint_id, forget).await?;
            json(Empty {})
        }
        other => Err(DriverError::UnknownCall {
            call: other.to_owned(),
        }),
    }
}

async fn ipam_call(driver: &Driver, call: &str, body: &[u8]) -> Result<String, DriverError> {
    match call {
        "IpamDriver.RequestPool" => {
            let request: api::RequestPoolRequest = parse(call, body)?;
            json(pool::request_pool(&request, &driver.pools().await?)?)
        }
        "IpamDriver.ReleasePool" => {
            let request: api::ReleasePoolRequest = parse(call, body)?;
            pool::PoolId::parse(&request.pool_id)?;
            json(Empty {})
        }
        "IpamDriver.RequestAddress" => {
            let request: api::RequestAddressRequest = parse(call, body)?;
            let wanted = pool::address_wanted(&request)?;
            let address = driver.request_address(wanted).await?;
            json(api::RequestAddressResponse {
                address,
                data: Default::default(),
            })
        }
        "IpamDriver.ReleaseAddress" => {
            let request: api::ReleaseAddressRequest = parse(call, body)?;
            let pool = pool::PoolId::parse(&request.pool_id)?;
            driver.release_address(pool, &request.address).await?;
            json(Empty {})
        }
        other => Err(DriverError::UnknownCall {
            call: other.to_owned(),
        }),
    }
}
