//! Resources in the datastore: reading them back as documents, and turning validated documents
//! into compare-and-swap transactions.
//!
//! A change reads the resource's keys first and makes every write conditional on them being
//! as read (`Expect::ModRevision`, or `Expect::Absent` for a key it creates), so a concurrent
//! writer makes the transaction fail rather than be overwritten. A key whose stored value
//! already means the same object (the model's parsed values are equal) is not written, so
//! applying what `get` printed moves no revision.
//!
//! A file of many resources costs few requests: what the datastore holds is read once per kind
//! (a kind the file names at least [`LIST_AT`] times is listed whole, the others are read key by
//! key), and the writes go in transactions of as many whole resources as etcd's operation limit
//! allows (`batches`), in the order of the file.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use calico_datastore::{Compare, Datastore, Expect, KvPair, TxnOp};
use calico_model::key::Key;
use calico_model::{Value as Stored, invalid_warning, parse_value};

use super::id::{Id, prefixes};
use super::kind::Kind;
use super::{Resource, describe, document, spec};

/// etcd's default `--max-txn-ops`: the most compares, and the most writes, one transaction may
/// hold.
pub const DEFAULT_MAX_TXN_OPS: usize = 128;

/// From this many resources of one kind in a file, every key of the kind is read in one list
/// rather than each resource's keys one by one.
pub const LIST_AT: usize = 16;

/// What a command does with each resource of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Refuses a resource that exists.
    Create,
    /// Refuses a resource that does not exist.
    Replace,
    /// Creates or replaces.
    Apply,
    /// Deletes every key of the resource; refuses a missing one unless told to skip it.
    Delete { skip_missing: bool },
}

/// The writes for one resource, and what they amount to.
#[derive(Debug, Clone)]
pub struct Change {
    pub index: usize,
    pub id: Id,
    pub compares: Vec<Compare>,
    pub ops: Vec<TxnOp>,
    /// created, replaced, unchanged, deleted, skipped (not found)
    pub outcome: &'static str,
}

/// The stored keys of the resources a file names, with their revisions.
#[derive(Debug, Default)]
pub struct Snapshot {
    pairs: BTreeMap<String, KvPair>,
}

impl Snapshot {
    /// Reads what the datastore holds of `resources`.
    pub async fn read(store: &dyn Datastore, resources: &[Resource]) -> anyhow::Result<Snapshot> {
        let mut per_kind: HashMap<Kind, usize> = HashMap::new();
        for resource in resources {
            *per_kind.entry(resource.id.kind()).or_default() += 1;
        }
        let mut snapshot = Snapshot::default();
        for (&kind, _) in per_kind.iter().filter(|(_, count)| **count >= LIST_AT) {
            for prefix in prefixes(kind) {
                snapshot.add(store.list(&prefix).await?);
            }
        }
        for resource in resources {
            if per_kind[&resource.id.kind()] < LIST_AT {
                snapshot.add(existing(store, &resource.id).await?);
            }
        }
        Ok(snapshot)
    }

    fn add(&mut self, pairs: Vec<KvPair>) {
        self.pairs
            .extend(pairs.into_iter().map(|pair| (pair.key.clone(), pair)));
    }

    /// The resource's keys as read.
    fn of(&self, id: &Id) -> Vec<KvPair> {
        if let Some(prefix) = id.prefix() {
            return (self.pairs.range(prefix.clone()..))
                .take_while(|(key, _)| key.starts_with(&prefix))
                .filter(|(_, pair)| ours(pair, id))
                .map(|(_, pair)| pair.clone())
                .collect();
        }
        let keys = id.keys().into_iter().map(|key| key.to_string());
        keys.filter_map(|key| self.pairs.get(&key).cloned())
            .collect()
    }
}

/// Whether a key under a Felix configuration's prefix is one of its parameters.
fn ours(pair: &KvPair, id: &Id) -> bool {
    Key::parse(&pair.key).is_ok_and(|key| Id::of_key(&key).as_ref() == Some(id))
}

/// The resource's keys as stored now.
async fn existing(store: &dyn Datastore, id: &Id) -> anyhow::Result<Vec<KvPair>> {
    if let Some(prefix) = id.prefix() {
        let pairs = store.list(&prefix).await?;
        return Ok(pairs.into_iter().filter(|pair| ours(pair, id)).collect());
    }
    let mut pairs = Vec::new();
    for key in id.keys() {
        pairs.extend(store.get(&key.to_string()).await?);
    }
    Ok(pairs)
}

/// Plans the change `mode` makes for one validated resource; refuses what the mode refuses.
pub fn plan(snapshot: &Snapshot, mode: Mode, resource: &Resource) -> anyhow::Result<Change> {
    let found = snapshot.of(&resource.id);
    let what = describe(&resource.id);
    let exists = !found.is_empty();
    let outcome = match (mode, exists) {
        (Mode::Create, true) => anyhow::bail!("{what} already exists (use apply or replace)"),
        (Mode::Replace, false) => anyhow::bail!("{what} does not exist (use create or apply)"),
        (
            Mode::Delete {
                skip_missing: false,
            },
            false,
        ) => anyhow::bail!("{what} does not exist"),
        (Mode::Delete { .. }, false) => "skipped (not found)",
        (Mode::Delete { .. }, true) => "deleted",
        (_, false) => "created",
        (_, true) => "replaced",
    };
    let mut compares: Vec<Compare> = found.iter().map(as_read).collect();
    let mut ops = Vec::new();
    for (key, raw) in &resource.pairs {
        let key = key.to_string();
        match found.iter().find(|pair| pair.key == key) {
            Some(pair) if same_object(&key, &pair.value, raw) => {}
            Some(_) => ops.push(TxnOp::Put {
                key,
                value: raw.clone(),
            }),
            None => {
                compares.push(Compare {
                    key: key.clone(),
                    expect: Expect::Absent,
                });
                ops.push(TxnOp::Put {
                    key,
                    value: raw.clone(),
                });
            }
        }
    }
    let wanted = |key: &str| resource.pairs.iter().any(|(k, _)| k.to_string() == key);
    for pair in found.iter().filter(|pair| !wanted(&pair.key)) {
        ops.push(TxnOp::Delete {
            key: pair.key.clone(),
        });
    }
    let outcome = if ops.is_empty() && exists && outcome == "replaced" {
        "unchanged"
    } else {
        outcome
    };
    Ok(Change {
        index: resource.index,
        id: resource.id.clone(),
        compares,
        ops,
        outcome,
    })
}

fn as_read(pair: &KvPair) -> Compare {
    Compare {
        key: pair.key.clone(),
        expect: Expect::ModRevision(pair.mod_revision),
    }
}

/// Whether a stored value and a new one are the same object (a stored value that does not
/// validate is never the same).
fn same_object(key: &str, stored: &str, new: &str) -> bool {
    let Ok(key) = Key::parse(key) else {
        return false;
    };
    match (parse_value(&key, stored), parse_value(&key, new)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Every resource of a kind, by identity, with its stored keys; values that do not validate are
/// reported on stderr (as `get KEY` does) and leave their resource out.
pub async fn list(
    store: &dyn Datastore,
    kind: Kind,
) -> anyhow::Result<BTreeMap<Id, Vec<(Key, Stored)>>> {
    let mut resources: BTreeMap<Id, Vec<(Key, Stored)>> = BTreeMap::new();
    let mut invalid = Vec::new();
    for prefix in prefixes(kind) {
        for pair in store.list(&prefix).await? {
            let Ok(key) = Key::parse(&pair.key) else {
                continue;
            };
            let Some(id) = Id::of_key(&key).filter(|id| id.kind() == kind) else {
                continue;
            };
            match parse_value(&key, &pair.value) {
                Ok(value) => resources.entry(id).or_default().push((key, value)),
                Err(err) => {
                    eprintln!("warning: {}", invalid_warning(&pair.key, &err));
                    invalid.push(id);
                }
            }
        }
    }
    for id in invalid {
        resources.remove(&id);
    }
    Ok(resources)
}

/// A listed resource as the document `apply` takes back.
pub fn to_document(id: &Id, values: &[(Key, Stored)]) -> serde_json::Value {
    document(id, spec::decode(id, values))
}

/// The transactions that write `changes`, as ranges of `changes` in order: each holds as many
/// whole resources as fit in `limit` compares and `limit` writes (a resource that alone exceeds
/// it goes alone, and etcd may refuse it). Changes that write nothing (unchanged) are in no
/// transaction; they lie between or inside the ranges and need no write.
pub fn batches(changes: &[Change], limit: usize) -> Vec<Range<usize>> {
    let mut batches: Vec<Range<usize>> = Vec::new();
    let (mut compares, mut ops) = (0, 0);
    for (index, change) in changes.iter().enumerate() {
        if change.ops.is_empty() {
            continue;
        }
        let fits = compares + change.compares.len() <= limit && ops + change.ops.len() <= limit;
        match batches.last_mut() {
            Some(batch) if fits => batch.end = index + 1,
            _ => {
                batches.push(index..index + 1);
                (compares, ops) = (0, 0);
            }
        }
        compares += change.compares.len();
        ops += change.ops.len();
    }
    batches
}

/// Writes one transaction: the writes of `changes`, conditional on their keys being as read.
/// Returns whether the conditions held (and so everything was written).
pub async fn write(store: &dyn Datastore, changes: &[Change]) -> anyhow::Result<bool> {
    let compares: Vec<Compare> = changes.iter().flat_map(|c| c.compares.clone()).collect();
    let ops: Vec<TxnOp> = changes.iter().flat_map(|c| c.ops.clone()).collect();
    Ok(store.transaction(&compares, &ops).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(index: usize, keys: usize) -> Change {
        let op = |n: usize| TxnOp::Delete {
            key: format!("/k{index}/{n}"),
        };
        let compare = |n: usize| Compare {
            key: format!("/k{index}/{n}"),
            expect: Expect::Absent,
        };
        Change {
            index,
            id: Id::Tier(format!("t{index}")),
            compares: (0..keys).map(compare).collect(),
            ops: (0..keys).map(op).collect(),
            outcome: "deleted",
        }
    }

    #[test]
    fn batches_hold_whole_resources_up_to_the_limit() {
        // 3 keys each: 42 resources (126 operations) fit in 128.
        let changes: Vec<Change> = (0..100).map(|i| change(i, 3)).collect();
        assert_eq!(batches(&changes, 128), [0..42, 42..84, 84..100]);
        // Unchanged resources are in no transaction; a resource over the limit goes alone.
        let changes = vec![
            change(0, 0),
            change(1, 2),
            change(2, 0),
            change(3, 5),
            change(4, 1),
        ];
        assert_eq!(batches(&changes, 4), [1..2, 3..4, 4..5]);
        assert_eq!(batches(&changes, 128), vec![Range { start: 1, end: 5 }]);
        assert!(batches(&[change(0, 0)], 128).is_empty());
    }
}
