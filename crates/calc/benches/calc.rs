//! The calculator's per-update cost on a 10,000-endpoint cluster (the 100,000-endpoint figures
//! come from `examples/scale.rs`). Baselines: parsing and validating the same value, which every
//! update needs anyway, parsing one selector of the scenario, and the same update applied to the
//! cluster model alone (parse, validate, store); the ratios say what the calculation adds.
//!
//! `cargo bench -p calico-calc --bench calc`

mod scenario;

use std::hint::black_box;

use calico_calc::{Calculator, Cluster};
use calico_model::selector::Selector;
use calico_model::{Key, parse_value};
use criterion::{Criterion, criterion_group, criterion_main};
use scenario::Scenario;

fn updates(c: &mut Criterion) {
    let scenario = Scenario::new(10_000);
    let mut calc = Calculator::new("host-0");
    scenario.initial_updates(|key, value| {
        calc.apply(key, Some(value));
    });
    let relabels = scenario.label_changes(1_000);
    let edits = scenario.policy_edits(1_000);
    let mut group = c.benchmark_group("calc_update");

    group.bench_function("parse_selector (baseline)", |b| {
        b.iter(|| Selector::parse(black_box("app == 'app7' && env == 'prod'")).unwrap())
    });
    let (key, value) = &relabels[0];
    let parsed = Key::parse(key).unwrap();
    group.bench_function("parse_endpoint (baseline)", |b| {
        b.iter(|| parse_value(black_box(&parsed), black_box(value)).unwrap())
    });
    // The cluster model alone (parse, validate, store): what any calculation keeps.
    let mut cluster = Cluster::default();
    scenario.initial_updates(|key, value| {
        cluster.apply(key, Some(value));
    });
    let mut n = 0;
    group.bench_function("cluster_label_change (baseline)", |b| {
        b.iter(|| {
            let (key, value) = &relabels[n % relabels.len()];
            n += 1;
            cluster.apply(key, Some(value))
        })
    });
    drop(cluster);
    let mut n = 0;
    group.bench_function("endpoint_label_change", |b| {
        b.iter(|| {
            let (key, value) = &relabels[n % relabels.len()];
            n += 1;
            calc.apply(key, Some(value));
            calc.take_changes()
        })
    });

    let (key, value) = &edits[0];
    let parsed = Key::parse(key).unwrap();
    group.bench_function("parse_policy (baseline)", |b| {
        b.iter(|| parse_value(black_box(&parsed), black_box(value)).unwrap())
    });
    let mut n = 0;
    group.bench_function("policy_edit", |b| {
        b.iter(|| {
            let (key, value) = &edits[n % edits.len()];
            n += 1;
            calc.apply(key, Some(value));
            calc.take_changes()
        })
    });
    group.finish();
}

criterion_group!(benches, updates);
criterion_main!(benches);
