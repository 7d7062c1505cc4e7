//! `calicoctl policy impact -f FILE`: what a policy change not yet applied would change, from
//! the live model, before anything is written.
//!
//! ```text
//!   FILE ─ parse, validate (as apply) ─ plan against the datastore (as apply: the puts and
//!   deletes it would make) ─┬─ before: the datastore's endpoints and policy (as explain reads it)
//!                           └─ after: the same with the plan applied in memory
//!   probes (probes.rs) × endpoint pairs (pairs.rs): verdicts before and after
//!   observed flows from the aggregator (observed.rs): verdicts before and after
//! ```
//!
//! A `stagedPolicy` document is judged as the policy of its tier and name it would become:
//! the impact of enforcing it. Nothing is written: the only requests to etcd are reads.

mod observed;
mod pairs;
mod probes;
mod report;

use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use calico_calc::Cluster;
use calico_datastore::{Datastore, TxnOp};
use calico_flowlog::FlowFilter;
use calico_model::key::Key;
use calico_model::rule::{IpVersion, Rule};
use serde_json::Value;

use super::flows::{self, MAX_LIMIT};
use super::{explain, read_file, resource};
use crate::cli::ImpactArgs;
use crate::resource::kind::Kind;
use crate::resource::parse::{self, Document};
use crate::resource::store::{self, Change, Mode, Snapshot};
use crate::resource::{Resource, describe};

/// The kinds whose documents change verdicts this way.
const KINDS: [Kind; 3] = [Kind::Policy, Kind::Profile, Kind::Tier];
/// The document spelling of a staged policy.
const STAGED: &str = "stagedPolicy";

pub async fn run(
    store: &dyn Datastore,
    args: &ImpactArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    flows::quiet_pipe(impact(store, args, out).await)
}

async fn impact(
    store: &dyn Datastore,
    args: &ImpactArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mut documents = parse::parse(&read_file(&args.filename)?)?;
    if documents.is_empty() {
        writeln!(out, "the input lists no resources: nothing to judge")?;
        return Ok(ExitCode::SUCCESS);
    }
    let staged = promote_staged(&mut documents);
    let resources = resource::validate(&documents, !args.delete)?;
    check_kinds(&resources)?;
    let changes = plan(store, args, &resources).await?;
    let before = explain::load(store).await?;
    let (after, changed) = applied(&before, &changes);
    let rules = considered(&before, &after, &changed);
    let probes = probes::probes(rules.iter());
    let scope = pairs::scope(&before, &after, &changed);
    let ends = |version: IpVersion| pairs::ends(&before, rules.iter(), version);
    let nets = every_net(&before, &after);
    let pairs = pairs::judge_pairs(&before, &after, &scope, ends, &probes, &nets);
    let flows = match args.no_flows {
        true => report::Flows::Skipped,
        false => read_flows(args, &before, &after).await,
    };
    let report = report::Report {
        changes: &changes,
        staged: &staged,
        probes: &probes,
        scope: &scope,
        pairs: &pairs,
        flows: &flows,
        since: args.since,
        url: &args.aggregator.flows_url,
    };
    match args.output.output {
        crate::cli::Output::Table => out.write_all(report.text().as_bytes())?,
        format => super::print_report(format, &report.json(), out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads `stagedPolicy` documents as the policy they would become; their indexes.
fn promote_staged(documents: &mut [Document]) -> Vec<usize> {
    let mut staged = Vec::new();
    for document in documents {
        if let Value::Object(top) = &mut document.value
            && top.get("kind").and_then(Value::as_str) == Some(STAGED)
        {
            top.insert("kind".into(), Kind::Policy.as_str().into());
            staged.push(document.index);
        }
    }
    staged
}

fn check_kinds(resources: &[Resource]) -> anyhow::Result<()> {
    let refused: Vec<String> = (resources.iter())
        .filter(|r| !KINDS.contains(&r.id.kind()))
        .map(|r| format!("document {}: {}", r.index, describe(&r.id)))
        .collect();
    if !refused.is_empty() {
        bail!(
            "{}: policy impact judges policy, {STAGED}, profile and tier documents; apply the \
             others as they are (nothing was judged)",
            refused.join("; ")
        );
    }
    Ok(())
}

/// What `apply -f` (or `delete -f`) would write, planned as those commands plan it.
async fn plan(
    store: &dyn Datastore,
    args: &ImpactArgs,
    resources: &[Resource],
) -> anyhow::Result<Vec<Change>> {
    let mode = match args.delete {
        true => Mode::Delete {
            skip_missing: false,
        },
        false => Mode::Apply,
    };
    let snapshot = Snapshot::read(store, resources).await?;
    let mut changes = Vec::new();
    let mut problems = Vec::new();
    for resource in resources {
        match store::plan(&snapshot, mode, resource) {
            Ok(change) => changes.push(change),
            Err(err) => problems.push(format!("document {}: {err:#}", resource.index)),
        }
    }
    if !problems.is_empty() {
        bail!("{} (nothing was judged)", problems.join("; "));
    }
    Ok(changes)
}

/// The model with `changes` applied, and the keys they write.
fn applied(before: &Cluster, changes: &[Change]) -> (Cluster, Vec<Key>) {
    let mut after = before.clone();
    let mut keys = Vec::new();
    for op in changes.iter().flat_map(|c| &c.ops) {
        let (key, value) = match op {
            TxnOp::Put { key, value } => (key, Some(value.as_str())),
            TxnOp::Delete { key } => (key, None),
        };
        // Validated by the plan: every key parses and every value is valid for it.
        after.apply(key, value);
        keys.extend(Key::parse(key).ok());
    }
    (after, keys)
}

/// The rules the probes come from: the old and new versions of every changed policy and
/// profile, every policy of a tier whose order changes, and every rule of the model when tags
/// or labels change (they move every selector).
fn considered(before: &Cluster, after: &Cluster, changed: &[Key]) -> Vec<Rule> {
    let mut rules = Vec::new();
    for model in [before, after] {
        for key in changed {
            match key {
                Key::Policy { tier, policy } => {
                    let found = model.tiers.get(tier).and_then(|t| t.policies.get(policy));
                    rules.extend(found.into_iter().flat_map(policy_rules).cloned());
                }
                Key::ProfileRules { profile } => {
                    let found = model.profiles.get(profile).and_then(|p| p.rules.as_ref());
                    let both = found
                        .into_iter()
                        .flat_map(|r| r.inbound_rules.iter().chain(&r.outbound_rules));
                    rules.extend(both.cloned());
                }
                Key::TierMetadata { tier } => {
                    let policies = model
                        .tiers
                        .get(tier)
                        .into_iter()
                        .flat_map(|t| t.policies.values());
                    rules.extend(policies.flat_map(policy_rules).cloned());
                }
                _ => rules.extend(every_rule(model).cloned()),
            }
        }
    }
    rules
}

fn policy_rules(policy: &calico_model::policy::Policy) -> impl Iterator<Item = &Rule> {
    policy.inbound_rules.iter().chain(&policy.outbound_rules)
}

fn every_rule(model: &Cluster) -> impl Iterator<Item = &Rule> {
    let policies = model.tiers.values().flat_map(|t| t.policies.values());
    let profiles = model.profiles.values().filter_map(|p| p.rules.as_ref());
    policies
        .flat_map(policy_rules)
        .chain(profiles.flat_map(|r| r.inbound_rules.iter().chain(&r.outbound_rules)))
}

/// Every net any rule of either model names: what tells addresses apart.
fn every_net(before: &Cluster, after: &Cluster) -> Vec<ipnet::IpNet> {
    let nets: std::collections::BTreeSet<ipnet::IpNet> = [before, after]
        .into_iter()
        .flat_map(every_rule)
        .flat_map(|rule| rule.nets().map(|(_, net)| *net))
        .collect();
    nets.into_iter().collect()
}

/// The flows observed over `--since`, judged before and after; an aggregator that cannot be
/// reached is reported (the pairs are still worth printing).
async fn read_flows(args: &ImpactArgs, before: &Cluster, after: &Cluster) -> report::Flows {
    let since = args.since.as_secs() as i64;
    let filter = FlowFilter {
        start_gte: -since,
        ..FlowFilter::default()
    };
    let listed = match flows::client(&args.aggregator) {
        Ok(client) => (client.list(&filter, Some(MAX_LIMIT as usize)).await)
            .map_err(|e| flows::failed(&args.aggregator, e)),
        Err(e) => Err(e),
    };
    match listed {
        Ok(list) => {
            let observed = observed::judge_flows(before, after, &list.flows);
            report::Flows::Read {
                total: list.total,
                read: list.flows.len(),
                observed,
            }
        }
        Err(error) => {
            eprintln!("warning: observed flows not judged: {error:#}");
            report::Flows::Unreachable(format!("{error:#}"))
        }
    }
}
