//! A chain as iptables rules, and restore input that declares, fills and deletes chains.

use std::fmt::Write;

/// A chain and its rule bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) name: String,
    pub(crate) rules: Vec<String>,
}

impl Chain {
    pub(crate) fn new(name: impl Into<String>) -> Chain {
        Chain {
            name: name.into(),
            rules: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, rule: impl Into<String>) {
        self.rules.push(rule.into());
    }
}

/// Restore input: declare (flush) and fill `chains`, then delete `removed` (declared first, so
/// they are empty, and deleted last, once nothing refers to them).
pub(crate) fn restore_text(table: &str, chains: &[&Chain], removed: &[&str]) -> String {
    let pairs: Vec<(&str, &[String])> = chains
        .iter()
        .map(|c| (c.name.as_str(), c.rules.as_slice()))
        .collect();
    restore_input(table, &pairs, removed)
}

/// [`restore_text`] for chains given as (name, rules).
pub(crate) fn restore_input(table: &str, chains: &[(&str, &[String])], removed: &[&str]) -> String {
    if chains.is_empty() && removed.is_empty() {
        return String::new();
    }
    let mut out = format!("*{table}\n");
    for name in chains
        .iter()
        .map(|(name, _)| *name)
        .chain(removed.iter().copied())
    {
        writeln!(out, ":{name} - [0:0]").unwrap();
    }
    for (name, rules) in chains {
        for rule in *rules {
            writeln!(out, "-A {name} {rule}").unwrap();
        }
    }
    for name in removed {
        writeln!(out, "-X {name}").unwrap();
    }
    out.push_str("COMMIT\n");
    out
}
