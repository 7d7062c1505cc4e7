//! The desired state of one host, computed from scratch from the cluster: what the dataplane
//! must program. The incremental calculator must always agree with this function; it is the
//! specification the property tests hold the calculator to.
//!
//! - **Endpoints**: each local endpoint with the tiers (and in each, the policies) that apply to
//!   it in evaluation order, and its profiles.
//! - **Policies** and **profiles**: the rules of those active locally, shared by every local
//!   endpoint that uses them.
//! - **Staged policies**: selected like policies and listed in each endpoint's tiers beside the
//!   policies, but never enforced (the dataplane only logs what they would do, with flow logs
//!   on); a tier whose only applying policies are staged drops nothing.
//! - **IP sets**: one per distinct canonical selector or tag used by an active rule, holding the
//!   addresses of the endpoints (cluster-wide) it selects.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;
use std::net::IpAddr;

use calico_model::policy::Policy;
use calico_model::rule::Rule;
use calico_model::selector::{Labels, Selector};
use fnv::FnvHasher;
use ipnet::IpNet;

use crate::cluster::{Cluster, Endpoint, EndpointKey};

/// A policy of a tier.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyId {
    pub tier: String,
    pub name: String,
}

/// The rules of a policy or profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rules {
    pub inbound: Vec<Rule>,
    pub outbound: Vec<Rule>,
    /// An untracked policy's rules (rendered in the raw table); false for profiles.
    pub untracked: bool,
}

/// What an IP set holds the addresses of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IpSetSource {
    Selector(Selector),
    Tag(String),
}

impl IpSetSource {
    /// A stable identifier, the same on every host and across restarts: a kind letter and the
    /// FNV-1a hash of the canonical selector or tag name, in hex (`s` + 16 or `t` + 16).
    pub fn id(&self) -> String {
        let (kind, text) = match self {
            IpSetSource::Selector(selector) => ('s', selector.canonical()),
            IpSetSource::Tag(tag) => ('t', tag.as_str()),
        };
        let mut hasher = FnvHasher::default();
        hasher.write(text.as_bytes());
        format!("{kind}{:016x}", hasher.finish())
    }
}

/// An IP set: its source and members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpSet {
    pub source: IpSetSource,
    pub members: BTreeSet<IpAddr>,
}

/// The policies of one tier that apply to an endpoint, in evaluation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierProgram {
    pub name: String,
    /// The enforced policies. Empty in a tier where only staged policies apply: such a tier
    /// enforces nothing (no end-of-tier drop).
    pub policies: Vec<PolicyId>,
    /// The staged policies that apply, in evaluation order (`order`, then name): evaluated at
    /// the start of the tier without enforcing. Always empty in untracked tiers.
    pub staged: Vec<PolicyId>,
}

impl TierProgram {
    /// Whether the tier enforces anything (has a policy that is not staged).
    pub fn enforces(&self) -> bool {
        !self.policies.is_empty()
    }
}

/// What one local endpoint needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointProgram {
    /// The Linux interface. A host endpoint given only by addresses gets the interface that
    /// holds them ([`Calculator::set_interface_addresses`](crate::Calculator)), and none while
    /// no interface does.
    pub interface: Option<String>,
    pub active: bool,
    /// Tiers with at least one (tracked) policy or staged policy that applies, in evaluation
    /// order.
    pub tiers: Vec<TierProgram>,
    /// For host endpoints, the same for the untracked policies (evaluated first, in the raw
    /// table). Always empty for workloads, which untracked policies do not apply to.
    pub untracked_tiers: Vec<TierProgram>,
    /// The endpoint's `profile_ids`, in order.
    pub profiles: Vec<String>,
    /// Whether any of them does not exist (the endpoint then drops what reaches its profiles).
    pub missing_profile: bool,
    /// The endpoint's addresses.
    pub addresses: Vec<IpAddr>,
    /// A workload's MAC: the dataplane adds static ARP/NDP entries for its addresses.
    pub mac: Option<[u8; 6]>,
    /// A workload's 1:1 NAT mappings, `(int_ip, ext_ip)` (`ipv4_nat` then `ipv6_nat`): the
    /// dataplane DNATs connections to `ext_ip` to `int_ip`, SNATs the endpoint's connections
    /// to its own `ext_ip` (hairpin) to come from it, and routes `ext_ip` to the workload.
    pub nat: Vec<(IpAddr, IpAddr)>,
}

/// Everything one host must program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredState {
    pub endpoints: BTreeMap<EndpointKey, EndpointProgram>,
    pub policies: BTreeMap<PolicyId, Rules>,
    /// The rules of the staged policies that apply to a local endpoint (a staged policy and a
    /// policy may share a tier and name: they are two objects).
    pub staged_policies: BTreeMap<PolicyId, Rules>,
    pub profiles: BTreeMap<String, Rules>,
    /// By [`IpSetSource::id`].
    pub ipsets: BTreeMap<String, IpSet>,
    /// Every IP pool's CIDR.
    pub pools: BTreeSet<IpNet>,
    /// The CIDRs of pools with `masquerade`: traffic from them to outside all pools is NATed.
    pub masquerade_pools: BTreeSet<IpNet>,
    /// Local workload endpoints refused because they are in a private address space (by the
    /// space's name): not in `endpoints`, so nothing is programmed for them; reported `error`.
    pub refused: BTreeMap<EndpointKey, String>,
}

impl DesiredState {
    /// The routes the host needs: each address of each active local workload endpoint, and
    /// each `ext_ip` of its NAT mappings, as a host route (/32 or /128) through the workload's
    /// interface. Inactive workloads and host endpoints get none. An `ext_ip` mapped by several
    /// endpoints goes to the first (by key); should it also be a local workload's own address,
    /// the address's route wins.
    pub fn routes(&self) -> BTreeMap<IpNet, &str> {
        let workloads = || {
            self.endpoints
                .iter()
                .filter(|(key, program)| matches!(key, EndpointKey::Workload(_)) && program.active)
                .filter_map(|(_, program)| Some((program.interface.as_deref()?, program)))
        };
        let external = workloads().flat_map(|(iface, program)| {
            program
                .nat
                .iter()
                .map(move |(_, ext)| (IpNet::from(*ext), iface))
        });
        let own = workloads().flat_map(|(iface, program)| {
            program
                .addresses
                .iter()
                .map(move |a| (IpNet::from(*a), iface))
        });
        let mut routes: BTreeMap<IpNet, &str> = BTreeMap::new();
        for (net, iface) in external {
            routes.entry(net).or_insert(iface);
        }
        routes.extend(own);
        routes
    }
}

/// The interfaces holding any of `expected` (a host endpoint's expected addresses), by name.
/// A host endpoint given only by addresses applies to the first of them.
pub fn interfaces_holding<'a>(
    expected: &[IpAddr],
    interfaces: &'a BTreeMap<String, BTreeSet<IpAddr>>,
) -> Vec<&'a str> {
    interfaces
        .iter()
        .filter(|(_, held)| expected.iter().any(|a| held.contains(a)))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// The pool sets of the desired state: all pools, and the masquerading ones.
pub fn pool_sets(cluster: &Cluster) -> (BTreeSet<IpNet>, BTreeSet<IpNet>) {
    let all = cluster.pools.keys().copied().collect();
    let masquerade = cluster
        .pools
        .iter()
        .filter(|(_, pool)| pool.masquerade)
        .map(|(cidr, _)| *cidr)
        .collect();
    (all, masquerade)
}

/// Computes the desired state of `hostname` from scratch.
pub fn desired_state(cluster: &Cluster, hostname: &str) -> DesiredState {
    let mut state = DesiredState::default();
    let tiers = cluster.ordered_tiers();
    for (key, endpoint) in &cluster.endpoints {
        if key.hostname() != hostname {
            continue;
        }
        let labels = cluster.effective_labels(endpoint);
        let mut program = EndpointProgram {
            interface: endpoint.interface.clone(),
            active: endpoint.active,
            tiers: Vec::new(),
            untracked_tiers: Vec::new(),
            profiles: endpoint.profile_ids.iter().map(|p| p.to_string()).collect(),
            missing_profile: false,
            addresses: endpoint.addresses.clone(),
            mac: endpoint.mac,
            nat: endpoint.nat.clone(),
        };
        let host = matches!(key, EndpointKey::Host(_));
        for (tier_name, tier) in &tiers {
            let applied = |policies: &'_ BTreeMap<String, Policy>| {
                let mut applied: Vec<(PolicyId, Rules)> = Vec::new();
                let mut found: Vec<(&String, &Policy)> = policies
                    .iter()
                    .filter(|(_, p)| applies(p, host, &labels))
                    .collect();
                found.sort_by(|a, b| a.1.order.cmp(&b.1.order).then(a.0.cmp(b.0)));
                for (name, policy) in found {
                    let id = PolicyId {
                        tier: (*tier_name).to_owned(),
                        name: name.clone(),
                    };
                    applied.push((id, rules_of(policy)));
                }
                applied
            };
            let staged = applied(&tier.staged);
            let (untracked, tracked): (Vec<_>, Vec<_>) = applied(&tier.policies)
                .into_iter()
                .partition(|(_, rules)| rules.untracked);
            let ids = |list: &[(PolicyId, Rules)]| -> Vec<PolicyId> {
                list.iter().map(|(id, _)| id.clone()).collect()
            };
            if !tracked.is_empty() || !staged.is_empty() {
                program.tiers.push(TierProgram {
                    name: (*tier_name).to_owned(),
                    policies: ids(&tracked),
                    staged: ids(&staged),
                });
            }
            if !untracked.is_empty() {
                program.untracked_tiers.push(TierProgram {
                    name: (*tier_name).to_owned(),
                    policies: ids(&untracked),
                    staged: Vec::new(),
                });
            }
            state.policies.extend(tracked.into_iter().chain(untracked));
            state.staged_policies.extend(staged);
        }
        for id in endpoint.profile_ids.iter() {
            match cluster.profiles.get(&**id).and_then(|p| p.rules.as_ref()) {
                Some(rules) => {
                    let rules = Rules {
                        inbound: rules.inbound_rules.clone(),
                        outbound: rules.outbound_rules.clone(),
                        untracked: false,
                    };
                    state.profiles.insert(id.to_string(), rules);
                }
                None => program.missing_profile = true,
            }
        }
        state.endpoints.insert(key.clone(), program);
    }
    state.ipsets = ipsets(cluster, &state);
    (state.pools, state.masquerade_pools) = pool_sets(cluster);
    state
}

/// Whether a policy applies to an endpoint: its selector matches, and an untracked policy only
/// to a host endpoint.
pub fn applies<L: Labels + ?Sized>(policy: &Policy, host: bool, labels: &L) -> bool {
    (host || !policy.untracked) && policy.selector.evaluate(labels)
}

fn rules_of(policy: &Policy) -> Rules {
    Rules {
        inbound: policy.inbound_rules.clone(),
        outbound: policy.outbound_rules.clone(),
        untracked: policy.untracked,
    }
}

/// The IP sets the active rules use, with their members.
fn ipsets(cluster: &Cluster, state: &DesiredState) -> BTreeMap<String, IpSet> {
    let all_rules = state
        .policies
        .values()
        .chain(state.staged_policies.values())
        .chain(state.profiles.values())
        .flat_map(|r| r.inbound.iter().chain(&r.outbound));
    let mut sources = BTreeMap::new();
    for rule in all_rules {
        for source in ipset_sources(rule) {
            sources.entry(source.id()).or_insert(source);
        }
    }
    sources
        .into_iter()
        .map(|(id, source)| {
            let members = members(cluster, &source);
            (id, IpSet { source, members })
        })
        .collect()
}

/// The tags and selectors a rule matches on, positive and negated.
pub fn ipset_sources(rule: &Rule) -> impl Iterator<Item = IpSetSource> + '_ {
    let tags = [
        &rule.src_tag,
        &rule.not_src_tag,
        &rule.dst_tag,
        &rule.not_dst_tag,
    ]
    .into_iter()
    .flatten()
    .map(|tag| IpSetSource::Tag(tag.clone()));
    let selectors = [
        &rule.src_selector,
        &rule.not_src_selector,
        &rule.dst_selector,
        &rule.not_dst_selector,
    ]
    .into_iter()
    .flatten()
    .map(|s: &Selector| IpSetSource::Selector(s.clone()));
    tags.chain(selectors)
}

/// Whether an endpoint belongs to the set.
pub fn selects(cluster: &Cluster, source: &IpSetSource, endpoint: &Endpoint) -> bool {
    match source {
        IpSetSource::Tag(tag) => cluster.has_tag(endpoint, tag),
        IpSetSource::Selector(selector) => selector.evaluate(&cluster.effective_labels(endpoint)),
    }
}

fn members(cluster: &Cluster, source: &IpSetSource) -> BTreeSet<IpAddr> {
    cluster
        .endpoints
        .values()
        .filter(|e| selects(cluster, source, e))
        .flat_map(|e| e.addresses.iter().copied())
        .collect()
}
