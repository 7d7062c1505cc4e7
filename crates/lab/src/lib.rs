//! `calico-lab`: a Calico cluster on one machine. A fabric namespace with a bridge and etcd,
//! host namespaces running `calico-felix`, workloads plugged into hosts by the `calico` CNI
//! plugin, and tools to see what gets through. Used by the demo, the end-to-end tests
//! and the system benchmarks; its command line is documented in `docs/lab.md`.

//!
//! Where things live:
//! - [`cluster`]: bringing a lab up and down (the order of things, and waiting until it settled);
//! - [`topology`]: the fabric, the host subnets, the hosts' namespaces and addresses;
//! - [`processes`]: spawning, finding, stopping and restarting etcd, the relay, Felix,
//!   calico-node and echo servers;
//! - [`members`]: the etcd members (one in the fabric, or a cluster): their flags, starting,
//!   stopping and restarting one, which one leads;
//! - [`etcd`]: connecting to the lab's etcd and what `up` writes into it first;
//! - [`workloads`]: plugging workloads in and out through CNI, their profiles and labels;
//! - [`cni`]: calling the `calico` CNI plugin as a runtime does;
//! - [`openstack`]: `up --openstack`: MariaDB, neutron-server, calico-neutron, the hosts' DHCP
//!   agents and the network for VMs; [`openstack::vm`]: `vm boot` / `vm delete` (a port through
//!   Neutron, a namespace behind a TAP, its address by DHCP);
//! - [`ready`]: waiting (by polling) until Felix, BGP, routes and servers are there;
//! - [`check`], [`probe`]: what gets through; [`demo`]: the demo walk-through;
//! - [`rng`]: the seedable generator of random plans and test inputs;
//! - [`soak`]: chaos, measured (kills, partitions, etcd member restarts, churn; then checks);
//! - [`relay`], [`supervise`]: the hidden commands the lab's processes run as;
//! - [`sh`]: running tools, in a namespace or not (the one place that does);
//! - [`logs`]: log tails for errors; [`state`]: the lab's state file.

pub mod check;
pub mod cluster;
pub mod cni;
pub mod demo;
pub mod etcd;
pub mod flows;
pub mod logs;
pub mod members;
pub mod openstack;
pub mod poll;
pub mod probe;
pub mod processes;
pub mod ready;
pub mod relay;
pub mod rng;
pub mod sh;
pub mod soak;
pub mod state;
pub mod supervise;
pub mod topology;
pub mod workloads;

pub use cluster::UpOptions;
pub use probe::{Outcome, Target};
pub use state::Lab;
pub use workloads::WorkloadSpec;
