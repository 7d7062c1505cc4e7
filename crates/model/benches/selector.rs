//! Selector evaluation and parsing. Felix evaluates every policy selector against every local
//! endpoint's labels on each change, so evaluation must be cheap and allocation-free.
//!
//! `cargo bench -p calico-model --bench selector`; figures in docs/benchmarks.md. `all()` is
//! the baseline: the other cases are reported as multiples of it.
//!
//! The `corpus_*` groups run the generated corpus of `corpus/mod.rs` (10,000 selectors, 10,000 label
//! sets): parse (canonical form included) per selector, and evaluation per (selector, labels)
//! pair on `BTreeMap`s. calc's `selector_corpus` bench gives the figure on its own labels.

mod corpus;

use std::collections::BTreeMap;
use std::hint::black_box;

use calico_model::selector::Selector;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Labels of a typical Kubernetes pod endpoint.
fn pod_labels() -> BTreeMap<String, String> {
    [
        ("app", "webserver"),
        ("calico/k8s_ns", "production"),
        ("pod-template-hash", "5d8f7c9b4"),
        ("role", "frontend"),
        ("tier", "web"),
        ("version", "v2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

const CASES: &[(&str, &str)] = &[
    ("all", "all()"),
    ("equality", r#"role == "frontend""#),
    (
        "set_of_8",
        r#"tier in {"a", "b", "c", "d", "e", "f", "g", "web"}"#,
    ),
    (
        "seed_policy",
        r#"type == "webserver" && deployment == "prod" || role != "db""#,
    ),
    (
        "complex",
        r#"calico/k8s_ns == "production" && (app in {"api", "webserver", "worker"} || has(debug)) && !(version in {"v0", "v1"}) && pod-template-hash starts with "5d""#,
    ),
];

fn evaluate(c: &mut Criterion) {
    let labels = pod_labels();
    let mut group = c.benchmark_group("selector_evaluate");
    for (name, text) in CASES {
        let selector = Selector::parse(text).unwrap();
        group.bench_function(*name, |b| {
            b.iter(|| black_box(&selector).evaluate(black_box(&labels)))
        });
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("selector_parse");
    for (name, text) in CASES {
        group.bench_function(*name, |b| {
            b.iter(|| Selector::parse(black_box(text)).unwrap())
        });
    }
    group.finish();
}

/// Selectors and label sets of the corpus benchmarks (the seeds are part of the benchmark).
const SELECTORS: usize = 10_000;
const LABEL_SETS: usize = 10_000;
const SELECTOR_SEED: u64 = 0x5e1e_c705;
const LABEL_SEED: u64 = 0x1abe_15e7;
/// Selectors per evaluation iteration: each iteration is `CHUNK` × 10,000 pairs, and successive
/// iterations walk the whole corpus.
const CHUNK: usize = 100;

fn corpus_parse(c: &mut Criterion) {
    let texts = corpus::selectors(SELECTORS, SELECTOR_SEED);
    let mut group = c.benchmark_group("corpus_parse");
    group.sample_size(20);
    group.throughput(Throughput::Elements(SELECTORS as u64));
    group.bench_function("10k_selectors", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| Selector::parse(black_box(t)).unwrap().canonical().len())
                .sum::<usize>()
        })
    });
    group.finish();
}

fn corpus_evaluate(c: &mut Criterion) {
    let selectors: Vec<Selector> = corpus::selectors(SELECTORS, SELECTOR_SEED)
        .iter()
        .map(|t| Selector::parse(t).unwrap())
        .collect();
    let maps: Vec<BTreeMap<String, String>> = corpus::label_sets(LABEL_SETS, LABEL_SEED)
        .into_iter()
        .map(|labels| labels.into_iter().collect())
        .collect();
    let mut group = c.benchmark_group("corpus_evaluate");
    group.sample_size(10);
    group.throughput(Throughput::Elements((CHUNK * LABEL_SETS) as u64));
    let mut next = 0;
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            let chunk = &selectors[next..next + CHUNK];
            next = (next + CHUNK) % SELECTORS;
            count_matches(chunk, &maps)
        })
    });
    group.finish();
}

/// Matches per selector, summed: what the benchmark computes.
fn count_matches(selectors: &[Selector], maps: &[BTreeMap<String, String>]) -> usize {
    selectors
        .iter()
        .map(|s| maps.iter().filter(|m| black_box(s).evaluate(*m)).count())
        .sum()
}

criterion_group!(benches, evaluate, parse, corpus_parse, corpus_evaluate);
criterion_main!(benches);
