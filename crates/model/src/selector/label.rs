//! How a selector looks a label up: the [`Labels`] trait, its maps, and the keyed hash.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// Where an endpoint's labels come from: anything that can look a label up by name.
pub trait Labels {
    fn get_label(&self, name: &str) -> Option<&str>;

    /// The same lookup, also given the name's [`label_key`] (selectors compute it once, when
    /// parsed). A representation that keeps the keys of its names (calc's `LabelSet` keeps a
    /// filter of them) can answer most misses without comparing a string. The answer must be
    /// `get_label(name)`'s.
    fn get_label_keyed(&self, name: &str, key: u64) -> Option<&str> {
        let _ = key;
        self.get_label(name)
    }
}

/// A 64-bit hash of a label name for [`Labels::get_label_keyed`]: FxHash-style (multiply,
/// rotate), fast on the short names labels have; its high bits are the best mixed. Stable within
/// a build only: never store it.
pub fn label_key(name: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let mut chunks = name.as_bytes().chunks_exact(8);
    let mut hash = name.len() as u64;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    let mut tail = [0; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(hash, u64::from_le_bytes(tail))
}

impl Labels for BTreeMap<String, String> {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl Labels for [(&str, &str)] {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}
