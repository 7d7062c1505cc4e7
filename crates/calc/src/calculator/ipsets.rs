//! The IP-set index: which sets are active (used by an active rule) with how many rules use
//! each, the selector and tag indexes that find the sets an endpoint belongs to, each set's
//! member endpoints, each endpoint's sets, and each set's addresses with a count per address (an
//! address stays while any member endpoint has it).
//!
//! [`IpSetIndex`] knows sets, not the cluster: the [`Calculator`](super::Calculator) finds the
//! endpoints a new set selects and tells the index which sets an endpoint wants. The index
//! writes the sets' members into the desired state and the changed ids into the changes it is
//! handed ([`Out`]), so that nothing is copied on the way.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::ids::{FxMap, IdSet, Slots};
use super::plan::Atom;
use super::selectors::SelectorIndex;
use crate::desired::{IpSet, IpSetSource, Rules, ipset_sources};
use crate::labels::Effective;

/// Where the index writes: the desired state's sets and the ids of the sets that changed.
pub(super) struct Out<'a> {
    pub sets: &'a mut BTreeMap<String, IpSet>,
    pub changed: &'a mut BTreeSet<String>,
}

/// One active set, by number.
#[derive(Debug)]
struct Set {
    /// The state's id ([`IpSetSource::id`]).
    id: String,
    source: IpSetSource,
    /// How many active rules use it.
    refs: usize,
    /// Member endpoints.
    members: IdSet,
    /// Address → how many members have it.
    counts: FxMap<IpAddr, u32>,
}

/// One endpoint's sets (numbers, sorted) and addresses (those it joins them with). Boxed
/// slices: one per endpoint, so their spare capacity would add up.
#[derive(Debug, Default)]
struct Membership {
    sets: Box<[u32]>,
    addresses: Box<[IpAddr]>,
}

/// The active IP sets and their members.
#[derive(Debug, Default)]
pub(super) struct IpSetIndex {
    numbers: FxMap<String, u32>,
    sets: Slots<Set>,
    /// Active selector sets by number.
    selectors: SelectorIndex,
    /// Active tag sets: tag → number.
    by_tag: FxMap<String, u32>,
    /// By endpoint number.
    memberships: Vec<Membership>,
}

impl IpSetIndex {
    /// The active sets (numbers, sorted) an endpoint with these labels and profile tags is in.
    pub fn wanted<'t>(
        &self,
        labels: &Effective,
        tags: impl IntoIterator<Item = &'t String>,
    ) -> Vec<u32> {
        let mut wanted = Vec::new();
        let evaluate = |number| match &self.sets[number].source {
            IpSetSource::Selector(selector) => selector.evaluate(labels),
            IpSetSource::Tag(_) => false,
        };
        self.selectors
            .matching(labels.iter(), evaluate, &mut wanted);
        wanted.extend(tags.into_iter().filter_map(|tag| self.by_tag.get(tag)));
        wanted.sort_unstable();
        wanted.dedup();
        wanted
    }

    /// What an active set holds.
    pub fn source(&self, number: u32) -> &IpSetSource {
        &self.sets[number].source
    }

    /// The atoms every member of a selector set hits (`None`: look at every endpoint).
    pub fn atoms(&self, number: u32) -> Option<&[Atom]> {
        self.selectors.atoms(number)
    }

    /// One more rule uses `source`. Returns the set's number when it just became active
    /// (empty: the caller fills it with [`IpSetIndex::join`]).
    pub fn reference(&mut self, source: &IpSetSource, out: Out<'_>) -> Option<u32> {
        let id = source.id();
        if let Some(&number) = self.numbers.get(&id) {
            self.sets[number].refs += 1;
            return None;
        }
        out.sets.insert(
            id.clone(),
            IpSet {
                source: source.clone(),
                members: BTreeSet::new(),
            },
        );
        out.changed.insert(id.clone());
        let number = self.sets.insert(Set {
            id: id.clone(),
            source: source.clone(),
            refs: 1,
            members: IdSet::default(),
            counts: FxMap::default(),
        });
        self.numbers.insert(id, number);
        match source {
            IpSetSource::Tag(tag) => {
                self.by_tag.insert(tag.clone(), number);
            }
            IpSetSource::Selector(selector) => self.selectors.insert(number, selector),
        }
        Some(number)
    }

    /// One rule fewer uses set `id`; the last one takes the set away.
    pub fn release(&mut self, id: &str, out: Out<'_>) {
        let Some(&number) = self.numbers.get(id) else {
            return;
        };
        let set = &mut self.sets[number];
        set.refs -= 1;
        if set.refs > 0 {
            return;
        }
        self.numbers.remove(id);
        let set = self.sets.remove(number).expect("a numbered set");
        match &set.source {
            IpSetSource::Tag(tag) => {
                self.by_tag.remove(tag);
            }
            IpSetSource::Selector(_) => self.selectors.remove(number),
        }
        for endpoint in set.members.iter() {
            let sets = &mut self.memberships[endpoint as usize].sets;
            if let Ok(at) = sets.binary_search(&number) {
                let mut kept = std::mem::take(sets).into_vec();
                kept.remove(at);
                *sets = kept.into_boxed_slice();
            }
        }
        out.sets.remove(id);
        out.changed.insert(id.to_owned());
    }

    /// Makes an endpoint a member of exactly the sets `wanted` (sorted) with `addresses`.
    pub fn update(
        &mut self,
        endpoint: u32,
        wanted: &[u32],
        addresses: &[IpAddr],
        mut out: Out<'_>,
    ) {
        let at = endpoint as usize;
        if self.memberships.len() <= at {
            self.memberships.resize_with(at + 1, Membership::default);
        }
        let mut membership = std::mem::take(&mut self.memberships[at]);
        if *membership.addresses != *addresses {
            for &number in &membership.sets {
                self.leave(number, endpoint, &membership.addresses, out.reborrow());
            }
            membership.sets = Box::default();
            membership.addresses = addresses.into();
        }
        let old = std::mem::take(&mut membership.sets);
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < wanted.len() {
            match (old.get(i), wanted.get(j)) {
                (Some(a), Some(b)) if a == b => (i, j) = (i + 1, j + 1),
                (Some(&a), Some(b)) if a < *b => {
                    self.leave(a, endpoint, &membership.addresses, out.reborrow());
                    i += 1;
                }
                (Some(&a), None) => {
                    self.leave(a, endpoint, &membership.addresses, out.reborrow());
                    i += 1;
                }
                (_, Some(&b)) => {
                    self.enter(b, endpoint, &membership.addresses, out.reborrow());
                    j += 1;
                }
                (None, None) => unreachable!("the loop condition"),
            }
        }
        membership.sets = if *old == *wanted { old } else { wanted.into() };
        self.memberships[at] = membership;
    }

    /// [`IpSetIndex::update`] with the addresses it has.
    pub fn update_sets(&mut self, endpoint: u32, wanted: &[u32], out: Out<'_>) {
        let addresses = self
            .memberships
            .get(endpoint as usize)
            .map(|m| m.addresses.to_vec())
            .unwrap_or_default();
        self.update(endpoint, wanted, &addresses, out);
    }

    /// Takes an endpoint out of every set it is in (it is gone).
    pub fn leave_all(&mut self, endpoint: u32, out: Out<'_>) {
        self.update(endpoint, &[], &[], out);
    }

    /// Endpoint `endpoint` joins set `number` with the addresses of its last update (a new set
    /// being filled).
    pub fn join(&mut self, number: u32, endpoint: u32, out: Out<'_>) {
        let Some(membership) = self.memberships.get_mut(endpoint as usize) else {
            return;
        };
        let Err(at) = membership.sets.binary_search(&number) else {
            return;
        };
        let mut sets = std::mem::take(&mut membership.sets).into_vec();
        sets.insert(at, number);
        membership.sets = sets.into_boxed_slice();
        let addresses = std::mem::take(&mut membership.addresses);
        self.enter(number, endpoint, &addresses, out);
        self.memberships[endpoint as usize].addresses = addresses;
    }

    fn enter(&mut self, number: u32, endpoint: u32, addresses: &[IpAddr], out: Out<'_>) {
        let set = &mut self.sets[number];
        set.members.insert(endpoint);
        let state = out.sets.get_mut(&set.id).expect("an active set");
        for address in addresses {
            let count = set.counts.entry(*address).or_default();
            *count += 1;
            if *count == 1 {
                state.members.insert(*address);
                mark(out.changed, &set.id);
            }
        }
    }

    fn leave(&mut self, number: u32, endpoint: u32, addresses: &[IpAddr], out: Out<'_>) {
        let Some(set) = self.sets.get_mut(number) else {
            return;
        };
        set.members.remove(endpoint);
        let Some(state) = out.sets.get_mut(&set.id) else {
            return;
        };
        for address in addresses {
            if let Some(count) = set.counts.get_mut(address) {
                *count -= 1;
                if *count == 0 {
                    set.counts.remove(address);
                    state.members.remove(address);
                    mark(out.changed, &set.id);
                }
            }
        }
    }
}

/// Records a set as changed, copying its id only the first time (a set filling up changes on
/// every member).
fn mark(changed: &mut BTreeSet<String>, id: &str) {
    if !changed.contains(id) {
        changed.insert(id.to_owned());
    }
}

impl Out<'_> {
    fn reborrow(&mut self) -> Out<'_> {
        Out {
            sets: self.sets,
            changed: self.changed,
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
    use super::*;

    /// An address stays in a set while any member endpoint has it; an endpoint that moves
    /// takes its old address with it; the last rule using the set takes it away, and every
    /// step names the set as changed.
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
        let id = source.id();
        let number = index.reference(&source, out!()).expect("a new set");
        assert_eq!(
            index.reference(&source, out!()),
            None,
            "a second rule, same set"
        );
        let ip = |text: &str| -> IpAddr { text.parse().unwrap() };
        let (a, b) = (0, 1);
        index.update(a, &[number], &[ip("10.0.0.1")], out!());
        index.update(b, &[number], &[ip("10.0.0.1"), ip("10.0.0.2")], out!());
        assert_eq!(sets[&id].members.len(), 2);
        assert_eq!(
            index.wanted(&Effective::default(), [&"web".to_owned()]),
            [number]
        );

        changed.clear();
        index.update(b, &[number], &[ip("10.0.0.3")], out!());
        let members: Vec<IpAddr> = sets[&id].members.iter().copied().collect();
        assert_eq!(members, [ip("10.0.0.1"), ip("10.0.0.3")], "b moved");
        assert!(changed.contains(&id));

        index.leave_all(b, out!());
        assert_eq!(
            sets[&id].members,
            BTreeSet::from([ip("10.0.0.1")]),
            "a still has 10.0.0.1"
        );

        index.release(&id, out!());
        assert!(sets.contains_key(&id), "one rule still uses it");
        index.release(&id, out!());
        assert!(!sets.contains_key(&id));
        assert!(
            index
                .wanted(&Effective::default(), [&"web".to_owned()])
                .is_empty()
        );
    }
}
