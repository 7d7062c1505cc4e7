//! The only crate that talks to the kernel or runs kernel tools. Each tool runs in the network
//! namespace the process is in, or, when given one, inside a named namespace
//! (`ip netns exec <ns> …`), which is how tests and the lab drive a host.

mod command;
mod ipset;
mod iptables;

pub use command::{CommandError, Netns};
pub use ipset::Ipset;
pub use iptables::{Family, Iptables};
