//! The IP-set index: which sets are active (used by an active rule) with how many rules use
//! each, the label and tag indexes that find the sets an endpoint may belong to, and each set's
//! members with a count per address (an address stays while any member endpoint has it).
//!
//! [`IpSetIndex`] knows sets, not endpoints: the [`Calculator`](super::Calculator) finds the
//! endpoints a new set selects and tells the index who joins and leaves. The index writes the
//! sets' members into the desired state and the changed ids into the changes it is handed
//! ([`Out`]), so that nothing is copied on the way.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use super::Shared;
use crate::cluster::EndpointKey;
use crate::desired::{IpSet, IpSetSource, Rules, ipset_sources};
use crate::labels::LabelSet;

/// Where the index writes: the desired state's sets and the ids of the sets that changed.
pub(super) struct Out<'a> {
    pub sets: &'a mut BTreeMap<String, IpSet>,
    pub changed: &'a mut BTreeSet<String>,
}

/// Selector sets requiring one label: those accepting any value, and those by value.
#[derive(Debug, Default)]
struct LabelIndex {
    any: BTreeSet<String>,
    by_value: HashMap<String, BTreeSet<String>>,
}

/// The active IP sets and their members.
#[derive(Debug, Default)]
pub(super) struct IpSetIndex {
    /// Set id → (source, how many active rules use it).
    refs: HashMap<String, (IpSetSource, usize)>,
    /// Set id → member endpoints.
    members: HashMap<String, BTreeSet<Shared>>,
    /// Endpoint → the sets it is in, with the addresses it added.
    memberships: HashMap<Shared, (BTreeSet<String>, Vec<IpAddr>)>,
    /// Set id → address → how many member endpoints have it.
    address_counts: HashMap<String, HashMap<IpAddr, usize>>,
    /// Active selector sets by the label their selector requires.
    by_label: HashMap<String, LabelIndex>,
    /// Active selector sets that require no label: evaluated against every endpoint.
    unindexed: BTreeSet<String>,
    /// Active tag sets: tag → set id.
    by_tag: HashMap<String, String>,
}

impl IpSetIndex {
    /// The active sets an endpoint with these labels and profile tags could be in (a superset
    /// of those it is in).
    pub fn candidates<'t>(
        &self,
        labels: &LabelSet,
        tags: impl IntoIterator<Item = &'t String>,
    ) -> BTreeSet<String> {
        let mut candidates = self.unindexed.clone();
        for (name, value) in labels.iter() {
            if let Some(index) = self.by_label.get(name.as_ref()) {
                candidates.extend(index.any.iter().cloned());
                if let Some(sets) = index.by_value.get(value.as_ref()) {
                    candidates.extend(sets.iter().cloned());
                }
            }
        }
        for tag in tags {
            if let Some(id) = self.by_tag.get(tag) {
                candidates.insert(id.clone());
            }
        }
        candidates
    }

    /// What an active set holds.
    pub fn source(&self, id: &str) -> &IpSetSource {
        &self.refs[id].0
    }

    /// One more rule uses `source`. Returns the set's id when it just became active (empty:
    /// the caller fills it with [`IpSetIndex::join`]).
    pub fn reference(&mut self, source: &IpSetSource, out: Out<'_>) -> Option<String> {
        let id = source.id();
        if let Some((_, count)) = self.refs.get_mut(&id) {
            *count += 1;
            return None;
        }
        self.refs.insert(id.clone(), (source.clone(), 1));
        out.sets.insert(
            id.clone(),
            IpSet {
                source: source.clone(),
                members: BTreeSet::new(),
            },
        );
        out.changed.insert(id.clone());
        self.index(&id, source);
        Some(id)
    }

    /// One rule fewer uses set `id`; the last one takes the set away.
    pub fn release(&mut self, id: &str, out: Out<'_>) {
        let Some((_, count)) = self.refs.get_mut(id) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        if let Some((source, _)) = self.refs.remove(id) {
            self.unindex(id, &source);
        }
        for key in self.members.remove(id).unwrap_or_default() {
            if let Some((sets, _)) = self.memberships.get_mut(&key) {
                sets.remove(id);
            }
        }
        self.address_counts.remove(id);
        out.sets.remove(id);
        out.changed.insert(id.to_owned());
    }

    /// Endpoint `key`, with `addresses`, is a member of set `id`.
    pub fn join(&mut self, id: &str, key: Shared, addresses: &[IpAddr], out: Out<'_>) {
        let (sets, recorded) = self.memberships.entry(key.clone()).or_default();
        if !sets.insert(id.to_owned()) {
            return;
        }
        *recorded = addresses.to_vec();
        self.members.entry(id.to_owned()).or_default().insert(key);
        let counts = self.address_counts.entry(id.to_owned()).or_default();
        let set = out.sets.get_mut(id).expect("a referenced set");
        for address in addresses {
            let count = counts.entry(*address).or_default();
            *count += 1;
            if *count == 1 {
                set.members.insert(*address);
                out.changed.insert(id.to_owned());
            }
        }
    }

    /// Takes an endpoint out of every set it is in.
    pub fn leave(&mut self, key: &EndpointKey, out: Out<'_>) {
        let Some((sets, addresses)) = self.memberships.remove(key) else {
            return;
        };
        for id in sets {
            if let Some(members) = self.members.get_mut(&id) {
                members.remove(key);
            }
            let (Some(counts), Some(set)) =
                (self.address_counts.get_mut(&id), out.sets.get_mut(&id))
            else {
                continue;
            };
            for address in &addresses {
                if let Some(count) = counts.get_mut(address) {
                    *count -= 1;
                    if *count == 0 {
                        counts.remove(address);
                        set.members.remove(address);
                        out.changed.insert(id.clone());
                    }
                }
            }
        }
    }

    fn index(&mut self, id: &str, source: &IpSetSource) {
        match source {
            IpSetSource::Tag(tag) => {
                self.by_tag.insert(tag.clone(), id.to_owned());
            }
            IpSetSource::Selector(selector) => match selector.requirement() {
                None => {
                    self.unindexed.insert(id.to_owned());
                }
                Some((name, values)) => {
                    let index = self.by_label.entry(name.to_owned()).or_default();
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

    fn unindex(&mut self, id: &str, source: &IpSetSource) {
        match source {
            IpSetSource::Tag(tag) => {
                self.by_tag.remove(tag);
            }
            IpSetSource::Selector(selector) => match selector.requirement() {
                None => {
                    self.unindexed.remove(id);
                }
                Some((name, _)) => {
                    if let Some(index) = self.by_label.get_mut(name) {
                        index.any.remove(id);
                        index.by_value.retain(|_, sets| {
                            sets.remove(id);
                            !sets.is_empty()
                        });
                        if index.any.is_empty() && index.by_value.is_empty() {
                            self.by_label.remove(name);
                        }
                    }
                }
            },
        }
    }
}

/// The IP sets a rule list uses.
pub(super) fn rule_sources(rules: &Rules) -> impl Iterator<Item = IpSetSource> + '_ {
    rules
        .inbound
        .iter()
        .chain(&rules.outbound)
        .flat_map(ipset_sources)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use calico_model::key::HostEndpointId;

    use super::*;

    fn endpoint(name: &str) -> Shared {
        Arc::new(EndpointKey::Host(HostEndpointId {
            hostname: "h1".into(),
            endpoint: name.into(),
        }))
    }

    /// An address stays in a set while any member endpoint has it; the last rule using the set
    /// takes it away, and every step names the set as changed.
    #[test]
    fn addresses_are_counted_and_the_last_rule_removes_the_set() {
        let mut index = IpSetIndex::default();
        let (mut sets, mut changed) = (BTreeMap::new(), BTreeSet::new());
        macro_rules! out {
            () => {
                Out {
                    sets: &mut sets,
                    changed: &mut changed,
                }
            };
        }
        let source = IpSetSource::Tag("web".into());
        let id = index.reference(&source, out!()).expect("a new set");
        assert_eq!(
            index.reference(&source, out!()),
            None,
            "a second rule, same set"
        );
        let shared: IpAddr = "10.0.0.1".parse().unwrap();
        let (a, b) = (endpoint("a"), endpoint("b"));
        index.join(&id, a.clone(), &[shared], out!());
        index.join(
            &id,
            b.clone(),
            &[shared, "10.0.0.2".parse().unwrap()],
            out!(),
        );
        assert_eq!(sets[&id].members.len(), 2);
        assert_eq!(
            index.candidates(&LabelSet::default(), [&"web".to_owned()]),
            BTreeSet::from([id.clone()])
        );

        changed.clear();
        index.leave(&b, out!());
        assert_eq!(
            sets[&id].members,
            BTreeSet::from([shared]),
            "a still has 10.0.0.1"
        );
        assert!(changed.contains(&id));

        index.release(&id, out!());
        assert!(sets.contains_key(&id), "one rule still uses it");
        index.release(&id, out!());
        assert!(!sets.contains_key(&id));
        assert!(
            index
                .candidates(&LabelSet::default(), [&"web".to_owned()])
                .is_empty()
        );
    }
}
