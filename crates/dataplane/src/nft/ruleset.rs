//! The desired state as Calico's nf_tables table (`inet calico`), rendered incrementally: each
//! piece of the table has an owner (an endpoint, a policy, a profile, a set, a tier's policy
//! list, the fixed frame), a change re-renders only the owners it touched, and the renderer
//! notes what that changed ([`Delta`]) for the plan (`plan.rs`).
//!
//! The frame, for workloads (`<p>` for each `InterfacePrefix`):
//!
//! ```text
//! filter-forward:  iifname/oifname "<p>*": ct invalid drop, ct established,related accept
//!                  clear marks; iifname "<p>*" jump from-wl-dispatch; oifname "<p>*" jump to-wl-dispatch
//!                  accept-marked accept
//! from-wl-dispatch: iifname vmap @from-wl (→ goto from-wl-<iface>); else drop
//! from-wl-<iface>:  anti-spoofing; clear marks; per tier: (flow logs on) jump each staged
//!                   policy's chain, which logs and returns; jump its policy or tier chain,
//!                   return if accepted, drop unless passed (not in a tier of staged policies
//!                   only); per profile: jump, return if accepted; drop
//! ```
//!
//! Host endpoints hang off `filter-input` / `filter-output` (`iifname vmap @to-hep`, `oifname
//! vmap @from-hep`) and `raw-prerouting` / `raw-output` for untracked policy; NAT lives in the
//! `nat-*` base chains. Marks, verdicts and comments are those of the iptables rendering
//! (`crate::iptables`), so both backends judge a packet alike (the semantics moving to
//! `crate::firewall`, which the iptables backend already encodes).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use calico_calc::{Changes, DesiredState, EndpointKey, PolicyId};
use calico_linux::nft::{Element, SetSpec};

use super::names::{self, staged_chain};
use super::parts::{Part, Renderer};
use super::rules::RuleOwner;
use super::table::{NftChain, NftSet};
use super::tiers::{self, TierList};
use crate::firewall::config::RenderConfig;

/// The whole table as rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<String, NftChain>,
    pub sets: BTreeMap<String, NftSet>,
}

/// What re-rendering changed, for the plan: chains and sets as they were before the first
/// change touched them (`None`: they did not exist), and the elements added to and removed
/// from sets that exist on both sides.
#[derive(Debug, Default)]
pub struct Delta {
    pub chains_before: BTreeMap<String, Option<NftChain>>,
    pub sets_before: BTreeMap<String, Option<SetSpec>>,
    pub added: BTreeMap<String, BTreeSet<Element>>,
    pub removed: BTreeMap<String, BTreeSet<Element>>,
}

/// What a piece of the table is rendered from; the unit of re-rendering.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Owner {
    Frame,
    Pools,
    IpSet(String),
    Endpoint(EndpointKey),
    Nat,
    Policy(PolicyId),
    StagedPolicy(PolicyId),
    Profile(String),
    Tier(TierList),
}

/// The table as last rendered, and the indexes that say which owners a change touches.
#[derive(Debug)]
pub struct NftRenderer {
    config: RenderConfig,
    owned: HashMap<Owner, Part>,
    current: Ruleset,
    delta: Delta,
    /// The tier lists each endpoint uses, and who uses each list.
    endpoint_tiers: BTreeMap<EndpointKey, Vec<TierList>>,
    tier_users: BTreeMap<TierList, BTreeSet<EndpointKey>>,
    policy_tiers: BTreeMap<PolicyId, BTreeSet<TierList>>,
    /// The endpoints on each interface: the first (by key) owns its chains and map elements.
    claims: BTreeMap<String, BTreeSet<EndpointKey>>,
    endpoint_iface: BTreeMap<EndpointKey, String>,
    /// Endpoints with 1:1 NAT mappings.
    nat_users: BTreeSet<EndpointKey>,
}

impl NftRenderer {
    pub fn new(config: RenderConfig) -> NftRenderer {
        NftRenderer {
            config,
            owned: HashMap::new(),
            current: Ruleset::default(),
            delta: Delta::default(),
            endpoint_tiers: BTreeMap::new(),
            tier_users: BTreeMap::new(),
            policy_tiers: BTreeMap::new(),
            claims: BTreeMap::new(),
            endpoint_iface: BTreeMap::new(),
            nat_users: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &RenderConfig {
        &self.config
    }

    /// The table as last rendered.
    pub fn ruleset(&self) -> &Ruleset {
        &self.current
    }

    /// Renders everything afresh (start-up and full syncs).
    pub fn render_all(&mut self, state: &DesiredState) -> &Ruleset {
        *self = NftRenderer::new(self.config.clone());
        let mut owners = vec![Owner::Frame, Owner::Pools, Owner::Nat];
        owners.extend(state.ipsets.keys().cloned().map(Owner::IpSet));
        owners.extend(state.policies.keys().cloned().map(Owner::Policy));
        owners.extend(
            state
                .staged_policies
                .keys()
                .cloned()
                .map(Owner::StagedPolicy),
        );
        owners.extend(state.profiles.keys().cloned().map(Owner::Profile));
        for key in state.endpoints.keys() {
            self.track_endpoint(state, key);
        }
        owners.extend(state.endpoints.keys().cloned().map(Owner::Endpoint));
        owners.extend(self.tier_users.keys().cloned().map(Owner::Tier));
        for owner in owners {
            self.rerender(state, &owner);
        }
        self.delta = Delta::default();
        &self.current
    }

    /// Re-renders what `changes` touched; returns what that changed.
    pub fn render_changes(&mut self, state: &DesiredState, changes: &Changes) -> Delta {
        let mut owners: BTreeSet<Owner> = BTreeSet::new();
        for key in &changes.endpoints {
            let old_iface = self.endpoint_iface.get(key).cloned();
            let old_tiers = self.endpoint_tiers.get(key).cloned().unwrap_or_default();
            let had_nat = self.nat_users.contains(key);
            self.track_endpoint(state, key);
            let new_iface = self.endpoint_iface.get(key).cloned();
            // Every endpoint on the old and new interface: the owner of an interface may
            // change hands.
            for iface in [old_iface, new_iface].into_iter().flatten() {
                for other in self.claims.get(&iface).into_iter().flatten() {
                    owners.insert(Owner::Endpoint(other.clone()));
                }
            }
            owners.insert(Owner::Endpoint(key.clone()));
            let new_tiers = self.endpoint_tiers.get(key).cloned().unwrap_or_default();
            for list in old_tiers.into_iter().chain(new_tiers) {
                if list.has_chain() {
                    owners.insert(Owner::Tier(list));
                }
            }
            if had_nat || self.nat_users.contains(key) {
                owners.insert(Owner::Nat);
            }
        }
        for id in &changes.policies {
            owners.insert(Owner::Policy(id.clone()));
            for list in self.policy_tiers.get(id).into_iter().flatten() {
                owners.insert(Owner::Tier(list.clone()));
            }
        }
        owners.extend(changes.profiles.iter().cloned().map(Owner::Profile));
        owners.extend((changes.staged_policies.iter().cloned()).map(Owner::StagedPolicy));
        owners.extend(changes.ipsets.iter().cloned().map(Owner::IpSet));
        if changes.pools {
            owners.insert(Owner::Pools);
        }
        for owner in &owners {
            self.rerender(state, owner);
        }
        std::mem::take(&mut self.delta)
    }

    /// Updates the interface, tier and NAT indexes for one endpoint.
    fn track_endpoint(&mut self, state: &DesiredState, key: &EndpointKey) {
        if let Some(iface) = self.endpoint_iface.remove(key)
            && let Some(claims) = self.claims.get_mut(&iface)
        {
            claims.remove(key);
            if claims.is_empty() {
                self.claims.remove(&iface);
            }
        }
        for list in self.endpoint_tiers.remove(key).unwrap_or_default() {
            self.release_tier(key, list);
        }
        self.nat_users.remove(key);
        let Some(program) = state.endpoints.get(key) else {
            return;
        };
        if let Some(iface) = &program.interface {
            self.endpoint_iface.insert(key.clone(), iface.clone());
            self.claims
                .entry(iface.clone())
                .or_default()
                .insert(key.clone());
        }
        if !program.nat.is_empty() && matches!(key, EndpointKey::Workload(_)) {
            self.nat_users.insert(key.clone());
        }
        if program.interface.is_none() || !program.active {
            return;
        }
        let mut lists = Vec::new();
        for tier in program.tiers.iter().filter(|t| t.enforces()) {
            for inbound in [true, false] {
                let list = TierList {
                    inbound,
                    policies: tier.policies.clone(),
                };
                self.tier_users
                    .entry(list.clone())
                    .or_default()
                    .insert(key.clone());
                for id in &list.policies {
                    self.policy_tiers
                        .entry(id.clone())
                        .or_default()
                        .insert(list.clone());
                }
                lists.push(list);
            }
        }
        self.endpoint_tiers.insert(key.clone(), lists);
    }

    fn release_tier(&mut self, key: &EndpointKey, list: TierList) {
        let Some(users) = self.tier_users.get_mut(&list) else {
            return;
        };
        users.remove(key);
        if !users.is_empty() {
            return;
        }
        self.tier_users.remove(&list);
        for id in &list.policies {
            if let Some(lists) = self.policy_tiers.get_mut(id) {
                lists.remove(&list);
                if lists.is_empty() {
                    self.policy_tiers.remove(id);
                }
            }
        }
    }

    /// Replaces what `owner` contributed with what it renders now.
    fn rerender(&mut self, state: &DesiredState, owner: &Owner) {
        let old = self.owned.remove(owner).unwrap_or_default();
        let new = self.render_owner(state, owner);
        self.withdraw(old);
        self.contribute(&new);
        if !(new.chains.is_empty() && new.sets.is_empty() && new.elements.is_empty()) {
            self.owned.insert(owner.clone(), new);
        }
    }

    fn withdraw(&mut self, part: Part) {
        for chain in part.chains {
            let old = self.current.chains.remove(&chain.name);
            self.delta.chains_before.entry(chain.name).or_insert(old);
        }
        for set in part.sets {
            if let Some(old) = self.current.sets.remove(&set.spec.name) {
                for element in &old.elements {
                    self.element_removed(&old.spec.name, element);
                }
                self.delta
                    .sets_before
                    .entry(set.spec.name)
                    .or_insert(Some(old.spec));
            }
        }
        for (map, element) in part.elements {
            if let Some(set) = self.current.sets.get_mut(&map)
                && set.elements.remove(&element)
            {
                self.element_removed(&map, &element);
            }
        }
    }

    fn contribute(&mut self, part: &Part) {
        for chain in &part.chains {
            let before = self
                .current
                .chains
                .insert(chain.name.clone(), chain.clone());
            self.delta
                .chains_before
                .entry(chain.name.clone())
                .or_insert(before);
        }
        for set in &part.sets {
            let name = set.spec.name.clone();
            self.delta.sets_before.entry(name.clone()).or_insert(None);
            for element in &set.elements {
                self.element_added(&name, element);
            }
            self.current.sets.insert(name, set.clone());
        }
        for (map, element) in &part.elements {
            if let Some(set) = self.current.sets.get_mut(map)
                && set.elements.insert(element.clone())
            {
                self.element_added(map, element);
            }
        }
    }

    fn element_added(&mut self, set: &str, element: &Element) {
        let removed = self.delta.removed.entry(set.to_owned()).or_default();
        if !removed.remove(element) {
            self.delta
                .added
                .entry(set.to_owned())
                .or_default()
                .insert(element.clone());
        }
    }

    fn element_removed(&mut self, set: &str, element: &Element) {
        let added = self.delta.added.entry(set.to_owned()).or_default();
        if !added.remove(element) {
            self.delta
                .removed
                .entry(set.to_owned())
                .or_default()
                .insert(element.clone());
        }
    }

    fn render_owner(&self, state: &DesiredState, owner: &Owner) -> Part {
        let r = Renderer {
            config: &self.config,
        };
        match owner {
            Owner::Frame => r.frame(),
            Owner::Pools => r.pools(state),
            Owner::IpSet(id) => r.ipset(state, id),
            Owner::Nat => r.nat(state),
            Owner::Endpoint(key) => {
                match (state.endpoints.get(key), self.endpoint_iface.get(key)) {
                    (Some(program), Some(iface)) if self.owns(key, iface) => {
                        let missing = program
                            .profiles
                            .iter()
                            .find(|p| !state.profiles.contains_key(*p))
                            .map(String::as_str);
                        r.endpoint(key, iface, program, missing)
                    }
                    _ => Part::default(),
                }
            }
            Owner::Policy(id) => match state.policies.get(id) {
                Some(rules) => {
                    let what = format!("policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::Policy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    r.rule_chains(&what, rules, owner, |inbound| {
                        names::policy_chain(inbound, &id.tier, &id.name)
                    })
                }
                None => Part::default(),
            },
            // Staged policies only log: nothing of them without flow logs.
            Owner::StagedPolicy(id) => match state.staged_policies.get(id) {
                Some(rules) if self.config.flow_logs => {
                    let what = format!("staged policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::StagedPolicy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    r.rule_chains(&what, rules, owner, |inbound| {
                        staged_chain(inbound, &id.tier, &id.name)
                    })
                }
                _ => Part::default(),
            },
            Owner::Profile(id) => match state.profiles.get(id) {
                Some(rules) => {
                    let what = format!("profile {id}");
                    r.rule_chains(&what, rules, RuleOwner::Profile(id), |inbound| {
                        names::profile_chain(inbound, id)
                    })
                }
                None => Part::default(),
            },
            Owner::Tier(list) if self.tier_users.contains_key(list) && list.has_chain() => {
                let (chains, sets) = tiers::render(list, &state.policies, &self.config);
                Part {
                    chains,
                    sets,
                    elements: Vec::new(),
                }
            }
            Owner::Tier(_) => Part::default(),
        }
    }

    /// Whether `key` is the first endpoint (by key) on `iface`.
    fn owns(&self, key: &EndpointKey, iface: &str) -> bool {
        self.claims
            .get(iface)
            .and_then(|claims| claims.first())
            .is_some_and(|first| first == key)
    }
}
