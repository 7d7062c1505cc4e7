//! Incremental rendering: after any sequence of updates, applying each delta's restore text to
//! what the previous ones built gives exactly the chains a from-scratch render of the final state
//! gives; for random sequences in an in-memory kernel (the whole driver), and in a real kernel for
//! a scripted one.

use calico_calc::Calculator;
use calico_dataplane::{Dataplane, FilterTable, IpVersion, RenderConfig, render_ipsets};
use calico_linux::fake::FakeKernel;
use calico_testkit::NetNs;
use proptest::prelude::*;

mod common;

use common::{HOST, pool};

/// A dataplane over an in-memory kernel, synced from `calc`.
fn synced(calc: &Calculator) -> (Dataplane, FakeKernel) {
    let kernel = FakeKernel::new();
    let mut dataplane = Dataplane::with_kernel(
        Box::new(kernel.clone()),
        Box::new(kernel.clone()),
        RenderConfig::default(),
    );
    dataplane
        .sync(calc.state())
        .expect("a sync into an empty kernel");
    (dataplane, kernel)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The whole driver (IP sets, filter, nat and raw, both IP versions) applied batch by batch
    /// holds what a fresh sync of the final state holds; the in-memory kernel refuses a rule
    /// naming a set or chain that does not exist yet, and a set or chain still in use going
    /// away, so the order of every batch is checked too.
    #[test]
    fn deltas_add_up_to_a_fresh_sync(
        steps in prop::collection::vec((0..12usize, 0..5usize), 1..40),
    ) {
        let pool = pool();
        let mut calc = Calculator::new(HOST);
        let (mut dataplane, kernel) = synced(&calc);
        for (k, v) in steps {
            let (key, values) = &pool[k % pool.len()];
            calc.apply(key, values[v % values.len()].as_deref());
            let changes = calc.take_changes();
            let applied = dataplane.apply(calc.state(), &changes);
            prop_assert!(applied.is_ok(), "after {}: {:?}", key, applied);
            let (_, fresh) = synced(&calc);
            prop_assert_eq!(kernel.dump(), fresh.dump(), "after {}", key);
        }
    }
}

#[test]
fn a_real_kernel_follows_the_deltas() {
    let pool = pool();
    let config = RenderConfig::default();
    let mut calc = Calculator::new(HOST);
    for (key, values) in &pool {
        calc.apply(key, values[0].as_deref());
    }
    calc.take_changes();
    let ns = NetNs::new("calico-delta");
    let mut table = FilterTable::new(config.clone(), IpVersion::V4);
    // IP sets first, as the agent does: the rules refer to them.
    let sets = |calc: &Calculator| render_ipsets(calc.state(), IpVersion::V4);
    ns.run_ok("ipset", &["restore"], &sets(&calc));
    ns.run_ok(
        "iptables-restore",
        &["--noflush"],
        &table.render_all(calc.state()),
    );
    let script = [
        (0, 1),
        (10, 1),
        (11, 1),
        (1, 2),
        (0, 4),
        (4, 1),
        (8, 1),
        (3, 1),
        (0, 2),
    ];
    for (k, v) in script {
        let (key, values) = &pool[k];
        calc.apply(key, values[v].as_deref());
        let changes = calc.take_changes();
        let delta = table.render_changes(calc.state(), &changes);
        ns.run_ok("ipset", &["restore"], &sets(&calc));
        if !delta.is_empty() {
            ns.run_ok("iptables-restore", &["--noflush"], &delta);
        }
        // The same state rendered from scratch into a fresh namespace: iptables-save writes
        // both in its own normal form, so they compare rule for rule.
        let fresh_ns = NetNs::new("calico-full");
        fresh_ns.run_ok("ipset", &["restore"], &sets(&calc));
        let full = FilterTable::new(config.clone(), IpVersion::V4).render_all(calc.state());
        fresh_ns.run_ok("iptables-restore", &["--noflush"], &full);
        let actual = saved_chains(&ns.run_ok("iptables-save", &["-t", "filter"], ""));
        let expected = saved_chains(&fresh_ns.run_ok("iptables-save", &["-t", "filter"], ""));
        assert_eq!(actual, expected, "after {key}");
    }
}

/// Our chains and their rules in iptables-save output, in order.
fn saved_chains(save: &str) -> Vec<String> {
    save.lines()
        .filter(|l| l.starts_with(":cali-") || l.starts_with("-A cali-"))
        .map(|l| l.split(" [").next().unwrap_or(l).to_owned())
        .collect()
}
