//! `calico-dhcp-agent`: one per compute host, it serves the host's VMs their fixed addresses,
//! gateway, DNS servers and host routes through one dnsmasq (seed 002, "DHCP").
//!
//! ```text
//!  etcd watch of /calico/v1/host/<host>/workload/openstack/ ──► Endpoint put/delete ─┐
//!  Neutron GET /v2.0/subnets and this host's ports' names      ──► Subnets, names ──┤
//!    every poll interval (sooner when an address is in no known                     │
//!    subnet; backoff while unreachable)                                              ▼
//!                                                           Agent (endpoints, subnets)
//!                                                                 │ plan → render (pure)
//!                                                                 ▼
//!  per-network interfaces (ip) ─► hosts/opts/names files ─► dnsmasq: SIGHUP, or restart
//!                                                       when the ranges or the TAPs change
//! ```
//!
//! One task runs the loop ([`agent::run`]); the etcd watch runs on the datastore's own task and
//! the dnsmasq child is awaited in the same `select!`, so dnsmasq killed is restarted (with
//! backoff) and stopped with the agent.
//!
//! | module | owns |
//! | --- | --- |
//! | `subnet` | pure: Neutron's subnet → what dnsmasq can serve of it, or why not |
//! | `names` | pure: the ports' `dns_assignment` → host names, domains and address records |
//! | `plan` | pure: endpoints + subnets + names → served subnets and host entries, and what is left out |
//! | `render` | pure: plan → dnsmasq's arguments, hosts file, options file, interface addresses |
//! | `interface` | the interfaces holding the gateway addresses (a bridge without ports per network), via `ip` |
//! | `dnsmasq` | the dnsmasq child: files written, SIGHUP, restart, stop |
//! | `agent` | the state machine and its loop |
//! | `config` | the command line |

pub mod agent;
pub mod config;
pub mod dnsmasq;
pub mod interface;
pub mod names;
pub mod plan;
pub mod render;
pub mod subnet;

/// Something the agent cannot serve (an endpoint, one of its addresses, a subnet), named by id
/// with the reason. Logged and left out; the rest is served.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{kind} {id}: {reason}")]
pub struct NotServed {
    /// `port`, `subnet` or `key`.
    pub kind: &'static str,
    pub id: String,
    pub reason: String,
}

impl NotServed {
    pub fn new(kind: &'static str, id: &str, reason: impl Into<String>) -> Self {
        NotServed {
            kind,
            id: id.to_owned(),
            reason: reason.into(),
        }
    }

    pub fn port(id: &str, reason: impl Into<String>) -> Self {
        Self::new("port", id, reason)
    }

    pub fn subnet(id: &str, reason: impl Into<String>) -> Self {
        Self::new("subnet", id, reason)
    }

    /// A warning naming the object: an operator can mend it in Neutron.
    pub fn log(&self) {
        tracing::warn!(kind = self.kind, id = %self.id, "{self}; not served by DHCP");
    }
}

/// The host side failed: a command, a file, the dnsmasq process.
#[derive(Debug, thiserror::Error)]
pub enum DhcpError {
    #[error("{command}: {reason}")]
    Command { command: String, reason: String },
    #[error("{path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("dnsmasq {binary}: {reason}")]
    Dnsmasq { binary: String, reason: String },
}
