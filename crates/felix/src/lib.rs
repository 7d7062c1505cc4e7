//! Felix, the per-host agent. So far: its configuration (precedence, validation, the start-up
//! report); the agent loop that waits for `/calico/v1/Ready` and drives the calculator and the
//! dataplane follows.

pub mod config;

pub use config::{Bootstrap, Config, ConfigError, Inputs, Source};
