//! Selector evaluation on the labels the calculation stores ([`LabelSet`], built by its
//! [`Interner`]), over the generated corpus of `calico-model`'s selector benchmark: 10,000
//! selectors × 10,000 label sets, counting matches per selector. The `BTreeMap<String, String>`
//! figure is measured beside it in the same run.
//!
//! `cargo bench -p calico-calc --bench selector_corpus`

#[path = "../../model/benches/corpus/mod.rs"]
mod corpus;

use std::collections::BTreeMap;
use std::hint::black_box;

use calico_calc::{Interner, LabelSet};
use calico_model::selector::{Labels, Selector};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The seeds and sizes of `calico-model`'s `benches/selector.rs`: the same corpus.
const SELECTORS: usize = 10_000;
const LABEL_SETS: usize = 10_000;
const SELECTOR_SEED: u64 = 0x5e1e_c705;
const LABEL_SEED: u64 = 0x1abe_15e7;
/// Selectors per iteration: each iteration is `CHUNK` × 10,000 pairs; successive iterations
/// walk the whole corpus.
const CHUNK: usize = 100;

fn evaluate(c: &mut Criterion) {
    let selectors: Vec<Selector> = corpus::selectors(SELECTORS, SELECTOR_SEED)
        .iter()
        .map(|t| Selector::parse(t).unwrap())
        .collect();
    let pairs = corpus::label_sets(LABEL_SETS, LABEL_SEED);
    let maps: Vec<BTreeMap<String, String>> = pairs
        .iter()
        .map(|labels| labels.iter().cloned().collect())
        .collect();
    let mut interner = Interner::default();
    let sets: Vec<LabelSet> = maps.iter().map(|m| interner.labels(m)).collect();
    let total = count_matches(&selectors, &sets);
    let sample = &selectors[..1_000];
    assert_eq!(count_matches(sample, &sets), count_matches(sample, &maps));
    println!(
        "corpus: {total} matching pairs of {}",
        SELECTORS * LABEL_SETS
    );

    let mut group = c.benchmark_group("corpus_evaluate");
    group.sample_size(10);
    group.throughput(Throughput::Elements((CHUNK * LABEL_SETS) as u64));
    let mut next = 0;
    group.bench_function("labelset", |b| {
        b.iter(|| {
            let chunk = &selectors[next..next + CHUNK];
            next = (next + CHUNK) % SELECTORS;
            count_matches(chunk, &sets)
        })
    });
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            let chunk = &selectors[next..next + CHUNK];
            next = (next + CHUNK) % SELECTORS;
            count_matches(chunk, &maps)
        })
    });
    group.finish();
}

/// Matches per selector, summed.
fn count_matches<L: Labels>(selectors: &[Selector], labels: &[L]) -> usize {
    selectors
        .iter()
        .map(|s| labels.iter().filter(|l| black_box(s).evaluate(*l)).count())
        .sum()
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
