//! The incremental calculator: datastore updates in, the host's [`DesiredState`] and the set of
//! what changed out, with work in proportion to each update:
//!
//! | update | work |
//! | --- | --- |
//! | an endpoint | its membership of each active IP set; for a local endpoint, the policy selectors |
//! | a profile's labels or tags | as above, for each endpoint using the profile |
//! | a policy | its selector against each local endpoint |
//! | a tier's order | the programs of local endpoints with policies in the tier |
//! | a rule list | the IP sets it starts or stops using (a new set is filled once, from all endpoints) |
//!
//! At every point the state equals [`desired_state`](crate::desired::desired_state) of the same
//! cluster (property-tested).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use calico_model::Key;
use calico_model::policy::Policy;

use crate::cluster::{Applied, Cluster, Endpoint, EndpointKey};
use crate::desired::applies;
use crate::desired::{
    DesiredState, EndpointProgram, IpSetSource, PolicyId, Rules, TierProgram, interfaces_holding,
    pool_sets,
};
use crate::labels::LabelSet;

mod ipsets;
use ipsets::{IpSetIndex, Out, rule_sources};

/// What changed since the last [`Calculator::take_changes`]: look each up in the state (present:
/// program it; absent: remove it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub endpoints: BTreeSet<EndpointKey>,
    pub policies: BTreeSet<PolicyId>,
    pub profiles: BTreeSet<String>,
    pub ipsets: BTreeSet<String>,
    /// The pool sets changed.
    pub pools: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
            && self.policies.is_empty()
            && self.profiles.is_empty()
            && self.ipsets.is_empty()
            && !self.pools
    }
}

/// One shared copy of an endpoint's key for every index that holds it.
type Shared = Arc<EndpointKey>;

/// The calculation for one host.
#[derive(Debug)]
pub struct Calculator {
    hostname: String,
    cluster: Cluster,
    /// Effective labels of every endpoint.
    labels: HashMap<Shared, LabelSet>,
    /// The shared key of every endpoint the indexes hold.
    interned: HashSet<Shared>,
    /// Profile id → the endpoints listing it.
    profile_users: HashMap<String, BTreeSet<Shared>>,
    /// Local endpoint → the policies whose selector matches it.
    local_matches: BTreeMap<EndpointKey, BTreeSet<PolicyId>>,
    /// How many local endpoints use each policy / profile.
    policy_refs: HashMap<PolicyId, usize>,
    profile_refs: HashMap<String, usize>,
    /// The active IP sets, their indexes and members.
    ipsets: IpSetIndex,
    /// Endpoints by label: name → value → endpoints.
    endpoints_by_label: HashMap<Arc<str>, HashMap<Arc<str>, BTreeSet<Shared>>>,
    /// The host's interfaces and their addresses, as last given to
    /// [`Calculator::set_interface_addresses`]: how host endpoints given only by their expected
    /// addresses find their interface.
    interface_addresses: BTreeMap<String, BTreeSet<IpAddr>>,
    state: DesiredState,
    changes: Changes,
}

impl Calculator {
    pub fn new(hostname: impl Into<String>) -> Calculator {
        Calculator {
            hostname: hostname.into(),
            cluster: Cluster::default(),
            labels: HashMap::new(),
            interned: HashSet::new(),
            profile_users: HashMap::new(),
            local_matches: BTreeMap::new(),
            policy_refs: HashMap::new(),
            profile_refs: HashMap::new(),
            ipsets: IpSetIndex::default(),
            endpoints_by_label: HashMap::new(),
            interface_addresses: BTreeMap::new(),
            state: DesiredState::default(),
            changes: Changes::default(),
        }
    }

    /// The desired state so far.
    pub fn state(&self) -> &DesiredState {
        &self.state
    }

    /// The cluster as last updated.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// What changed since the last call.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// The host's interfaces and their addresses (from the kernel). A local host endpoint with
    /// no `name` applies to the first interface (by name) holding one of its expected
    /// addresses, and to none while no interface holds any: its program's `interface` follows
    /// the address, and the change is reported like any other.
    pub fn set_interface_addresses(&mut self, interfaces: BTreeMap<String, BTreeSet<IpAddr>>) {
        if interfaces == self.interface_addresses {
            return;
        }
        self.interface_addresses = interfaces;
        let by_address: Vec<EndpointKey> = self
            .state
            .endpoints
            .keys()
            .filter(|key| matches!(key, EndpointKey::Host(_)))
            .filter(|key| {
                self.cluster
                    .endpoints
                    .get(*key)
                    .is_some_and(|e| e.interface.is_none())
            })
            .cloned()
            .collect();
        for key in by_address {
            self.rebuild_program(&key);
        }
    }

    /// The interfaces (by name) holding the expected addresses of a host endpoint given only by
    /// addresses; empty for others.
    pub fn interfaces_of(&self, key: &EndpointKey) -> Vec<&str> {
        match self.cluster.endpoints.get(key) {
            Some(e) if e.interface.is_none() && matches!(key, EndpointKey::Host(_)) => {
                interfaces_holding(&e.addresses, &self.interface_addresses)
            }
            _ => Vec::new(),
        }
    }

    /// Applies one datastore update: `Some(value)` for a put, `None` for a delete.
    pub fn apply(&mut self, key: &str, value: Option<&str>) -> Applied {
        match Key::parse(key) {
            Ok(parsed) => self.apply_parsed(parsed, value),
            Err(_) => Applied::Ignored,
        }
    }

    /// [`Calculator::apply`] for a key the caller has parsed already.
    pub fn apply_parsed(&mut self, parsed: Key, value: Option<&str>) -> Applied {
        let endpoint = match &parsed {
            Key::WorkloadEndpoint(id) => Some(EndpointKey::Workload(id.clone())),
            Key::HostEndpoint(id) => Some(EndpointKey::Host(id.clone())),
            _ => None,
        };
        let old_profiles = endpoint
            .as_ref()
            .and_then(|k| self.cluster.endpoints.get(k))
            .map(|e| e.profile_ids.clone());
        let applied = self.cluster.apply_parsed(&parsed, value);
        if applied == Applied::Ignored {
            return applied;
        }
        match parsed {
            Key::WorkloadEndpoint(_) | Key::HostEndpoint(_) => {
                let endpoint = endpoint.expect("an endpoint key");
                self.endpoint_changed(&endpoint, old_profiles.unwrap_or_default());
            }
            Key::ProfileRules { profile } => self.profile_rules_changed(&profile),
            Key::ProfileTags { profile } | Key::ProfileLabels { profile } => {
                self.profile_members_changed(&profile);
            }
            Key::TierMetadata { tier } => self.tier_changed(&tier),
            Key::Policy { tier, policy } => self.policy_changed(&PolicyId { tier, name: policy }),
            Key::Pool { .. } => self.pools_changed(),
            _ => {}
        }
        applied
    }

    fn pools_changed(&mut self) {
        let (all, masquerade) = pool_sets(&self.cluster);
        if all != self.state.pools || masquerade != self.state.masquerade_pools {
            self.state.pools = all;
            self.state.masquerade_pools = masquerade;
            self.changes.pools = true;
        }
    }

    fn is_local(&self, endpoint: &EndpointKey) -> bool {
        endpoint.hostname() == self.hostname
    }

    // ---- endpoints ----

    fn endpoint_changed(&mut self, key: &EndpointKey, old_profiles: Vec<String>) {
        // Out of every set first: profile changes below may create sets this endpoint joins
        // with its new addresses, and the memberships must record one set of addresses.
        self.leave_ipsets(key);
        let new_profiles = self
            .cluster
            .endpoints
            .get(key)
            .map(|e| e.profile_ids.clone())
            .unwrap_or_default();
        for id in distinct(&old_profiles) {
            if let Some(users) = self.profile_users.get_mut(id) {
                users.remove(key);
                if users.is_empty() {
                    self.profile_users.remove(id);
                }
            }
        }
        for id in distinct(&new_profiles) {
            let shared = self.shared(key);
            self.profile_users
                .entry(id.clone())
                .or_default()
                .insert(shared);
        }
        if self.is_local(key) {
            for id in distinct(&old_profiles) {
                self.profile_unref(id);
            }
            for id in distinct(&new_profiles) {
                self.profile_ref(id);
            }
        }
        self.refresh_endpoint(key);
    }

    /// Recomputes an endpoint's labels, IP set memberships and (if local) program.
    fn refresh_endpoint(&mut self, key: &EndpointKey) {
        self.leave_ipsets(key);
        if let Some(old) = self.labels.remove(key) {
            self.unindex_endpoint(key, &old);
        }
        let Some(endpoint) = self.cluster.endpoints.get(key) else {
            if self.local_matches.contains_key(key) {
                self.set_matches(key, BTreeSet::new());
                self.local_matches.remove(key);
            }
            if self.state.endpoints.remove(key).is_some() {
                self.changes.endpoints.insert(key.clone());
            }
            self.interned.remove(key);
            return;
        };
        let labels = self.cluster.effective_labels(endpoint);
        let tags = endpoint.profile_ids.iter().flat_map(|profile| {
            let tags = self
                .cluster
                .profiles
                .get(profile)
                .map(|p| p.tags.as_slice());
            tags.unwrap_or_default()
        });
        let joined: Vec<String> = self
            .ipsets
            .candidates(&labels, tags)
            .into_iter()
            .filter(|id| self.selects(self.ipsets.source(id), endpoint, &labels))
            .collect();
        let addresses = endpoint.addresses.clone();
        for id in joined {
            self.join_ipset(&id, key, &addresses);
        }
        self.index_endpoint(key, &labels);
        let shared = self.shared(key);
        self.labels.insert(shared, labels);
        if self.is_local(key) {
            let matches = self.matching_policies(key);
            self.set_matches(key, matches);
            self.rebuild_program(key);
        }
    }

    fn index_endpoint(&mut self, key: &EndpointKey, labels: &LabelSet) {
        let shared = self.shared(key);
        for (name, value) in labels.iter() {
            self.endpoints_by_label
                .entry(name.clone())
                .or_default()
                .entry(value.clone())
                .or_default()
                .insert(shared.clone());
        }
    }

    /// The shared copy of a key, made on first use.
    fn shared(&mut self, key: &EndpointKey) -> Shared {
        if let Some(shared) = self.interned.get(key) {
            return shared.clone();
        }
        let shared = Arc::new(key.clone());
        self.interned.insert(shared.clone());
        shared
    }

    fn unindex_endpoint(&mut self, key: &EndpointKey, labels: &LabelSet) {
        for (name, value) in labels.iter() {
            let Some(by_value) = self.endpoints_by_label.get_mut(name.as_ref()) else {
                continue;
            };
            if let Some(keys) = by_value.get_mut(value.as_ref()) {
                keys.remove(key);
                if keys.is_empty() {
                    by_value.remove(value.as_ref());
                }
            }
            if by_value.is_empty() {
                self.endpoints_by_label.remove(name.as_ref());
            }
        }
    }

    /// Every policy whose selector matches a local endpoint.
    fn matching_policies(&self, key: &EndpointKey) -> BTreeSet<PolicyId> {
        let labels = &self.labels[key];
        let host = matches!(key, EndpointKey::Host(_));
        let mut matches = BTreeSet::new();
        for (tier, t) in &self.cluster.tiers {
            for (name, policy) in &t.policies {
                if applies(policy, host, labels) {
                    matches.insert(PolicyId {
                        tier: tier.clone(),
                        name: name.clone(),
                    });
                }
            }
        }
        matches
    }

    /// Replaces a local endpoint's matching policies, keeping the policy references right.
    fn set_matches(&mut self, key: &EndpointKey, matches: BTreeSet<PolicyId>) {
        let old = self.local_matches.insert(key.clone(), matches.clone());
        let old = old.unwrap_or_default();
        for id in old.difference(&matches) {
            self.policy_unref(id);
        }
        for id in matches.difference(&old) {
            self.policy_ref(id);
        }
    }

    /// Rebuilds a local endpoint's program from its matches and the current orders.
    fn rebuild_program(&mut self, key: &EndpointKey) {
        let Some(endpoint) = self.cluster.endpoints.get(key) else {
            return;
        };
        let matches = &self.local_matches[key];
        let interface = endpoint.interface.clone().or_else(|| {
            let holders = interfaces_holding(&endpoint.addresses, &self.interface_addresses);
            holders.first().map(|name| (*name).to_owned())
        });
        let program = EndpointProgram {
            interface,
            active: endpoint.active,
            tiers: self.tier_programs(matches, false),
            untracked_tiers: self.tier_programs(matches, true),
            profiles: endpoint.profile_ids.clone(),
            missing_profile: endpoint.profile_ids.iter().any(|id| {
                self.cluster
                    .profiles
                    .get(id)
                    .is_none_or(|p| p.rules.is_none())
            }),
            addresses: endpoint.addresses.clone(),
            mac: endpoint.mac,
            nat: endpoint.nat.clone(),
        };
        if self.state.endpoints.get(key) != Some(&program) {
            self.state.endpoints.insert(key.clone(), program);
            self.changes.endpoints.insert(key.clone());
        }
    }

    /// The matching policies grouped by tier, in evaluation order.
    fn tier_programs(&self, matches: &BTreeSet<PolicyId>, untracked: bool) -> Vec<TierProgram> {
        let mut by_tier: BTreeMap<&str, Vec<(&Policy, &PolicyId)>> = BTreeMap::new();
        for id in matches {
            let policy = &self.cluster.tiers[&id.tier].policies[&id.name];
            if policy.untracked == untracked {
                by_tier.entry(&id.tier).or_default().push((policy, id));
            }
        }
        let mut tiers: Vec<(&str, Vec<(&Policy, &PolicyId)>)> = by_tier.into_iter().collect();
        tiers.sort_by(|a, b| {
            let order = |name: &str| self.cluster.tiers[name].order;
            order(a.0).cmp(&order(b.0)).then(a.0.cmp(b.0))
        });
        tiers
            .into_iter()
            .map(|(name, mut policies)| {
                policies.sort_by(|a, b| a.0.order.cmp(&b.0.order).then(a.1.name.cmp(&b.1.name)));
                TierProgram {
                    name: name.to_owned(),
                    policies: policies.into_iter().map(|(_, id)| id.clone()).collect(),
                }
            })
            .collect()
    }

    // ---- profiles, tiers, policies ----

    fn profile_rules_changed(&mut self, profile: &str) {
        self.sync_profile(profile);
        let users: Vec<EndpointKey> = self.local_users(profile);
        for key in users {
            self.rebuild_program(&key);
        }
    }

    fn profile_members_changed(&mut self, profile: &str) {
        let users: Vec<Shared> = self
            .profile_users
            .get(profile)
            .map(|u| u.iter().cloned().collect())
            .unwrap_or_default();
        for key in users {
            self.refresh_endpoint(&key);
        }
    }

    fn local_users(&self, profile: &str) -> Vec<EndpointKey> {
        self.profile_users
            .get(profile)
            .map(|users| {
                let local = users.iter().filter(|k| self.is_local(k));
                local.map(|k| EndpointKey::clone(k)).collect()
            })
            .unwrap_or_default()
    }

    fn tier_changed(&mut self, tier: &str) {
        let affected: Vec<EndpointKey> = self
            .local_matches
            .iter()
            .filter(|(_, m)| m.iter().any(|id| id.tier == tier))
            .map(|(k, _)| k.clone())
            .collect();
        for key in affected {
            self.rebuild_program(&key);
        }
    }

    fn policy_changed(&mut self, id: &PolicyId) {
        self.sync_policy(id);
        let policy = self
            .cluster
            .tiers
            .get(&id.tier)
            .and_then(|t| t.policies.get(&id.name))
            .cloned();
        // One pass over the local endpoints without cloning their keys: only those the policy
        // applies to, before or after, are touched (at 1,000 local endpoints, cloning every key
        // for each policy of a snapshot was a tenth of start-up).
        let labels = &self.labels;
        let touched: Vec<(EndpointKey, bool, bool)> = self
            .local_matches
            .iter()
            .filter_map(|(key, matched)| {
                let host = matches!(key, EndpointKey::Host(_));
                let now = policy
                    .as_ref()
                    .is_some_and(|p| applies(p, host, &labels[key]));
                let had = matched.contains(id);
                (now || had).then(|| (key.clone(), now, had))
            })
            .collect();
        for (key, now, had) in touched {
            if now && !had {
                self.local_matches.get_mut(&key).unwrap().insert(id.clone());
                self.policy_ref(id);
            } else if had && !now {
                self.local_matches.get_mut(&key).unwrap().remove(id);
                self.policy_unref(id);
            }
            self.rebuild_program(&key);
        }
    }

    fn policy_ref(&mut self, id: &PolicyId) {
        *self.policy_refs.entry(id.clone()).or_default() += 1;
        self.sync_policy(id);
    }

    fn policy_unref(&mut self, id: &PolicyId) {
        if let Some(count) = self.policy_refs.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                self.policy_refs.remove(id);
            }
        }
        self.sync_policy(id);
    }

    fn profile_ref(&mut self, id: &str) {
        *self.profile_refs.entry(id.to_owned()).or_default() += 1;
        self.sync_profile(id);
    }

    fn profile_unref(&mut self, id: &str) {
        if let Some(count) = self.profile_refs.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                self.profile_refs.remove(id);
            }
        }
        self.sync_profile(id);
    }

    /// Makes the state's rules of a policy what the cluster says, if it is active.
    fn sync_policy(&mut self, id: &PolicyId) {
        let wanted = match self.policy_refs.contains_key(id) {
            true => self
                .cluster
                .tiers
                .get(&id.tier)
                .and_then(|t| t.policies.get(&id.name))
                .map(|p| Rules {
                    inbound: p.inbound_rules.clone(),
                    outbound: p.outbound_rules.clone(),
                    untracked: p.untracked,
                }),
            false => None,
        };
        let current = self.state.policies.get(id).cloned();
        if wanted != current {
            self.swap_sources(current.as_ref(), wanted.as_ref());
            match wanted {
                Some(rules) => self.state.policies.insert(id.clone(), rules),
                None => self.state.policies.remove(id),
            };
            self.changes.policies.insert(id.clone());
        }
    }

    /// Makes the state's rules of a profile what the cluster says, if it is used locally.
    fn sync_profile(&mut self, id: &str) {
        let wanted = match self.profile_refs.contains_key(id) {
            true => self
                .cluster
                .profiles
                .get(id)
                .and_then(|p| p.rules.as_ref())
                .map(|r| Rules {
                    inbound: r.inbound_rules.clone(),
                    outbound: r.outbound_rules.clone(),
                    untracked: false,
                }),
            false => None,
        };
        let current = self.state.profiles.get(id).cloned();
        if wanted != current {
            self.swap_sources(current.as_ref(), wanted.as_ref());
            match wanted {
                Some(rules) => self.state.profiles.insert(id.to_owned(), rules),
                None => self.state.profiles.remove(id),
            };
            self.changes.profiles.insert(id.to_owned());
        }
    }

    /// References the IP sets of the new rules, then releases those of the old, so a set both
    /// use is never torn down and refilled.
    fn swap_sources(&mut self, old: Option<&Rules>, new: Option<&Rules>) {
        for source in new.into_iter().flat_map(rule_sources) {
            self.ipset_ref(source);
        }
        for source in old.into_iter().flat_map(rule_sources) {
            self.ipset_unref(&source.id());
        }
    }
}

impl Calculator {
    // ---- IP sets (the index is `ipsets.rs`; finding the endpoints is here) ----

    /// One more rule uses `source`; a set that just became active is filled from every
    /// endpoint it selects.
    fn ipset_ref(&mut self, source: IpSetSource) {
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        let Some(id) = self.ipsets.reference(&source, out) else {
            return;
        };
        let joining: Vec<(Shared, Vec<IpAddr>)> = self
            .candidate_endpoints(&source)
            .into_iter()
            .filter_map(|key| {
                // An endpoint being refreshed has no labels yet; its refresh joins it.
                let labels = self.labels.get(&key)?;
                let endpoint = self.cluster.endpoints.get(&key)?;
                self.selects(&source, endpoint, labels)
                    .then(|| (key, endpoint.addresses.clone()))
            })
            .collect();
        for (key, addresses) in joining {
            let out = Out {
                sets: &mut self.state.ipsets,
                changed: &mut self.changes.ipsets,
            };
            self.ipsets.join(&id, key, &addresses, out);
        }
    }

    fn ipset_unref(&mut self, id: &str) {
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.release(id, out);
    }

    fn join_ipset(&mut self, id: &str, key: &EndpointKey, addresses: &[IpAddr]) {
        let shared = self.shared(key);
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.join(id, shared, addresses, out);
    }

    /// Takes an endpoint out of every set it is in.
    fn leave_ipsets(&mut self, key: &EndpointKey) {
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.leave(key, out);
    }

    /// The endpoints that could be in a set (a superset of its members).
    fn candidate_endpoints(&self, source: &IpSetSource) -> Vec<Shared> {
        match source {
            IpSetSource::Tag(tag) => {
                let mut keys = BTreeSet::new();
                for (id, profile) in &self.cluster.profiles {
                    if profile.tags.iter().any(|t| t == tag)
                        && let Some(users) = self.profile_users.get(id)
                    {
                        keys.extend(users.iter().cloned());
                    }
                }
                keys.into_iter().collect()
            }
            IpSetSource::Selector(selector) => match selector.requirement() {
                None => self.labels.keys().cloned().collect(),
                Some((name, values)) => {
                    let Some(by_value) = self.endpoints_by_label.get(name) else {
                        return Vec::new();
                    };
                    let mut keys = BTreeSet::new();
                    match values {
                        Some(values) => {
                            for value in values {
                                keys.extend(
                                    by_value.get(value.as_str()).into_iter().flatten().cloned(),
                                );
                            }
                        }
                        None => keys.extend(by_value.values().flatten().cloned()),
                    }
                    keys.into_iter().collect()
                }
            },
        }
    }

    fn selects(&self, source: &IpSetSource, endpoint: &Endpoint, labels: &LabelSet) -> bool {
        match source {
            IpSetSource::Tag(tag) => self.cluster.has_tag(endpoint, tag),
            IpSetSource::Selector(selector) => selector.evaluate(labels),
        }
    }
}

/// The distinct ids of a list, in first-seen order.
fn distinct(ids: &[String]) -> Vec<&String> {
    let mut seen = BTreeSet::new();
    ids.iter().filter(|id| seen.insert(*id)).collect()
}
