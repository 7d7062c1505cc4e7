//! The window's memory estimate against the allocator: flows parsed by the real ingest path
//! and inserted into a `Window` while a counting allocator measures what stays allocated, in
//! a window that keeps all and in one whose memory cap evicts.

mod load;

use std::alloc::System;

use calico_flows::ingest::{self, BatchLimits};
use calico_flows::{Limits, Window};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const NOW: u64 = 1_900_000_000;

fn fill(window: &mut Window, batches: std::ops::Range<usize>) {
    let limits = BatchLimits {
        max_records: 10_000,
        max_skew: 300,
    };
    for batch in batches {
        let body = load::body(batch * load::BATCH, NOW);
        let checked = ingest::check(&body, limits, NOW).expect("a batch");
        assert!(checked.refused.is_empty(), "{:?}", checked.refused);
        for (_, record, _) in checked.records {
            window.insert(record, NOW);
        }
    }
}

/// Fills a window of `max_memory` with `batches` of new flows while counting; checks the
/// estimate against what stays allocated.
fn check(max_memory: usize, batches: usize) {
    let limits = Limits {
        max_flows: 1_000_000,
        max_memory,
        retention: 0,
        bucket: 15,
    };
    let region = Region::new(GLOBAL);
    let mut window = Window::new(limits);
    fill(&mut window, 0..batches);
    let change = region.change();
    let held = change.bytes_allocated as isize - change.bytes_deallocated as isize;
    let blocks = change.allocations as isize - change.deallocations as isize;
    let flows = window.len() as isize;
    eprintln!(
        "{flows} flows: estimated {} B/flow; allocated {} B/flow in {:.1} blocks/flow",
        window.memory() as isize / flows,
        held / flows,
        blocks as f64 / flows as f64
    );
    // What malloc takes: at least each block and its 8-byte header, at most 16 bytes more
    // per block (rounding to 16).
    let (least, most) = ((held + 8 * blocks) as usize, (held + 24 * blocks) as usize);
    assert!(
        window.memory() >= least,
        "estimate {} B under the {least} B allocated for {flows} flows",
        window.memory()
    );
    assert!(
        window.memory() <= most + most / 5,
        "estimate {} B over 1.2 × the {most} B allocated for {flows} flows",
        window.memory()
    );
}

// One test: the allocator's counts are the whole process's, so nothing else may run meanwhile.
#[test]
fn the_estimate_counts_what_the_window_allocates() {
    check(usize::MAX, 20);
    // While the cap evicts: 20,000 flows offered to a window that holds about 2,500.
    check(8 << 20, 20);
}
