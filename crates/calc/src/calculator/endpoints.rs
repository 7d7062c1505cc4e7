//! Every endpoint of the cluster by number, with its effective labels, and the endpoints by
//! label (name → value → ids): how a new IP set finds the endpoints it may hold.
//!
//! Only the label names some IP set's selector has looked up are indexed (from then on): a
//! pod's own name or a label no selector uses would cost an index entry per endpoint, made and
//! dropped on every relabel, for nothing.

use std::sync::Arc;

use calico_model::key::{HostEndpointId, WorkloadEndpointId};

use super::ids::{FxMap, IdSet, Slots};
use super::profiles::ProfileList;
use crate::cluster::EndpointKey;
use crate::labels::Effective;

/// An endpoint's key in one string ([`compact`]): a quarter of the memory of an
/// [`EndpointKey`] (four strings), and the indexes only need it back on rare paths.
pub(super) type CompactKey = Arc<str>;

/// The kind, then each field as `<length>:<text>` (any text survives the round trip).
fn compact(key: &EndpointKey) -> String {
    let (kind, fields): (char, &[&str]) = match key {
        EndpointKey::Workload(id) => (
            'w',
            &[&id.hostname, &id.orchestrator, &id.workload, &id.endpoint],
        ),
        EndpointKey::Host(id) => ('h', &[&id.hostname, &id.endpoint]),
    };
    let mut text = String::with_capacity(1 + fields.iter().map(|f| f.len() + 4).sum::<usize>());
    text.push(kind);
    for field in fields {
        push_decimal(&mut text, field.len());
        text.push(':');
        text.push_str(field);
    }
    text
}

/// `n` in decimal, without the formatting machinery (this is on every update's path).
fn push_decimal(text: &mut String, n: usize) {
    if n >= 10 {
        push_decimal(text, n / 10);
    }
    text.push(char::from(b'0' + (n % 10) as u8));
}

/// The key [`compact`] made `text` of.
pub(super) fn expand(text: &str) -> EndpointKey {
    let mut rest = &text[1..];
    let mut field = || {
        let (len, tail) = rest.split_once(':').expect("a compact key");
        let len: usize = len.parse().expect("a compact key's length");
        let (field, tail) = tail.split_at(len);
        rest = tail;
        field.to_owned()
    };
    match &text[..1] {
        "w" => EndpointKey::Workload(WorkloadEndpointId {
            hostname: field(),
            orchestrator: field(),
            workload: field(),
            endpoint: field(),
        }),
        _ => EndpointKey::Host(HostEndpointId {
            hostname: field(),
            endpoint: field(),
        }),
    }
}

#[derive(Debug)]
pub(super) struct Slot {
    pub key: CompactKey,
    /// Effective labels (own over the profiles').
    pub labels: Effective,
    /// The profiles it lists, as last recorded.
    pub profiles: ProfileList,
    /// On the calculator's host.
    pub local: bool,
}

#[derive(Debug, Default)]
pub(super) struct Endpoints {
    ids: FxMap<CompactKey, u32>,
    slots: Slots<Slot>,
    /// Indexed names → value → endpoints.
    by_label: FxMap<Arc<str>, FxMap<Arc<str>, IdSet>>,
}

impl Endpoints {
    pub fn id(&self, key: &EndpointKey) -> Option<u32> {
        self.ids.get(compact(key).as_str()).copied()
    }

    pub fn get(&self, id: u32) -> Option<&Slot> {
        self.slots.get(id)
    }

    pub fn labels(&self, key: &EndpointKey) -> Option<&Effective> {
        Some(&self.slots.get(self.id(key)?)?.labels)
    }

    /// The endpoint's number, numbering it (with no labels) if new.
    pub fn insert(&mut self, key: &EndpointKey, local: bool) -> u32 {
        let key = compact(key);
        if let Some(&id) = self.ids.get(key.as_str()) {
            return id;
        }
        let key: CompactKey = key.into();
        let id = self.slots.insert(Slot {
            key: key.clone(),
            labels: Effective::default(),
            profiles: ProfileList::from([]),
            local,
        });
        self.ids.insert(key, id);
        id
    }

    /// Forgets an endpoint; returns the number it had.
    pub fn remove(&mut self, key: &EndpointKey) -> Option<u32> {
        let id = self.ids.remove(compact(key).as_str())?;
        self.set_labels(id, Effective::default());
        self.slots.remove(id);
        Some(id)
    }

    /// Replaces an endpoint's labels, touching the index only for the labels that changed (a
    /// relabel changes one label of several; the pod's own name stays).
    pub fn set_labels(&mut self, id: u32, labels: Effective) {
        let old = std::mem::replace(&mut self.slots[id].labels, labels);
        if self.by_label.is_empty() {
            return;
        }
        let new = self.slots[id].labels.clone();
        let (mut old_labels, mut new_labels) = (old.iter().peekable(), new.iter().peekable());
        loop {
            match (old_labels.peek(), new_labels.peek()) {
                (None, None) => break,
                (Some(a), Some(b)) if a.0 == b.0 => {
                    if a.1 != b.1 {
                        self.unindex(id, a);
                        self.index(id, b);
                    }
                    old_labels.next();
                    new_labels.next();
                }
                (Some(a), Some(b)) if a.0 < b.0 => {
                    self.unindex(id, a);
                    old_labels.next();
                }
                (Some(a), None) => {
                    self.unindex(id, a);
                    old_labels.next();
                }
                (_, Some(b)) => {
                    self.index(id, b);
                    new_labels.next();
                }
            }
        }
    }

    fn index(&mut self, id: u32, (name, value): &(Arc<str>, Arc<str>)) {
        if let Some(by_value) = self.by_label.get_mut(name) {
            by_value.entry(value.clone()).or_default().insert(id);
        }
    }

    fn unindex(&mut self, id: u32, (name, value): &(Arc<str>, Arc<str>)) {
        let Some(by_value) = self.by_label.get_mut(name) else {
            return;
        };
        if let Some(ids) = by_value.get_mut(value) {
            ids.remove(id);
            if ids.is_empty() {
                by_value.remove(value);
            }
        }
    }

    /// Indexes label `name` from now on (once: one pass over every endpoint).
    pub fn index_name(&mut self, name: &str) {
        if self.by_label.contains_key(name) {
            return;
        }
        let mut by_value: FxMap<Arc<str>, IdSet> = FxMap::default();
        for (id, slot) in self.slots.iter() {
            if let Some((_, value)) = slot.labels.iter().find(|(n, _)| **n == *name) {
                by_value.entry(value.clone()).or_default().insert(id);
            }
        }
        self.by_label.insert(name.into(), by_value);
    }

    /// The endpoints with label `name` (indexed: [`Endpoints::index_name`]), with one of
    /// `values` (`None`: any value); an endpoint may come more than once.
    pub fn with_label<'a>(
        &'a self,
        name: &str,
        values: Option<&'a [String]>,
    ) -> Box<dyn Iterator<Item = u32> + 'a> {
        let Some(by_value) = self.by_label.get(name) else {
            return Box::new(std::iter::empty());
        };
        match values {
            None => Box::new(by_value.values().flat_map(IdSet::iter)),
            Some(values) => Box::new(
                values
                    .iter()
                    .filter_map(|v| by_value.get(v.as_str()))
                    .flat_map(IdSet::iter),
            ),
        }
    }

    /// Every endpoint.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Slot)> {
        self.slots.iter()
    }
}

impl std::ops::Index<u32> for Endpoints {
    type Output = Slot;

    fn index(&self, id: u32) -> &Slot {
        &self.slots[id]
    }
}

impl std::ops::IndexMut<u32> for Endpoints {
    fn index_mut(&mut self, id: u32) -> &mut Slot {
        &mut self.slots[id]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use calico_model::selector::Labels;
    use proptest::prelude::*;

    use super::*;
    use crate::labels::Interner;

    #[test]
    fn compact_keys_expand_to_the_same_key() {
        let odd = "a:1/b\0c";
        let keys = [
            EndpointKey::Workload(WorkloadEndpointId {
                hostname: "h1".into(),
                orchestrator: "k8s".into(),
                workload: odd.into(),
                endpoint: "eth0".into(),
            }),
            EndpointKey::Host(HostEndpointId {
                hostname: odd.into(),
                endpoint: String::new(),
            }),
        ];
        for key in keys {
            assert_eq!(expand(&compact(&key)), key);
        }
    }

    fn key(n: usize) -> EndpointKey {
        EndpointKey::Host(HostEndpointId {
            hostname: "h1".into(),
            endpoint: format!("e{n}"),
        })
    }

    proptest! {
        /// After any sequence of relabels and removals, with names indexed at any point, the
        /// index finds exactly the endpoints a scan of every endpoint finds.
        #[test]
        fn the_label_index_answers_as_a_scan(
            steps in prop::collection::vec(
                (0..6usize, prop::option::of(prop::collection::btree_map("[abc]", "[xy]", 0..3)), any::<bool>()),
                1..40,
            ),
        ) {
            let mut interner = Interner::default();
            let mut endpoints = Endpoints::default();
            for (n, labels, index_now) in steps {
                match labels {
                    Some(labels) => {
                        let id = endpoints.insert(&key(n), false);
                        let own = interner.labels(&labels);
                        let labels = Effective { own, ..Effective::default() };
                        endpoints.set_labels(id, labels);
                    }
                    None => {
                        endpoints.remove(&key(n));
                    }
                }
                if index_now {
                    endpoints.index_name(["a", "b", "c"][n % 3]);
                }
                for name in ["a", "b", "c"].into_iter().filter(|n| endpoints.by_label.contains_key(*n)) {
                    for values in [None, Some(vec!["x".to_owned()]), Some(vec!["x".to_owned(), "y".to_owned()])] {
                        let found: BTreeSet<u32> = endpoints.with_label(name, values.as_deref()).collect();
                        let expected: BTreeSet<u32> = endpoints
                            .iter()
                            .filter(|(_, slot)| {
                                slot.labels.get_label(name).is_some_and(|v| {
                                    values.as_ref().is_none_or(|vs| vs.iter().any(|x| x == v))
                                })
                            })
                            .map(|(id, _)| id)
                            .collect();
                        prop_assert_eq!(found, expected, "{} in {:?}", name, values);
                    }
                }
            }
        }
    }
}
