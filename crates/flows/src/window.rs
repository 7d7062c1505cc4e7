//! The window: the flows the aggregator holds, pure and synchronous (`now` is an argument).
//!
//! A flow here is one key in one time bucket (`--bucket`, Felix's flush interval by default):
//! the records of the same key (reporter, both sides, protocol, port, direction, verdict and
//! both trails) whose interval starts in the same bucket are summed into one entry. Queries sum
//! a key's entries over the time asked for. Entries leave oldest first — by bucket, then by
//! arrival — when the window is over `max_flows` or `max_memory` (evicted) or past `retention`
//! (expired). A record that would be the oldest entry of a full window, or that is past the
//! retention already, is not taken (dropped); every one of these is counted.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use calico_flowlog::FlowFilter;
use calico_flowlog::protocol::{FlowList, FlowResult, Hints, MAX_HINTS};
use calico_model::flow::{FlowEndpoint, FlowRecord, PolicyTrail};
use ipnet::IpNet;

pub use footprint::footprint;
use footprint::stored;
use labels::Labels;

/// The bounds of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_flows: usize,
    /// Estimated bytes of all entries (see [`footprint`]).
    pub max_memory: usize,
    /// Seconds after its end that a flow is kept; 0 keeps flows until the caps push them out.
    pub retention: u64,
    /// Seconds per bucket (at least 1).
    pub bucket: u64,
}

/// What [`Window::insert`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Summed into an entry of the same key and bucket.
    Merged,
    /// A new entry.
    Added,
    Dropped(DropReason),
}

/// Why a valid record was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// It ended longer than the retention ago.
    Expired,
    /// The window is full and everything in it is newer.
    OlderThanWindow,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Expired => "expired",
            DropReason::OlderThanWindow => "older-than-window",
        }
    }
}

/// Entries removed so far, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub over_max_flows: u64,
    pub over_max_memory: u64,
    pub expired: u64,
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    /// The record, its labels taken out into `labels` (source, destination).
    flow: FlowRecord,
    labels: [Labels; 2],
    records: u64,
    footprint: usize,
}

/// The flows held, in arrival order within buckets.
#[derive(Debug)]
pub struct Window {
    limits: Limits,
    /// (bucket, sequence) → entry: the first is the oldest. Boxed: a B-tree leaf has room for
    /// 11 values and keeps about 6, so an entry of its own costs less than 5 empty slots.
    entries: BTreeMap<(u64, u64), Box<Entry>>,
    /// (bucket, key hash) → sequences of the entries with that hash (collisions are compared).
    index: HashMap<(u64, u64), Vec<u64>>,
    memory: usize,
    next: u64,
    removed: Removed,
    /// Every record accepted that started at this second or later is held (summed): what was
    /// evicted, or dropped as older than the window, started before it.
    covered_from: u64,
}

impl Window {
    pub fn new(mut limits: Limits) -> Window {
        limits.bucket = limits.bucket.max(1);
        Window {
            limits,
            entries: BTreeMap::new(),
            index: HashMap::new(),
            memory: 0,
            next: 0,
            removed: Removed::default(),
            covered_from: 0,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Estimated bytes held.
    pub fn memory(&self) -> usize {
        self.memory
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn removed(&self) -> Removed {
        self.removed
    }

    /// Whether every record accepted that started at `from` or later is still held at `now`:
    /// nothing of that time evicted, nor past the retention.
    pub fn covers(&self, from: u64, now: u64) -> bool {
        let horizon = match self.limits.retention {
            0 => 0,
            retention => now.saturating_sub(retention),
        };
        from >= self.covered_from.max(horizon)
    }

    /// Says that records which started before `from` may be missing (the window was filled
    /// from a store that had already dropped them).
    pub fn cover_from(&mut self, from: u64) {
        self.covered_from = self.covered_from.max(from);
    }

    /// Records of `bucket` and before are no longer all held.
    fn uncover(&mut self, bucket: u64) {
        self.cover_from((bucket + 1).saturating_mul(self.limits.bucket));
    }

    /// Takes one valid record.
    pub fn insert(&mut self, mut record: FlowRecord, now: u64) -> Outcome {
        let retention = self.limits.retention;
        if retention > 0 && record.end_time.saturating_add(retention) < now {
            return Outcome::Dropped(DropReason::Expired);
        }
        let bucket = record.start_time / self.limits.bucket;
        let hash = key_hash(&record);
        if let Some(seq) = self.find(bucket, hash, &record) {
            let entry = self.entries.get_mut(&(bucket, seq)).expect("indexed");
            let before = entry.footprint;
            if record.end_time >= entry.flow.end_time {
                entry.labels = take_labels(&mut record);
            }
            merge(&mut entry.flow, &record);
            entry.records += 1;
            entry.footprint = stored(&entry.flow, &entry.labels);
            self.memory = self.memory - before + entry.footprint;
            self.shrink();
            return Outcome::Merged;
        }
        compact(&mut record);
        let size = footprint(&record);
        let full = self.entries.len() >= self.limits.max_flows
            || self.memory + size > self.limits.max_memory;
        let oldest = self.entries.keys().next().map(|(b, _)| *b);
        if full && oldest.is_none_or(|oldest| bucket < oldest) {
            self.uncover(bucket);
            return Outcome::Dropped(DropReason::OlderThanWindow);
        }
        let seq = self.next;
        self.next += 1;
        self.index.entry((bucket, hash)).or_default().push(seq);
        let labels = take_labels(&mut record);
        let entry = Entry {
            hash,
            flow: record,
            labels,
            records: 1,
            footprint: size,
        };
        self.entries.insert((bucket, seq), Box::new(entry));
        self.memory += size;
        self.shrink();
        Outcome::Added
    }

    /// Removes the entries that ended longer than the retention ago; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        if self.limits.retention == 0 {
            return 0;
        }
        let horizon = now.saturating_sub(self.limits.retention);
        // Only entries that started before the horizon can have ended before it: the buckets
        // up to the horizon's, each entry's end checked.
        let reach = horizon / self.limits.bucket + 1;
        let stale: Vec<(u64, u64)> = self
            .entries
            .range(..(reach, 0))
            .filter(|(_, e)| e.flow.end_time < horizon)
            .map(|(k, _)| *k)
            .collect();
        for key in &stale {
            self.remove(*key);
        }
        self.removed.expired += stale.len() as u64;
        stale.len()
    }

    /// The flows matching `filter`, one per key summed over its buckets, newest first. Only
    /// the `limit` flows answered are copied, so a query costs little memory however large the
    /// window.
    pub fn query(&self, filter: &FlowFilter, now: u64, limit: usize) -> FlowList {
        // One group per key, and the first group of each hash: keys of one hash (rare) chain
        // through `next`. A few dozen bytes per flow matched, so a query of the whole window
        // costs a fraction of it.
        let mut groups: Vec<Group<'_>> = Vec::new();
        let mut first: HashMap<u64, usize> = HashMap::new();
        for entry in self.entries.values() {
            if !filter.matches(&entry.flow, now) {
                continue;
            }
            let mut at = first.get(&entry.hash).copied();
            while let Some(i) = at.filter(|i| !same_key(&groups[*i].latest.flow, &entry.flow)) {
                at = groups[i].next;
            }
            match at {
                Some(i) => groups[i].add(entry),
                None => {
                    let mut group = Group::of(entry);
                    group.next = first.insert(entry.hash, groups.len());
                    groups.push(group);
                }
            }
        }
        groups.sort_by(|a, b| b.end.cmp(&a.end).then(a.hash.cmp(&b.hash)));
        let total = groups.len();
        let flows = groups.iter().take(limit).map(Group::result).collect();
        FlowList { flows, total }
    }

    /// The distinct values a filter could take: each kind computed with the filter's own
    /// parameter of that kind left out, so the alternatives to a choice stay visible.
    pub fn hints(&self, filter: &FlowFilter, now: u64) -> Hints {
        let without = |clear: fn(&mut FlowFilter)| {
            let mut f = filter.clone();
            clear(&mut f);
            f
        };
        let collect = |f: FlowFilter, values: fn(&FlowRecord, &mut BTreeSet<String>)| {
            let mut set = BTreeSet::new();
            for entry in self.entries.values().filter(|e| f.matches(&e.flow, now)) {
                values(&entry.flow, &mut set);
                // The first MAX_HINTS in order are kept; the set never grows past them.
                while set.len() > MAX_HINTS {
                    set.pop_last();
                }
            }
            set.into_iter().collect()
        };
        Hints {
            reporters: collect(without(|f| f.reporters.clear()), |flow, set| {
                set.insert(flow.reporter.clone());
            }),
            endpoints: collect(without(|f| f.endpoints.clear()), |flow, set| {
                set.extend([flow.source.name(), flow.destination.name()]);
            }),
            profiles: collect(without(|f| f.profiles.clear()), |flow, set| {
                for side in [&flow.source, &flow.destination] {
                    set.extend(side.profiles.iter().cloned());
                }
            }),
            tiers: collect(without(|f| f.tiers.clear()), |flow, set| {
                set.extend(flow.policies.steps().filter_map(|s| s.tier.clone()));
            }),
            policies: collect(without(|f| f.policies.clear()), |flow, set| {
                set.extend(flow.policies.steps().filter_map(|s| s.name.clone()));
            }),
            actions: collect(without(|f| f.actions.clear()), |flow, set| {
                set.insert(flow.action.as_str().to_owned());
            }),
        }
    }

    fn find(&self, bucket: u64, hash: u64, record: &FlowRecord) -> Option<u64> {
        let seqs = self.index.get(&(bucket, hash))?;
        seqs.iter()
            .copied()
            .find(|seq| same_key(&self.entries[&(bucket, *seq)].flow, record))
    }

    /// Evicts the oldest entries while over a cap.
    fn shrink(&mut self) {
        loop {
            let cause = if self.entries.len() > self.limits.max_flows {
                &mut self.removed.over_max_flows
            } else if self.memory > self.limits.max_memory && !self.entries.is_empty() {
                &mut self.removed.over_max_memory
            } else {
                return;
            };
            *cause += 1;
            let oldest = *self
                .entries
                .keys()
                .next()
                .expect("over a cap, so not empty");
            self.uncover(oldest.0);
            self.remove(oldest);
        }
    }

    fn remove(&mut self, key: (u64, u64)) {
        let Some(entry) = self.entries.remove(&key) else {
            return;
        };
        self.memory -= entry.footprint;
        let slot = (key.0, entry.hash);
        if let Some(seqs) = self.index.get_mut(&slot) {
            seqs.retain(|seq| *seq != key.1);
            if seqs.is_empty() {
                self.index.remove(&slot);
            }
        }
    }
}

/// A key's entries summed for a query, without copying them.
struct Group<'a> {
    hash: u64,
    /// The entry that ended last: its profiles and labels are the flow's.
    latest: &'a Entry,
    start: u64,
    end: u64,
    sums: [u64; 5],
    records: u64,
    /// The next group of the same hash (another key).
    next: Option<usize>,
}

impl<'a> Group<'a> {
    fn of(entry: &'a Entry) -> Group<'a> {
        let f = &entry.flow;
        Group {
            hash: entry.hash,
            latest: entry,
            start: f.start_time,
            end: f.end_time,
            sums: counters(f),
            records: entry.records,
            next: None,
        }
    }

    fn add(&mut self, entry: &'a Entry) {
        let f = &entry.flow;
        self.start = self.start.min(f.start_time);
        if f.end_time >= self.end {
            self.end = f.end_time;
            self.latest = entry;
        }
        for (sum, add) in self.sums.iter_mut().zip(counters(f)) {
            *sum = sum.saturating_add(add);
        }
        self.records += entry.records;
    }

    fn result(&self) -> FlowResult {
        let mut flow = self.latest.flow.clone();
        flow.source.labels = labels::to_map(&self.latest.labels[0]);
        flow.destination.labels = labels::to_map(&self.latest.labels[1]);
        flow.start_time = self.start;
        flow.end_time = self.end;
        [
            flow.packets_in,
            flow.bytes_in,
            flow.packets_out,
            flow.bytes_out,
            flow.connections_started,
        ] = self.sums;
        FlowResult {
            id: flow_id(self.hash),
            records: self.records,
            flow,
        }
    }
}

fn counters(f: &FlowRecord) -> [u64; 5] {
    [
        f.packets_in,
        f.bytes_in,
        f.packets_out,
        f.bytes_out,
        f.connections_started,
    ]
}

/// The id of a key: its hash as 16 hex digits.
pub fn flow_id(hash: u64) -> String {
    format!("{hash:016x}")
}

/// The fields that make a flow's identity (everything but times, counters, profiles, labels).
type FlowKey<'a> = (
    &'a str,
    KeySide<'a>,
    KeySide<'a>,
    u8,
    Option<u16>,
    u8,
    u8,
    &'a PolicyTrail,
);

type KeySide<'a> = (u8, Option<&'a str>, Option<&'a IpNet>, Option<&'a IpAddr>);

fn key(r: &FlowRecord) -> FlowKey<'_> {
    (
        &r.reporter,
        side(&r.source),
        side(&r.destination),
        r.protocol.number(),
        r.dst_port,
        r.direction as u8,
        r.action as u8,
        &r.policies,
    )
}

fn side(endpoint: &FlowEndpoint) -> KeySide<'_> {
    (
        endpoint.kind as u8,
        endpoint.key.as_deref(),
        endpoint.net.as_ref(),
        endpoint.address.as_ref(),
    )
}

fn same_key(a: &FlowRecord, b: &FlowRecord) -> bool {
    key(a) == key(b)
}

/// The hash of a record's key (SipHash with fixed keys: the same in every run of a build).
pub fn key_hash(record: &FlowRecord) -> u64 {
    let mut hasher = DefaultHasher::new();
    key(record).hash(&mut hasher);
    hasher.finish()
}

/// Both sides' labels, taken out of the record to be kept compact (`labels.rs`).
fn take_labels(flow: &mut FlowRecord) -> [Labels; 2] {
    [
        labels::take(&mut flow.source.labels),
        labels::take(&mut flow.destination.labels),
    ]
}

/// Gives back the room a parser's growing lists keep (a list of 2 is read into room for 4):
/// the entry keeps its record for as long as the window holds it.
fn compact(flow: &mut FlowRecord) {
    for side in [&mut flow.source, &mut flow.destination] {
        side.profiles.shrink_to_fit();
    }
    flow.policies.enforced.shrink_to_fit();
    flow.policies.pending.shrink_to_fit();
}

/// Adds `more` (same key) into `into`: the earliest start, the latest end, counters summed,
/// profiles of the later record (its labels are taken by the caller).
fn merge(into: &mut FlowRecord, more: &FlowRecord) {
    into.start_time = into.start_time.min(more.start_time);
    if more.end_time >= into.end_time {
        into.end_time = more.end_time;
        into.source.profiles.clone_from(&more.source.profiles);
        into.destination
            .profiles
            .clone_from(&more.destination.profiles);
    }
    for (sum, add) in [
        (&mut into.packets_in, more.packets_in),
        (&mut into.bytes_in, more.bytes_in),
        (&mut into.packets_out, more.packets_out),
        (&mut into.bytes_out, more.bytes_out),
        (&mut into.connections_started, more.connections_started),
    ] {
        *sum = sum.saturating_add(add);
    }
}

mod footprint;
mod labels;
#[cfg(test)]
mod tests;
