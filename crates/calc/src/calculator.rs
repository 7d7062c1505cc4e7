//! The incremental calculator: datastore updates in, the host's [`DesiredState`] and the set of
//! what changed out, with work in proportion to each update:
//!
//! | update | work |
//! | --- | --- |
//! | an endpoint | the IP sets and (if local) policies whose selectors its labels leave open |
//! | a profile's labels or tags | as above, for each endpoint using the profile (no cluster lookup) |
//! | a policy or staged policy | its selector against each local endpoint |
//! | a tier's order | the programs of local endpoints with policies in the tier |
//! | a rule list | the IP sets it starts or stops using (a new set is filled once, from the endpoints with a label it needs; `!=` and `all()` sets hold nearly all, so from all) |
//!
//! | part | file |
//! | --- | --- |
//! | numbers for endpoints, sets and policies; their id sets; the hasher | `ids.rs` |
//! | what an index can look a selector up by (`==`, `in`, `has`, `\|\|`, `!=`, `all()`) | `plan.rs` |
//! | selectors by those labels: which match an endpoint, evaluating only the open ones | `selectors.rs` |
//! | endpoints by number and by label | `endpoints.rs` |
//! | profile users and the labels and tags a list of profiles gives | `profiles.rs` |
//! | policies by selector | `policies.rs` |
//! | active IP sets, members and address counts | `ipsets.rs` |
//! | filling a set that just became active: the endpoints it could hold, and which it does | `membership.rs` |
//!
//! At every point the state equals [`desired_state`](crate::desired::desired_state) of the same
//! cluster (property-tested).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use calico_model::Key;
use calico_model::policy::Policy;

use crate::cluster::{Applied, Cluster, EndpointChange, EndpointKey, ProfileList};
use crate::desired::applies;
use crate::desired::{
    DesiredState, EndpointProgram, PolicyId, Rules, TierProgram, interfaces_holding, pool_sets,
};
use crate::labels::Effective;

mod endpoints;
pub(crate) mod ids;
mod ipsets;
mod membership;
mod plan;
mod policies;
mod profiles;
mod refs;
mod selectors;

use endpoints::Endpoints;
use ipsets::{IpSetIndex, Out, rule_sources};
use policies::Policies;
use profiles::ProfileUsers;
use refs::{count_down, count_up};

/// What the calculator reads of an endpoint just stored (copied out of the cluster so that the
/// calculator can update its own indexes meanwhile).
struct Stored {
    /// Its number (the cluster's).
    id: u32,
    labels: crate::labels::LabelSet,
    addresses: Vec<IpAddr>,
    /// Its profiles, if they are not those recorded.
    profile_ids: Option<ProfileList>,
}

impl Stored {
    fn of(id: u32, endpoint: &crate::cluster::Endpoint, known: &Endpoints) -> Stored {
        let listed = known.get(id).map(|slot| &slot.profiles);
        let same = listed
            .is_some_and(|l| Arc::ptr_eq(l, &endpoint.profile_ids) || **l == *endpoint.profile_ids);
        Stored {
            id,
            labels: endpoint.labels.clone(),
            addresses: endpoint.addresses.clone(),
            profile_ids: (!same).then(|| endpoint.profile_ids.clone()),
        }
    }
}

/// What changed since the last [`Calculator::take_changes`]: look each up in the state (present:
/// program it; absent: remove it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub endpoints: BTreeSet<EndpointKey>,
    pub policies: BTreeSet<PolicyId>,
    /// Staged policies whose rules changed, appeared or went ([`DesiredState::staged_policies`]).
    pub staged_policies: BTreeSet<PolicyId>,
    pub profiles: BTreeSet<String>,
    pub ipsets: BTreeSet<String>,
    /// The pool sets changed.
    pub pools: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
            && self.policies.is_empty()
            && self.staged_policies.is_empty()
            && self.profiles.is_empty()
            && self.ipsets.is_empty()
            && !self.pools
    }
}

/// The calculation for one host.
#[derive(Debug)]
pub struct Calculator {
    hostname: String,
    cluster: Cluster,
    /// Every endpoint by number, with its effective labels; and by label.
    endpoints: Endpoints,
    /// The endpoints listing each profile, and the labels they inherit.
    users: ProfileUsers,
    /// Every policy, by selector.
    policies: Policies,
    /// Local endpoint → the policies whose selector matches it.
    local_matches: BTreeMap<EndpointKey, BTreeSet<PolicyId>>,
    /// The same for staged policies: their own index, matches and references (a staged
    /// policy and a policy may have the same tier and name).
    staged: Policies,
    local_staged: BTreeMap<EndpointKey, BTreeSet<PolicyId>>,
    staged_refs: HashMap<PolicyId, usize>,
    /// How many local endpoints use each policy / profile.
    policy_refs: HashMap<PolicyId, usize>,
    profile_refs: HashMap<String, usize>,
    /// The active IP sets, their indexes and members.
    ipsets: IpSetIndex,
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
            endpoints: Endpoints::default(),
            users: ProfileUsers::default(),
            policies: Policies::default(),
            local_matches: BTreeMap::new(),
            staged: Policies::default(),
            local_staged: BTreeMap::new(),
            staged_refs: HashMap::new(),
            policy_refs: HashMap::new(),
            profile_refs: HashMap::new(),
            ipsets: IpSetIndex::default(),
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
                    .get(key)
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
        if let Some(endpoint) = endpoint {
            let (applied, change) = self.cluster.apply_stored(parsed, value);
            match change {
                EndpointChange::Stored(id, stored) => {
                    let stored = Stored::of(id, stored, &self.endpoints);
                    self.refresh_endpoint(&endpoint, stored);
                }
                EndpointChange::Removed(id) => self.endpoint_removed(&endpoint, id),
                EndpointChange::Refused(id, space) => {
                    self.endpoint_removed(&endpoint, id);
                    self.set_refused(&endpoint, Some(space));
                    return applied;
                }
                EndpointChange::None => {}
            }
            self.set_refused(&endpoint, None);
            return applied;
        }
        let applied = self.cluster.apply_parsed(&parsed, value);
        if applied == Applied::Ignored {
            return applied;
        }
        match parsed {
            Key::ProfileRules { profile } => self.profile_rules_changed(&profile),
            Key::ProfileTags { profile } | Key::ProfileLabels { profile } => {
                self.profile_members_changed(&profile);
            }
            Key::TierMetadata { tier } => self.tier_changed(&tier),
            Key::Policy { tier, policy } => self.policy_changed(&PolicyId { tier, name: policy }),
            Key::StagedPolicy { tier, policy } => {
                self.staged_changed(&PolicyId { tier, name: policy });
            }
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

    /// Records a local endpoint as refused (in `space`) or not; a change is an endpoint change,
    /// so its status is written again.
    fn set_refused(&mut self, key: &EndpointKey, space: Option<String>) {
        if !self.is_local(key) {
            return;
        }
        let changed = match space {
            Some(space) => self.state.refused.insert(key.clone(), space.clone()) != Some(space),
            None => self.state.refused.remove(key).is_some(),
        };
        if changed {
            self.changes.endpoints.insert(key.clone());
        }
    }

    fn is_local(&self, endpoint: &EndpointKey) -> bool {
        endpoint.hostname() == self.hostname
    }

    // ---- endpoints ----

    /// Recomputes an endpoint's labels, profiles, IP set memberships and (if local) program
    /// from the endpoint as just stored (not looked up again). The profile references and so
    /// the sets that start or stop being used come last: a set that becomes active is filled
    /// from the endpoints as they now are, this one included.
    fn refresh_endpoint(&mut self, key: &EndpointKey, endpoint: Stored) {
        let local = key.hostname() == self.hostname;
        let id = endpoint.id;
        self.endpoints.insert(id, local);
        let swapped = endpoint
            .profile_ids
            .map(|profiles| self.users.set(&mut self.endpoints, id, &profiles));
        let inherited = self
            .users
            .inherited(&self.endpoints[id].profiles, &self.cluster);
        let labels = Effective {
            own: endpoint.labels,
            inherited: inherited.labels,
        };
        let wanted = self.ipsets.wanted(&labels, inherited.tags.iter());
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.update(id, &wanted, &endpoint.addresses, out);
        self.endpoints.set_labels(id, labels);
        if let Some((old, new)) = swapped {
            self.swap_profile_refs(key, &old, &new);
        }
        if self.is_local(key) {
            self.rematch(key, id);
            self.rebuild_program(key);
        }
    }

    /// A local endpoint listing `new` profiles instead of `old`: new references first, so a
    /// profile both list keeps its rules and sets throughout.
    fn swap_profile_refs(&mut self, key: &EndpointKey, old: &[Arc<str>], new: &[Arc<str>]) {
        if !self.is_local(key) {
            return;
        }
        for profile in distinct(new) {
            self.profile_ref(profile);
        }
        for profile in distinct(old) {
            self.profile_unref(profile);
        }
    }

    /// Endpoint `key` is gone from the cluster, which had numbered it `id`.
    fn endpoint_removed(&mut self, key: &EndpointKey, id: Option<u32>) {
        if let Some(id) = id.filter(|id| self.endpoints.get(*id).is_some()) {
            let (old, new) = self
                .users
                .set(&mut self.endpoints, id, &ProfileList::from([]));
            self.swap_profile_refs(key, &old, &new);
            self.endpoints.remove(id);
            let out = Out {
                sets: &mut self.state.ipsets,
                changed: &mut self.changes.ipsets,
            };
            self.ipsets.leave_all(id, out);
        }
        if self.local_matches.contains_key(key) {
            self.set_matches(key, BTreeSet::new());
            self.local_matches.remove(key);
        }
        if self.local_staged.contains_key(key) {
            self.set_staged_matches(key, BTreeSet::new());
            self.local_staged.remove(key);
        }
        if self.state.endpoints.remove(key).is_some() {
            self.changes.endpoints.insert(key.clone());
        }
    }

    /// Recomputes which policies and staged policies match local endpoint `key` (number `id`).
    fn rematch(&mut self, key: &EndpointKey, id: u32) {
        let labels = self.endpoints.labels(id).expect("a numbered endpoint");
        let host = matches!(key, EndpointKey::Host(_));
        let matches = self.policies.matching(labels, host);
        let staged = self.staged.matching(labels, host);
        self.set_matches(key, matches);
        self.set_staged_matches(key, staged);
    }

    /// Replaces a local endpoint's matching staged policies, keeping the references right.
    fn set_staged_matches(&mut self, key: &EndpointKey, matches: BTreeSet<PolicyId>) {
        let old = self.local_staged.insert(key.clone(), matches.clone());
        let old = old.unwrap_or_default();
        for id in old.difference(&matches) {
            self.staged_unref(id);
        }
        for id in matches.difference(&old) {
            self.staged_ref(id);
        }
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
        let staged = &self.local_staged[key];
        let interface = endpoint.interface.clone().or_else(|| {
            let holders = interfaces_holding(&endpoint.addresses, &self.interface_addresses);
            holders.first().map(|name| (*name).to_owned())
        });
        let program = EndpointProgram {
            interface,
            active: endpoint.active,
            tiers: self.tier_programs(matches, staged, false),
            untracked_tiers: self.tier_programs(matches, &BTreeSet::new(), true),
            profiles: endpoint.profile_ids.iter().map(|p| p.to_string()).collect(),
            missing_profile: endpoint.profile_ids.iter().any(|id| {
                self.cluster
                    .profiles
                    .get(&**id)
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

    /// The matching policies (and staged policies) grouped by tier, in evaluation order.
    fn tier_programs(
        &self,
        matches: &BTreeSet<PolicyId>,
        staged: &BTreeSet<PolicyId>,
        untracked: bool,
    ) -> Vec<TierProgram> {
        type Found<'a> = Vec<(&'a Policy, &'a PolicyId)>;
        let mut by_tier: BTreeMap<&str, (Found<'_>, Found<'_>)> = BTreeMap::new();
        for id in matches {
            let policy = &self.cluster.tiers[&id.tier].policies[&id.name];
            if policy.untracked == untracked {
                by_tier.entry(&id.tier).or_default().0.push((policy, id));
            }
        }
        for id in staged {
            let policy = &self.cluster.tiers[&id.tier].staged[&id.name];
            by_tier.entry(&id.tier).or_default().1.push((policy, id));
        }
        let mut tiers: Vec<(&str, (Found<'_>, Found<'_>))> = by_tier.into_iter().collect();
        tiers.sort_by(|a, b| {
            let order = |name: &str| self.cluster.tiers[name].order;
            order(a.0).cmp(&order(b.0)).then(a.0.cmp(b.0))
        });
        let in_order = |mut policies: Found<'_>| -> Vec<PolicyId> {
            policies.sort_by(|a, b| a.0.order.cmp(&b.0.order).then(a.1.name.cmp(&b.1.name)));
            policies.into_iter().map(|(_, id)| id.clone()).collect()
        };
        tiers
            .into_iter()
            .map(|(name, (policies, staged))| TierProgram {
                name: name.to_owned(),
                policies: in_order(policies),
                staged: in_order(staged),
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
        self.users.profile_changed(profile);
        let users: Vec<u32> = self.users.of(profile).collect();
        for id in users {
            self.refresh_inherited(id);
        }
    }

    /// [`Calculator::refresh_endpoint`] for an endpoint whose profiles' labels or tags changed
    /// and nothing else: what the endpoint itself gave is as recorded, so the cluster is not
    /// looked up (a profile of 1,000 endpoints was 1,000 lookups of cold keys).
    fn refresh_inherited(&mut self, id: u32) {
        let slot = &self.endpoints[id];
        let inherited = self.users.inherited(&slot.profiles, &self.cluster);
        let labels = Effective {
            own: slot.labels.own.clone(),
            inherited: inherited.labels,
        };
        let wanted = self.ipsets.wanted(&labels, inherited.tags.iter());
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.update_sets(id, &wanted, out);
        let local = slot.local.then(|| self.key_of(id));
        self.endpoints.set_labels(id, labels);
        if let Some(key) = local {
            self.rematch(&key, id);
            self.rebuild_program(&key);
        }
    }

    /// The key of endpoint `id` (numbered by the cluster).
    fn key_of(&self, id: u32) -> EndpointKey {
        let (key, _) = self
            .cluster
            .endpoints
            .get_by_id(id)
            .expect("a numbered endpoint");
        key.clone()
    }

    /// The keys of the local endpoints listing a profile.
    fn local_users(&self, profile: &str) -> Vec<EndpointKey> {
        let users = self.users.of(profile);
        let local = users.filter(|id| self.endpoints.get(*id).is_some_and(|slot| slot.local));
        local.map(|id| self.key_of(id)).collect()
    }

    fn tier_changed(&mut self, tier: &str) {
        let affected: BTreeSet<EndpointKey> = self
            .local_matches
            .iter()
            .chain(&self.local_staged)
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
        self.policies.set(id, policy.as_ref());
        let touched = self.touched(&self.local_matches, id, policy.as_ref());
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

    /// The local endpoints `policy` (`id`, `None` when deleted) applies to now or did before
    /// (in `matches`): (endpoint, applies now, applied before). One pass without cloning the
    /// keys of the others (at 1,000 local endpoints, cloning every key for each policy of a
    /// snapshot was a tenth of start-up).
    fn touched(
        &self,
        matches: &BTreeMap<EndpointKey, BTreeSet<PolicyId>>,
        id: &PolicyId,
        policy: Option<&Policy>,
    ) -> Vec<(EndpointKey, bool, bool)> {
        matches
            .iter()
            .filter_map(|(key, matched)| {
                let host = matches!(key, EndpointKey::Host(_));
                let labels = || {
                    let number = self
                        .cluster
                        .endpoints
                        .id(key)
                        .expect("a local endpoint is in the cluster");
                    self.endpoints.labels(number).expect("numbered")
                };
                let now = policy.is_some_and(|p| applies(p, host, labels()));
                let had = matched.contains(id);
                (now || had).then(|| (key.clone(), now, had))
            })
            .collect()
    }

    /// A staged policy changed: as [`Calculator::policy_changed`], with the staged index.
    fn staged_changed(&mut self, id: &PolicyId) {
        self.sync_staged(id);
        let policy = self
            .cluster
            .tiers
            .get(&id.tier)
            .and_then(|t| t.staged.get(&id.name))
            .cloned();
        self.staged.set(id, policy.as_ref());
        let touched = self.touched(&self.local_staged, id, policy.as_ref());
        for (key, now, had) in touched {
            if now && !had {
                self.local_staged.get_mut(&key).unwrap().insert(id.clone());
                self.staged_ref(id);
            } else if had && !now {
                self.local_staged.get_mut(&key).unwrap().remove(id);
                self.staged_unref(id);
            }
            self.rebuild_program(&key);
        }
    }

    fn staged_ref(&mut self, id: &PolicyId) {
        count_up(&mut self.staged_refs, id);
        self.sync_staged(id);
    }

    fn staged_unref(&mut self, id: &PolicyId) {
        count_down(&mut self.staged_refs, id);
        self.sync_staged(id);
    }

    /// Makes the state's rules of a staged policy what the cluster says, if it is active.
    fn sync_staged(&mut self, id: &PolicyId) {
        let wanted = match self.staged_refs.contains_key(id) {
            true => self
                .cluster
                .tiers
                .get(&id.tier)
                .and_then(|t| t.staged.get(&id.name))
                .map(|p| Rules {
                    inbound: p.inbound_rules.clone(),
                    outbound: p.outbound_rules.clone(),
                    untracked: false,
                }),
            false => None,
        };
        let current = self.state.staged_policies.get(id).cloned();
        if wanted != current {
            self.swap_sources(current.as_ref(), wanted.as_ref());
            match wanted {
                Some(rules) => self.state.staged_policies.insert(id.clone(), rules),
                None => self.state.staged_policies.remove(id),
            };
            self.changes.staged_policies.insert(id.clone());
        }
    }

    fn policy_ref(&mut self, id: &PolicyId) {
        count_up(&mut self.policy_refs, id);
        self.sync_policy(id);
    }

    fn policy_unref(&mut self, id: &PolicyId) {
        count_down(&mut self.policy_refs, id);
        self.sync_policy(id);
    }

    fn profile_ref(&mut self, id: &str) {
        count_up(&mut self.profile_refs, id);
        self.sync_profile(id);
    }

    fn profile_unref(&mut self, id: &str) {
        count_down(&mut self.profile_refs, id);
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

/// The distinct ids of a list, in first-seen order.
fn distinct<T: Ord>(ids: &[T]) -> Vec<&T> {
    let mut seen = BTreeSet::new();
    ids.iter().filter(|id| seen.insert(*id)).collect()
}
