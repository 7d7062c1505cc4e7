//! The nf_tables backend: the desired state as one `inet calico` table, programmed over
//! netlink in transactions that name only what changed.
//!
//! - `names.rs`: what every chain, set and map is called (they say what they are for).
//! - `rules.rs`: one Calico rule as nf_tables rules.
//! - `tiers.rs`: a tier's policies dispatched by protocol and port, so that a new connection
//!   visits only the policies that could match it.
//! - `table.rs`: a chain and a set as rendered, the pieces `tiers.rs` and `parts.rs` build.
//! - `frame.rs`: the fixed frame: base chains, dispatch chains and maps, host services.
//! - `parts.rs`: what each owner (the frame, a set, an endpoint, a policy…) puts in the table.
//! - `ruleset.rs`: the whole table, rendered incrementally by owner.
//! - `plan.rs`: a change, or a read of the kernel, to one ordered transaction.
//! - `driver.rs`: [`NftDataplane`], the same sync / apply / drift repair as the iptables driver.

mod driver;
mod frame;
pub mod names;
mod parts;
pub mod plan;
mod rules;
mod ruleset;
mod table;
pub mod tiers;

pub use driver::{NftDataplane, NftReader, NftSnapshot, calico_table};
pub use ruleset::{Delta, NftRenderer, Ruleset};
pub use table::{NftChain, NftSet};
