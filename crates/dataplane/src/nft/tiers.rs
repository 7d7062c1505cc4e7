//! How a new connection reaches the policies of a tier: only those that could match it.
//!
//! A tier's policies are walked in order until one decides (accept, drop, or next-tier). With
//! iptables every policy is a jump and a mark test, so a packet pays for each policy of the
//! tier, matching or not. Here a tier of several policies gets one dispatch chain, shared by
//! every endpoint with the same list, built from what the policies' rules can match:
//!
//! - a policy with no rules in this direction cannot decide anything and is left out;
//! - a policy whose every rule names a protocol (tcp, udp, sctp, udplite, icmp, icmpv6), and,
//!   for the protocols with ports, destination ports, is *keyed* by those (protocol, port
//!   range) pairs (a rule naming only a protocol covers all ports);
//! - a run of [`MIN_RUN`] or more consecutive keyed policies becomes one verdict map lookup,
//!   `meta l4proto . th dport vmap @tier-…-ports<n>`, whose elements jump to a chain holding,
//!   in order, just the policies of the run that cover that protocol and port range; a packet
//!   whose key is in no element skips the whole run;
//! - every other policy is a plain jump, in its place.
//!
//! Between two steps, `meta mark & (accept|pass) != 0 return` leaves the tier as soon as a
//! policy decided. The order of evaluation is the tier's order, so the verdict is the one the
//! iptables rendering (and `calicoctl policy explain`) gives; only the walk is shorter.

use std::collections::{BTreeMap, BTreeSet};

use calico_calc::{PolicyId, Rules};
use calico_linux::nft::{Element, Expr, MapKey, Ports, SetKind, SetSpec, Verdict};
use calico_model::rule::Protocol;

use super::names;
use super::rules::{jump, plain, ports_of, return_if_decided};
use super::table::{NftChain, NftSet};
use crate::firewall::config::RenderConfig;

/// The fewest consecutive keyed policies worth a map lookup.
pub const MIN_RUN: usize = 3;

/// A run's chains may hold at most this many jumps per policy of the run (plus a little):
/// past it (ranges nested inside ranges) the run is walked in order instead.
const JUMPS_PER_POLICY: usize = 8;

/// The policies of one tier that apply to an endpoint, in order, in one direction: the key of a
/// shared dispatch chain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TierList {
    pub inbound: bool,
    pub policies: Vec<PolicyId>,
}

impl TierList {
    /// The chain an endpoint jumps to for this tier: the policy's own chain for a tier of one,
    /// else the tier's dispatch chain. Depends on the list only, never on the rules, so a
    /// policy edit never rewrites an endpoint's chain.
    pub fn entry(&self) -> Option<String> {
        match self.policies.as_slice() {
            [] => None,
            [one] => Some(names::policy_chain(self.inbound, &one.tier, &one.name)),
            _ => Some(self.chain()),
        }
    }

    /// Whether the list has a dispatch chain of its own.
    pub fn has_chain(&self) -> bool {
        self.policies.len() > 1
    }

    pub fn chain(&self) -> String {
        let mut text = String::new();
        for id in &self.policies {
            text.push_str(&id.tier);
            text.push('/');
            text.push_str(&id.name);
            text.push('\n');
        }
        names::tier_chain(self.inbound, names::hash(&text))
    }
}

/// How a policy takes part in a tier's dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// No rules in this direction: left out.
    Inert,
    /// Walked whatever the packet.
    Always,
    /// Walked only for these protocols and destination port ranges.
    Keyed(Vec<(u8, Ports)>),
}

/// The protocols a keyed rule may name without ports (all ports of it then).
fn keyable(protocol: Protocol) -> bool {
    protocol.has_ports() || protocol.is_icmp()
}

fn role(rules: Option<&Rules>, inbound: bool) -> Role {
    let Some(rules) = rules else {
        return Role::Always;
    };
    let list = if inbound {
        &rules.inbound
    } else {
        &rules.outbound
    };
    if list.is_empty() {
        return Role::Inert;
    }
    let mut keys = Vec::new();
    for rule in list {
        let Some(protocol) = rule.protocol.filter(|p| keyable(*p)) else {
            return Role::Always;
        };
        let proto = protocol.number();
        if rule.dst_ports.is_empty() {
            keys.push((
                proto,
                Ports {
                    first: 0,
                    last: u16::MAX,
                },
            ));
        } else {
            keys.extend(rule.dst_ports.iter().map(|r| (proto, ports_of(r))));
        }
    }
    Role::Keyed(keys)
}

/// One step of a tier's dispatch chain.
enum Step {
    Jump(String),
    /// A run of keyed policies: their chains and keys.
    Run(Vec<(String, Vec<(u8, Ports)>)>),
}

/// The dispatch chain of `list` (a tier of two or more policies) and the maps and chains of its
/// runs.
pub fn render(
    list: &TierList,
    policies: &BTreeMap<PolicyId, Rules>,
    config: &RenderConfig,
) -> (Vec<NftChain>, Vec<NftSet>) {
    let chain_name = list.chain();
    let mut steps: Vec<Step> = Vec::new();
    let mut run: Vec<(String, Vec<(u8, Ports)>)> = Vec::new();
    let close = |run: &mut Vec<(String, Vec<(u8, Ports)>)>, steps: &mut Vec<Step>| {
        if run.len() >= MIN_RUN {
            steps.push(Step::Run(std::mem::take(run)));
        } else {
            steps.extend(run.drain(..).map(|(chain, _)| Step::Jump(chain)));
        }
    };
    for id in &list.policies {
        let chain = names::policy_chain(list.inbound, &id.tier, &id.name);
        match role(policies.get(id), list.inbound) {
            Role::Inert => {}
            Role::Keyed(keys) => run.push((chain, keys)),
            Role::Always => {
                close(&mut run, &mut steps);
                steps.push(Step::Jump(chain));
            }
        }
    }
    close(&mut run, &mut steps);

    let mut chains = Vec::new();
    let mut sets = Vec::new();
    let mut main = NftChain::new(&chain_name);
    let last = steps.len().saturating_sub(1);
    for (index, step) in steps.into_iter().enumerate() {
        match step {
            Step::Jump(policy) => main.rules.push(plain(vec![jump(policy)])),
            Step::Run(run) => {
                let map = format!("{chain_name}-ports{index}");
                match run_map(&map, &run, config) {
                    Some((set, run_chains)) => {
                        main.rules.push(plain(vec![Expr::Vmap {
                            key: MapKey::L4ProtoDport,
                            map: map.clone(),
                        }]));
                        sets.push(set);
                        chains.extend(run_chains);
                    }
                    None => {
                        // Too many jumps for a map: in order, as a plain tier.
                        let n = run.len();
                        for (k, (policy, _)) in run.into_iter().enumerate() {
                            main.rules.push(plain(vec![jump(policy)]));
                            if k + 1 < n {
                                main.rules.push(return_if_decided(config));
                            }
                        }
                    }
                }
            }
        }
        if index < last {
            main.rules.push(return_if_decided(config));
        }
    }
    chains.insert(0, main);
    (chains, sets)
}

/// The verdict map of a run and the chains its elements jump to; `None` when the chains would
/// hold too many jumps.
fn run_map(
    map: &str,
    run: &[(String, Vec<(u8, Ports)>)],
    config: &RenderConfig,
) -> Option<(NftSet, Vec<NftChain>)> {
    let protocols: BTreeSet<u8> = run
        .iter()
        .flat_map(|(_, keys)| keys.iter().map(|(p, _)| *p))
        .collect();
    // Covering policy lists (indexes into the run) → their chain; elements.
    let mut lists: BTreeMap<Vec<usize>, String> = BTreeMap::new();
    let mut elements = BTreeSet::new();
    let mut jumps = 0;
    for proto in protocols {
        for (ports, covering) in elementary(run, proto) {
            let next = lists.len();
            let chain = lists
                .entry(covering.clone())
                .or_insert_with(|| {
                    jumps += covering.len();
                    format!("{map}-{next}")
                })
                .clone();
            elements.insert(Element::ProtoPorts {
                proto,
                ports,
                verdict: Verdict::Jump(chain),
            });
        }
    }
    if jumps > JUMPS_PER_POLICY * run.len() + 64 {
        return None;
    }
    let chains = lists
        .into_iter()
        .map(|(covering, name)| {
            let mut chain = NftChain::new(&name);
            for (k, index) in covering.iter().enumerate() {
                chain.rules.push(plain(vec![jump(run[*index].0.clone())]));
                if k + 1 < covering.len() {
                    chain.rules.push(return_if_decided(config));
                }
            }
            chain
        })
        .collect();
    let set = NftSet {
        spec: SetSpec {
            name: map.to_owned(),
            kind: SetKind::ProtoPortVmap,
            comment: Some("protocol and port -> the policies that name them".to_owned()),
        },
        elements,
    };
    Some((set, chains))
}

/// The port ranges of `proto` cut where any policy's range begins or ends, each with the
/// policies (indexes into `run`, in order) that cover it; neighbours with the same policies are
/// merged, ranges no policy covers are left out.
fn elementary(run: &[(String, Vec<(u8, Ports)>)], proto: u8) -> Vec<(Ports, Vec<usize>)> {
    let ranges: Vec<(usize, Ports)> = run
        .iter()
        .enumerate()
        .flat_map(|(i, (_, keys))| {
            keys.iter()
                .filter(move |(p, _)| *p == proto)
                .map(move |(_, ports)| (i, *ports))
        })
        .collect();
    let mut cuts: BTreeSet<u32> = BTreeSet::new();
    for (_, ports) in &ranges {
        cuts.insert(u32::from(ports.first));
        cuts.insert(u32::from(ports.last) + 1);
    }
    let cuts: Vec<u32> = cuts.into_iter().collect();
    let mut out: Vec<(Ports, Vec<usize>)> = Vec::new();
    for pair in cuts.windows(2) {
        let (first, last) = (pair[0], pair[1] - 1);
        let covering: Vec<usize> = ranges
            .iter()
            .filter(|(_, p)| u32::from(p.first) <= first && last <= u32::from(p.last))
            .map(|(i, _)| *i)
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .collect();
        if covering.is_empty() {
            continue;
        }
        let ports = Ports {
            first: first as u16,
            last: last as u16,
        };
        match out.last_mut() {
            Some((previous, list))
                if *list == covering && u32::from(previous.last) + 1 == first =>
            {
                previous.last = ports.last;
            }
            _ => out.push((ports, covering)),
        }
    }
    out
}

/// The policies of a tier a packet would walk, for tests: by protocol and destination port.
#[cfg(test)]
pub(crate) fn walked(chains: &[NftChain], sets: &[NftSet], proto: u8, port: u16) -> Vec<String> {
    let by_name: BTreeMap<&str, &NftChain> = chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut out = Vec::new();
    fn walk(
        chain: &NftChain,
        by_name: &BTreeMap<&str, &NftChain>,
        sets: &[NftSet],
        proto: u8,
        port: u16,
        out: &mut Vec<String>,
    ) {
        for rule in &chain.rules {
            for expr in &rule.exprs {
                match expr {
                    Expr::Verdict(Verdict::Jump(target)) => match by_name.get(target.as_str()) {
                        Some(next) => walk(next, by_name, sets, proto, port, out),
                        None => out.push(target.clone()),
                    },
                    Expr::Vmap { map, .. } => {
                        let set = sets.iter().find(|s| &s.spec.name == map).unwrap();
                        for element in &set.elements {
                            if let Element::ProtoPorts {
                                proto: p,
                                ports,
                                verdict: Verdict::Jump(target),
                            } = element
                                && *p == proto
                                && ports.first <= port
                                && port <= ports.last
                            {
                                walk(by_name[target.as_str()], by_name, sets, proto, port, out);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    walk(&chains[0], &by_name, sets, proto, port, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, inbound: &str) -> (PolicyId, Rules) {
        let id = PolicyId {
            tier: "t".to_owned(),
            name: name.to_owned(),
        };
        let inbound: Vec<calico_model::rule::Rule> = serde_json::from_str(inbound).unwrap();
        let rules = Rules {
            inbound,
            outbound: Vec::new(),
            untracked: false,
        };
        (id, rules)
    }

    fn chain_of(name: &str) -> String {
        names::policy_chain(true, "t", name)
    }

    /// `walked` for a tier built from `policies` (in order).
    fn walk(policies: &[(PolicyId, Rules)], proto: u8, port: u16) -> Vec<String> {
        let list = TierList {
            inbound: true,
            policies: policies.iter().map(|(id, _)| id.clone()).collect(),
        };
        let map: BTreeMap<PolicyId, Rules> = policies.iter().cloned().collect();
        let (chains, sets) = render(&list, &map, &RenderConfig::default());
        walked(&chains, &sets, proto, port)
    }

    #[test]
    fn a_connection_visits_only_the_policies_that_name_its_port() {
        let mut policies: Vec<(PolicyId, Rules)> = (0..100)
            .map(|i| {
                policy(
                    &format!("p{i}"),
                    &format!(
                        r#"[{{"protocol": "tcp", "dst_ports": [{}], "action": "allow"}}]"#,
                        1000 + i
                    ),
                )
            })
            .collect();
        // One that matches everything, in the middle: always walked, in its place.
        policies.insert(
            50,
            policy("any", r#"[{"src_net": "10.0.0.0/8", "action": "deny"}]"#),
        );
        // One without inbound rules: never walked.
        policies.insert(10, policy("none", "[]"));
        assert_eq!(walk(&policies, 6, 1007), [chain_of("p7"), chain_of("any")]);
        assert_eq!(walk(&policies, 6, 1070), [chain_of("any"), chain_of("p70")]);
        assert_eq!(
            walk(&policies, 17, 1007),
            [chain_of("any")],
            "udp names no policy"
        );
        assert_eq!(walk(&policies, 6, 80), [chain_of("any")]);
    }

    #[test]
    fn overlapping_ranges_keep_the_tier_order() {
        let policies = vec![
            policy(
                "wide",
                r#"[{"protocol": "tcp", "dst_ports": ["1:2000"], "action": "allow"}]"#,
            ),
            policy(
                "web",
                r#"[{"protocol": "tcp", "dst_ports": [80, 443], "action": "deny"}]"#,
            ),
            policy("icmp", r#"[{"protocol": "icmp", "action": "deny"}]"#),
            policy(
                "narrow",
                r#"[{"protocol": "tcp", "dst_ports": ["70:90"], "action": "allow"}]"#,
            ),
        ];
        assert_eq!(
            walk(&policies, 6, 80),
            [chain_of("wide"), chain_of("web"), chain_of("narrow")]
        );
        assert_eq!(walk(&policies, 6, 443), [chain_of("wide"), chain_of("web")]);
        assert_eq!(walk(&policies, 6, 3000), Vec::<String>::new());
        assert_eq!(walk(&policies, 1, 0), [chain_of("icmp")]);
    }

    #[test]
    fn short_runs_and_unknown_policies_are_walked_in_order() {
        let policies = vec![
            policy(
                "a",
                r#"[{"protocol": "tcp", "dst_ports": [1], "action": "allow"}]"#,
            ),
            policy("b", r#"[{"action": "allow"}]"#),
            policy(
                "c",
                r#"[{"protocol": "udp", "dst_ports": [2], "action": "allow"}]"#,
            ),
        ];
        // Runs of fewer than MIN_RUN keyed policies are not worth a map.
        assert_eq!(
            walk(&policies, 6, 9),
            [chain_of("a"), chain_of("b"), chain_of("c")]
        );
    }
}
