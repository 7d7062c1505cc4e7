//! The nf_tables monitor on a real kernel, in a namespace the test makes: changes `nft` and
//! iptables-nft make arrive as they happen, with their table, and this process's own writes
//! (through [`Nft`]) are left out.

use std::time::Duration;

use calico_linux::Netns;
use calico_linux::nft::*;
use calico_testkit::{NetNs, eventually, require_tool};

/// Collects the monitor's events on a thread of their own (`blocking_next` blocks).
fn collect(netns: &NetNs) -> std::sync::mpsc::Receiver<FirewallEvent> {
    let mut events = FirewallEvents::subscribe(&Netns::named(netns.name())).expect("subscribe");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Some(event) = events.blocking_next() {
            if sender.send(event).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Waits for an event that concerns `family`'s `table`; the events seen before it.
fn wait_for(
    events: &std::sync::mpsc::Receiver<FirewallEvent>,
    family: &str,
    table: &str,
) -> Vec<FirewallEvent> {
    let mut seen = Vec::new();
    eventually(
        "the monitor to report the change",
        Duration::from_secs(5),
        || {
            while let Ok(event) = events.try_recv() {
                seen.push(event);
            }
            seen.iter()
                .any(|e| {
                    matches!(e, FirewallEvent::Changed { .. }) && e.concerns(&[(family, table)])
                })
                .then_some(())
                .ok_or_else(|| format!("no change of {family} {table} yet: {seen:?}"))
        },
    );
    seen
}

#[test]
fn changes_of_others_arrive_and_own_writes_do_not() {
    require_tool("nft");
    require_tool("iptables");
    let ns = NetNs::new("nftmon");
    let events = collect(&ns);

    // Our own write first: a table made through Nft must not be reported.
    let table = Table {
        family: TableFamily::Inet,
        name: "calico".into(),
    };
    let nft = Nft::new(Netns::named(ns.name()), table.clone());
    nft.apply(&Batch {
        ops: vec![Op::AddTable],
    })
    .expect("add the table");

    // Then `nft flush ruleset`, what a distribution's nftables service does on reload.
    ns.run_ok("nft", &["flush", "ruleset"], "");
    let seen = wait_for(&events, "inet", "calico");
    let deleted = seen.iter().find(|e| e.concerns(&[("inet", "calico")]));
    let Some(FirewallEvent::Changed {
        kind, added, port, ..
    }) = deleted
    else {
        panic!("{seen:?}");
    };
    assert_eq!((*kind, *added), (ChangeKind::Table, false), "{seen:?}");
    assert_ne!(*port, 0, "a notification names the writer's port");
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, FirewallEvent::Changed { added: true, .. })),
        "our own AddTable is left out: {seen:?}"
    );

    // iptables-nft writes through nf_tables too.
    ns.run_ok("iptables", &["-A", "FORWARD", "-j", "ACCEPT"], "");
    wait_for(&events, "ip", "filter");
}
