//! Calico for OpenStack (seeds 000 and 002): Neutron's VM ports become workload endpoints and
//! its security groups profiles in etcd, kept equal to Neutron by `calico-neutron`. The Neutron
//! side is the small ML2 mechanism driver in `openstack/networking_calico_rs` (Python), which
//! only binds ports as TAP interfaces; all logic is here. On each compute host,
//! `calico-dhcp-agent` serves the host's VMs by DHCP through dnsmasq (`dhcp`).
//!
//! | module | owns |
//! | --- | --- |
//! | `neutron` | Neutron's REST API: serde types of networks, subnets, ports, groups, rules; [`neutron::Snapshot`] and [`neutron::Revisions`] |
//! | `client` | the HTTP client of Neutron's API (noauth), timeouts, the revisions and snapshot reads |
//! | `translate` | pure: port → endpoint, security group → profile, and what cannot be expressed |
//! | `rule` | pure: security group rule → rule (protocols, ports, ICMP, remote prefix or group, IP version) |
//! | `desired` | pure: a snapshot → the owned etcd keys and values |
//! | `sync` | ownership, the plan (puts, deletes in dependency order), its executor, the poll and resync loop |
//! | `config` | the command line of `calico-neutron` |
//! | `daemon` | what both binaries' `main` share: logging, the runtime, the exit code |
//! | `server` | a noauth neutron-server and its MariaDB: the rendered configuration and the commands (tests, `calico-lab up --openstack`) |
//! | `dhcp` | `calico-dhcp-agent`: this host's endpoints + Neutron's subnets → one dnsmasq (its own module map) |
//! | `error` | [`NeutronError`], [`TranslateError`], [`SyncError`] and their log levels |

pub mod client;
pub mod config;
pub mod daemon;
pub mod desired;
pub mod dhcp;
pub mod error;
pub mod neutron;
pub mod rule;
pub mod server;
pub mod sync;
pub mod translate;

pub use config::Args;
pub use error::{NeutronError, SyncError, TranslateError};
