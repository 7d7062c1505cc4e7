//! Felix, the per-host agent: its configuration ([`config`]: precedence, validation, the
//! start-up report) and the agent loop ([`agent`]: wait for `/calico/v1/Ready`, datastore
//! updates into the calculator, changes into the dataplane, periodic repair, status).

pub mod agent;
pub mod backend;
pub mod config;
pub mod dry_run;
pub mod encap;
pub mod firewall;
pub mod logging;
pub mod metrics;
pub mod status;

pub use config::{Bootstrap, Config, ConfigError, Inputs, Source};
