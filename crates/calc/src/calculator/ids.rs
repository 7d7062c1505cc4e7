//! Dense ids and the collections of them the indexes keep. Endpoints and IP sets are numbered
//! (`u32`) so that an index entry is four bytes and a lookup hashes an integer, not a key of
//! four strings: at 100,000 endpoints, ordered sets of shared keys spent most of an update
//! comparing strings.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (as rustc's): one multiply per word, cheap for the small integers, addresses and
/// short label strings the indexes hash. (Flooding one bucket with chosen labels would slow
/// the lookups that land in it, never change an answer.)
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fx(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut tail = [0; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(tail));
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    /// The multiply leaves the high bits well mixed and the low ones not (the low bits of a
    /// product depend only on the low bits of its inputs: addresses `10.a.b.c` would all land
    /// in a few buckets), and hash tables index by the low bits: rotate the good ones down.
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

pub(crate) type FxBuild = BuildHasherDefault<Fx>;
pub(super) type FxMap<K, V> = HashMap<K, V, FxBuild>;

/// Past this many ids a set is hashed; below, a vector scanned in order is smaller and as fast.
const SMALL: usize = 32;

/// A set of ids, unordered: most index entries hold one or a few (a pod's own label value), a
/// few hold half the cluster (`env=prod`).
#[derive(Debug, Clone)]
pub(super) enum IdSet {
    Small(Vec<u32>),
    Large(HashSet<u32, FxBuild>),
}

impl Default for IdSet {
    fn default() -> IdSet {
        IdSet::Small(Vec::new())
    }
}

impl IdSet {
    pub fn insert(&mut self, id: u32) -> bool {
        match self {
            IdSet::Small(ids) if ids.contains(&id) => false,
            IdSet::Small(ids) if ids.len() < SMALL => {
                ids.push(id);
                true
            }
            IdSet::Small(ids) => {
                let mut large: HashSet<u32, FxBuild> = ids.drain(..).collect();
                large.insert(id);
                *self = IdSet::Large(large);
                true
            }
            IdSet::Large(ids) => ids.insert(id),
        }
    }

    pub fn remove(&mut self, id: u32) -> bool {
        match self {
            IdSet::Small(ids) => match ids.iter().position(|&i| i == id) {
                Some(at) => {
                    ids.swap_remove(at);
                    true
                }
                None => false,
            },
            IdSet::Large(ids) => ids.remove(&id),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            IdSet::Small(ids) => ids.len(),
            IdSet::Large(ids) => ids.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (small, large) = match self {
            IdSet::Small(ids) => (Some(ids.iter().copied()), None),
            IdSet::Large(ids) => (None, Some(ids.iter().copied())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }
}

/// Numbers for things named by a key: an id is reused once its thing is gone.
#[derive(Debug)]
pub(super) struct Slots<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Slots<T> {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    pub fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(value);
                id
            }
            None => {
                self.slots.push(Some(value));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 slots")
            }
        }
    }

    pub fn remove(&mut self, id: u32) -> Option<T> {
        let value = self.slots.get_mut(id as usize)?.take();
        if value.is_some() {
            self.free.push(id);
        }
        value
    }

    pub fn get(&self, id: u32) -> Option<&T> {
        self.slots.get(id as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.slots.get_mut(id as usize)?.as_mut()
    }
}

impl<T> std::ops::Index<u32> for Slots<T> {
    type Output = T;

    fn index(&self, id: u32) -> &T {
        self.get(id).expect("a live id")
    }
}

impl<T> std::ops::IndexMut<u32> for Slots<T> {
    fn index_mut(&mut self, id: u32) -> &mut T {
        self.get_mut(id).expect("a live id")
    }
}
