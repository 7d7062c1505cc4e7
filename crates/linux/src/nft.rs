//! nf_tables over netlink: one table of the kernel's firewall, changed by transactions and read
//! back, without the `nft` tool.
//!
//! ```text
//!   dataplane (pure) ── Batch of Op ──► NfTables::apply ── one netlink batch ──► kernel
//!                    ◄─ TableSnapshot ── NfTables::read ◄─ dumps of chains, rules, sets ──┘
//! ```
//!
//! | file | what |
//! | --- | --- |
//! | `ast.rs` | the values: tables, chains, rules, sets, elements, operations |
//! | `display.rs` | those values in `nft` syntax; a batch as an `nft -f` script ([`Batch::script`]) |
//! | `forms.rs` | the one form a value is written in (a port list's match, a comment's cut, an address's family) the encoder, the text, the checks and the fake share |
//! | `check.rs` | what a batch must satisfy before it is sent (names, explicit dependencies, values, elements of the kind their set holds) |
//! | `elements.rs` | set elements: the kind of set each fits, and how the kernel treats them side by side |
//! | `wire.rs` | the netlink message format and the constants of `linux/netfilter/nf_tables.h` |
//! | `encode.rs`, `expr.rs` | a batch as one nf_tables transaction; a rule's expressions |
//! | `decode.rs` | the kernel's dumps back into values |
//! | `socket.rs` | the `NETLINK_NETFILTER` socket: a batch in one `sendmsg`, errors mapped to the operation that failed |
//! | `monitor.rs` | [`FirewallEvents`]: changes other processes make to nf_tables (iptables-nft's too), as they happen |
//! | `kernel.rs` | [`Nft`], the real [`NfTables`], and [`probe`] |
//! | `fake.rs` | [`crate::fake::FakeNft`]: the same trait in memory, refusing what the kernel refuses |
//!
//! Each rule carries a digest of itself in its user data (beside its comment), so a read-back
//! tells whether the kernel still holds exactly the rule that was written without decoding
//! every expression.
//!
//! The encoding of every expression is the one `nft` 1.0.6 builds from the same text (the
//! tests load both into two namespaces and compare `nft list` of each), so `nft list ruleset`
//! shows what Felix wrote in the words it was written in. Names must be `nft` identifiers
//! (checked); for the `nft -f` text to load they must also not be `nft` keywords (`fwd`, `ip`,
//! …), which the kernel does not care about and nothing checks.

mod ast;
mod check;
mod decode;
mod display;
mod elements;
mod encode;
mod expr;
pub(crate) mod fake;
mod forms;
mod kernel;
mod monitor;
mod socket;
mod wire;

pub use ast::*;
pub use display::Script;
pub(crate) use display::summary;
pub use kernel::{Nft, probe};
pub use monitor::{ChangeKind, FirewallEvent, FirewallEvents};
pub use wire::{COMMENT_MAX, LOG_PREFIX_MAX, NAME_MAX};

/// The digest of a rule as written: 64 bits of FNV-1a over its `nft` text. Stable across
/// processes and versions of this crate as long as the text of the rule is.
pub fn rule_digest(rule: &Rule) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(rule.to_string().as_bytes());
    hasher.finish()
}

/// A rule as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSnapshot {
    /// The kernel's handle of the rule.
    pub handle: u64,
    /// The digest written with the rule ([`rule_digest`]); `None` for a rule someone else
    /// wrote (or rewrote) without it.
    pub digest: Option<u64>,
    pub comment: Option<String>,
}

/// A chain as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSnapshot {
    pub spec: ChainSpec,
    pub rules: Vec<RuleSnapshot>,
}

/// A set or map as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetSnapshot {
    pub spec: SetSpec,
    pub elements: std::collections::BTreeSet<Element>,
}

/// One table as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableSnapshot {
    pub chains: std::collections::BTreeMap<String, ChainSnapshot>,
    pub sets: std::collections::BTreeMap<String, SetSnapshot>,
}

/// Why a transaction or a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NftError {
    /// The kernel (or the fake) refused operation `index` of the batch; nothing of the batch
    /// was applied.
    #[error("nf_tables refused operation {index} ({op}): {reason}")]
    Refused {
        index: usize,
        op: String,
        reason: String,
    },
    /// The batch could not be encoded (a rule breaks the rules of `ast.rs`): nothing was sent.
    #[error("cannot encode operation {index} ({op}): {reason}")]
    Invalid {
        index: usize,
        op: String,
        reason: String,
    },
    /// The netlink socket failed (or nf_tables is missing from the kernel).
    #[error("nf_tables netlink in {netns}: {reason}")]
    Socket { netns: String, reason: String },
    /// The table holds something this crate does not write (another program's chain type,
    /// set kind or verdict), so it cannot be read back as these values.
    #[error("cannot read back table {table}: {what} is not something this crate writes: {reason}")]
    Unreadable {
        table: String,
        what: String,
        reason: String,
    },
}

/// One table of one network namespace's nf_tables.
pub trait NfTables: std::fmt::Debug + Send {
    /// Applies `batch` as one transaction: all of it or nothing.
    fn apply(&self, batch: &Batch) -> Result<(), NftError>;

    /// The table as the kernel holds it, or `None` when there is no such table.
    fn read(&self) -> Result<Option<TableSnapshot>, NftError>;

    /// The table this handle works on.
    fn table(&self) -> &Table;

    /// Another handle on the same table, for a reader on another thread.
    fn handle(&self) -> Box<dyn NfTables>;
}
