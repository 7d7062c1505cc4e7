//! What an entry of the window really costs: every heap block it owns as glibc's malloc hands
//! it out (the requested size plus an 8-byte header, rounded up to 16, at least 32; labels as
//! `labels.rs` keeps them), its box, its slot in the entries' B-tree and in the index, and the
//! slack those keep. Checked against a counting allocator by `tests/estimate.rs`: the estimate
//! stays at or above what is allocated and at most a fifth above it with malloc's rounding, so
//! `--max-memory` bounds the heap and not a guess.

use std::mem::size_of;

use calico_model::flow::{FlowEndpoint, FlowRecord, PolicyHit};

use super::Entry;
use super::labels::Labels;

/// The bytes malloc takes for a block of `size` requested bytes (none for an empty one).
pub(super) fn block(size: usize) -> usize {
    match size {
        0 => 0,
        n => (n + 8).div_ceil(16).max(2) * 16,
    }
}

/// Bytes the labels cost once taken: the slice and every string.
fn label_cost<'a>(pairs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> usize {
    let slice = block(pairs.len() * size_of::<(Box<str>, Box<str>)>());
    slice
        + pairs
            .map(|(k, v)| block(k.len()) + block(v.len()))
            .sum::<usize>()
}

/// A B-tree's slots per node (std's `CAPACITY`, 2 × 6 - 1).
const NODE_SLOTS: usize = 11;
/// Entries arrive in key order (bucket, then sequence), so a full leaf splits with 6 kept on
/// the left that nothing later fills: a leaf holds 6 slots' worth on average.
const FILLED: usize = 6;

/// A B-tree leaf with `K`, `V` slots: the slots, the parent pointer, its index and length.
const fn leaf<K, V>() -> usize {
    NODE_SLOTS * (size_of::<K>() + size_of::<V>()) + size_of::<usize>() + 2 * size_of::<u16>()
}

/// The entry's box, and the entries map's share per entry: a leaf over the entries it holds,
/// internal nodes (a twelfth more: one per 6 leaves, each 12 edges wider) rounded in.
fn entry_slot() -> usize {
    let node = block(leaf::<(u64, u64), Box<Entry>>());
    block(size_of::<Entry>()) + node / FILLED + node / FILLED / 6
}

/// The index's share per entry: a hash-table slot ((bucket, hash) → sequences) and control
/// byte, at worst half used just after the table doubled, and the sequence list (room for 4).
fn index_slot() -> usize {
    let slot = size_of::<((u64, u64), Vec<u64>)>() + 1;
    2 * slot * 8 / 7 + block(4 * size_of::<u64>())
}

fn string(s: &str) -> usize {
    block(s.len())
}

fn side(e: &FlowEndpoint) -> usize {
    e.key.as_deref().map_or(0, string)
        + block(e.profiles.capacity() * size_of::<String>())
        + e.profiles.iter().map(|p| string(p)).sum::<usize>()
}

fn steps(hits: &Vec<PolicyHit>) -> usize {
    let text = |s: &Option<String>| s.as_deref().map_or(0, string);
    block(hits.capacity() * size_of::<PolicyHit>())
        + hits
            .iter()
            .map(|h| text(&h.tier) + text(&h.name))
            .sum::<usize>()
}

/// Bytes an entry holding `flow` will cost, its labels taken out (see the module's comment).
pub fn footprint(flow: &FlowRecord) -> usize {
    let pairs = |e: &'_ FlowEndpoint| label_cost(e.labels.iter().map(|(k, v)| (&**k, &**v)));
    unlabelled(flow) + pairs(&flow.source) + pairs(&flow.destination)
}

/// Bytes an entry costs: its record (labels taken out) and the labels of both sides.
pub(super) fn stored(flow: &FlowRecord, sides: &[Labels; 2]) -> usize {
    let pairs = |l: &Labels| label_cost(l.iter().map(|(k, v)| (&**k, &**v)));
    unlabelled(flow) + sides.iter().map(pairs).sum::<usize>()
}

/// The entry with everything but the labels.
fn unlabelled(flow: &FlowRecord) -> usize {
    entry_slot()
        + index_slot()
        + string(&flow.reporter)
        + side(&flow.source)
        + side(&flow.destination)
        + steps(&flow.policies.enforced)
        + steps(&flow.policies.pending)
}
