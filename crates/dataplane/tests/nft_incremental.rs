//! The nf_tables backend, incrementally: after any sequence of updates, the table built by
//! applying each batch's transaction holds exactly what a fresh sync of the final state holds
//! (chains with the same rules, sets with the same elements). The in-memory nf_tables refuses
//! what the kernel refuses (a jump to a missing chain, a set in use deleted, an element of a
//! missing set), so the order inside every transaction is checked too. A sync of a table that
//! is already right writes nothing.

use calico_calc::Calculator;
use calico_dataplane::{NftDataplane, RenderConfig, calico_table};
use calico_linux::fake::FakeNft;
use calico_linux::nft::TableSnapshot;
use proptest::prelude::*;

mod common;

use common::{HOST, pool};

/// A dataplane over an in-memory nf_tables, synced from `calc`.
fn synced(calc: &Calculator) -> (NftDataplane, FakeNft) {
    let nft = FakeNft::new(calico_table());
    let mut dataplane = NftDataplane::with_kernel(Box::new(nft.clone()), RenderConfig::default());
    dataplane
        .sync(calc.state())
        .expect("a sync into an empty table");
    (dataplane, nft)
}

/// The table without the kernel's rule handles (which count every rule ever added).
fn held(nft: &FakeNft) -> Option<TableSnapshot> {
    let mut table = nft.snapshot()?;
    for chain in table.chains.values_mut() {
        for rule in &mut chain.rules {
            rule.handle = 0;
        }
    }
    Some(table)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn transactions_add_up_to_a_fresh_sync(
        steps in prop::collection::vec((0..20usize, 0..5usize), 1..40),
    ) {
        let pool = pool();
        let mut calc = Calculator::new(HOST);
        let (mut dataplane, nft) = synced(&calc);
        for (k, v) in steps {
            let (key, values) = &pool[k % pool.len()];
            calc.apply(key, values[v % values.len()].as_deref());
            let changes = calc.take_changes();
            let applied = dataplane.apply(calc.state(), &changes);
            prop_assert!(applied.is_ok(), "after {}: {:?}", key, applied);
            let (_, fresh) = synced(&calc);
            prop_assert_eq!(held(&nft), held(&fresh), "after {}", key);
        }
    }
}

#[test]
fn a_sync_of_a_table_in_place_writes_nothing() {
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        calc.apply(&key, values[0].as_deref());
    }
    let (_, nft) = synced(&calc);
    assert_eq!(nft.applied().len(), 1, "the first sync is one transaction");
    // A restarted Felix: a new dataplane over the same table.
    let mut restarted = NftDataplane::with_kernel(Box::new(nft.clone()), RenderConfig::default());
    let repairs = restarted.sync(calc.state()).unwrap();
    assert_eq!(
        (repairs.written_chains, repairs.written_sets),
        (0, 0),
        "{repairs:?}"
    );
    assert_eq!(
        nft.applied().len(),
        1,
        "nothing was written: {:?}",
        nft.applied().last()
    );
}

#[test]
fn a_change_names_only_what_it_touched() {
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        calc.apply(&key, values[0].as_deref());
    }
    let (mut dataplane, nft) = synced(&calc);
    calc.apply(
        "/calico/v1/policy/profile/p2/rules",
        Some(r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [22], "action": "allow"}]}"#),
    );
    let changes = calc.take_changes();
    dataplane.apply(calc.state(), &changes).unwrap();
    let batch = nft.applied().pop().unwrap();
    let text = batch
        .ops
        .iter()
        .map(|op| format!("{op:?}\n"))
        .collect::<String>();
    assert!(text.contains("prof-in-p2"), "{text}");
    assert!(
        !text.contains("calia") && !text.contains("prof-in-p1"),
        "a profile edit rewrites only the profile's chain: {text}"
    );
}
