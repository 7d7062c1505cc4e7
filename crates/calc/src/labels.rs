//! Compact labels for a cluster of many endpoints: each endpoint's labels are one sorted slice,
//! and equal names and values (`app`, `env`, `prod`) share one allocation through an interner.
//!
//! Selector evaluation is the hot path (every candidate set against every changed endpoint), and
//! most label lookups miss: a selector names labels most endpoints lack. So each set keeps a
//! 64-bit filter of its names' [`label_key`]s, and a lookup whose key is not in the filter is
//! answered with one AND, without comparing a string.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use calico_model::selector::{Labels, label_key};

use crate::calculator::ids::FxBuild;

/// Labels sorted by name; cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSet {
    entries: Arc<[Entry]>,
    /// The union of [`filter_bits`] of every name: a name whose bits are not all here is absent.
    filter: u64,
}

/// One label with the [`label_key`] of its name: a lookup compares keys, and compares strings
/// only to confirm a key that matches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: u64,
    label: (Arc<str>, Arc<str>),
}

/// Two bits of a 64-bit filter, from the best-mixed (high) bits of a [`label_key`]. With 5
/// labels about 2 % of absent names pass the filter (and are then looked up), with 10 about 7 %.
fn filter_bits(key: u64) -> u64 {
    (1 << (key >> 58)) | (1 << ((key >> 52) & 63))
}

impl LabelSet {
    /// From (name, value) pairs; on duplicate names the first wins.
    pub fn from_pairs(mut pairs: Vec<(Arc<str>, Arc<str>)>) -> LabelSet {
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, first| later.0 == first.0);
        let entries: Arc<[Entry]> = pairs
            .into_iter()
            .map(|label| Entry {
                key: label_key(&label.0),
                label,
            })
            .collect();
        let filter = entries.iter().fold(0, |f, e| f | filter_bits(e.key));
        LabelSet { entries, filter }
    }

    /// The value of a label.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.get_label_keyed(name, label_key(name))
    }

    /// The labels in name order, with their shared strings.
    pub fn iter(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        self.entries.iter().map(|e| &e.label)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Labels over labels: on equal names the earliest layer wins. One allocation, however many
    /// layers.
    pub fn layered(layers: &[&LabelSet]) -> LabelSet {
        match layers {
            [] => LabelSet::default(),
            [only] => (*only).clone(),
            _ if layers[1..].iter().all(|l| l.is_empty()) => layers[0].clone(),
            _ => {
                let pairs = layers.iter().flat_map(|l| l.iter()).cloned().collect();
                // `from_pairs` sorts stably and keeps the first of equal names.
                LabelSet::from_pairs(pairs)
            }
        }
    }

    /// These labels over `others`: names already here keep their value.
    pub fn over(&self, others: &LabelSet) -> LabelSet {
        if others.is_empty() {
            return self.clone();
        }
        let pairs = self.iter().chain(others.iter()).cloned().collect();
        // `from_pairs` sorts stably and keeps the first of equal names: ours.
        LabelSet::from_pairs(pairs)
    }
}

impl Labels for LabelSet {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name)
    }

    /// The filter, then a scan of the keys: endpoints have a handful of labels, and comparing
    /// integers in order beats bisecting by string comparisons.
    fn get_label_keyed(&self, name: &str, key: u64) -> Option<&str> {
        let bits = filter_bits(key);
        if self.filter & bits != bits {
            return None;
        }
        self.entries
            .iter()
            .find(|e| e.key == key && *e.label.0 == *name)
            .map(|e| e.label.1.as_ref())
    }
}

/// An endpoint's effective labels as two shared layers: its own (the cluster's copy) over those
/// it inherits from its profiles (one copy for every endpoint listing the same profiles). At
/// 100,000 endpoints a merged copy per endpoint was a fifth of the calculator's memory, and a
/// profile relabel rebuilt one per endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Effective {
    pub own: LabelSet,
    pub inherited: LabelSet,
}

impl Effective {
    /// The labels in name order, own ones hiding inherited ones of the same name.
    pub fn iter(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        let mut own = self.own.iter().peekable();
        let mut inherited = self.inherited.iter().peekable();
        std::iter::from_fn(move || match (own.peek(), inherited.peek()) {
            (Some(a), Some(b)) => match a.0.cmp(&b.0) {
                std::cmp::Ordering::Less => own.next(),
                std::cmp::Ordering::Equal => {
                    inherited.next();
                    own.next()
                }
                std::cmp::Ordering::Greater => inherited.next(),
            },
            (Some(_), None) => own.next(),
            (None, _) => inherited.next(),
        })
    }
}

impl Labels for Effective {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get_label_keyed(name, label_key(name))
    }

    fn get_label_keyed(&self, name: &str, key: u64) -> Option<&str> {
        let own = self.own.get_label_keyed(name, key);
        own.or_else(|| self.inherited.get_label_keyed(name, key))
    }
}

/// Shares equal strings. Strings nobody else holds any more are dropped by [`Interner::purge`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interner(HashSet<Arc<str>, FxBuild>);

impl Interner {
    pub fn intern(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.0.insert(shared.clone());
        shared
    }

    /// Interns a map of labels.
    pub fn labels<'a>(
        &mut self,
        labels: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> LabelSet {
        let pairs = labels
            .into_iter()
            .map(|(n, v)| (self.intern(n), self.intern(v)))
            .collect();
        LabelSet::from_pairs(pairs)
    }

    /// [`Interner::labels`] for labels replacing `like` (an endpoint's previous labels): names
    /// and values equal to `like`'s are taken from it without a lookup, and when all are, the
    /// set is `like` itself (no allocation). A relabel changes one label of several.
    pub fn labels_like(&mut self, labels: &BTreeMap<String, String>, like: &LabelSet) -> LabelSet {
        let mut old = like.iter().peekable();
        let mut same = labels.len() == like.len();
        let mut pairs = Vec::with_capacity(labels.len());
        for (name, value) in labels {
            // Both are in name order: skip the old names before this one.
            while old.peek().is_some_and(|(n, _)| **n < **name) {
                old.next();
            }
            let pair = match old.peek() {
                Some((n, v)) if **n == **name => {
                    let value = match **v == **value {
                        true => v.clone(),
                        false => {
                            same = false;
                            self.intern(value)
                        }
                    };
                    (n.clone(), value)
                }
                _ => {
                    same = false;
                    (self.intern(name), self.intern(value))
                }
            };
            pairs.push(pair);
        }
        match same {
            true => like.clone(),
            false => LabelSet::from_pairs(pairs),
        }
    }

    /// Forgets strings only the interner holds.
    pub fn purge(&mut self) {
        self.0.retain(|s| Arc::strong_count(s) > 1);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use calico_model::selector::Selector;

    use super::*;

    /// Label maps of 0 to 40 labels drawn (xorshift, fixed seed) from 60 names with `/`, `.`
    /// and `-`, and the names: enough to fill the 64-bit filter and pass it by chance.
    fn random_maps() -> (Vec<String>, Vec<BTreeMap<String, String>>) {
        let names: Vec<String> = (0..60)
            .map(|i| format!("{}{i}", ["app", "calico/k8s_ns.", "x.example.io/n-"][i % 3]))
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let maps = (0..400)
            .map(|size| {
                (0..size % 41)
                    .map(|_| {
                        let name = names[(next() % 60) as usize].clone();
                        (name, (next() % 3).to_string())
                    })
                    .collect()
            })
            .collect();
        (names, maps)
    }

    #[test]
    fn keyed_lookups_agree_with_the_map() {
        let (names, maps) = random_maps();
        let mut interner = Interner::default();
        for map in &maps {
            let set = interner.labels(map);
            for name in &names {
                let expected = map.get(name).map(String::as_str);
                assert_eq!(
                    set.get_label_keyed(name, label_key(name)),
                    expected,
                    "{name}"
                );
                assert_eq!(set.get(name), expected, "{name}");
            }
        }
    }

    #[test]
    fn selectors_select_the_same_on_both_representations() {
        let (_, maps) = random_maps();
        let mut interner = Interner::default();
        let selectors = [
            "app0 == '0' || calico/k8s_ns.1 != '1'",
            "x.example.io/n-2 in {'0', '2'} && !has(app3)",
            "app30 not in {'1'} && (has(app6) || app9 == '2')",
            "all()",
        ]
        .map(|text| Selector::parse(text).unwrap());
        for map in &maps {
            let set = interner.labels(map);
            for selector in &selectors {
                assert_eq!(
                    selector.evaluate(&set),
                    selector.evaluate(map),
                    "{selector}"
                );
            }
        }
    }

    #[test]
    fn labels_like_old_ones_equal_fresh_ones_and_share_what_did_not_change() {
        let (_, maps) = random_maps();
        let mut interner = Interner::default();
        for pair in maps.windows(2) {
            let old = interner.labels(&pair[0]);
            let new = interner.labels_like(&pair[1], &old);
            assert_eq!(new, interner.labels(&pair[1]));
            let again = interner.labels_like(&pair[1], &new);
            assert!(
                Arc::ptr_eq(&again.entries, &new.entries),
                "unchanged labels are shared"
            );
        }
    }

    #[test]
    fn own_labels_win_and_strings_are_shared() {
        let mut interner = Interner::default();
        let own = interner.labels([(&"a".to_owned(), &"1".to_owned())]);
        let inherited = interner.labels([
            (&"a".to_owned(), &"2".to_owned()),
            (&"b".to_owned(), &"1".to_owned()),
        ]);
        let merged = own.over(&inherited);
        assert_eq!((merged.get("a"), merged.get("b")), (Some("1"), Some("1")));
        assert_eq!(interner.len(), 4, "a, 1, 2, b");
        drop((own, inherited, merged));
        interner.purge();
        assert!(interner.is_empty());
    }
}
