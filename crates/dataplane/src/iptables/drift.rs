//! Finding drift without stalling updates: the periodic check reads the kernel on another
//! thread ([`KernelReader::read`], `iptables-save` and `ipset save`), then compares the
//! [`KernelSnapshot`] with what the dataplane knows it wrote, and rewrites only the chains and
//! sets that differ (see `Dataplane::repair_drift`).
//!
//! The kernel gives rules back in its own normal form (`-s 10.0.0.1` comes back as
//! `-s 10.0.0.1/32`, `-p tcp --dport` gains `-m tcp`), so a chain cannot be compared with the text
//! we rendered. Instead the [`Ledger`] remembers, per chain, when we last wrote it and how many
//! rules it got, and the first check after a write learns the chain's saved form (a
//! *baseline*, a hash) once its rule count matches; from then on, a saved form that differs
//! from the baseline while we have not written the chain is drift. A chain written after the
//! read began is left to the next check. Set members are compared directly (addresses and
//! networks are parsed on both sides).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use calico_linux::{CommandError, Family, FirewallTables, IpSets};
use ipnet::IpNet;

/// The tables the dataplane writes.
pub const TABLES: [&str; 3] = ["filter", "nat", "raw"];

/// A chain: IP family, table, name.
type ChainKey = (Family, &'static str, String);

fn table_name(table: &str) -> Option<&'static str> {
    TABLES.into_iter().find(|t| *t == table)
}

/// When a chain was last written and with how many rules.
#[derive(Debug, Clone, Copy)]
struct Written {
    generation: u64,
    rules: usize,
}

/// A chain's saved form as learned from the kernel, and the generation of the read.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    hash: u64,
    generation: u64,
}

/// What the dataplane wrote, by write generation, and the chains' learned saved forms.
#[derive(Debug, Default)]
pub struct Ledger {
    generation: u64,
    chains: HashMap<ChainKey, Written>,
    /// Chains deleted, with the generation of the deletion: one deleted after a read began is
    /// not stale in that read (kept until a check has seen past it).
    deleted: HashMap<ChainKey, u64>,
    /// Sets by the generation they were last written, created or destroyed in.
    sets: HashMap<String, u64>,
    baselines: HashMap<ChainKey, Baseline>,
}

impl Ledger {
    /// The generation of the last write.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Notes the chains `input` (iptables-restore input for `family`) declares, fills and
    /// deletes.
    pub fn tables_written(&mut self, family: Family, input: &str) {
        self.generation += 1;
        let generation = self.generation;
        let mut table = None;
        let mut rules: HashMap<(&'static str, &str), usize> = HashMap::new();
        for line in input.lines() {
            if let Some(name) = line.strip_prefix('*') {
                table = table_name(name.trim());
                continue;
            }
            let Some(table) = table else { continue };
            if let Some(declared) = line.strip_prefix(':') {
                let chain = declared.split_whitespace().next().unwrap_or_default();
                let written = Written {
                    generation,
                    rules: 0,
                };
                self.chains
                    .insert((family, table, chain.to_owned()), written);
            } else if let Some(rule) = line.strip_prefix("-A ") {
                // Counted by borrowed name: no allocation per rule of a large write.
                let chain = rule.split_whitespace().next().unwrap_or_default();
                *rules.entry((table, chain)).or_default() += 1;
            } else if let Some(chain) = line.strip_prefix("-X ") {
                let key = (family, table, chain.trim().to_owned());
                self.chains.remove(&key);
                self.baselines.remove(&key);
                self.deleted.insert(key, generation);
            }
        }
        for ((table, chain), count) in rules {
            if let Some(written) = self.chains.get_mut(&(family, table, chain.to_owned())) {
                written.generation = generation;
                written.rules += count;
            }
        }
    }

    /// Takes chains found in the kernel as they should be (a start-up that did not need to
    /// write them) as if written now, with their saved forms learned: later changes to them
    /// are drift.
    pub fn adopt<'a>(
        &mut self,
        family: Family,
        table: &'static str,
        chains: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) {
        self.generation += 1;
        let generation = self.generation;
        for (chain, saved) in chains {
            let key = (family, table, chain.to_owned());
            let written = Written {
                generation,
                rules: saved.len(),
            };
            self.chains.insert(key.clone(), written);
            let hash = fingerprint(saved);
            self.baselines.insert(key, Baseline { hash, generation });
        }
    }

    /// Notes the sets `input` (ipset restore input) creates, changes or destroys.
    pub fn sets_written(&mut self, input: &str) {
        self.generation += 1;
        for line in input.lines() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("swap"), Some(a), Some(b)) => {
                    self.sets.insert(a.to_owned(), self.generation);
                    self.sets.insert(b.to_owned(), self.generation);
                }
                (Some("create" | "add" | "del" | "flush" | "destroy"), Some(name), _) => {
                    self.sets.insert(name.to_owned(), self.generation);
                }
                _ => {}
            }
        }
    }

    /// Compares one table of the snapshot with what was written: the chains of `desired` that
    /// drifted (missing, or a saved form that is not the one learned), and the `cali-` chains
    /// the kernel has that `desired` does not. Learns the saved form of chains written since
    /// the last check.
    pub fn table_drift(
        &mut self,
        snapshot: &KernelSnapshot,
        family: Family,
        table: &'static str,
        desired: &BTreeSet<&str>,
    ) -> TableDrift {
        let empty = BTreeMap::new();
        let saved = snapshot.chains.get(&(family, table)).unwrap_or(&empty);
        let mut drift = TableDrift::default();
        for name in desired {
            let key = (family, table, (*name).to_owned());
            let written = self.chains.get(&key).copied();
            if written.is_some_and(|w| w.generation > snapshot.generation) {
                continue; // written after the read began: the next check judges it
            }
            let Some(rules) = saved.get(*name) else {
                drift.drifted.push((*name).to_owned());
                continue;
            };
            let hash = fingerprint(rules);
            let learned = self.baselines.get(&key).copied();
            match (learned, written) {
                // Unchanged by us since learned: any difference is someone else's.
                (Some(baseline), Some(w)) if w.generation <= baseline.generation => {
                    if baseline.hash != hash {
                        drift.drifted.push((*name).to_owned());
                    }
                }
                // Written since (or never seen): learn it if it has the rules we wrote.
                (_, Some(w)) if w.rules == rules.len() => {
                    let baseline = Baseline {
                        hash,
                        generation: snapshot.generation,
                    };
                    self.baselines.insert(key, baseline);
                }
                _ => drift.drifted.push((*name).to_owned()),
            }
        }
        for name in saved.keys() {
            let key = (family, table, name.clone());
            let ours = name.starts_with("cali-") && !desired.contains(name.as_str());
            let written_since = self
                .chains
                .get(&key)
                .map(|w| w.generation)
                .or_else(|| self.deleted.get(&key).copied())
                .is_some_and(|generation| generation > snapshot.generation);
            if ours && !written_since {
                drift.stale.push(name.clone());
            }
        }
        // Deletions this read saw past are settled.
        self.deleted.retain(|(f, t, _), generation| {
            (*f, *t) != (family, table) || *generation > snapshot.generation
        });
        drift
    }

    /// Compares the snapshot's sets with `desired` (name → members): the sets that are missing
    /// or hold other members, and the `cali4`/`cali6` sets nothing wants. Sets written after
    /// the read began are left to the next check.
    pub fn set_drift(
        &mut self,
        snapshot: &KernelSnapshot,
        desired: &BTreeMap<String, BTreeSet<String>>,
    ) -> SetDrift {
        let written_since = |name: &str| {
            self.sets
                .get(name)
                .is_some_and(|g| *g > snapshot.generation)
        };
        let mut drift = SetDrift::default();
        for (name, members) in desired {
            if written_since(name) {
                continue;
            }
            if snapshot.sets.get(name) != Some(members) {
                drift.drifted.push(name.clone());
            }
        }
        for name in snapshot.sets.keys() {
            let ours = name.starts_with("cali4") || name.starts_with("cali6");
            if ours && !desired.contains_key(name) && !written_since(name) {
                drift.stale.push(name.clone());
            }
        }
        // A set neither wanted nor in the kernel, last touched before this read, is forgotten.
        self.sets.retain(|name, generation| {
            *generation > snapshot.generation
                || desired.contains_key(name)
                || snapshot.sets.contains_key(name)
        });
        drift
    }
}

/// One table's drift.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TableDrift {
    /// Chains to rewrite.
    pub drifted: Vec<String>,
    /// `cali-` chains to delete.
    pub stale: Vec<String>,
}

/// The sets' drift.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SetDrift {
    /// Sets to rebuild.
    pub drifted: Vec<String>,
    /// Sets to destroy.
    pub stale: Vec<String>,
}

fn fingerprint(rules: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    rules.hash(&mut hasher);
    hasher.finish()
}

/// A set member in one spelling whatever wrote it: an address or a network.
pub fn normal_member(text: &str) -> String {
    if let Ok(net) = text.parse::<IpNet>() {
        return net.to_string();
    }
    match text.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => text.to_owned(),
    }
}

/// What the kernel held when read: every chain of our tables with its saved rules, every set
/// with its members, and the ledger's generation when the read began.
#[derive(Debug, Default)]
pub struct KernelSnapshot {
    pub generation: u64,
    chains: HashMap<(Family, &'static str), BTreeMap<String, Vec<String>>>,
    sets: BTreeMap<String, BTreeSet<String>>,
}

impl KernelSnapshot {
    /// The chains of one table.
    pub fn chain_names(&self, family: Family, table: &str) -> Vec<&str> {
        let Some(table) = table_name(table) else {
            return Vec::new();
        };
        let chains = self.chains.get(&(family, table));
        chains
            .into_iter()
            .flat_map(|c| c.keys().map(String::as_str))
            .collect()
    }

    /// Whether the kernel has set `name` with exactly `members` (in one spelling).
    pub fn set_holds(&self, name: &str, members: &BTreeSet<String>) -> bool {
        self.sets.get(name) == Some(members)
    }

    /// Every set's name.
    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.keys().map(String::as_str)
    }

    /// The saved rules of one chain.
    pub fn rules(&self, family: Family, table: &str, chain: &str) -> Option<&[String]> {
        let table = table_name(table)?;
        let rules = self.chains.get(&(family, table))?.get(chain)?;
        Some(rules.as_slice())
    }
}

/// Reads the kernel on whatever thread it is sent to.
#[derive(Debug)]
pub struct KernelReader {
    pub(crate) tables: Box<dyn FirewallTables>,
    pub(crate) sets: Box<dyn IpSets>,
    pub(crate) generation: u64,
}

impl KernelReader {
    /// `iptables-save` of each table for both families, and `ipset save`.
    pub fn read(self) -> Result<KernelSnapshot, CommandError> {
        let mut snapshot = KernelSnapshot {
            generation: self.generation,
            ..KernelSnapshot::default()
        };
        for family in [Family::V4, Family::V6] {
            for table in TABLES {
                let saved = self.tables.save(family, table)?;
                snapshot
                    .chains
                    .insert((family, table), parse_saved_chains(&saved));
            }
        }
        for line in self.sets.save()?.lines() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("create"), Some(name), _) => {
                    snapshot.sets.entry(name.to_owned()).or_default();
                }
                (Some("add"), Some(name), Some(member)) => {
                    let members = snapshot.sets.entry(name.to_owned()).or_default();
                    members.insert(normal_member(member));
                }
                _ => {}
            }
        }
        Ok(snapshot)
    }
}

/// Chains and their rules from `iptables-save` output (or restore input): chain → rules, each
/// the text after `-A <chain> `.
pub fn parse_saved_chains(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut chains: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix(':') {
            let name = declared.split_whitespace().next().unwrap_or_default();
            chains.entry(name.to_owned()).or_default();
        } else if let Some(rule) = line.strip_prefix("-A ") {
            let (chain, body) = rule.split_once(' ').unwrap_or((rule, ""));
            chains
                .entry(chain.to_owned())
                .or_default()
                .push(body.to_owned());
        }
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(generation: u64, filter: &str) -> KernelSnapshot {
        let mut snapshot = KernelSnapshot {
            generation,
            ..KernelSnapshot::default()
        };
        snapshot
            .chains
            .insert((Family::V4, "filter"), parse_saved_chains(filter));
        snapshot
    }

    const WRITTEN: &str = "*filter\n:cali-a - [0:0]\n-A cali-a -s 10.0.0.1 -j ACCEPT\nCOMMIT\n";
    const SAVED: &str = ":cali-a - [0:0]\n-A cali-a -s 10.0.0.1/32 -j ACCEPT\n";

    #[test]
    fn the_saved_form_is_learned_then_differences_are_drift() {
        let mut ledger = Ledger::default();
        ledger.tables_written(Family::V4, WRITTEN);
        let desired = BTreeSet::from(["cali-a"]);
        let first = snapshot(ledger.generation(), SAVED);
        let drift = ledger.table_drift(&first, Family::V4, "filter", &desired);
        assert_eq!(
            drift,
            TableDrift::default(),
            "the normal form is learned, not drift"
        );

        let same = snapshot(ledger.generation(), SAVED);
        assert_eq!(
            ledger.table_drift(&same, Family::V4, "filter", &desired),
            TableDrift::default()
        );
        let edited = snapshot(
            ledger.generation(),
            ":cali-a - [0:0]\n-A cali-a -s 10.0.0.1/32 -j DROP\n:cali-x - [0:0]\n",
        );
        let drift = ledger.table_drift(&edited, Family::V4, "filter", &desired);
        assert_eq!(drift.drifted, ["cali-a"]);
        assert_eq!(drift.stale, ["cali-x"]);
        let gone = snapshot(ledger.generation(), "");
        let drift = ledger.table_drift(&gone, Family::V4, "filter", &desired);
        assert_eq!(drift.drifted, ["cali-a"], "a missing chain is drift");
    }

    #[test]
    fn a_rule_added_before_the_first_check_is_caught_by_the_count() {
        let mut ledger = Ledger::default();
        ledger.tables_written(Family::V4, WRITTEN);
        let desired = BTreeSet::from(["cali-a"]);
        let extra = snapshot(
            ledger.generation(),
            ":cali-a - [0:0]\n-A cali-a -j ACCEPT\n-A cali-a -s 10.0.0.1/32 -j ACCEPT\n",
        );
        let drift = ledger.table_drift(&extra, Family::V4, "filter", &desired);
        assert_eq!(drift.drifted, ["cali-a"]);
    }

    #[test]
    fn what_was_written_after_the_read_began_waits_for_the_next_check() {
        let mut ledger = Ledger::default();
        let before = ledger.generation();
        ledger.tables_written(Family::V4, WRITTEN);
        ledger.sets_written("create cali4-s1 hash:ip\nadd cali4-s1 10.0.0.1\n");
        // The read began before those writes: it saw neither the chain nor the set.
        let stale = snapshot(before, "");
        let desired = BTreeSet::from(["cali-a"]);
        let drift = ledger.table_drift(&stale, Family::V4, "filter", &desired);
        assert_eq!(drift, TableDrift::default());
        let sets = BTreeMap::from([(
            "cali4-s1".to_owned(),
            BTreeSet::from(["10.0.0.1".to_owned()]),
        )]);
        assert_eq!(ledger.set_drift(&stale, &sets), SetDrift::default());
        let later = snapshot(ledger.generation(), "");
        assert_eq!(ledger.set_drift(&later, &sets).drifted, ["cali4-s1"]);
    }

    #[test]
    fn what_was_deleted_after_the_read_began_is_not_stale() {
        let mut ledger = Ledger::default();
        ledger.tables_written(Family::V4, WRITTEN);
        ledger.sets_written("create cali4-s1 hash:ip\n");
        // The read saw the chain and the set; then the endpoint went and both were deleted.
        let read = KernelSnapshot {
            sets: BTreeMap::from([("cali4-s1".to_owned(), BTreeSet::new())]),
            ..snapshot(ledger.generation(), SAVED)
        };
        ledger.tables_written(Family::V4, "*filter\n-X cali-a\nCOMMIT\n");
        ledger.sets_written("destroy cali4-s1\n");
        let nothing = BTreeSet::new();
        let drift = ledger.table_drift(&read, Family::V4, "filter", &nothing);
        assert_eq!(drift, TableDrift::default(), "not someone else's chain");
        assert_eq!(
            ledger.set_drift(&read, &BTreeMap::new()),
            SetDrift::default()
        );
        // A later read that still finds them (someone put them back) reports them.
        let later = KernelSnapshot {
            sets: read.sets.clone(),
            ..snapshot(ledger.generation(), SAVED)
        };
        let drift = ledger.table_drift(&later, Family::V4, "filter", &nothing);
        assert_eq!(drift.stale, ["cali-a"]);
        assert_eq!(
            ledger.set_drift(&later, &BTreeMap::new()).stale,
            ["cali4-s1"]
        );
    }

    #[test]
    fn members_compare_in_one_spelling() {
        assert_eq!(normal_member("fd00:0:0::1"), "fd00::1");
        assert_eq!(normal_member("10.0.0.0/16"), "10.0.0.0/16");
        assert_eq!(normal_member("10.0.0.1"), "10.0.0.1");
    }
}
