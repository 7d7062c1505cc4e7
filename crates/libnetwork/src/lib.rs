//! Calico networks for `docker run`: a libnetwork remote plugin that is both Docker's network
//! driver and its IPAM driver (seed 003, the calico-containers data model; issue 14).
//!
//! | module | owns |
//! | --- | --- |
//! | `api` | the wire types: one request and one response type per plugin call |
//! | `server` | the HTTP side on a unix socket: parsing, dispatch, `{"Err": ...}` answers |
//! | `config` | the command line (`--plugin-name`, `--socket`, `--hostname`, `--etcd-*`) |
//! | `pool` | pure: `RequestPool` → a Calico pool and its pool id, what `RequestAddress` asks |
//! | `address` | `RequestAddress` / `ReleaseAddress` on Calico IPAM (affine blocks, handles) |
//! | `endpoint` | pure: network and endpoint checks, the endpoint JSON, the profile, `Join`'s answer |
//! | `driver` | the network calls' effects: profile, veth, endpoint key, undo on failure |
//! | `pending` | pure: the record that carries an endpoint from `CreateEndpoint` to `Join` in etcd |
//! | `reconcile` | collects what crashes leave: endpoints whose container went while the driver was down (key, veth, addresses), leaked addresses |
//! | `plumb` | the veth pair in dockerd's namespace, through `calico_plumbing`'s plan (the CNI plugin's) |
//! | `standby` | a second network's source routing inside the sandbox, once dockerd has moved the interface in |
//! | `logging` | `CALICO_LIBNETWORK_LOG`: a bare level is our crates' level |
//! | `docker` | dockerd's API, asked for a network's name |
//! | `names` | veth names, the endpoint key's workload segment, handles |
//! | `error` | [`DriverError`], the text of every `Err` |

mod address;
pub mod api;
pub mod config;
pub mod docker;
pub mod driver;
pub mod endpoint;
pub mod error;
pub mod logging;
pub mod names;
pub mod pending;
pub mod plumb;
pub mod pool;
pub mod reconcile;
pub mod server;
pub mod standby;

pub use config::Args;
pub use driver::Driver;
pub use error::DriverError;
