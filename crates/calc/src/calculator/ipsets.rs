//! The calculator's IP-set side: which sets are active (used by an active rule) with how many
//! rules use each, the label and tag indexes that find the sets an endpoint may belong to, and
//! each set's members with a count per address (an address stays while any member has it).
//! Part of [`Calculator`]: the same state, kept in its own file.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::{Calculator, Shared};
use crate::cluster::{Endpoint, EndpointKey};
use crate::desired::{IpSet, IpSetSource, Rules, ipset_sources};
use crate::labels::LabelSet;

impl Calculator {
    /// The active sets an endpoint with these labels could be in (a superset of those it is in).
    pub(super) fn candidate_sets(
        &self,
        endpoint: &Endpoint,
        labels: &LabelSet,
    ) -> BTreeSet<String> {
        let mut candidates = self.unindexed_sets.clone();
        for (name, value) in labels.iter() {
            if let Some(index) = self.set_index.get(name.as_ref()) {
                candidates.extend(index.any.iter().cloned());
                if let Some(sets) = index.by_value.get(value.as_ref()) {
                    candidates.extend(sets.iter().cloned());
                }
            }
        }
        for profile in &endpoint.profile_ids {
            let tags = self
                .cluster
                .profiles
                .get(profile)
                .map(|p| p.tags.as_slice());
            for tag in tags.unwrap_or_default() {
                if let Some(id) = self.tag_sets.get(tag) {
                    candidates.insert(id.clone());
                }
            }
        }
        candidates
    }

    /// The endpoints that could be in a set (a superset of its members).
    pub(super) fn candidate_endpoints(&self, source: &IpSetSource) -> Vec<Shared> {
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

    pub(super) fn selects(
        &self,
        source: &IpSetSource,
        endpoint: &Endpoint,
        labels: &LabelSet,
    ) -> bool {
        match source {
            IpSetSource::Tag(tag) => self.cluster.has_tag(endpoint, tag),
            IpSetSource::Selector(selector) => selector.evaluate(labels),
        }
    }

    pub(super) fn ipset_ref(&mut self, source: IpSetSource) {
        let id = source.id();
        if let Some((_, count)) = self.ipset_refs.get_mut(&id) {
            *count += 1;
            return;
        }
        self.ipset_refs.insert(id.clone(), (source.clone(), 1));
        self.state.ipsets.insert(
            id.clone(),
            IpSet {
                source: source.clone(),
                members: BTreeSet::new(),
            },
        );
        self.changes.ipsets.insert(id.clone());
        self.index_set(&id, &source);
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
            self.join_ipset(&id, &key, &addresses);
        }
    }

    pub(super) fn index_set(&mut self, id: &str, source: &IpSetSource) {
        match source {
            IpSetSource::Tag(tag) => {
                self.tag_sets.insert(tag.clone(), id.to_owned());
            }
            IpSetSource::Selector(selector) => match selector.requirement() {
                None => {
                    self.unindexed_sets.insert(id.to_owned());
                }
                Some((name, values)) => {
                    let index = self.set_index.entry(name.to_owned()).or_default();
                    match values {
                        None => {
                            index.any.insert(id.to_owned());
                        }
                        Some(values) => {
                            for value in values {
                                let sets = index.by_value.entry(value.clone()).or_default();
                                sets.insert(id.to_owned());
                            }
                        }
                    }
                }
            },
        }
    }

    pub(super) fn unindex_set(&mut self, id: &str, source: &IpSetSource) {
        match source {
            IpSetSource::Tag(tag) => {
                self.tag_sets.remove(tag);
            }
            IpSetSource::Selector(selector) => match selector.requirement() {
                None => {
                    self.unindexed_sets.remove(id);
                }
                Some((name, _)) => {
                    if let Some(index) = self.set_index.get_mut(name) {
                        index.any.remove(id);
                        index.by_value.retain(|_, sets| {
                            sets.remove(id);
                            !sets.is_empty()
                        });
                        if index.any.is_empty() && index.by_value.is_empty() {
                            self.set_index.remove(name);
                        }
                    }
                }
            },
        }
    }

    pub(super) fn ipset_unref(&mut self, id: &str) {
        let Some((_, count)) = self.ipset_refs.get_mut(id) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        if let Some((source, _)) = self.ipset_refs.remove(id) {
            self.unindex_set(id, &source);
        }
        for key in self.ipset_members.remove(id).unwrap_or_default() {
            if let Some((sets, _)) = self.memberships.get_mut(&key) {
                sets.remove(id);
            }
        }
        self.address_counts.remove(id);
        self.state.ipsets.remove(id);
        self.changes.ipsets.insert(id.to_owned());
    }

    pub(super) fn join_ipset(&mut self, id: &str, key: &EndpointKey, addresses: &[IpAddr]) {
        let shared = self.shared(key);
        let (sets, recorded) = self.memberships.entry(shared.clone()).or_default();
        if !sets.insert(id.to_owned()) {
            return;
        }
        *recorded = addresses.to_vec();
        self.ipset_members
            .entry(id.to_owned())
            .or_default()
            .insert(shared);
        let counts = self.address_counts.entry(id.to_owned()).or_default();
        let set = self.state.ipsets.get_mut(id).expect("a referenced set");
        for address in addresses {
            let count = counts.entry(*address).or_default();
            *count += 1;
            if *count == 1 {
                set.members.insert(*address);
                self.changes.ipsets.insert(id.to_owned());
            }
        }
    }

    /// Takes an endpoint out of every set it is in.
    pub(super) fn leave_ipsets(&mut self, key: &EndpointKey) {
        let Some((sets, addresses)) = self.memberships.remove(key) else {
            return;
        };
        for id in sets {
            if let Some(members) = self.ipset_members.get_mut(&id) {
                members.remove(key);
            }
            let (Some(counts), Some(set)) = (
                self.address_counts.get_mut(&id),
                self.state.ipsets.get_mut(&id),
            ) else {
                continue;
            };
            for address in &addresses {
                if let Some(count) = counts.get_mut(address) {
                    *count -= 1;
                    if *count == 0 {
                        counts.remove(address);
                        set.members.remove(address);
                        self.changes.ipsets.insert(id.clone());
                    }
                }
            }
        }
    }
}

pub(super) fn rule_sources(rules: &Rules) -> impl Iterator<Item = IpSetSource> + '_ {
    rules
        .inbound
        .iter()
        .chain(&rules.outbound)
        .flat_map(ipset_sources)
}
