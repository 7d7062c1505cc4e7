//! An in-memory kernel firewall for unit tests that run without root: iptables tables and IP
//! sets behind the [`FirewallTables`] and [`IpSets`] seams, with the kernel's rules that catch
//! ordering mistakes — a rule may only jump to a chain that exists and match a set that exists,
//! a chain is deleted only when empty and unused, and a set is destroyed only when no rule
//! uses it. Each table commits atomically at `COMMIT`, as `iptables-restore` does; `ipset
//! restore` applies line by line.
//!
//! A [`FakeKernel`] is a handle: clones share one kernel, so a test keeps one clone to look at
//! and change (drift, failures) while the code under test owns another.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::command::CommandError;
use crate::iptables::Family;
use crate::seams::{FirewallTables, IpSets};

pub use crate::nft::fake::FakeNft;

/// One table: chain name → rules, each rule as written after `-A <chain> `.
type Table = BTreeMap<String, Vec<String>>;

/// The kernel's firewall state, shared by the clones of a [`FakeKernel`].
#[derive(Debug, Clone, Default)]
pub struct FakeKernel {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    tables: BTreeMap<(Family, String), Table>,
    sets: BTreeMap<String, BTreeSet<String>>,
    /// Program → how many of its next runs fail.
    failures: BTreeMap<String, usize>,
    /// Every restore that ran, `(program, input)`, failed ones included.
    log: Vec<(String, String)>,
}

fn builtin_chains(table: &str) -> &'static [&'static str] {
    match table {
        "filter" => &["INPUT", "FORWARD", "OUTPUT"],
        "nat" => &["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
        "raw" => &["PREROUTING", "OUTPUT"],
        "mangle" => &["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
        _ => &[],
    }
}

fn restore_program(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-restore",
        Family::V6 => "ip6tables-restore",
    }
}

impl FakeKernel {
    pub fn new() -> FakeKernel {
        FakeKernel::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the next run of `program` (`iptables-restore`, `ip6tables-restore`, `ipset`,
    /// `iptables`, `ip6tables`, `iptables-save`, `ip6tables-save`) fail, changing nothing.
    pub fn fail_next(&self, program: &str) {
        *self.lock().failures.entry(program.to_owned()).or_default() += 1;
    }

    /// The rules of one chain, or `None` when the chain does not exist.
    pub fn rules(&self, family: Family, table: &str, chain: &str) -> Option<Vec<String>> {
        let mut state = self.lock();
        state.table(family, table).get(chain).cloned()
    }

    /// The members of one set, or `None` when the set does not exist.
    pub fn set(&self, name: &str) -> Option<BTreeSet<String>> {
        self.lock().sets.get(name).cloned()
    }

    /// Everything the kernel holds, one line each, in a stable order: `<family> <table>
    /// <chain>: <rule>` (a `:<chain>` line for each chain, rules or not) and
    /// `set <name>: <members>`. Two kernels that hold the same have the same dump.
    pub fn dump(&self) -> String {
        let state = self.lock();
        let mut out = String::new();
        for ((family, table), chains) in &state.tables {
            for (chain, rules) in chains {
                out.push_str(&format!("{family:?} {table} :{chain}\n"));
                for rule in rules {
                    out.push_str(&format!("{family:?} {table} {chain}: {rule}\n"));
                }
            }
        }
        for (name, members) in &state.sets {
            let members: Vec<&str> = members.iter().map(String::as_str).collect();
            out.push_str(&format!("set {name}: {}\n", members.join(" ")));
        }
        out
    }

    /// Every restore run so far as `(program, input)`, in order.
    pub fn log(&self) -> Vec<(String, String)> {
        self.lock().log.clone()
    }

    /// Forgets the log (to look only at what comes next).
    pub fn clear_log(&self) {
        self.lock().log.clear();
    }
}

impl State {
    fn table(&mut self, family: Family, table: &str) -> &mut Table {
        self.tables
            .entry((family, table.to_owned()))
            .or_insert_with(|| {
                builtin_chains(table)
                    .iter()
                    .map(|c| ((*c).to_owned(), Vec::new()))
                    .collect()
            })
    }

    /// Fails the run when a failure was asked for `program`.
    fn injected_failure(&mut self, program: &str, args: &str) -> Result<(), CommandError> {
        match self.failures.get_mut(program) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Err(CommandError {
                    command: format!("{program} {args}"),
                    reason: "exit status: 1: failure injected by the test".to_owned(),
                })
            }
            _ => Ok(()),
        }
    }

    fn set_in_use(&self, name: &str) -> bool {
        self.tables
            .values()
            .flat_map(|t| t.values())
            .flatten()
            .any(|rule| {
                rule.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w[0] == "--match-set" && w[1] == name)
            })
    }

    fn iptables_restore(&mut self, family: Family, input: &str) -> Result<(), String> {
        let mut open: Option<(String, Table)> = None;
        for (n, line) in input.lines().enumerate() {
            let line = line.trim();
            let fail = |why: String| format!("line {} failed: {why}: {line}", n + 1);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('*') {
                if open.is_some() {
                    return Err(fail("table opened before COMMIT".into()));
                }
                open = Some((name.to_owned(), self.table(family, name).clone()));
                continue;
            }
            let Some((name, table)) = open.as_mut() else {
                return Err(fail("no table opened with *<table>".into()));
            };
            if line == "COMMIT" {
                let (name, table) = open.take().expect("a table is open");
                self.tables.insert((family, name), table);
                continue;
            }
            if let Some(declared) = line.strip_prefix(':') {
                let chain = declared.split_whitespace().next().unwrap_or_default();
                // Declaring a chain creates it, or (with --noflush) flushes it; a built-in
                // chain only gets its policy.
                if !builtin_chains(name).contains(&chain) {
                    table.insert(chain.to_owned(), Vec::new());
                }
                continue;
            }
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let (op, chain) = match tokens.as_slice() {
                [op, chain, ..] => (*op, *chain),
                _ => return Err(fail("incomplete command".into())),
            };
            let Some(rules) = table.get(chain) else {
                return Err(fail(format!("chain {chain} does not exist")));
            };
            let mut rest = tokens[2..].to_vec();
            match op {
                "-A" | "-I" => {
                    let at = match (op, rest.first().map(|t| t.parse::<usize>())) {
                        ("-I", Some(Ok(position))) => {
                            rest.remove(0);
                            position.saturating_sub(1).min(rules.len())
                        }
                        ("-I", _) => 0,
                        _ => rules.len(),
                    };
                    let rule = normal_form(&rest);
                    self.check_references(table, &rest).map_err(fail)?;
                    table.get_mut(chain).expect("checked").insert(at, rule);
                }
                "-D" => {
                    let rule = normal_form(&rest);
                    let Some(at) = rules.iter().position(|r| *r == rule) else {
                        return Err(fail("no such rule".into()));
                    };
                    table.get_mut(chain).expect("checked").remove(at);
                }
                "-F" => table.get_mut(chain).expect("checked").clear(),
                "-X" => {
                    if builtin_chains(name).contains(&chain) {
                        return Err(fail("a built-in chain cannot be deleted".into()));
                    }
                    if !rules.is_empty() {
                        return Err(fail(format!("chain {chain} is not empty")));
                    }
                    if referenced(table, chain) {
                        return Err(fail(format!("chain {chain} is in use")));
                    }
                    table.remove(chain);
                }
                _ => return Err(fail(format!("unknown command {op}"))),
            }
        }
        match open {
            Some((name, _)) => Err(format!("table {name} has no COMMIT")),
            None => Ok(()),
        }
    }

    /// A rule may jump only to a chain that exists and match only a set that exists.
    fn check_references(&self, table: &Table, rule: &[&str]) -> Result<(), String> {
        for pair in rule.windows(2) {
            match pair {
                ["-j" | "-g", target] if is_chain_name(target) && !table.contains_key(*target) => {
                    return Err(format!("chain {target} does not exist"));
                }
                ["--match-set", set] if !self.sets.contains_key(*set) => {
                    return Err(format!("set {set} does not exist"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn ipset_restore(&mut self, input: &str) -> Result<(), String> {
        for (n, line) in input.lines().enumerate() {
            let fail = |why: &str| format!("Error in line {}: {why}", n + 1);
            let tokens: Vec<&str> = line.split_whitespace().collect();
            match tokens.as_slice() {
                [] => {}
                ["create", name, ..] => {
                    self.sets.entry((*name).to_owned()).or_default();
                }
                // `-exist` makes destroying a missing set a no-op (measured with ipset 7.17).
                ["destroy", name, ..] if !self.sets.contains_key(*name) => {}
                [op @ ("add" | "del" | "flush" | "destroy"), name, rest @ ..] => {
                    if !self.sets.contains_key(*name) {
                        return Err(fail("The set with the given name does not exist"));
                    }
                    match (*op, rest) {
                        ("add", [member, ..]) => {
                            self.sets
                                .get_mut(*name)
                                .unwrap()
                                .insert((*member).to_owned());
                        }
                        ("del", [member, ..]) => {
                            self.sets.get_mut(*name).unwrap().remove(*member);
                        }
                        ("flush", _) => self.sets.get_mut(*name).unwrap().clear(),
                        ("destroy", _) => {
                            if self.set_in_use(name) {
                                return Err(fail(
                                    "Set cannot be destroyed: it is in use by a kernel component",
                                ));
                            }
                            self.sets.remove(*name);
                        }
                        _ => return Err(fail("Missing mandatory argument")),
                    }
                }
                ["swap", a, b] => {
                    let (Some(first), Some(second)) = (self.sets.remove(*a), self.sets.remove(*b))
                    else {
                        return Err(fail("The set with the given name does not exist"));
                    };
                    self.sets.insert((*a).to_owned(), second);
                    self.sets.insert((*b).to_owned(), first);
                }
                _ => return Err(fail("Unknown command")),
            }
        }
        Ok(())
    }
}

/// A rule as the kernel gives it back: like `iptables-save`, an address without a prefix
/// length gets one (`-s 10.0.0.1` → `-s 10.0.0.1/32`), so that what is read back differs from
/// what was written, as it does with the real tools.
fn normal_form(rule: &[&str]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(rule.len());
    for (i, token) in rule.iter().enumerate() {
        let after_address_flag = i > 0 && matches!(rule[i - 1], "-s" | "-d");
        match token.parse::<std::net::IpAddr>() {
            Ok(ip) if after_address_flag => {
                out.push(format!("{token}/{}", if ip.is_ipv4() { 32 } else { 128 }))
            }
            _ => out.push((*token).to_owned()),
        }
    }
    out.join(" ")
}

/// Whether any rule of `table` jumps or goes to `chain`.
fn referenced(table: &Table, chain: &str) -> bool {
    table.values().flatten().any(|rule| {
        rule.split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| matches!(w[0], "-j" | "-g") && w[1] == chain)
    })
}

/// Targets in capitals (`ACCEPT`, `MARK`, `DNAT`, …) are the kernel's; anything else is a chain.
fn is_chain_name(target: &str) -> bool {
    target.chars().any(|c| c.is_ascii_lowercase())
}

impl FirewallTables for FakeKernel {
    fn restore(&self, family: Family, input: &str) -> Result<(), CommandError> {
        let program = restore_program(family);
        let mut state = self.lock();
        state.log.push((program.to_owned(), input.to_owned()));
        state.injected_failure(program, "--noflush -w")?;
        // Atomic like the kernel's per-table commit: a failing script leaves the tables as the
        // last COMMIT before the failure left them.
        state
            .iptables_restore(family, input)
            .map_err(|reason| CommandError {
                command: format!("{program} --noflush -w"),
                reason: format!("exit status: 1: {program}: {reason}"),
            })
    }

    fn chains(
        &self,
        family: Family,
        table: &str,
        prefix: &str,
    ) -> Result<Vec<String>, CommandError> {
        let program = match family {
            Family::V4 => "iptables-save",
            Family::V6 => "ip6tables-save",
        };
        let mut state = self.lock();
        state.injected_failure(program, &format!("-t {table}"))?;
        Ok(state
            .table(family, table)
            .keys()
            .filter(|c| c.starts_with(prefix))
            .cloned()
            .collect())
    }

    fn save(&self, family: Family, table: &str) -> Result<String, CommandError> {
        let program = match family {
            Family::V4 => "iptables-save",
            Family::V6 => "ip6tables-save",
        };
        let mut state = self.lock();
        state.injected_failure(program, &format!("-t {table}"))?;
        let chains = state.table(family, table);
        let mut out = format!("# Generated by the in-memory kernel\n*{table}\n");
        for chain in chains.keys() {
            let policy = if builtin_chains(table).contains(&chain.as_str()) {
                "ACCEPT"
            } else {
                "-"
            };
            out.push_str(&format!(":{chain} {policy} [0:0]\n"));
        }
        for (chain, rules) in chains.iter() {
            for rule in rules {
                out.push_str(&format!("-A {chain} {rule}\n"));
            }
        }
        out.push_str("COMMIT\n");
        Ok(out)
    }

    fn handle(&self) -> Box<dyn FirewallTables> {
        Box::new(self.clone())
    }

    fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError> {
        let program = match family {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        };
        let mut state = self.lock();
        let args = format!("-w -t {table} -I {chain} 1 -j {target}");
        state.injected_failure(program, &args)?;
        let jump = format!("-j {target}");
        let tables = state.table(family, table);
        let fail = |reason: &str| CommandError {
            command: format!("{program} {args}"),
            reason: format!("exit status: 2: {reason}"),
        };
        if !tables.contains_key(target) {
            return Err(fail(&format!("chain {target} does not exist")));
        }
        let rules = tables
            .get_mut(chain)
            .ok_or_else(|| fail(&format!("chain {chain} does not exist")))?;
        // As the kernel's: one jump, first; other rules keep their order after it.
        if rules.first() == Some(&jump) && rules.iter().filter(|r| **r == jump).count() == 1 {
            return Ok(false);
        }
        rules.retain(|rule| *rule != jump);
        rules.insert(0, jump);
        Ok(true)
    }
}

impl IpSets for FakeKernel {
    fn restore(&self, input: &str) -> Result<(), CommandError> {
        let mut state = self.lock();
        state.log.push(("ipset".to_owned(), input.to_owned()));
        state.injected_failure("ipset", "restore -exist")?;
        state.ipset_restore(input).map_err(|reason| CommandError {
            command: "ipset restore -exist".to_owned(),
            reason: format!("exit status: 1: ipset v7.17: {reason}"),
        })
    }

    fn names(&self) -> Result<Vec<String>, CommandError> {
        let mut state = self.lock();
        state.injected_failure("ipset", "list -n")?;
        Ok(state.sets.keys().cloned().collect())
    }

    fn save(&self) -> Result<String, CommandError> {
        let mut state = self.lock();
        state.injected_failure("ipset", "save")?;
        let mut out = String::new();
        for (name, members) in &state.sets {
            out.push_str(&format!(
                "create {name} hash:ip family inet hashsize 1024\n"
            ));
            for member in members {
                out.push_str(&format!("add {name} {member}\n"));
            }
        }
        Ok(out)
    }

    fn handle(&self) -> Box<dyn IpSets> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_commits_whole_or_not_at_all() {
        let kernel = FakeKernel::new();
        let good = "*filter\n:cali-a - [0:0]\n-A cali-a -j ACCEPT\n-A INPUT -j cali-a\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, good).unwrap();
        assert_eq!(
            kernel.rules(Family::V4, "filter", "INPUT").unwrap(),
            vec!["-j cali-a"]
        );
        let bad = "*filter\n:cali-b - [0:0]\n-A cali-b -j cali-missing\nCOMMIT\n";
        let error = FirewallTables::restore(&kernel, Family::V4, bad).unwrap_err();
        assert!(
            error.reason.contains("chain cali-missing does not exist"),
            "{error}"
        );
        assert_eq!(kernel.rules(Family::V4, "filter", "cali-b"), None);
        assert_eq!(
            kernel.rules(Family::V6, "filter", "cali-a"),
            None,
            "families are apart"
        );
    }

    #[test]
    fn chains_and_sets_in_use_cannot_go() {
        let kernel = FakeKernel::new();
        IpSets::restore(&kernel, "create s hash:ip\nadd s 10.0.0.1\n").unwrap();
        let rules = "*filter\n:cali-a - [0:0]\n-A cali-a -m set --match-set s src -j DROP\n\
                     -A INPUT -j cali-a\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, rules).unwrap();
        let error = IpSets::restore(&kernel, "destroy s\n").unwrap_err();
        assert!(error.reason.contains("in use"), "{error}");
        let error = FirewallTables::restore(&kernel, Family::V4, "*filter\n-X cali-a\nCOMMIT\n")
            .unwrap_err();
        assert!(error.reason.contains("cali-a is not empty"), "{error}");
        let unhook = "*filter\n-D INPUT -j cali-a\n:cali-a - [0:0]\n-X cali-a\nCOMMIT\n";
        FirewallTables::restore(&kernel, Family::V4, unhook).unwrap();
        IpSets::restore(&kernel, "destroy s\n").unwrap();
        assert_eq!(kernel.set("s"), None);
    }

    #[test]
    fn jumps_are_inserted_once_and_failures_are_injected() {
        let kernel = FakeKernel::new();
        FirewallTables::restore(&kernel, Family::V4, "*raw\n:cali-OUTPUT - [0:0]\nCOMMIT\n")
            .unwrap();
        assert!(
            kernel
                .ensure_jump(Family::V4, "raw", "OUTPUT", "cali-OUTPUT")
                .unwrap()
        );
        assert!(
            !kernel
                .ensure_jump(Family::V4, "raw", "OUTPUT", "cali-OUTPUT")
                .unwrap()
        );
        kernel.fail_next("ipset");
        assert!(
            IpSets::restore(&kernel, "create s hash:ip\n")
                .is_err_and(|e| e.command.starts_with("ipset"))
        );
        assert_eq!(kernel.set("s"), None, "a failed run changes nothing");
        IpSets::restore(&kernel, "create s hash:ip\n").unwrap();
        assert_eq!(kernel.set("s"), Some(BTreeSet::new()));
    }
}
