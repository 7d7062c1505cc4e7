//! Calico's firewall semantics, decided once for every backend: from the calculator's
//! [`DesiredState`](calico_calc::DesiredState) to a typed model of what the firewall does
//! (`model.rs`), which each backend encodes in its own syntax (`crate::iptables`, `crate::nft`).
//!
//! - `config.rs`: [`RenderConfig`](config::RenderConfig), Felix's settings that shape the
//!   firewall (marks, prefixes, drop action, failsafe ports, metadata, flow logs).
//! - `model.rs`: the model's types: the frame, the dispatch by interface, endpoint programs
//!   (anti-spoofing, host preamble, tiers, profiles), policy and profile rules, raw.
//! - `build.rs`: the model from the desired state, pure, by owner.

pub mod build;
pub mod config;
pub mod model;
