//! Whether `policy explain` on the datastore as it is now agrees with the trail the data plane
//! recorded for a flow, and when it does not, which of the two causes it is:
//!
//! | finding | cause |
//! | --- | --- |
//! | the same verdict, decided at the same step | they agree |
//! | an end of the flow is gone (or inactive) now | the policy (the model) changed since |
//! | a newer record of the same connection is decided where explain decides | changed since: the data plane has followed |
//! | a step the record names no longer holds in the datastore: its tier, policy or profile is gone, the policy no longer selects the endpoint, the endpoint no longer lists the profile, the rule at that index is gone or has another action, a missing profile exists | changed since |
//! | explain decides in a policy, tier or profile the recorded trail never reached | changed since: it was added, or its selector, its rules or the labels changed |
//! | none of these: the record names the policy (or profile) explain decides in, and every step it records still holds | a bug: the data plane judged the packet otherwise in the same policy |
//!
//! The datastore keeps no times, so the last two rows are judged by where the two disagree: a
//! policy the data plane never reached is most likely new (it could also be one the data plane
//! failed to program: a bug); a policy both reached but judged differently is a bug unless the
//! other end's labels or address changed since (which the datastore cannot date).

use std::fmt;

use calico_calc::{Cluster, Direction, Endpoint, Explanation};
use calico_flowlog::protocol::FlowResult;
use calico_model::flow::{FlowRecord, HitKind, PolicyHit};
use calico_model::rule::Rule;

use super::judge::{self, Judgement};
use super::render;

/// What the comparison found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    Agree,
    /// The evidence, one finding per line.
    ChangedSince(Vec<String>),
    Bug(String),
}

impl Agreement {
    /// `agree`, `changed-since` or `bug`: the `cause` of `-o json`.
    pub fn cause(&self) -> &'static str {
        match self {
            Agreement::Agree => "agree",
            Agreement::ChangedSince(_) => "changed-since",
            Agreement::Bug(_) => "bug",
        }
    }

    pub fn details(&self) -> Vec<String> {
        match self {
            Agreement::Agree => Vec::new(),
            Agreement::ChangedSince(evidence) => evidence.clone(),
            Agreement::Bug(detail) => vec![detail.clone()],
        }
    }
}

impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Agreement::Agree => f.write_str("agree: explain decides as the data plane recorded"),
            Agreement::ChangedSince(evidence) => write!(
                f,
                "disagree: the policy changed since the flow was recorded: {}",
                evidence.join("; ")
            ),
            Agreement::Bug(detail) => write!(f, "disagree: a bug: {detail}"),
        }
    }
}

/// Compares `explained` (of `judged`, in `cluster`) with `flow`'s enforced trail; `newer` are
/// the aggregator's records of the same connection.
pub fn compare(
    cluster: &Cluster,
    flow: &FlowRecord,
    judged: &Result<Judgement, String>,
    explained: Option<&Explanation>,
    newer: &[FlowResult],
) -> Agreement {
    let (judged, explained) = match (judged, explained) {
        (Ok(judged), Some(explained)) => (judged, explained),
        (Err(reason), _) => return Agreement::ChangedSince(vec![reason.clone()]),
        (Ok(_), None) => return Agreement::Bug("explain gave no answer".to_owned()),
    };
    let recorded = flow.policies.enforced.last();
    let Some(now) = judge::hit_of(&explained.reason) else {
        return Agreement::ChangedSince(vec![format!("{} now", explained.reason)]);
    };
    if judge::verdict(explained) == flow.action
        && recorded.is_some_and(|r| judge::same_step(r, &now))
    {
        return Agreement::Agree;
    }
    let followed = newer.iter().find(|result| {
        result.flow.end_time > flow.end_time
            && same_connection(&result.flow, flow)
            && (result.flow.policies.enforced.last()).is_some_and(|r| judge::same_step(r, &now))
    });
    if let Some(result) = followed {
        return Agreement::ChangedSince(vec![format!(
            "the data plane decides this connection as explain does in a newer record (flow {}, \
             until {})",
            result.id,
            render::time(result.flow.end_time)
        )]);
    }
    let Some(endpoint) = cluster.endpoints.get(&judged.endpoint) else {
        let gone = format!("endpoint {} is no longer in the datastore", judged.endpoint);
        return Agreement::ChangedSince(vec![gone]);
    };
    let evidence = evidence(cluster, endpoint, judged.direction, &flow.policies.enforced);
    if !evidence.is_empty() {
        return Agreement::ChangedSince(evidence);
    }
    let owner = owner(&now);
    let time = render::time(flow.end_time);
    if !flow
        .policies
        .enforced
        .iter()
        .any(|step| same_owner(step, &now))
    {
        return Agreement::ChangedSince(vec![format!(
            "{owner} decides now ({now}), and the recorded trail never reached it: it was added, \
             or its selector or rules or the endpoints' labels changed, after {time}"
        )]);
    }
    Agreement::Bug(format!(
        "the record names {owner}, which decides now ({now}), and every step it records still \
         holds in the datastore: the data plane on {} judged this packet otherwise at {time} \
         (unless the other end's labels or address changed since): collect `calicoctl diags` \
         there and report it",
        flow.reporter
    ))
}

/// What a step belongs to, as a sentence names it.
fn owner(step: &PolicyHit) -> String {
    let tier = step.tier.as_deref().unwrap_or_default();
    let name = step.name.as_deref().unwrap_or_default();
    match step.kind {
        HitKind::Policy | HitKind::StagedPolicy => format!("policy {name} of tier {tier}"),
        HitKind::EndOfTier => format!("tier {tier}"),
        HitKind::Profile | HitKind::MissingProfile => format!("profile {name}"),
        HitKind::NoProfileMatched => "the endpoint's profiles".to_owned(),
    }
}

/// Whether a recorded step is in the same policy, tier or profile as `now`.
fn same_owner(recorded: &PolicyHit, now: &PolicyHit) -> bool {
    let profiles = [
        HitKind::Profile,
        HitKind::MissingProfile,
        HitKind::NoProfileMatched,
    ];
    match now.kind {
        HitKind::Policy | HitKind::StagedPolicy => {
            recorded.kind == HitKind::Policy
                && recorded.tier == now.tier
                && recorded.name == now.name
        }
        HitKind::EndOfTier => recorded.tier == now.tier,
        HitKind::Profile | HitKind::MissingProfile => {
            profiles[..2].contains(&recorded.kind) && recorded.name == now.name
        }
        HitKind::NoProfileMatched => profiles.contains(&recorded.kind),
    }
}

/// Whether two records are of one connection (their trails aside).
fn same_connection(a: &FlowRecord, b: &FlowRecord) -> bool {
    a.reporter == b.reporter
        && a.source.name() == b.source.name()
        && a.destination.name() == b.destination.name()
        && a.protocol == b.protocol
        && a.dst_port == b.dst_port
        && a.direction == b.direction
}

/// What no longer holds of the recorded steps, in the datastore as it is.
pub fn evidence(
    cluster: &Cluster,
    endpoint: &Endpoint,
    direction: Direction,
    steps: &[PolicyHit],
) -> Vec<String> {
    steps
        .iter()
        .filter_map(|step| step_evidence(cluster, endpoint, direction, step))
        .collect()
}

fn step_evidence(
    cluster: &Cluster,
    endpoint: &Endpoint,
    direction: Direction,
    step: &PolicyHit,
) -> Option<String> {
    let tier = step.tier.as_deref().unwrap_or_default();
    let name = step.name.as_deref().unwrap_or_default();
    let lists = |profile: &str| endpoint.profile_ids.iter().any(|p| &**p == profile);
    match step.kind {
        HitKind::Policy => {
            let Some(found) = cluster.tiers.get(tier) else {
                return Some(format!("tier {tier} no longer exists"));
            };
            let Some(policy) = found.policies.get(name) else {
                return Some(format!("policy {name} is no longer in tier {tier}"));
            };
            if !policy
                .selector
                .evaluate(&cluster.effective_labels(endpoint))
            {
                return Some(format!(
                    "policy {name} of tier {tier} no longer selects the endpoint"
                ));
            }
            let rules = rules(direction, &policy.inbound_rules, &policy.outbound_rules);
            rule_evidence(
                &format!("policy {name} of tier {tier}"),
                rules,
                direction,
                step,
            )
        }
        HitKind::Profile => {
            if !lists(name) {
                return Some(format!("the endpoint no longer lists profile {name}"));
            }
            let Some(profile) = cluster.profiles.get(name).and_then(|p| p.rules.as_ref()) else {
                return Some(format!("profile {name} no longer exists"));
            };
            let rules = rules(direction, &profile.inbound_rules, &profile.outbound_rules);
            rule_evidence(&format!("profile {name}"), rules, direction, step)
        }
        HitKind::MissingProfile if !lists(name) => {
            Some(format!("the endpoint no longer lists profile {name}"))
        }
        HitKind::MissingProfile => (cluster.profiles.get(name).is_some_and(|p| p.exists()))
            .then(|| format!("profile {name} exists now")),
        HitKind::EndOfTier => {
            (!cluster.tiers.contains_key(tier)).then(|| format!("tier {tier} no longer exists"))
        }
        HitKind::NoProfileMatched | HitKind::StagedPolicy => None,
    }
}

fn rules<'a>(direction: Direction, inbound: &'a [Rule], outbound: &'a [Rule]) -> &'a [Rule] {
    match direction {
        Direction::Inbound => inbound,
        Direction::Outbound => outbound,
    }
}

fn rule_evidence(
    owner: &str,
    rules: &[Rule],
    direction: Direction,
    step: &PolicyHit,
) -> Option<String> {
    let index = step.rule_index.unwrap_or_default() as usize;
    match rules.get(index) {
        None => Some(format!(
            "{owner} has {} {direction} rule(s) now, not a rule {}",
            rules.len(),
            index + 1
        )),
        Some(rule) if rule.action != step.action => Some(format!(
            "rule {} of {owner} is {} now, was {}",
            index + 1,
            rule.action,
            step.action
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests;
