//! `calicoctl create|apply|replace -f FILE`, `delete -f FILE`, `delete KIND NAME` and
//! `get KIND [NAME]`: resources as documents (see docs/resources.md).
//!
//! A file is handled in three passes, so that nothing is written unless everything can be:
//! every document is validated (all problems reported), then every resource is checked against
//! the datastore (create refuses what exists, replace and delete what does not), then the writes
//! go in transactions conditional on the keys being as read: one when they fit in etcd's
//! operation limit, else as many whole resources per transaction as fit, in the order of the
//! file. A transaction that fails stops the command, which says which resources were written
//! (those before it) and which were not (it and those after).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::ops::Range;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use calico_datastore::{Datastore, TxnOp};
use calico_model::key::{Key, Prefix};
use serde_json::{Map, Value};

use super::read_file;
use crate::cli::{DeleteArgs, FileArgs, GetArgs, Output, ResourceFilter};
use crate::resource::id::Id;
use crate::resource::kind::Kind;
use crate::resource::parse::{self, Document};
use crate::resource::store::{self, Change, Mode, Snapshot};
use crate::resource::{Resource, describe, list, space, table};

/// `create`, `apply` or `replace -f FILE`.
pub async fn write(
    store: &dyn Datastore,
    args: &FileArgs,
    mode: Mode,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let documents = parse::parse(&read_file(&args.filename)?)?;
    if documents.is_empty() {
        return nothing_to_change(out);
    }
    let resources = validate(&documents, true)?;
    let changes = plan(store, mode, &resources).await?;
    space::check(store, &changes).await?;
    if let Some(warning) = space::not_in_effect(&changes) {
        eprintln!("{warning}");
    }
    commit(store, &changes, args.txn.max_txn_ops as usize, out).await
}

/// `delete -f FILE` or `delete KIND NAME`.
pub async fn delete(
    store: &dyn Datastore,
    args: &DeleteArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mode = Mode::Delete {
        skip_missing: args.skip_missing,
    };
    let resources = match &args.filename {
        Some(path) => match parse::parse(&read_file(path)?)? {
            documents if documents.is_empty() => return nothing_to_change(out),
            documents => validate(&documents, false)?,
        },
        None => vec![named(store, args).await?],
    };
    let changes = plan(store, mode, &resources).await?;
    check_tiers(store, &changes).await?;
    space::check(store, &changes).await?;
    if let Some(warning) = space::not_in_effect(&changes) {
        eprintln!("{warning}");
    }
    commit(store, &changes, args.txn.max_txn_ops as usize, out).await
}

/// A `List` without items (what `get KIND -o yaml` prints when there are none): said, exit 0.
fn nothing_to_change(out: &mut impl Write) -> anyhow::Result<ExitCode> {
    writeln!(out, "the input lists no resources: nothing to change")?;
    Ok(ExitCode::SUCCESS)
}

/// `get KIND [NAME]`.
pub async fn get(
    store: &dyn Datastore,
    args: &GetArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let kind = kind(&args.target)?;
    let name = args.name.as_deref();
    let listed: Vec<_> = store::list(store, kind)
        .await?
        .into_iter()
        .filter(|(id, _)| selects(id, name, &args.filter))
        .collect();
    warn_left_out(store, listed.iter().map(|(id, _)| id)).await?;
    let documents: Vec<Value> = listed
        .iter()
        .map(|(id, values)| store::to_document(id, values))
        .collect();
    if let (Some(name), true) = (name, documents.is_empty()) {
        bail!("{kind} {name:?} not found");
    }
    let single = name.is_some() && documents.len() == 1;
    let as_document = || match single {
        true => documents[0].clone(),
        false => list(documents.clone()),
    };
    match args.output.unwrap_or(Output::Table) {
        Output::Table => out.write_all(table::render(kind, &documents, false).as_bytes())?,
        Output::Wide => out.write_all(table::render(kind, &documents, true).as_bytes())?,
        // Starting with `---`, outputs can be concatenated into one file of documents.
        Output::Yaml => out.write_all(crate::yaml::document(&as_document()).as_bytes())?,
        Output::Json => writeln!(out, "{}", serde_json::to_string_pretty(&as_document())?)?,
        Output::Text => bail!("-o text is for keys; resources print as table, wide, yaml or json"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The profile id prefix of calico-neutron's security groups (`openstack-sg-<group id>`).
const SECURITY_GROUP_PROFILE: &str = "openstack-sg-";

/// One warning on stderr per Neutron rule calico-neutron left out of a listed profile (read
/// from `/calico/openstack/v1/left-out/<group>`): those rules are not enforced.
async fn warn_left_out(
    store: &dyn Datastore,
    ids: impl Iterator<Item = &Id>,
) -> anyhow::Result<()> {
    for id in ids {
        let Id::Profile(profile) = id else { continue };
        let Some(group) = profile.strip_prefix(SECURITY_GROUP_PROFILE) else {
            continue;
        };
        let key = Key::LeftOut {
            group: group.to_owned(),
        };
        let Some(raw) = store.get(&key.to_string()).await? else {
            continue;
        };
        match calico_model::from_json::<calico_model::leftout::LeftOut>(&raw.value) {
            Ok(left_out) => {
                for rule in &left_out.rules {
                    eprintln!(
                        "warning: security group {group} rule {} ({}) is not enforced: {}",
                        rule.id, rule.direction, rule.reason
                    );
                }
            }
            Err(err) => eprintln!(
                "warning: {}",
                calico_model::invalid_warning(&key.to_string(), &err)
            ),
        }
    }
    Ok(())
}

fn kind(text: &str) -> anyhow::Result<Kind> {
    Kind::from_cli(text).ok_or_else(|| {
        anyhow!(
            "unknown resource kind {text:?} (expected one of {}, or a key starting with /)",
            Kind::list()
        )
    })
}

fn selects(id: &Id, name: Option<&str>, filter: &ResourceFilter) -> bool {
    name.is_none_or(|name| id.name() == name)
        && filter
            .node
            .as_deref()
            .is_none_or(|node| id.node() == Some(node))
        && filter
            .tier
            .as_deref()
            .is_none_or(|tier| id.tier() == Some(tier))
}

/// Validates every document; reports every problem and fails if there is one.
pub(crate) fn validate(documents: &[Document], with_spec: bool) -> anyhow::Result<Vec<Resource>> {
    let mut resources: Vec<Resource> = Vec::new();
    let mut seen: HashMap<Id, usize> = HashMap::new();
    let mut problems = Vec::new();
    for document in documents {
        match Resource::from_document(document, with_spec) {
            Ok(resource) => match seen.get(&resource.id) {
                Some(first) => problems.push(format!(
                    "document {}: {} is also document {first}: a file names a resource once",
                    resource.index,
                    describe(&resource.id),
                )),
                None => {
                    seen.insert(resource.id.clone(), resource.index);
                    resources.push(resource);
                }
            },
            Err(err) => problems.push(err.to_string()),
        }
    }
    refuse(&problems, documents.len(), "documents are invalid")?;
    Ok(resources)
}

fn refuse(problems: &[String], total: usize, what: &str) -> anyhow::Result<()> {
    if problems.is_empty() {
        return Ok(());
    }
    for problem in problems {
        eprintln!("error: {problem}");
    }
    bail!("{} of {total} {what}; nothing was written", problems.len())
}

/// Checks every resource against the datastore; reports every refusal.
async fn plan(
    store: &dyn Datastore,
    mode: Mode,
    resources: &[Resource],
) -> anyhow::Result<Vec<Change>> {
    let snapshot = Snapshot::read(store, resources).await?;
    let mut changes = Vec::new();
    let mut problems = Vec::new();
    for resource in resources {
        match store::plan(&snapshot, mode, resource) {
            Ok(change) => changes.push(change),
            Err(err) => problems.push(format!("document {}: {err:#}", resource.index)),
        }
    }
    refuse(&problems, resources.len(), "resources were refused")?;
    Ok(changes)
}

/// Writes the changes transaction by transaction and prints each resource's outcome; when a
/// transaction fails, prints the outcomes of the resources before it (written) and fails
/// naming the documents not written.
async fn commit(
    store: &dyn Datastore,
    changes: &[Change],
    limit: usize,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let batches = store::batches(changes, limit);
    for (number, batch) in batches.iter().enumerate() {
        let written = store::write(store, &changes[batch.clone()]).await;
        if let Ok(true) = written {
            continue;
        }
        out.write_all(outcomes(&changes[..batch.start]).as_bytes())?;
        let which = match batches.len() {
            1 => String::new(),
            n => format!("transaction {} of {n} ", number + 1),
        };
        bail!("{which}{}", partial(changes, batch, written, limit));
    }
    out.write_all(outcomes(changes).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Why the transaction of `changes[batch]` did not write (`written`: its conditions failed, or
/// an error), and what that leaves: the resources before it done, it and those after not.
fn partial(
    changes: &[Change],
    batch: &Range<usize>,
    written: anyhow::Result<bool>,
    limit: usize,
) -> String {
    let (first, last) = (&changes[batch.start], &changes[batch.end - 1]);
    let (what, span) = match batch.len() {
        1 => (describe(&first.id), format!("document {}", first.index)),
        _ => (
            format!("{} to {}", describe(&first.id), describe(&last.id)),
            format!("documents {} to {}", first.index, last.index),
        ),
    };
    let before = match batch.start {
        0 => "nothing was written".to_owned(),
        n => format!("the {n} resources before it were done (listed above)"),
    };
    let after = match changes.len() - batch.end {
        0 => String::new(),
        n => format!("the {n} after them "),
    };
    let (failure, left) = match written {
        Err(err) => (
            format!("failed: {err:#}{}", limit_hint(&err, limit)),
            // Whether etcd applied a transaction whose answer was lost is unknown.
            match after.is_empty() {
                true => format!("{span} may or may not have been written"),
                false => format!("{span} may or may not have been written, {after}were not"),
            },
        ),
        Ok(_) => (
            "changed while this command ran (another writer)".to_owned(),
            match after.is_empty() {
                true => format!("{span} were not written"),
                false => format!("{span} and {after}were not written"),
            },
        ),
    };
    format!("({what}) {failure}: {before}; {left}; run the command again")
}

/// One line per resource, `profile "p1" created`, in one string (one write for a big file).
fn outcomes(changes: &[Change]) -> String {
    let lines = changes
        .iter()
        .map(|c| format!("{} {}\n", describe(&c.id), c.outcome));
    lines.collect()
}

/// What to do when etcd refuses a transaction as too large.
fn limit_hint(err: &anyhow::Error, limit: usize) -> String {
    match format!("{err:#}").contains("too many operations") {
        true => format!(
            " (etcd's --max-txn-ops is below the {limit} this command used: give calicoctl \
             --max-txn-ops with etcd's value)"
        ),
        false => String::new(),
    }
}

/// The one resource `delete KIND NAME` names: found by listing (so a policy is found in any
/// tier, an endpoint on any node), else taken from the name and filters as given.
async fn named(store: &dyn Datastore, args: &DeleteArgs) -> anyhow::Result<Resource> {
    let kind = kind(args.target.as_deref().unwrap_or_default())?;
    let Some(name) = args.name.as_deref() else {
        bail!("give the {kind}'s NAME, or -f FILE");
    };
    let found: Vec<Id> = store::list(store, kind)
        .await?
        .into_keys()
        .filter(|id| selects(id, Some(name), &args.filter))
        .collect();
    let id = match found.as_slice() {
        [id] => id.clone(),
        [] => from_name(kind, name, &args.filter)?,
        several => {
            let names: Vec<String> = several.iter().map(describe).collect();
            bail!(
                "{} resources match: {}; narrow it with --node or --tier, or use -f",
                several.len(),
                names.join("; ")
            );
        }
    };
    Ok(Resource {
        index: 1,
        id,
        pairs: Vec::new(),
    })
}

fn from_name(kind: Kind, name: &str, filter: &ResourceFilter) -> anyhow::Result<Id> {
    let mut metadata = Map::new();
    metadata.insert("name".into(), name.into());
    for (field, value) in [("node", &filter.node), ("tier", &filter.tier)] {
        if let Some(value) = value {
            metadata.insert(field.into(), value.clone().into());
        }
    }
    Id::from_metadata(kind, &metadata).map_err(|err| {
        let hint = if err.reason == "missing" {
            " (give it with a flag, or use -f)"
        } else {
            ""
        };
        anyhow!("{kind} {name:?}: {err}{hint}")
    })
}

/// A tier is deleted only with its last policy: a policy of a tier without metadata is not one
/// an operator can see or order.
async fn check_tiers(store: &dyn Datastore, changes: &[Change]) -> anyhow::Result<()> {
    let deleted: HashSet<&str> = (changes.iter().flat_map(|c| &c.ops))
        .filter_map(|op| match op {
            TxnOp::Delete { key } => Some(key.as_str()),
            TxnOp::Put { .. } => None,
        })
        .collect();
    let deleted = |key: &str| deleted.contains(key);
    for change in changes.iter().filter(|c| c.outcome == "deleted") {
        let Id::Tier(tier) = &change.id else { continue };
        let prefix = Prefix::TierPolicies { tier: tier.clone() }.to_string();
        let left: Vec<String> = (store.list(&prefix).await?.into_iter())
            .filter(|pair| !deleted(&pair.key))
            .filter_map(|pair| match Key::parse(&pair.key) {
                Ok(Key::Policy { policy, .. }) => Some(policy),
                _ => None,
            })
            .collect();
        if !left.is_empty() {
            bail!(
                "document {}: tier {tier:?} still has policies {}: delete them first (or in the \
                 same file); nothing was written",
                change.index,
                left.join(", ")
            );
        }
    }
    Ok(())
}
