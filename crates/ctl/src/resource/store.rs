//! Resources in the datastore: reading them back as documents, and turning validated documents
//! into compare-and-swap transactions.
//!
//! A change reads the resource's keys first and makes every write conditional on them being
//! as read (`Expect::ModRevision`, or `Expect::Absent` for a key it creates), so a concurrent
//! writer makes the transaction fail rather than be overwritten. A key whose stored value
//! already means the same object (the model's parsed values are equal) is not written, so
//! applying what `get` printed moves no revision.

use std::collections::BTreeMap;

use anyhow::Context;
use calico_datastore::{Compare, Datastore, Expect, KvPair, TxnOp};
use calico_model::key::Key;
use calico_model::{Value as Stored, invalid_warning, parse_value};

use super::id::{Id, prefixes};
use super::kind::Kind;
use super::{Resource, describe, document, spec};

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

/// The resource's keys as stored now.
pub async fn existing(store: &dyn Datastore, id: &Id) -> anyhow::Result<Vec<KvPair>> {
    if let Some(prefix) = id.prefix() {
        let pairs = store.list(&prefix).await?;
        let ours = |pair: &KvPair| {
            Key::parse(&pair.key).is_ok_and(|key| Id::of_key(&key).as_ref() == Some(id))
        };
        return Ok(pairs.into_iter().filter(ours).collect());
    }
    let mut pairs = Vec::new();
    for key in id.keys() {
        pairs.extend(store.get(&key.to_string()).await?);
    }
    Ok(pairs)
}

/// Plans the change `mode` makes for one validated resource; refuses what the mode refuses.
pub async fn plan(
    store: &dyn Datastore,
    mode: Mode,
    resource: &Resource,
) -> anyhow::Result<Change> {
    let found = existing(store, &resource.id).await?;
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
        for pair in store.list(prefix).await? {
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

/// etcd refuses a transaction of more than 128 operations (or compares) by default.
const TXN_LIMIT: usize = 100;

/// Writes the changes: in one transaction when they fit, else one transaction per resource in
/// the order of the file, stopping at the first that fails. Returns how many were written.
pub async fn write(store: &dyn Datastore, changes: &[Change]) -> anyhow::Result<()> {
    let compares: Vec<Compare> = changes.iter().flat_map(|c| c.compares.clone()).collect();
    let ops: Vec<TxnOp> = changes.iter().flat_map(|c| c.ops.clone()).collect();
    if ops.is_empty() {
        return Ok(());
    }
    if compares.len() <= TXN_LIMIT && ops.len() <= TXN_LIMIT {
        let done = store.transaction(&compares, &ops).await?;
        anyhow::ensure!(
            done,
            "the datastore changed while this command ran (another writer); nothing was \
             written: run it again"
        );
        return Ok(());
    }
    for (written, change) in changes.iter().enumerate() {
        let what = describe(&change.id);
        let done = store
            .transaction(&change.compares, &change.ops)
            .await
            .with_context(|| format!("{what} (document {})", change.index))?;
        anyhow::ensure!(
            done,
            "{what} (document {}) changed while this command ran (another writer); the {written} \
             resources before it were written, it and those after it were not: run it again",
            change.index
        );
    }
    Ok(())
}
