//! Endpoint pairs before and after a change: every ordered pair of ends (the endpoints of the
//! live model, and an address of each net the changed rules name) judged with every probe, in
//! the model before and the model after. A packet from A to B passes when A's outbound rules
//! allow it (if A is an endpoint) and B's inbound rules do (if B is an endpoint), as the hosts
//! at both ends enforce them.
//!
//! Only pairs with an end the change can judge differently are judged twice (`Scope`): an
//! endpoint a changed policy selects (before or after), or one that lists a changed profile;
//! every endpoint when a tier's order or a profile's tags or labels change (they move every
//! selector and tag).
//!
//! Ends that no rule can tell apart are judged once (`classes`): the evaluator sees an end only
//! through its kind, whether it is active, its labels (its own over its profiles'), its
//! profiles (their tags), and which of the nets any rule names contain its address. Ends alike
//! in all of these judge alike, so one pair of a class pair stands for all of its pairs; a
//! cluster of many endpoints with few distinct label sets costs pairs of classes, not of
//! endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_calc::{Cluster, Direction, EndpointKey, Packet, Verdict, explain};
use calico_model::flow::PolicyHit;
use calico_model::key::Key;
use calico_model::rule::{IpVersion, Rule};
use ipnet::IpNet;

use super::probes::Probe;
use crate::commands::flows::judge;

/// Which endpoints a change can judge differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Some(BTreeSet<EndpointKey>),
}

impl Scope {
    fn covers(&self, key: &EndpointKey) -> bool {
        match self {
            Scope::All => true,
            Scope::Some(keys) => keys.contains(key),
        }
    }
}

/// The scope of a change of `changed` keys, from `before` to `after`.
pub fn scope(before: &Cluster, after: &Cluster, changed: &[Key]) -> Scope {
    let mut keys = BTreeSet::new();
    for key in changed {
        match key {
            Key::Policy { tier, policy } => {
                let versions =
                    [before, after].map(|c| c.tiers.get(tier).and_then(|t| t.policies.get(policy)));
                for policy in versions.into_iter().flatten() {
                    let selects = |e: &calico_calc::Endpoint| {
                        policy.selector.evaluate(&before.effective_labels(e))
                    };
                    let found = before.endpoints.iter().filter(|(_, e)| selects(e));
                    keys.extend(found.map(|(k, _)| k.clone()));
                }
            }
            Key::ProfileRules { profile } => {
                let lists =
                    |e: &calico_calc::Endpoint| e.profile_ids.iter().any(|p| **p == **profile);
                let found = before.endpoints.iter().filter(|(_, e)| lists(e));
                keys.extend(found.map(|(k, _)| k.clone()));
            }
            _ => return Scope::All,
        }
    }
    Scope::Some(keys)
}

/// One end of a pair.
#[derive(Debug, Clone)]
pub struct End {
    /// The endpoint's key, or the net's address.
    pub name: String,
    pub endpoint: Option<EndpointKey>,
    pub address: IpAddr,
}

/// The ends of `version`: each endpoint's first address of that version, and an address in
/// each net `rules` name that no endpoint has.
pub fn ends<'a>(
    cluster: &Cluster,
    rules: impl IntoIterator<Item = &'a Rule>,
    version: IpVersion,
) -> Vec<End> {
    let fits = |a: &IpAddr| IpVersion::of_addr(a) == version;
    let mut ends: Vec<End> = (cluster.endpoints.iter())
        .filter_map(|(key, e)| {
            let address = e.addresses.iter().copied().find(fits)?;
            let name = key.to_string();
            Some(End {
                name,
                endpoint: Some(key.clone()),
                address,
            })
        })
        .collect();
    let nets: BTreeSet<IpNet> = (rules.into_iter())
        .flat_map(|rule| rule.nets().map(|(_, net)| *net))
        .collect();
    for net in nets {
        let address = net.hosts().next().unwrap_or(net.addr());
        if fits(&address) && cluster.endpoints_with_address(address).next().is_none() {
            ends.push(End {
                name: format!("{address} (in {net})"),
                endpoint: None,
                address,
            });
        }
    }
    ends
}

/// How one end judged a packet: the verdict and the step, for the end's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub verdict: Verdict,
    /// The step that decided, as flows print it (or the reason when no step did).
    pub step: String,
    pub hit: Option<PolicyHit>,
}

fn side(cluster: &Cluster, end: &End, direction: Direction, packet: &Packet) -> Option<Side> {
    let key = end.endpoint.as_ref()?;
    let explained = explain(cluster, key, direction, packet);
    let hit = judge::hit_of(&explained.reason);
    let step = hit
        .as_ref()
        .map_or_else(|| explained.reason.to_string(), ToString::to_string);
    Some(Side {
        verdict: explained.verdict,
        step,
        hit,
    })
}

/// A pair and probe whose verdict changes.
#[derive(Debug, Clone)]
pub struct PairChange {
    pub source: String,
    pub destination: String,
    pub probe: Probe,
    pub before: Verdict,
    pub after: Verdict,
    /// The ends whose own verdict changed: `source outbound` or `destination inbound`, with
    /// how they judge before and after.
    pub sides: Vec<(&'static str, Option<Side>, Option<Side>)>,
}

/// What judging the pairs found.
#[derive(Debug, Default)]
pub struct Pairs {
    pub ends: usize,
    pub judged: usize,
    pub changes: Vec<PairChange>,
}

/// Judges every pair with an end in `scope`, with each probe of the pair's IP version; `nets`
/// are every net any rule of the model names (before and after).
pub fn judge_pairs(
    before: &Cluster,
    after: &Cluster,
    scope: &Scope,
    ends_of: impl Fn(IpVersion) -> Vec<End>,
    probes: &[Probe],
    nets: &[IpNet],
) -> Pairs {
    let mut pairs = Pairs::default();
    for version in [IpVersion::V4, IpVersion::V6] {
        let ends = ends_of(version);
        pairs.ends += ends.len();
        let probes: Vec<&Probe> = (probes.iter())
            .filter(|p| p.ip_version().is_none_or(|v| v == version))
            .collect();
        let moved = |end: &End| end.endpoint.as_ref().is_some_and(|k| scope.covers(k));
        let classes = classes(before, &ends, nets);
        for source in &classes {
            for destination in &classes {
                let (a, b) = (&ends[source[0]], &ends[destination[0]]);
                let b = match std::ptr::eq(source, destination) {
                    true => match source.get(1) {
                        Some(second) => &ends[*second],
                        None => continue,
                    },
                    false => b,
                };
                if (a.endpoint.is_none() && b.endpoint.is_none()) || (!moved(a) && !moved(b)) {
                    continue;
                }
                let members = (source.len() * destination.len())
                    - usize::from(std::ptr::eq(source, destination)) * source.len();
                for probe in &probes {
                    pairs.judged += members;
                    let Some(change) = judge_one(before, after, (a, b, moved(a), moved(b)), probe)
                    else {
                        continue;
                    };
                    for &s in source {
                        for &d in destination.iter().filter(|&&d| d != s) {
                            let mut change = change.clone();
                            change.source.clone_from(&ends[s].name);
                            change.destination.clone_from(&ends[d].name);
                            pairs.changes.push(change);
                        }
                    }
                }
            }
        }
    }
    pairs.changes.sort_by(|a, b| {
        (&a.source, &a.destination, a.probe).cmp(&(&b.source, &b.destination, b.probe))
    });
    pairs
}

/// The ends grouped by what the evaluator can see of them (indexes into `ends`).
fn classes(cluster: &Cluster, ends: &[End], nets: &[IpNet]) -> Vec<Vec<usize>> {
    let mut classes: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    for (index, end) in ends.iter().enumerate() {
        let mut key: Vec<String> = nets
            .iter()
            .filter(|net| net.contains(&end.address))
            .map(ToString::to_string)
            .collect();
        let owners = cluster.endpoints_with_address(end.address).count();
        match end
            .endpoint
            .as_ref()
            .and_then(|k| Some((k, cluster.endpoints.get(k)?)))
        {
            // An address two endpoints claim resolves to both: such an end stands alone.
            Some(_) if owners > 1 => key.push(format!("alone {}", end.name)),
            Some((found_key, found)) => {
                let kind = matches!(found_key, EndpointKey::Host(_));
                key.push(format!("host {kind} active {}", found.active));
                key.push(format!("profiles {:?}", found.profile_ids));
                let labels = cluster.effective_labels(found);
                key.extend(labels.iter().map(|(k, v)| format!("label {k}={v}")));
            }
            None => key.push(format!("net {}", end.address)),
        }
        classes.entry(key).or_default().push(index);
    }
    classes.into_values().collect()
}

fn judge_one(
    before: &Cluster,
    after: &Cluster,
    (source, destination, source_moved, destination_moved): (&End, &End, bool, bool),
    probe: &Probe,
) -> Option<PairChange> {
    let packet = Packet {
        src: source.address,
        dst: destination.address,
        protocol: probe.protocol,
        src_port: probe.src_port,
        dst_port: probe.dst_port,
        icmp_type: probe.icmp_type,
        icmp_code: probe.icmp_code,
    };
    let out_before = side(before, source, Direction::Outbound, &packet);
    let in_before = side(before, destination, Direction::Inbound, &packet);
    let out_after = match source_moved {
        true => side(after, source, Direction::Outbound, &packet),
        false => out_before.clone(),
    };
    let in_after = match destination_moved {
        true => side(after, destination, Direction::Inbound, &packet),
        false => in_before.clone(),
    };
    let passes = |a: &Option<Side>, b: &Option<Side>| {
        let allows = |s: &Option<Side>| s.as_ref().is_none_or(|s| s.verdict == Verdict::Allow);
        if allows(a) && allows(b) {
            Verdict::Allow
        } else {
            Verdict::Deny
        }
    };
    let (was, will) = (
        passes(&out_before, &in_before),
        passes(&out_after, &in_after),
    );
    if was == will {
        return None;
    }
    let mut sides = Vec::new();
    for (name, old, new) in [
        ("source outbound", out_before, out_after),
        ("destination inbound", in_before, in_after),
    ] {
        let verdict = |s: &Option<Side>| s.as_ref().map(|s| s.verdict);
        if verdict(&old) != verdict(&new) {
            sides.push((name, old, new));
        }
    }
    Some(PairChange {
        source: source.name.clone(),
        destination: destination.name.clone(),
        probe: *probe,
        before: was,
        after: will,
        sides,
    })
}

#[cfg(test)]
mod tests;
