//! Felix, the per-host agent: its configuration ([`config`]: precedence, validation, the
//! start-up report), its decisions ([`core`]: a synchronous state machine fed inputs, answering
//! effects as data: when to program the firewall ([`firewall`]), routes, encapsulation
//! ([`encap`]), statuses ([`status`]), reloads and restarts), and the loop that feeds it and
//! carries its effects out with etcd and the kernel ([`agent`]); health and metrics
//! ([`metrics`]), the firewall backend's choice ([`backend`]), `--dry-run` ([`dry_run`]).

pub mod agent;
pub mod backend;
pub mod config;
pub mod core;
pub mod dry_run;
pub mod encap;
pub mod firewall;
pub mod flowlogs;
pub mod logging;
pub mod metrics;
pub mod status;

pub use config::{Bootstrap, Config, ConfigError, Inputs, Source};
