//! The narrow seams between the dataplane and the kernel's firewall: what a caller needs of
//! iptables and of IP sets, as traits. [`Iptables`] and [`Ipset`] are the real implementations;
//! [`crate::fake::FakeKernel`] is the in-memory one that unit tests use without root.

use std::fmt::Debug;

use crate::command::CommandError;
use crate::ipset::Ipset;
use crate::iptables::{Family, Iptables};

/// The firewall tables of one network namespace (`iptables-restore --noflush` semantics).
pub trait FirewallTables: Debug + Send {
    /// Applies restore input; each table commits atomically at its `COMMIT`.
    fn restore(&self, family: Family, input: &str) -> Result<(), CommandError>;

    /// The names of the chains of `table` that start with `prefix`.
    fn chains(
        &self,
        family: Family,
        table: &str,
        prefix: &str,
    ) -> Result<Vec<String>, CommandError>;

    /// One table as `iptables-save -t <table>` prints it (the kernel's normal form of each rule).
    fn save(&self, family: Family, table: &str) -> Result<String, CommandError>;

    /// Makes sure `chain` of `table` starts by jumping to `target`, once (a jump missing is
    /// inserted, one other rules pushed down is moved back to the top, after it the other
    /// rules in their order); returns whether it changed the chain.
    fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError>;

    /// Another handle on the same tables, for a reader on another thread.
    fn handle(&self) -> Box<dyn FirewallTables>;
}

/// The IP sets of one network namespace (`ipset restore -exist` semantics).
pub trait IpSets: Debug + Send {
    /// Applies restore input, line by line (what precedes a failing line stays applied).
    fn restore(&self, input: &str) -> Result<(), CommandError>;

    /// The names of every set.
    fn names(&self) -> Result<Vec<String>, CommandError>;

    /// Every set and its members as `ipset save` prints them (`create …` and `add <set> <member>`).
    fn save(&self) -> Result<String, CommandError>;

    /// Another handle on the same sets, for a reader on another thread.
    fn handle(&self) -> Box<dyn IpSets>;
}

impl FirewallTables for Iptables {
    fn restore(&self, family: Family, input: &str) -> Result<(), CommandError> {
        Iptables::restore(self, family, input)
    }

    fn chains(
        &self,
        family: Family,
        table: &str,
        prefix: &str,
    ) -> Result<Vec<String>, CommandError> {
        Iptables::chains(self, family, table, prefix)
    }

    fn save(&self, family: Family, table: &str) -> Result<String, CommandError> {
        Iptables::save(self, family, table)
    }

    fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError> {
        Iptables::ensure_jump(self, family, table, chain, target)
    }

    fn handle(&self) -> Box<dyn FirewallTables> {
        Box::new(self.clone())
    }
}

impl IpSets for Ipset {
    fn restore(&self, input: &str) -> Result<(), CommandError> {
        Ipset::restore(self, input)
    }

    fn names(&self) -> Result<Vec<String>, CommandError> {
        Ipset::names(self)
    }

    fn save(&self) -> Result<String, CommandError> {
        Ipset::save(self)
    }

    fn handle(&self) -> Box<dyn IpSets> {
        Box::new(self.clone())
    }
}
