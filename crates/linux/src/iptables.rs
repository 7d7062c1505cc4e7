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

    /// Makes sure `chain` of `table` starts by jumping to `target`, once: a jump missing is
    /// inserted at the top; one that other software's rules pushed down (`iptables -I`, as
    /// Docker does) is moved back to the top, with those rules kept after it. Returns whether
    /// it changed the chain. The move is one `iptables-restore --noflush` transaction: the
    /// chain is never without the jump.
    pub fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError> {
        let listed = self
            .netns
            .run(&family.tool(""), &["-w", "-t", table, "-S", chain], "")?;
        let rules: Vec<&str> = listed
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("-A {chain} ")))
            .collect();
        let Some(input) = jump_to_top(table, chain, target, &rules) else {
            return Ok(false);
        };
        self.restore(family, &input)?;
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

/// Restore input that leaves `chain` (now `rules`, as `iptables -S` prints them after
/// `-A <chain> `) with one jump to `target`, first; `None` when it already has that.
pub(crate) fn jump_to_top(
    table: &str,
    chain: &str,
    target: &str,
    rules: &[&str],
) -> Option<String> {
    let jump = format!("-j {target}");
    let copies = rules.iter().filter(|rule| **rule == jump).count();
    if copies == 1 && rules.first() == Some(&jump.as_str()) {
        return None;
    }
    let deletes = format!("-D {chain} {jump}\n").repeat(copies);
    Some(format!("*{table}\n{deletes}-I {chain} 1 {jump}\nCOMMIT\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_first_and_alone_is_left_as_it_is() {
        let rules = ["-j cali-FORWARD", "-j DOCKER"];
        assert_eq!(
            jump_to_top("filter", "FORWARD", "cali-FORWARD", &rules),
            None
        );
    }

    #[test]
    fn a_jump_missing_is_inserted_at_the_top() {
        let input = jump_to_top("filter", "FORWARD", "cali-FORWARD", &["-j DOCKER"]);
        let expected = "*filter\n-I FORWARD 1 -j cali-FORWARD\nCOMMIT\n";
        assert_eq!(input.as_deref(), Some(expected));
    }

    #[test]
    fn a_jump_pushed_down_or_doubled_is_moved_back_to_the_top() {
        let foreign = "-d 10.65.0.2/32 -p tcp -m tcp --dport 5432 -j ACCEPT";
        let input = jump_to_top(
            "filter",
            "FORWARD",
            "cali-FORWARD",
            &[foreign, "-j cali-FORWARD"],
        );
        let expected =
            "*filter\n-D FORWARD -j cali-FORWARD\n-I FORWARD 1 -j cali-FORWARD\nCOMMIT\n";
        assert_eq!(input.as_deref(), Some(expected));
        let doubled = ["-j cali-FORWARD", "-j cali-FORWARD"];
        let input = jump_to_top("filter", "FORWARD", "cali-FORWARD", &doubled).unwrap();
        assert_eq!(input.matches("-D FORWARD").count(), 2, "{input}");
    }
}
