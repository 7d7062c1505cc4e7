//! iptables through `iptables-restore --noflush` (atomic per table), `iptables-save` and, for the
//! one jump each kernel chain needs, `iptables -C` / `-I`.

use crate::command::{CommandError, Netns};

/// IPv4 (`iptables`, `net/ipv4` settings) or IPv6 (`ip6tables`, `net/ipv6`): the family a kernel
/// tool or setting works on.
///
/// A copy of `calico_model::IpVersion` on purpose: `linux` depends on none of the workspace's
/// crates (it is the kernel seam, usable without the data model), and the model knows nothing of
/// the kernel. The dataplane, which uses both, pairs them (`Family::V4` with `IpVersion::V4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn tool(self, suffix: &str) -> String {
        match self {
            Family::V4 => format!("iptables{suffix}"),
            Family::V6 => format!("ip6tables{suffix}"),
        }
    }
}

/// The iptables of one network namespace.
#[derive(Debug, Clone, Default)]
pub struct Iptables {
    netns: Netns,
}

impl Iptables {
    pub fn new(netns: Netns) -> Iptables {
        Iptables { netns }
    }

    /// Applies restore input without flushing what it does not mention. `-w` waits for the
    /// xtables lock instead of failing when another tool holds it.
    pub fn restore(&self, family: Family, input: &str) -> Result<(), CommandError> {
        if input.is_empty() {
            return Ok(());
        }
        let tool = family.tool("-restore");
        self.netns.run(&tool, &["--noflush", "-w"], input).map(drop)
    }

    /// The rules of one table as `iptables-save` prints them.
    pub fn save(&self, family: Family, table: &str) -> Result<String, CommandError> {
        self.netns.run(&family.tool("-save"), &["-t", table], "")
    }

    /// Makes sure `chain` of `table` starts by jumping to `target`; returns whether it had to
    /// insert the jump.
    pub fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError> {
        let tool = family.tool("");
        let exists = self
            .netns
            .run(&tool, &["-w", "-t", table, "-C", chain, "-j", target], "")
            .is_ok();
        if exists {
            return Ok(false);
        }
        self.netns.run(
            &tool,
            &["-w", "-t", table, "-I", chain, "1", "-j", target],
            "",
        )?;
        Ok(true)
    }

    /// The names of the chains of `table` that start with `prefix`.
    pub fn chains(
        &self,
        family: Family,
        table: &str,
        prefix: &str,
    ) -> Result<Vec<String>, CommandError> {
        let saved = self.save(family, table)?;
        Ok(saved
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| name.starts_with(prefix))
            .map(str::to_owned)
            .collect())
    }
}
