//! Compact labels for a cluster of many endpoints: each endpoint's labels are one sorted slice,
//! and equal names and values (`app`, `env`, `prod`) share one allocation through an interner.

use std::collections::HashSet;
use std::sync::Arc;

use calico_model::selector::Labels;

/// Labels sorted by name; cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSet(Arc<[(Arc<str>, Arc<str>)]>);

impl LabelSet {
    /// From (name, value) pairs; on duplicate names the first wins.
    pub fn from_pairs(mut pairs: Vec<(Arc<str>, Arc<str>)>) -> LabelSet {
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, first| later.0 == first.0);
        LabelSet(pairs.into())
    }

    /// The value of a label.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(n, _)| n.as_ref().cmp(name))
            .ok()
            .map(|i| self.0[i].1.as_ref())
    }

    /// The labels in name order, with their shared strings.
    pub fn iter(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These labels over `others`: names already here keep their value.
    pub fn over(&self, others: &LabelSet) -> LabelSet {
        if others.is_empty() {
            return self.clone();
        }
        let pairs = self.0.iter().chain(others.0.iter()).cloned().collect();
        // `from_pairs` sorts stably and keeps the first of equal names: ours.
        LabelSet::from_pairs(pairs)
    }
}

impl Labels for LabelSet {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name)
    }
}

/// Shares equal strings. Strings nobody else holds any more are dropped by [`Interner::purge`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interner(HashSet<Arc<str>>);

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
    use super::*;

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
