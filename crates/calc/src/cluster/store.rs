//! The cluster's endpoints: numbered slots, found by key through a hash table of numbers.
//!
//! At 100,000 endpoints a `BTreeMap<EndpointKey, Endpoint>` compared keys of four strings
//! about seventeen times per lookup, most of them cache misses (14 % of the samples of a profile
//! of `examples/scale.rs`'s build and label changes). Here a lookup hashes the key once and
//! probes a table of (number, hash) pairs, comparing a key only when the hashes agree; an
//! endpoint's number stays its own until it is removed (then it is reused), so the calculator
//! keys its own records by it.

use std::hash::BuildHasher;

use super::{Endpoint, EndpointKey};
use crate::calculator::ids::FxBuild;

/// A table entry: a slot's number and the low 32 bits of its key's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    id: u32,
    hash: u32,
}

const EMPTY: Entry = Entry {
    id: u32::MAX,
    hash: 0,
};

/// Every endpoint of the cluster, by key and by number. Iteration is in number order (not key
/// order).
#[derive(Clone, Default)]
pub struct EndpointMap {
    slots: Vec<Option<(EndpointKey, Endpoint)>>,
    /// Numbers of empty slots, reused first.
    free: Vec<u32>,
    /// Open addressing with linear probing: a power of two in size, at most half full.
    table: Vec<Entry>,
    len: usize,
}

fn hash(key: &EndpointKey) -> u32 {
    FxBuild::default().hash_one(key) as u32
}

impl EndpointMap {
    /// How many endpoints.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The endpoint under `key`.
    pub fn get(&self, key: &EndpointKey) -> Option<&Endpoint> {
        self.get_by_id(self.id(key)?).map(|(_, e)| e)
    }

    pub fn contains_key(&self, key: &EndpointKey) -> bool {
        self.id(key).is_some()
    }

    /// The number of the endpoint under `key`: its own until it is removed.
    pub fn id(&self, key: &EndpointKey) -> Option<u32> {
        self.find(key, hash(key)).ok().map(|at| self.table[at].id)
    }

    /// The endpoint numbered `id`, with its key.
    pub fn get_by_id(&self, id: u32) -> Option<(&EndpointKey, &Endpoint)> {
        let (key, endpoint) = self.slots.get(id as usize)?.as_ref()?;
        Some((key, endpoint))
    }

    /// Every endpoint with its key, in number order.
    pub fn iter(&self) -> impl Iterator<Item = (&EndpointKey, &Endpoint)> {
        self.iter_ids().map(|(_, key, endpoint)| (key, endpoint))
    }

    /// Every endpoint with its number and key.
    pub fn iter_ids(&self) -> impl Iterator<Item = (u32, &EndpointKey, &Endpoint)> {
        self.slots.iter().enumerate().filter_map(|(id, slot)| {
            let (key, endpoint) = slot.as_ref()?;
            Some((id as u32, key, endpoint))
        })
    }

    pub fn keys(&self) -> impl Iterator<Item = &EndpointKey> {
        self.iter().map(|(key, _)| key)
    }

    pub fn values(&self) -> impl Iterator<Item = &Endpoint> {
        self.iter().map(|(_, endpoint)| endpoint)
    }

    /// Stores an endpoint (replacing the one under the same key, which keeps its number);
    /// returns its number and the endpoint as stored.
    pub(crate) fn insert(&mut self, key: EndpointKey, endpoint: Endpoint) -> (u32, &Endpoint) {
        let hash = hash(&key);
        let id = match self.find(&key, hash) {
            Ok(at) => {
                let id = self.table[at].id;
                let slot = self.slots[id as usize].as_mut().expect("a live slot");
                slot.1 = endpoint;
                id
            }
            Err(_) => {
                let id = match self.free.pop() {
                    Some(id) => {
                        self.slots[id as usize] = Some((key, endpoint));
                        id
                    }
                    None => {
                        self.slots.push(Some((key, endpoint)));
                        u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 endpoints")
                    }
                };
                self.len += 1;
                if self.len * 2 > self.table.len() {
                    self.grow();
                }
                let at = self.vacancy(hash);
                self.table[at] = Entry { id, hash };
                id
            }
        };
        let (_, endpoint) = self.slots[id as usize].as_ref().expect("a live slot");
        (id, endpoint)
    }

    /// Replaces the endpoint numbered `id` (which must be live); returns it as stored.
    pub(crate) fn replace(&mut self, id: u32, endpoint: Endpoint) -> &Endpoint {
        let slot = self.slots[id as usize].as_mut().expect("a live slot");
        slot.1 = endpoint;
        &slot.1
    }

    /// Removes the endpoint under `key`; returns the number it had.
    pub(crate) fn remove(&mut self, key: &EndpointKey) -> Option<u32> {
        let at = self.find(key, hash(key)).ok()?;
        let id = self.table[at].id;
        self.slots[id as usize] = None;
        self.free.push(id);
        self.len -= 1;
        self.close_hole(at);
        if self.len == 0 {
            // Nothing left: give back the memory of a cluster that emptied.
            *self = EndpointMap::default();
        }
        Some(id)
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// `Ok(position)` of the key's entry, or `Err(())` if it has none.
    fn find(&self, key: &EndpointKey, hash: u32) -> Result<usize, ()> {
        if self.table.is_empty() {
            return Err(());
        }
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            let entry = self.table[at];
            if entry == EMPTY {
                return Err(());
            }
            if entry.hash == hash
                && let Some((stored, _)) = &self.slots[entry.id as usize]
                && stored == key
            {
                return Ok(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// The first empty position from a hash's home.
    fn vacancy(&self, hash: u32) -> usize {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        while self.table[at] != EMPTY {
            at = (at + 1) & mask;
        }
        at
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(16);
        let old = std::mem::replace(&mut self.table, vec![EMPTY; size]);
        for entry in old.into_iter().filter(|e| *e != EMPTY) {
            let at = self.vacancy(entry.hash);
            self.table[at] = entry;
        }
    }

    /// Empties position `hole`, moving back the entries after it that would otherwise be cut
    /// off from their home (backward-shift deletion: no tombstones).
    fn close_hole(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut next = (hole + 1) & mask;
        loop {
            let entry = self.table[next];
            if entry == EMPTY {
                break;
            }
            let home = entry.hash as usize & mask;
            // The entry may move back to the hole unless its home lies after the hole (in
            // probe order, up to where it sits).
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.table[hole] = entry;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.table[hole] = EMPTY;
    }
}

impl std::fmt::Debug for EndpointMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Equal when they hold the same endpoints under the same keys, whatever their numbers.
impl PartialEq for EndpointMap {
    fn eq(&self, other: &EndpointMap) -> bool {
        self.len == other.len && self.iter().all(|(k, e)| other.get(k) == Some(e))
    }
}

impl Eq for EndpointMap {}

/// `map[&key]`, as for a map: panics if there is no endpoint under `key`.
impl std::ops::Index<&EndpointKey> for EndpointMap {
    type Output = Endpoint;

    fn index(&self, key: &EndpointKey) -> &Endpoint {
        self.get(key).expect("an endpoint under the key")
    }
}

impl<'a> IntoIterator for &'a EndpointMap {
    type Item = (&'a EndpointKey, &'a Endpoint);
    type IntoIter = Box<dyn Iterator<Item = (&'a EndpointKey, &'a Endpoint)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<(EndpointKey, Endpoint)> for EndpointMap {
    fn from_iter<I: IntoIterator<Item = (EndpointKey, Endpoint)>>(pairs: I) -> EndpointMap {
        let mut map = EndpointMap::default();
        for (key, endpoint) in pairs {
            map.insert(key, endpoint);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use calico_model::key::{HostEndpointId, WorkloadEndpointId};
    use proptest::prelude::*;

    use super::*;

    fn key_of(n: u8) -> EndpointKey {
        match n % 2 {
            0 => EndpointKey::Workload(WorkloadEndpointId {
                hostname: format!("h{}", n % 3),
                orchestrator: "k8s".into(),
                workload: format!("w{n}"),
                endpoint: "eth0".into(),
            }),
            _ => EndpointKey::Host(HostEndpointId {
                hostname: format!("h{}", n % 3),
                endpoint: format!("e{n}"),
            }),
        }
    }

    fn endpoint(generation: u16) -> Endpoint {
        Endpoint {
            interface: Some(format!("cali{generation}")),
            active: true,
            profile_ids: Default::default(),
            labels: Default::default(),
            addresses: Vec::new(),
            mac: None,
            nat: Vec::new(),
        }
    }

    proptest! {
        /// After any sequence of puts and removals (of up to 200 keys, so the table grows,
        /// wraps around and closes holes in runs), the map holds what a `BTreeMap` given the
        /// same sequence holds, and numbers stay with their endpoint until it is removed.
        #[test]
        fn the_map_holds_what_a_btree_map_holds(
            steps in prop::collection::vec((any::<u8>(), prop::option::of(any::<u16>())), 1..600),
        ) {
            let mut map = EndpointMap::default();
            let mut expected: BTreeMap<EndpointKey, Endpoint> = BTreeMap::new();
            let mut numbers: BTreeMap<EndpointKey, u32> = BTreeMap::new();
            for (n, put) in steps {
                let key = key_of(n % 200);
                match put {
                    Some(generation) => {
                        let (id, stored) = map.insert(key.clone(), endpoint(generation));
                        prop_assert_eq!(stored, &endpoint(generation));
                        let kept = *numbers.entry(key.clone()).or_insert(id);
                        prop_assert_eq!(kept, id, "{} was renumbered", key);
                        expected.insert(key, endpoint(generation));
                    }
                    None => {
                        prop_assert_eq!(map.remove(&key), numbers.remove(&key));
                        expected.remove(&key);
                    }
                }
                prop_assert_eq!(map.len(), expected.len());
                for (key, id) in &numbers {
                    prop_assert_eq!(map.id(key), Some(*id));
                    prop_assert_eq!(map.get_by_id(*id), Some((key, &expected[key])));
                }
                for n in 0..200 {
                    let probe = key_of(n);
                    prop_assert_eq!(map.get(&probe), expected.get(&probe), "{}", probe);
                }
                let mut listed: Vec<(&EndpointKey, &Endpoint)> = map.iter().collect();
                listed.sort_by(|a, b| a.0.cmp(b.0));
                prop_assert_eq!(listed, expected.iter().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn maps_with_the_same_endpoints_are_equal_whatever_their_numbers() {
        let forward: EndpointMap = (0..5).map(|n| (key_of(n), endpoint(1))).collect();
        let backward: EndpointMap = (0..5).rev().map(|n| (key_of(n), endpoint(1))).collect();
        assert_eq!(forward, backward);
        let other: EndpointMap = (0..5).map(|n| (key_of(n), endpoint(n.into()))).collect();
        assert_ne!(forward, other);
    }
}
