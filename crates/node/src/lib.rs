//! `calico-node`: what runs on every host (seed 004's calico-node container). It registers the
//! host's BGP address, runs Felix, renders BIRD's configuration from etcd and runs BIRD, and
//! restarts Felix or BIRD when they die. See docs/bgp.md.
//!
//! | module | owns |
//! | --- | --- |
//! | `register` | the host's BGP addresses (given or detected) and AS number in etcd |
//! | `bird` | checking (`bird -p`), installing and reloading (`birdc configure`) BIRD's configuration |
//! | `agent` | the loop: watch, render, supervise |
//! | `vxlan` | the host's VXLAN tunnel endpoint record and its IPAM address |

pub mod agent;
pub mod bird;
pub mod register;
pub mod vxlan;
