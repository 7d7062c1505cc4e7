//! Calico for OpenStack (seeds 000 and 002): Neutron's VM ports become workload endpoints and
//! its security groups profiles in etcd, kept equal to Neutron by `calico-neutron`. The Neutron
//! side is the small ML2 mechanism driver in `openstack/networking_calico_rs` (Python), which
//! only binds ports as TAP interfaces; all logic is here. On each compute host,
//! `calico-dhcp-agent` serves the host's VMs by DHCP through dnsmasq (`dhcp`). Both binaries
//! are the `calico-neutron` crate (`crates/neutron`): their `main`s over this library, which
//! `calico-lab up --openstack` uses too.
//!
//! | module | owns |
//! | --- | --- |
//! | `neutron` | Neutron's REST API: serde types of networks, subnets, ports, groups, rules; [`neutron::Snapshot`] and [`neutron::Revisions`] |
//! | `http` | Keystone's and Neutron's HTTP on the workspace's client stack (`calico_http`): a CA file or the system's bundle |
//! | `credentials` | how to authenticate: `keystone` or `noauth`, the service user's settings from `OS_*` variables or an ini file, each with its source |
//! | `keystone` | the service user's token: issued, renewed before expiry, dropped on a 401; refused settings told apart |
//! | `client` | Neutron's API over `http` with the token: calls, paginated listings, the revisions and snapshot reads, one object by id |
//! | `translate` | pure: port → endpoint, security group → profile, and what cannot be expressed |
//! | `rule` | pure: security group rule → rule (protocols, ports, ICMP, remote prefix or group, IP version) |
//! | `desired` | pure: a snapshot (or one port, one group) → the owned etcd keys and values |
//! | `model` | pure: Neutron as last read, kept object by object; the keys one change touches |
//! | `notify` | the driver's change notifications: the unix datagram socket and their format |
//! | `sync` | ownership, the plan (puts, deletes in dependency order), its executor |
//! | `syncer` | the state between steps: a resync, a polling pass, the changed objects of notifications |
//! | `run` | the loop of each mode (notifications, polling), resyncs, failures |
//! | `config` | the command line of `calico-neutron` |
//! | `server` | a throwaway control plane: MariaDB, Keystone under uWSGI, neutron-server with the driver: configurations, commands, Keystone's provisioning (tests, `calico-lab up --openstack`) |
//! | `dhcp` | `calico-dhcp-agent`: this host's endpoints + Neutron's subnets → one dnsmasq (its own module map) |
//! | `error` | [`NeutronError`], [`TranslateError`], [`SyncError`] and their log levels |

pub mod client;
pub mod config;
pub mod credentials;
pub mod desired;
pub mod dhcp;
pub mod error;
pub mod http;
pub mod keystone;
pub mod model;
pub mod neutron;
pub mod notify;
pub mod rule;
pub mod run;
pub mod server;
pub mod sync;
pub mod syncer;
pub mod translate;

pub use config::Args;
pub use error::{NeutronError, SyncError, TranslateError};
