//! `calico-lab`: a Calico cluster on one machine. A fabric namespace with a bridge and etcd,
//! host namespaces running `calico-felix`, workloads plugged into hosts by the `calico` CNI
//! plugin, and tools to see what gets through. Used by the demo, the end-to-end tests
//! and the system benchmarks; its command line is documented in `docs/lab.md`.

pub mod check;
pub mod cluster;
pub mod cni;
pub mod demo;
pub mod probe;
pub mod ready;
pub mod relay;
pub mod sh;
pub mod state;
pub mod supervise;

pub use cluster::{UpOptions, WorkloadSpec};
pub use probe::{Outcome, Target};
pub use state::Lab;
