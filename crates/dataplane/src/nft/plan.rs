//! From a change to one nf_tables transaction that names only what changed, in the order the
//! kernel needs: new sets and chains exist before anything refers to them, and what goes away
//! goes last, once nothing refers to it.
//!
//! ```text
//! 1. add table (full syncs)            5. flush + add rules of new and changed chains
//! 2. add new sets and maps             6. flush the chains that go (they may jump to each other)
//! 3. add new chains (empty)            7. delete the sets that go
//! 4. element changes (deletes first)   8. delete the chains that go
//! ```
//!
//! [`changes`] plans a [`Delta`] of the incremental renderer; [`reconcile`] plans the way from
//! what a read of the kernel found to the rendered table (start-up, drift repair).

use std::collections::{BTreeMap, BTreeSet};

use calico_linux::nft::{Batch, Element, Op, SetSpec, TableSnapshot, rule_digest};

use super::ruleset::{Delta, Ruleset};
use super::table::NftChain;

/// What a plan writes and finds, for the log and the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Chains added or rewritten.
    pub chains: Vec<String>,
    /// Sets added or whose elements changed.
    pub sets: Vec<String>,
    /// Chains and sets deleted because nothing needs them.
    pub stale_chains: Vec<String>,
    pub stale_sets: Vec<String>,
}

/// The plan's steps, collected and then put in order.
#[derive(Debug, Default)]
struct Steps {
    table: bool,
    new_sets: Vec<SetSpec>,
    new_chains: Vec<NftChain>,
    element_deletes: Vec<(String, Vec<Element>)>,
    element_adds: Vec<(String, Vec<Element>)>,
    rewrites: Vec<(NftChain, bool)>,
    gone_sets: Vec<String>,
    gone_chains: Vec<String>,
}

impl Steps {
    fn batch(self) -> Batch {
        let mut batch = Batch::default();
        if self.table {
            batch.push(Op::AddTable);
        }
        for spec in self.new_sets {
            batch.push(Op::AddSet(spec));
        }
        for chain in &self.new_chains {
            batch.push(Op::AddChain(chain.spec()));
        }
        for (set, elements) in self.element_deletes {
            batch.push(Op::DeleteElements { set, elements });
        }
        for (set, elements) in self.element_adds {
            batch.push(Op::AddElements { set, elements });
        }
        let fills = self
            .new_chains
            .into_iter()
            .map(|c| (c, false))
            .chain(self.rewrites);
        for (chain, flush) in fills {
            if flush {
                batch.push(Op::FlushChain(chain.name.clone()));
            }
            for rule in chain.rules {
                batch.push(Op::AddRule {
                    chain: chain.name.clone(),
                    rule,
                });
            }
        }
        for name in &self.gone_chains {
            batch.push(Op::FlushChain(name.clone()));
        }
        for name in self.gone_sets {
            batch.push(Op::DeleteSet(name));
        }
        for name in self.gone_chains {
            batch.push(Op::DeleteChain(name));
        }
        batch
    }
}

/// The transaction for what the renderer changed.
pub fn changes(delta: &Delta, current: &Ruleset) -> (Batch, Counts) {
    let mut steps = Steps::default();
    let mut counts = Counts::default();
    for (name, before) in &delta.sets_before {
        match (before, current.sets.get(name)) {
            (None, Some(set)) => steps.new_sets.push(set.spec.clone()),
            (Some(_), None) => steps.gone_sets.push(name.clone()),
            _ => {}
        }
    }
    let gone: BTreeSet<&String> = steps.gone_sets.iter().collect();
    for (set, elements) in &delta.removed {
        if !elements.is_empty() && !gone.contains(set) {
            steps
                .element_deletes
                .push((set.clone(), elements.iter().cloned().collect()));
        }
    }
    for (set, elements) in &delta.added {
        if !elements.is_empty() && current.sets.contains_key(set) {
            steps
                .element_adds
                .push((set.clone(), elements.iter().cloned().collect()));
        }
    }
    let touched: BTreeSet<&String> = delta
        .added
        .iter()
        .chain(&delta.removed)
        .filter(|(_, e)| !e.is_empty())
        .map(|(s, _)| s)
        .chain(steps.new_sets.iter().map(|s| &s.name))
        .collect();
    counts.sets = touched.into_iter().cloned().collect();
    for (name, before) in &delta.chains_before {
        match (before, current.chains.get(name)) {
            (None, Some(chain)) => steps.new_chains.push(chain.clone()),
            (Some(_), None) => steps.gone_chains.push(name.clone()),
            (Some(old), Some(new)) if old.base != new.base => {
                // A base chain moved hook or priority: replaced (only a new configuration does
                // this, and it comes with a full sync).
                steps.gone_chains.push(name.clone());
                steps.new_chains.push(new.clone());
            }
            (Some(old), Some(new)) if old.rules != new.rules => {
                steps.rewrites.push((new.clone(), true));
            }
            _ => {}
        }
    }
    counts.chains = steps
        .new_chains
        .iter()
        .chain(steps.rewrites.iter().map(|(c, _)| c))
        .map(|c| c.name.clone())
        .collect();
    counts.stale_chains = steps.gone_chains.clone();
    counts.stale_sets = steps.gone_sets.clone();
    (steps.batch(), counts)
}

/// The transaction that takes the kernel from `snapshot` (`None`: no table) to `desired`,
/// leaving alone every chain whose rules carry the digests of the rendered ones and every set
/// with the right elements; `skip` names chains and sets written after the snapshot was taken
/// (a drift check leaves those to the next check). A chain or set of the wrong kind, or a
/// table that is not there, rebuilds the whole table in the same transaction.
pub fn reconcile(
    snapshot: Option<&TableSnapshot>,
    desired: &Ruleset,
    skip: impl Fn(&str) -> bool,
) -> (Batch, Counts) {
    let Some(snapshot) = snapshot else {
        return rebuild(false, desired);
    };
    let wrong_kind = desired.chains.values().any(|c| {
        snapshot
            .chains
            .get(&c.name)
            .is_some_and(|k| k.spec.base != c.base)
    }) || desired.sets.values().any(|s| {
        snapshot
            .sets
            .get(&s.spec.name)
            .is_some_and(|k| k.spec.kind != s.spec.kind)
    });
    if wrong_kind {
        return rebuild(true, desired);
    }
    let mut steps = Steps::default();
    let mut counts = Counts::default();
    for set in desired.sets.values() {
        let name = &set.spec.name;
        if skip(name) {
            continue;
        }
        let Some(held) = snapshot.sets.get(name) else {
            steps.new_sets.push(set.spec.clone());
            if !set.elements.is_empty() {
                let all = set.elements.iter().cloned().collect();
                steps.element_adds.push((name.clone(), all));
            }
            counts.sets.push(name.clone());
            continue;
        };
        let extra: Vec<Element> = held.elements.difference(&set.elements).cloned().collect();
        let missing: Vec<Element> = set.elements.difference(&held.elements).cloned().collect();
        if !extra.is_empty() {
            steps.element_deletes.push((name.clone(), extra.clone()));
        }
        if !missing.is_empty() {
            steps.element_adds.push((name.clone(), missing.clone()));
        }
        if !extra.is_empty() || !missing.is_empty() {
            counts.sets.push(name.clone());
        }
    }
    for chain in desired.chains.values() {
        if skip(&chain.name) {
            continue;
        }
        match snapshot.chains.get(&chain.name) {
            None => steps.new_chains.push(chain.clone()),
            Some(held) => {
                let digests: Vec<Option<u64>> = held.rules.iter().map(|r| r.digest).collect();
                let wanted: Vec<Option<u64>> =
                    chain.rules.iter().map(|r| Some(rule_digest(r))).collect();
                if digests != wanted {
                    steps.rewrites.push((chain.clone(), true));
                }
            }
        }
    }
    counts.chains = steps
        .new_chains
        .iter()
        .chain(steps.rewrites.iter().map(|(c, _)| c))
        .map(|c| c.name.clone())
        .collect();
    steps.gone_chains = snapshot
        .chains
        .keys()
        .filter(|n| !desired.chains.contains_key(*n) && !skip(n))
        .cloned()
        .collect();
    steps.gone_sets = snapshot
        .sets
        .keys()
        .filter(|n| !desired.sets.contains_key(*n) && !skip(n))
        .cloned()
        .collect();
    counts.stale_chains = steps.gone_chains.clone();
    counts.stale_sets = steps.gone_sets.clone();
    (steps.batch(), counts)
}

/// The whole table written anew (after deleting the old one when `delete`), in one
/// transaction: packets see the old table or the new one, never none.
fn rebuild(delete: bool, desired: &Ruleset) -> (Batch, Counts) {
    let mut steps = Steps {
        table: true,
        ..Steps::default()
    };
    for set in desired.sets.values() {
        steps.new_sets.push(set.spec.clone());
        if !set.elements.is_empty() {
            let all = set.elements.iter().cloned().collect();
            steps.element_adds.push((set.spec.name.clone(), all));
        }
    }
    steps.new_chains = desired.chains.values().cloned().collect();
    let counts = Counts {
        chains: desired.chains.keys().cloned().collect(),
        sets: desired.sets.keys().cloned().collect(),
        ..Counts::default()
    };
    let mut batch = steps.batch();
    if delete {
        batch.ops.insert(0, Op::DeleteTable);
    }
    (batch, counts)
}

/// The elements of every set of `ruleset`, by set (for tests and the ledger).
pub fn elements(ruleset: &Ruleset) -> BTreeMap<&str, &BTreeSet<Element>> {
    ruleset
        .sets
        .iter()
        .map(|(name, set)| (name.as_str(), &set.elements))
        .collect()
}
