//! An index of selectors (of IP sets, of policies) by [`Plan`]: given an endpoint's labels, the
//! selectors that match it, evaluating only those whose answer the labels leave open.
//!
//! | plan | found by | an endpoint none of whose labels hits an atom |
//! | --- | --- | --- |
//! | `matches` atoms (`==`, `in`, `has`, `\|\|` of those) | its labels | is not matched: not evaluated |
//! | `misses` atoms (`!=`, `not in`, `all()`, `!has`) | its labels | is matched: not evaluated |
//! | neither (rare: `a != "x" \|\| has(b) && c != "y"` mixes) | always | is evaluated |

use std::sync::Arc;

use calico_model::selector::Selector;

use super::ids::{FxMap, IdSet};
use super::plan::{Atom, Plan, cost};

/// Selectors by the atoms of their plans: name → (any value, by value).
#[derive(Debug, Default)]
struct Atoms {
    by_name: FxMap<Box<str>, ByName>,
}

#[derive(Debug, Default)]
struct ByName {
    any: IdSet,
    by_value: FxMap<Box<str>, IdSet>,
}

impl Atoms {
    fn insert(&mut self, id: u32, atoms: &[Atom]) {
        for atom in atoms {
            let entry = self.by_name.entry(atom.name.as_str().into()).or_default();
            match &atom.values {
                None => {
                    entry.any.insert(id);
                }
                Some(values) => {
                    for value in values {
                        entry
                            .by_value
                            .entry(value.as_str().into())
                            .or_default()
                            .insert(id);
                    }
                }
            }
        }
    }

    fn remove(&mut self, id: u32, atoms: &[Atom]) {
        for atom in atoms {
            let Some(entry) = self.by_name.get_mut(atom.name.as_str()) else {
                continue;
            };
            entry.any.remove(id);
            for value in atom.values.iter().flatten() {
                if let Some(ids) = entry.by_value.get_mut(value.as_str()) {
                    ids.remove(id);
                    if ids.is_empty() {
                        entry.by_value.remove(value.as_str());
                    }
                }
            }
            if entry.any.is_empty() && entry.by_value.is_empty() {
                self.by_name.remove(atom.name.as_str());
            }
        }
    }

    /// Appends the ids with an atom that label hits.
    fn hits(&self, name: &str, value: &str, out: &mut Vec<u32>) {
        if let Some(entry) = self.by_name.get(name) {
            out.extend(entry.any.iter());
            if let Some(ids) = entry.by_value.get(value) {
                out.extend(ids.iter());
            }
        }
    }
}

/// How a selector is found.
#[derive(Debug, Clone)]
enum Kind {
    Matches(Vec<Atom>),
    Misses(Vec<Atom>),
    Scanned,
}

impl Kind {
    fn of(selector: &Selector) -> Kind {
        let plan = Plan::of(selector);
        match (plan.matches, plan.misses) {
            (Some(matches), Some(misses)) if cost(&misses) < cost(&matches) => Kind::Misses(misses),
            (Some(matches), _) => Kind::Matches(matches),
            (None, Some(misses)) => Kind::Misses(misses),
            (None, None) => Kind::Scanned,
        }
    }
}

/// Selectors by id (the caller's numbering).
#[derive(Debug, Default)]
pub(super) struct SelectorIndex {
    kinds: FxMap<u32, Kind>,
    matches: Atoms,
    misses: Atoms,
    /// The ids of `Kind::Misses`, matched unless their atoms are hit.
    negated: Vec<u32>,
    /// The ids of `Kind::Scanned`.
    scanned: Vec<u32>,
}

impl SelectorIndex {
    pub fn insert(&mut self, id: u32, selector: &Selector) {
        self.remove(id);
        let kind = Kind::of(selector);
        match &kind {
            Kind::Matches(atoms) => self.matches.insert(id, atoms),
            Kind::Misses(atoms) => {
                self.misses.insert(id, atoms);
                self.negated.push(id);
            }
            Kind::Scanned => self.scanned.push(id),
        }
        self.kinds.insert(id, kind);
    }

    pub fn remove(&mut self, id: u32) {
        let Some(kind) = self.kinds.remove(&id) else {
            return;
        };
        match kind {
            Kind::Matches(atoms) => self.matches.remove(id, &atoms),
            Kind::Misses(atoms) => {
                self.misses.remove(id, &atoms);
                self.negated.retain(|&i| i != id);
            }
            Kind::Scanned => self.scanned.retain(|&i| i != id),
        }
    }

    /// Appends (unsorted, each once) the ids of the selectors that match an endpoint with
    /// `labels` (its labels, in any order); `evaluate` answers for one id, and is asked only
    /// about those the index cannot answer.
    pub fn matching<'l>(
        &self,
        labels: impl IntoIterator<Item = &'l (Arc<str>, Arc<str>)>,
        mut evaluate: impl FnMut(u32) -> bool,
        out: &mut Vec<u32>,
    ) {
        let (mut open, mut missed) = (Vec::new(), Vec::new());
        for (name, value) in labels {
            self.matches.hits(name, value, &mut open);
            self.misses.hits(name, value, &mut missed);
        }
        missed.sort_unstable();
        let negated = self.negated.iter().copied();
        out.extend(negated.filter(|id| missed.binary_search(id).is_err()));
        open.extend_from_slice(&missed);
        open.extend_from_slice(&self.scanned);
        open.sort_unstable();
        open.dedup();
        out.extend(open.into_iter().filter(|&id| evaluate(id)));
    }

    /// The atoms every endpoint the selector matches hits (`None`: no such atoms; the caller
    /// looks at every endpoint).
    pub fn atoms(&self, id: u32) -> Option<&[Atom]> {
        match self.kinds.get(&id)? {
            Kind::Matches(atoms) => Some(atoms),
            Kind::Misses(_) | Kind::Scanned => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::labels::LabelSet;

    const NAMES: [&str; 3] = ["a", "b", "c"];
    const VALUES: [&str; 3] = ["x", "y", "z"];

    /// A random selector over three names and three values, with every operator and `!`,
    /// `&&`, `||` and parentheses nested a few levels.
    fn selector_text() -> impl Strategy<Value = String> {
        let name = || prop::sample::select(NAMES.as_slice());
        let value = || prop::sample::select(VALUES.as_slice());
        let values = || prop::sample::subsequence(VALUES.as_slice(), 0..=3);
        let leaf = prop_oneof![
            Just("all()".to_owned()),
            name().prop_map(|n| format!("has({n})")),
            (name(), value()).prop_map(|(n, v)| format!("{n} == '{v}'")),
            (name(), value()).prop_map(|(n, v)| format!("{n} != '{v}'")),
            (name(), values()).prop_map(|(n, v)| format!("{n} in {{{}}}", quoted(&v))),
            (name(), values()).prop_map(|(n, v)| format!("{n} not in {{{}}}", quoted(&v))),
            (name(), value()).prop_map(|(n, v)| format!("{n} starts with '{v}'")),
        ];
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|s| format!("!({s})")),
                prop::collection::vec(inner.clone(), 2..4).prop_map(|v| v.join(" && ")),
                prop::collection::vec(inner.clone(), 2..4)
                    .prop_map(|v| format!("({})", v.join(" || "))),
                prop::collection::vec(inner, 2..4).prop_map(|v| v.join(" || ")),
            ]
        })
    }

    fn quoted(values: &[&str]) -> String {
        let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
        quoted.join(", ")
    }

    /// Random labels over the same names and values (each name absent or one value).
    fn labels() -> impl Strategy<Value = LabelSet> {
        let value = prop::option::of(prop::sample::select(VALUES.as_slice()));
        prop::collection::vec(value, 3).prop_map(|values| {
            let pairs = NAMES
                .iter()
                .zip(values)
                .filter_map(|(n, v)| Some((Arc::from(*n), Arc::from(v?))))
                .collect();
            LabelSet::from_pairs(pairs)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The plan of a selector holds: every endpoint it matches hits a `matches` atom, and
        /// every endpoint it does not match hits a `misses` atom.
        #[test]
        fn plans_hold_for_every_endpoint(text in selector_text(), labels in labels()) {
            let selector = Selector::parse(&text).unwrap();
            let plan = Plan::of(&selector);
            let hits = |atoms: &[Atom]| {
                atoms.iter().any(|a| labels.get(&a.name).is_some_and(|v| a.hit(v)))
            };
            let matched = selector.evaluate(&labels);
            if let (true, Some(atoms)) = (matched, &plan.matches) {
                prop_assert!(hits(atoms), "{} matches {:?} but hits none of {:?}", selector, labels, atoms);
            }
            if let (false, Some(atoms)) = (matched, &plan.misses) {
                prop_assert!(hits(atoms), "{} misses {:?} but hits none of {:?}", selector, labels, atoms);
            }
        }

        /// The index answers what evaluating every selector against the labels answers, after
        /// selectors come and go.
        #[test]
        fn the_index_answers_as_evaluating_every_selector(
            texts in prop::collection::vec(selector_text(), 1..12),
            removed in prop::collection::vec(any::<bool>(), 12),
            endpoints in prop::collection::vec(labels(), 1..12),
        ) {
            let selectors: Vec<Selector> =
                texts.iter().map(|t| Selector::parse(t).unwrap()).collect();
            let mut index = SelectorIndex::default();
            for (id, selector) in selectors.iter().enumerate() {
                index.insert(id as u32, selector);
            }
            let live = |id: usize| !removed[id];
            for (id, _) in selectors.iter().enumerate().filter(|(id, _)| !live(*id)) {
                index.remove(id as u32);
            }
            for labels in &endpoints {
                let mut found = Vec::new();
                let evaluate = |id: u32| selectors[id as usize].evaluate(labels);
                index.matching(labels.iter(), evaluate, &mut found);
                let found_set: BTreeSet<u32> = found.iter().copied().collect();
                prop_assert_eq!(found.len(), found_set.len(), "each id once");
                let expected: BTreeSet<u32> = (0..selectors.len())
                    .filter(|&id| live(id) && selectors[id].evaluate(labels))
                    .map(|id| id as u32)
                    .collect();
                prop_assert_eq!(found_set, expected, "labels {:?}", labels);
            }
        }
    }

    /// Selectors with `||`, `!=` and `all()` are answered from the index: an endpoint none of
    /// whose labels they name is not evaluated against them.
    #[test]
    fn or_not_equal_and_all_are_not_evaluated_against_unrelated_endpoints() {
        let texts = ["app == 'a' || role == 'db'", "env != 'dev'", "all()"];
        let mut index = SelectorIndex::default();
        for (id, text) in texts.iter().enumerate() {
            index.insert(id as u32, &Selector::parse(text).unwrap());
        }
        let unrelated = LabelSet::from_pairs(vec![(Arc::from("pod"), Arc::from("p1"))]);
        let mut found = Vec::new();
        let mut evaluated = Vec::new();
        let evaluate = |id| {
            evaluated.push(id);
            true
        };
        index.matching(unrelated.iter(), evaluate, &mut found);
        found.sort_unstable();
        assert_eq!(
            found,
            [1, 2],
            "`!=` and all() match an endpoint without the label"
        );
        assert!(evaluated.is_empty(), "evaluated {evaluated:?}");
    }
}
