//! Every endpoint of the cluster by number, with its effective labels, and the endpoints by
//! label (name → value → ids): how a new IP set finds the endpoints it may hold.
//!
//! Only the label names some IP set's selector has looked up are indexed (from then on): a
//! pod's own name or a label no selector uses would cost an index entry per endpoint, made and
//! dropped on every relabel, for nothing.

use std::sync::Arc;

use super::ids::{FxMap, IdSet};
use crate::cluster::ProfileList;
use crate::labels::Effective;

/// What the calculator keeps of an endpoint, under the number the cluster gave it
/// ([`crate::EndpointMap::id`]; the key is the cluster's).
#[derive(Debug)]
pub(super) struct Slot {
    /// Effective labels (own over the profiles').
    pub labels: Effective,
    /// The profiles it lists, as last recorded.
    pub profiles: ProfileList,
    /// On the calculator's host.
    pub local: bool,
}

#[derive(Debug, Default)]
pub(super) struct Endpoints {
    /// By the cluster's number.
    slots: Vec<Option<Slot>>,
    /// Indexed names → value → endpoints.
    by_label: FxMap<Arc<str>, FxMap<Arc<str>, IdSet>>,
}

impl Endpoints {
    pub fn get(&self, id: u32) -> Option<&Slot> {
        self.slots.get(id as usize)?.as_ref()
    }

    pub fn labels(&self, id: u32) -> Option<&Effective> {
        Some(&self.get(id)?.labels)
    }

    /// Records endpoint `id` (with no labels) if new.
    pub fn insert(&mut self, id: u32, local: bool) {
        let at = id as usize;
        if self.slots.len() <= at {
            self.slots.resize_with(at + 1, || None);
        }
        self.slots[at].get_or_insert_with(|| Slot {
            labels: Effective::default(),
            profiles: ProfileList::from([]),
            local,
        });
    }

    /// Forgets an endpoint; returns whether it was recorded.
    pub fn remove(&mut self, id: u32) -> bool {
        if self.get(id).is_none() {
            return false;
        }
        self.set_labels(id, Effective::default());
        self.slots[id as usize] = None;
        true
    }

    /// Replaces an endpoint's labels, touching the index only for the labels that changed (a
    /// relabel changes one label of several; the pod's own name stays).
    pub fn set_labels(&mut self, id: u32, labels: Effective) {
        let old = std::mem::replace(&mut self[id].labels, labels);
        if self.by_label.is_empty() {
            return;
        }
        let new = self[id].labels.clone();
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
        for (id, slot) in self.iter() {
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
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(id, slot)| Some((id as u32, slot.as_ref()?)))
    }
}

impl std::ops::Index<u32> for Endpoints {
    type Output = Slot;

    fn index(&self, id: u32) -> &Slot {
        self.get(id).expect("a recorded endpoint")
    }
}

impl std::ops::IndexMut<u32> for Endpoints {
    fn index_mut(&mut self, id: u32) -> &mut Slot {
        let slot = self.slots.get_mut(id as usize).and_then(Option::as_mut);
        slot.expect("a recorded endpoint")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use calico_model::selector::Labels;
    use proptest::prelude::*;

    use super::*;
    use crate::labels::Interner;

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
                        let id = n as u32;
                        endpoints.insert(id, false);
                        let own = interner.labels(&labels);
                        let labels = Effective { own, ..Effective::default() };
                        endpoints.set_labels(id, labels);
                    }
                    None => {
                        endpoints.remove(n as u32);
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
