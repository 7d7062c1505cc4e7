//! The cluster as the datastore describes it: endpoints, profiles, tiers and policies, kept up to
//! date from datastore updates. Invalid values are treated as missing and reported back
//! ([`Applied::Invalid`]) for the caller to log with `calico_model::invalid_warning` (calc itself
//! does not log, so each invalid update is logged exactly once), so a workload with bad config fails closed and is picked up again once
//! its config is fixed. A workload endpoint in a private address space is refused the same way
//! ([`refusal`]: Felix does not translate yet), and the calculator records it as refused.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use calico_model::endpoint::{EndpointState, HostEndpoint, WorkloadEndpoint};
use calico_model::key::{HostEndpointId, Key, WorkloadEndpointId};
use calico_model::policy::{Order, Policy};
use calico_model::pool::IpPool;
use calico_model::profile::ProfileRules;
use calico_model::{Value, parse_value};
use ipnet::IpNet;

use crate::calculator::ids::FxBuild;
use crate::labels::{Interner, LabelSet};

mod store;

pub use store::EndpointMap;

/// Which endpoint: a workload's interface or a host's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndpointKey {
    Workload(WorkloadEndpointId),
    Host(HostEndpointId),
}

impl EndpointKey {
    /// The host the endpoint is on.
    pub fn hostname(&self) -> &str {
        match self {
            EndpointKey::Workload(id) => &id.hostname,
            EndpointKey::Host(id) => &id.hostname,
        }
    }

    /// The datastore key of the endpoint.
    pub fn to_key(&self) -> Key {
        match self {
            EndpointKey::Workload(id) => Key::WorkloadEndpoint(id.clone()),
            EndpointKey::Host(id) => Key::HostEndpoint(id.clone()),
        }
    }
}

impl std::fmt::Display for EndpointKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_key())
    }
}

/// What policy needs to know of an endpoint, whichever kind it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The Linux interface: a workload's `name`, a host endpoint's `name` if it has one.
    pub interface: Option<String>,
    /// Inactive workload endpoints pass no traffic.
    pub active: bool,
    /// Its profiles, in order (shared with every endpoint listing the same).
    pub profile_ids: ProfileList,
    pub labels: LabelSet,
    /// The addresses rules resolve tags and selectors to: a workload's `ipv4_nets` /
    /// `ipv6_nets`, a host endpoint's `expected_ipvX_addrs`.
    pub addresses: Vec<IpAddr>,
    /// A workload's MAC (for its static ARP/NDP entries), if it gave one.
    pub mac: Option<[u8; 6]>,
    /// A workload's 1:1 NAT mappings (`ipv4_nat` then `ipv6_nat`), as `(int_ip, ext_ip)`. The
    /// model refuses an endpoint whose `int_ip` is not one of its nets, so each `int_ip` is
    /// one of `addresses`. Empty for host endpoints.
    pub nat: Vec<(IpAddr, IpAddr)>,
}

/// The profiles an endpoint lists, in order: one shared copy per distinct list (a cluster has
/// far fewer distinct lists than endpoints).
pub type ProfileList = Arc<[Arc<str>]>;

/// What a new endpoint may share with the one it replaces (or with every other endpoint): its
/// label strings and sets, and its list of profiles. A relabel changes one label of several, so
/// most of an update is found in the old endpoint without a lookup.
struct Sharing<'a> {
    interner: &'a mut Interner,
    lists: &'a mut HashSet<ProfileList, FxBuild>,
    old: Option<&'a Endpoint>,
}

impl Sharing<'_> {
    fn labels(&mut self, labels: &BTreeMap<String, String>) -> LabelSet {
        match self.old {
            Some(old) => self.interner.labels_like(labels, &old.labels),
            None => self.interner.labels(labels),
        }
    }

    fn profiles(&mut self, ids: &[String]) -> ProfileList {
        if let Some(old) = self.old
            && old
                .profile_ids
                .iter()
                .map(|p| &**p)
                .eq(ids.iter().map(String::as_str))
        {
            return old.profile_ids.clone();
        }
        let list: Vec<Arc<str>> = ids.iter().map(|id| self.interner.intern(id)).collect();
        if let Some(shared) = self.lists.get(list.as_slice()) {
            return shared.clone();
        }
        let shared: ProfileList = list.into();
        self.lists.insert(shared.clone());
        shared
    }
}

impl Endpoint {
    fn workload(wep: &WorkloadEndpoint, mut sharing: Sharing<'_>) -> Endpoint {
        let nets = wep.ipv4_nets.iter().chain(&wep.ipv6_nets);
        Endpoint {
            interface: Some(wep.name.clone()),
            active: wep.state == EndpointState::Active,
            profile_ids: sharing.profiles(&wep.profile_ids),
            labels: sharing.labels(&wep.labels),
            addresses: nets.map(|net| net.addr()).collect(),
            mac: wep.mac.map(|m| m.0),
            nat: wep
                .ipv4_nat
                .iter()
                .chain(&wep.ipv6_nat)
                .map(|m| (m.int_ip, m.ext_ip))
                .collect(),
        }
    }

    fn host(hep: &HostEndpoint, mut sharing: Sharing<'_>) -> Endpoint {
        let addrs = hep
            .expected_ipv4_addrs
            .iter()
            .chain(&hep.expected_ipv6_addrs);
        Endpoint {
            interface: hep.name.clone(),
            active: true,
            profile_ids: sharing.profiles(&hep.profile_ids),
            labels: sharing.labels(&hep.labels),
            addresses: addrs.copied().collect(),
            mac: None,
            nat: Vec::new(),
        }
    }
}

/// A profile's three keys; each may be missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub rules: Option<ProfileRules>,
    pub tags: Vec<String>,
    pub labels: LabelSet,
}

impl Profile {
    /// A profile exists for policy once its rules do.
    pub fn exists(&self) -> bool {
        self.rules.is_some()
    }

    fn is_empty(&self) -> bool {
        self.rules.is_none() && self.tags.is_empty() && self.labels.is_empty()
    }
}

/// A tier: its order (from its metadata; `default` while that is missing), its policies and
/// its staged policies (evaluated without enforcing: only the flow logs see them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tier {
    pub order: Order,
    pub has_metadata: bool,
    pub policies: BTreeMap<String, Policy>,
    pub staged: BTreeMap<String, Policy>,
}

/// What an update did to the cluster's endpoints.
#[derive(Debug)]
pub(crate) enum EndpointChange<'a> {
    /// Not an endpoint, or ignored.
    None,
    /// Stored (added or replaced) under this number.
    Stored(u32, &'a Endpoint),
    /// Removed (or invalid); the number it had, if it was there.
    Removed(Option<u32>),
    /// A workload endpoint in a private address space, refused (see [`refusal`]) and so
    /// treated as missing; the number it had, if it was there, and the space.
    Refused(Option<u32>, String),
}

/// Why a valid object is refused: a workload endpoint in a private address space. Felix does
/// not translate private spaces yet (issue 34), so programming one would put a tenant's
/// overlapping IPv4 addresses in the shared space; it is left out (no routes, no interface
/// dispatch, no IP set member, so the firewall drops its interface) and reported `error`.
pub fn refusal(value: &Value) -> Option<(&str, String)> {
    let Value::WorkloadEndpoint(wep) = value else {
        return None;
    };
    let space = wep.private_space()?;
    let reason = format!(
        "workload endpoint {:?} is in address space {space:?}: address spaces are not yet \
         enforced by Felix, so it is refused (nothing is programmed for it and its status is \
         error)",
        wep.name
    );
    Some((space, reason))
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The key is not one policy calculation uses.
    Ignored,
    /// The object was stored, replaced or removed.
    Changed,
    /// The value was invalid: the object is now treated as missing.
    Invalid { reason: String },
}

/// Every object policy depends on, cluster-wide.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    /// By key and by number ([`EndpointMap`]).
    pub endpoints: EndpointMap,
    pub profiles: BTreeMap<String, Profile>,
    pub tiers: BTreeMap<String, Tier>,
    /// IP pools by CIDR: addresses in them are Calico's, and masquerading pools NAT traffic
    /// leaving for anywhere outside every pool.
    pub pools: BTreeMap<IpNet, IpPool>,
    /// Shares label names and values, and profile ids, between endpoints.
    interner: Interner,
    /// Shares lists of profiles between endpoints.
    lists: HashSet<ProfileList, FxBuild>,
    /// Updates since the interner was last purged.
    since_purge: usize,
}

/// How many updates pass between purges of strings nobody uses any more.
const PURGE_EVERY: usize = 65_536;

impl Cluster {
    /// Applies one datastore update: `Some(value)` for a put, `None` for a delete.
    pub fn apply(&mut self, key: &str, value: Option<&str>) -> Applied {
        match Key::parse(key) {
            Ok(parsed) => self.apply_parsed(&parsed, value),
            Err(_) => Applied::Ignored,
        }
    }

    /// [`Cluster::apply`] for a key already parsed.
    pub fn apply_parsed(&mut self, parsed: &Key, value: Option<&str>) -> Applied {
        if !self.uses(parsed) {
            return Applied::Ignored;
        }
        self.apply_owned(parsed.clone(), value)
    }

    /// [`Cluster::apply_parsed`] taking the key (it is stored without a copy).
    pub fn apply_owned(&mut self, key: Key, value: Option<&str>) -> Applied {
        self.apply_stored(key, value).0
    }

    /// [`Cluster::apply_owned`], also returning the endpoint an endpoint key now holds, with
    /// its number (the calculator reads it without a second lookup).
    pub(crate) fn apply_stored(
        &mut self,
        key: Key,
        value: Option<&str>,
    ) -> (Applied, EndpointChange<'_>) {
        let parsed = &key;
        if !self.uses(parsed) {
            return (Applied::Ignored, EndpointChange::None);
        }
        self.since_purge += 1;
        if self.since_purge >= PURGE_EVERY {
            // Lists first: a list nobody else holds holds its strings.
            self.lists.retain(|list| Arc::strong_count(list) > 1);
            self.interner.purge();
            self.since_purge = 0;
        }
        let Some(raw) = value else {
            let removed = self.remove(parsed);
            return (Applied::Changed, removed);
        };
        match parse_value(parsed, raw) {
            Ok(value) => match refusal(&value) {
                Some((space, reason)) => {
                    let space = space.to_owned();
                    let EndpointChange::Removed(id) = self.remove(parsed) else {
                        unreachable!("only workload endpoints are refused")
                    };
                    (
                        Applied::Invalid { reason },
                        EndpointChange::Refused(id, space),
                    )
                }
                None => (Applied::Changed, self.store(key, value)),
            },
            Err(error) => {
                // Not logged here: the caller writes the one WARNING line
                // (`calico_model::invalid_warning`), so each invalid update is logged once.
                let removed = self.remove(parsed);
                let reason = error.to_string();
                (Applied::Invalid { reason }, removed)
            }
        }
    }

    fn uses(&self, key: &Key) -> bool {
        matches!(
            key,
            Key::WorkloadEndpoint(_)
                | Key::HostEndpoint(_)
                | Key::ProfileRules { .. }
                | Key::ProfileTags { .. }
                | Key::ProfileLabels { .. }
                | Key::TierMetadata { .. }
                | Key::Policy { .. }
                | Key::StagedPolicy { .. }
                | Key::Pool { .. }
        )
    }

    /// Stores a value; returns the endpoint stored and its number, for an endpoint.
    fn store(&mut self, key: Key, value: Value) -> EndpointChange<'_> {
        let key = match key {
            Key::WorkloadEndpoint(id) => EndpointKey::Workload(id),
            Key::HostEndpoint(id) => EndpointKey::Host(id),
            key => {
                self.store_other(key, value);
                return EndpointChange::None;
            }
        };
        let id = self.endpoints.id(&key);
        let sharing = Sharing {
            interner: &mut self.interner,
            lists: &mut self.lists,
            old: id
                .and_then(|id| self.endpoints.get_by_id(id))
                .map(|(_, e)| e),
        };
        let endpoint = match value {
            Value::WorkloadEndpoint(wep) => Endpoint::workload(&wep, sharing),
            Value::HostEndpoint(hep) => Endpoint::host(&hep, sharing),
            _ => unreachable!("parse_value typed {key} by its key"),
        };
        let (id, endpoint) = match id {
            Some(id) => (id, self.endpoints.replace(id, endpoint)),
            None => self.endpoints.insert(key, endpoint),
        };
        EndpointChange::Stored(id, endpoint)
    }

    fn store_other(&mut self, key: Key, value: Value) {
        match (key, value) {
            (Key::ProfileRules { profile }, Value::ProfileRules(rules)) => {
                self.profiles.entry(profile).or_default().rules = Some(*rules);
            }
            (Key::ProfileTags { profile }, Value::ProfileTags(tags)) => {
                self.profiles.entry(profile).or_default().tags = tags.0;
            }
            (Key::ProfileLabels { profile }, Value::ProfileLabels(labels)) => {
                let labels = self.interner.labels(&labels.0);
                self.profiles.entry(profile).or_default().labels = labels;
            }
            (Key::TierMetadata { tier }, Value::TierMetadata(metadata)) => {
                let tier = self.tiers.entry(tier).or_default();
                tier.order = metadata.order;
                tier.has_metadata = true;
            }
            (Key::Policy { tier, policy }, Value::Policy(value)) => {
                let tier = self.tiers.entry(tier).or_default();
                tier.policies.insert(policy, *value);
            }
            (Key::StagedPolicy { tier, policy }, Value::StagedPolicy(value)) => {
                let tier = self.tiers.entry(tier).or_default();
                tier.staged.insert(policy, *value);
            }
            (Key::Pool { cidr }, Value::Pool(pool)) => {
                self.pools.insert(cidr, pool);
            }
            (key, _) => unreachable!("parse_value typed {key} by its key"),
        }
    }

    /// Removes an object; for an endpoint, returns the number it had.
    fn remove(&mut self, key: &Key) -> EndpointChange<'static> {
        match key {
            Key::WorkloadEndpoint(id) => {
                let key = EndpointKey::Workload(id.clone());
                return EndpointChange::Removed(self.endpoints.remove(&key));
            }
            Key::HostEndpoint(id) => {
                let key = EndpointKey::Host(id.clone());
                return EndpointChange::Removed(self.endpoints.remove(&key));
            }
            Key::ProfileRules { profile } => self.edit_profile(profile, |p| p.rules = None),
            Key::ProfileTags { profile } => self.edit_profile(profile, |p| p.tags.clear()),
            Key::ProfileLabels { profile } => {
                self.edit_profile(profile, |p| p.labels = LabelSet::default());
            }
            Key::TierMetadata { tier } => self.edit_tier(tier, |t| {
                t.order = Order::Default;
                t.has_metadata = false;
            }),
            Key::Policy { tier, policy } => self.edit_tier(tier, |t| {
                t.policies.remove(policy);
            }),
            Key::StagedPolicy { tier, policy } => self.edit_tier(tier, |t| {
                t.staged.remove(policy);
            }),
            Key::Pool { cidr } => {
                self.pools.remove(cidr);
            }
            _ => {}
        }
        EndpointChange::None
    }

    fn edit_profile(&mut self, id: &str, edit: impl FnOnce(&mut Profile)) {
        if let Some(profile) = self.profiles.get_mut(id) {
            edit(profile);
            if profile.is_empty() {
                self.profiles.remove(id);
            }
        }
    }

    fn edit_tier(&mut self, name: &str, edit: impl FnOnce(&mut Tier)) {
        if let Some(tier) = self.tiers.get_mut(name) {
            edit(tier);
            if !tier.has_metadata && tier.policies.is_empty() && tier.staged.is_empty() {
                self.tiers.remove(name);
            }
        }
    }

    /// The labels selectors see on an endpoint: its own, over those of its profiles (among
    /// profiles, the first in `profile_ids` wins).
    pub fn effective_labels(&self, endpoint: &Endpoint) -> LabelSet {
        let mut layers = Vec::with_capacity(1 + endpoint.profile_ids.len());
        layers.push(&endpoint.labels);
        let profiles = endpoint.profile_ids.iter();
        layers.extend(profiles.filter_map(|id| Some(&self.profiles.get(&**id)?.labels)));
        LabelSet::layered(&layers)
    }

    /// Interns a string (label names and values, for indexes that key by them).
    pub fn intern(&mut self, text: &str) -> std::sync::Arc<str> {
        self.interner.intern(text)
    }

    /// Whether the endpoint is a member of `tag`: one of its profiles lists it.
    pub fn has_tag(&self, endpoint: &Endpoint, tag: &str) -> bool {
        endpoint.profile_ids.iter().any(|id| {
            self.profiles
                .get(&**id)
                .is_some_and(|p| p.tags.iter().any(|t| t == tag))
        })
    }

    /// The endpoints that own `address`, cluster-wide.
    pub fn endpoints_with_address(&self, address: IpAddr) -> impl Iterator<Item = &Endpoint> {
        self.endpoints
            .values()
            .filter(move |e| e.addresses.contains(&address))
    }

    /// The tiers in the order they apply: `order` ascending (`default` last), then name.
    pub fn ordered_tiers(&self) -> Vec<(&str, &Tier)> {
        let mut tiers: Vec<(&str, &Tier)> =
            self.tiers.iter().map(|(n, t)| (n.as_str(), t)).collect();
        tiers.sort_by(|a, b| a.1.order.cmp(&b.1.order).then(a.0.cmp(b.0)));
        tiers
    }
}
