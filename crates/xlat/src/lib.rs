//! Address spaces: workloads in private IPv4 address spaces, translated statelessly (RFC 7915,
//! SIIT) by their compute host into IPv6 `<prefix>:<ID>::W.X.Y.Z` and back, so that overlapping
//! IPv4 ranges cross an IPv6-only fabric without meeting. See docs/address-spaces.md.
//!
//! - `mapping`: the address mapping (pure), prefix room for IDs, checksum delta.
//! - `object`: the tc eBPF translator (bpf/xlat.bpf.c) and its per-space copy.
//! - `plan`: the kernel steps that attach a workload interface to its space, as data.
//! - `exec`: runs a plan in a network namespace.
//! - `error`: the errors of each layer.

pub mod error;
pub mod exec;
pub mod mapping;
pub mod object;
pub mod plan;

pub use error::{ExecError, MappingError, ObjectError};
pub use mapping::{Prefix, Space};
pub use plan::{Step, Workload};
