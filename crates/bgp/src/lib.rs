//! BGP for Calico: the cluster's BGP configuration from the datastore ([`BgpConfig`]) and the
//! BIRD 2 configuration of one host rendered from it ([`render`]).
//!
//! | module | owns |
//! | --- | --- |
//! | `config` | AS numbers, mesh, peers, registered nodes, pools and blocks, from datastore changes |
//! | `render` | the BIRD configuration: filters, kernel and static protocols, one session per peer |
//! | `status` | BIRD's `show protocols all`, read back for `calicoctl node status` |

pub mod config;
pub mod render;
pub mod status;

pub use config::{BgpConfig, DEFAULT_AS, Node, datastore_prefixes};
pub use render::{Peer, PeerKind, RenderError, peers, render};
pub use status::{Session, parse_protocols};
