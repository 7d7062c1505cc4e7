//! Selector evaluation and parsing. Felix evaluates every policy selector against every local
//! endpoint's labels on each change, so evaluation must be cheap and allocation-free.
//!
//! `cargo bench -p calico-model --bench selector`; figures in docs/benchmarks.md. `all()` is
//! the baseline: the other cases are reported as multiples of it.

use std::collections::BTreeMap;
use std::hint::black_box;

use calico_model::selector::Selector;
use criterion::{Criterion, criterion_group, criterion_main};

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

criterion_group!(benches, evaluate, parse);
criterion_main!(benches);
