//! The whole agent, step by step, without root: inputs into the core (`calico_felix::core`),
//! effects out, the way a protocol instance is tested in isolation. The firewall's work runs
//! on the real backends over the in-memory kernel (`FakeKernel`, `FakeNft`), so a step also
//! shows what the kernel would hold; every other effect (addresses, routes, encapsulation,
//! statuses, configuration) is answered by the test with the result it wants to see handled.
//!
//! Each step prints as lines: the effects in order (`firewall: …` with how the work went),
//! metrics kept aside in `Bench::metrics` (`bench.rs`).

mod bench;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_dataplane::{BackendKind, RoutingError};
use calico_datastore::{DatastoreError, WatchEvent};
use calico_felix::core::{ConfigValues, Effect, Input, Metric, Tick};
use calico_felix::encap::EncapChanges;
use calico_linux::{Family, FirewallTables, LinkEvent};

use bench::{Bench, READY, addresses_read, netlink_failure, routes_synced, statuses};

const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
const WEB_BODY: &str = r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.65.0.1/32"]}"#;
const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";
const DB_BODY: &str = r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.65.0.2/32"]}"#;
const WEB_RULES: &str = "/calico/v1/policy/profile/web/rules";
const HOST_EP: &str = "/calico/v1/host/h1/endpoint/by-address";

#[test]
fn nothing_is_programmed_until_the_snapshot_is_in_and_ready_is_true() {
    let mut bench = Bench::new(&[]);
    let none: &[&str] = &[];
    assert_eq!(
        bench.datastore(&[(WEB, Some(WEB_BODY))]),
        none,
        "no snapshot yet"
    );
    let snapshot = WatchEvent::InSync { revision: 1 };
    assert_eq!(
        bench.step(Input::Datastore(vec![snapshot])),
        none,
        "the snapshot is in but Ready is not true"
    );
    assert_eq!(
        bench.tick(Tick::Heartbeat),
        ["alive"],
        "no retry while waiting"
    );
    assert_eq!(
        bench.tick(Tick::Refresh),
        none,
        "no drift check before programming"
    );
    let report = Tick::Report {
        time: SystemTime::now(),
        uptime: Duration::from_secs(1),
    };
    assert_eq!(bench.tick(report), none, "no status report before Ready");
    assert_eq!(bench.kernel.dump(), "", "nothing in the kernel");

    // The report the tick skipped is due as soon as the datastore is ready (not a whole
    // reporting interval later).
    assert_eq!(
        bench.datastore(&[(READY, Some("true"))]),
        ["report now", "read interface addresses"]
    );
    assert_eq!(
        bench.step(addresses_read(&[("eth0", "192.0.2.9")])),
        [
            "firewall: full sync → synced",
            "sync routes",
            "sync encapsulation"
        ]
    );
    assert!(bench.filter_rules("cali-wi-caliweb").is_some());
    assert_eq!(bench.step(routes_synced(&["caliweb"])), none);
    assert_eq!(
        bench.step(Input::Encap(Ok(EncapChanges::default()))),
        ["ready true", &statuses(&[(WEB, "Up")])]
    );

    // Ready no longer true: the dataplane stays as it is, updates wait; then they go in as
    // changes (no full sync).
    assert_eq!(bench.datastore(&[(READY, Some("false"))]), ["ready false"]);
    assert_eq!(bench.datastore(&[(DB, Some(DB_BODY))]), none);
    assert!(bench.filter_rules("cali-wi-calidb").is_none());
    assert_eq!(
        bench.datastore(&[(READY, Some("true"))]),
        ["firewall: apply endpoints 1 → applied", "sync routes"]
    );
    assert!(bench.filter_rules("cali-wi-calidb").is_some());
}

#[test]
fn a_batch_of_waiting_events_is_programmed_in_one_step() {
    let mut bench = Bench::new(&[]);
    let open = r#"{"inbound_rules": [{"action": "allow"}]}"#;
    bench.start(
        &[(WEB, Some(WEB_BODY)), (WEB_RULES, Some(open))],
        &[],
        &["caliweb"],
    );
    bench.kernel.clear_log();
    let lines = bench.datastore(&[
        (DB, Some(DB_BODY)),
        (WEB_RULES, Some(r#"{"inbound_rules": []}"#)),
        (
            "/calico/v1/policy/profile/db/rules",
            Some(r#"{"inbound_rules": []}"#),
        ),
    ]);
    assert_eq!(
        lines,
        [
            "firewall: apply endpoints 1, profiles 2 → applied",
            "sync routes"
        ]
    );
    let db_profile = calico_dataplane::profile_chain(true, "db");
    assert!(bench.filter_rules("cali-wi-calidb").is_some());
    assert!(
        bench.filter_rules(&db_profile).is_some(),
        "{}",
        bench.kernel.dump()
    );
    let filter_restores = bench
        .kernel
        .log()
        .iter()
        .filter(|(program, input)| {
            program.starts_with("iptables-restore") && input.contains("*filter")
        })
        .count();
    assert_eq!(
        filter_restores, 1,
        "one write of the filter table for the batch"
    );
    assert!(bench.metrics.contains(&Metric::Updates(3)));
}

#[test]
fn a_failed_firewall_program_is_retried_on_the_heartbeat_as_a_full_sync() {
    let mut bench = Bench::new(&[]);
    let open = r#"{"inbound_rules": [{"action": "allow"}]}"#;
    bench.start(
        &[(WEB, Some(WEB_BODY)), (WEB_RULES, Some(open))],
        &[],
        &["caliweb"],
    );
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive"], "nothing to retry");

    bench.kernel.fail_next("iptables-restore");
    let deny = r#"{"inbound_rules": [{"action": "deny"}]}"#;
    assert_eq!(
        bench.datastore(&[(WEB_RULES, Some(deny))]),
        ["firewall: apply profiles 1 → failed", "ready false"]
    );
    assert_eq!(bench.failures(), ["iptables"]);
    let profile = calico_dataplane::profile_chain(true, "web");
    assert!(
        bench
            .filter_rules(&profile)
            .is_none_or(|rules| !rules.iter().any(|r| r.contains("DROP")))
    );

    assert_eq!(
        bench.tick(Tick::Heartbeat),
        ["alive", "firewall: full sync → synced", "ready true"]
    );
    let rules = bench.filter_rules(&profile).expect("the profile's chain");
    assert!(rules.iter().any(|r| r.contains("DROP")), "{rules:?}");
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive"], "in step again");
}

#[test]
fn a_failed_routing_sync_is_retried_and_statuses_wait_for_it() {
    let mut bench = Bench::new(&[]);
    bench.start(&[], &[], &[]);
    assert_eq!(
        bench.datastore(&[(WEB, Some(WEB_BODY))]),
        ["firewall: apply endpoints 1 → applied", "sync routes"]
    );
    let failed = RoutingError::Netlink(netlink_failure("route add"));
    assert_eq!(bench.step(Input::Routes(Err(failed))), ["ready false"]);
    assert_eq!(bench.failures(), ["netlink"]);
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive", "sync routes"]);
    assert_eq!(
        bench.step(routes_synced(&["caliweb"])),
        ["ready true", &statuses(&[(WEB, "Up")])]
    );
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive"]);
}

#[test]
fn statuses_are_written_only_after_a_pass_that_synced_routes() {
    let mut bench = Bench::new(&[]);
    let open = r#"{"inbound_rules": [{"action": "allow"}]}"#;
    bench.start(&[(WEB, Some(WEB_BODY)), (WEB_RULES, Some(open))], &[], &[]);
    let closed = r#"{"inbound_rules": []}"#;
    assert_eq!(
        bench.datastore(&[(WEB_RULES, Some(closed))]),
        ["firewall: apply profiles 1 → applied"],
        "a policy-only batch: no routes, no statuses"
    );

    // The interface comes up: a link event, routes, and the status follows.
    let link = LinkEvent::Changed(calico_linux::Link {
        index: 7,
        name: "caliweb".to_owned(),
        mac: None,
        up: true,
        mtu: 1500,
        running: true,
    });
    assert_eq!(bench.step(Input::Links(vec![link])), ["sync routes"]);
    assert_eq!(
        bench.step(routes_synced(&["caliweb"])),
        [statuses(&[(WEB, "Up")])]
    );

    // A failed write is retried on the heartbeat.
    assert_eq!(
        bench.step(Input::StatusesWritten(false)),
        Vec::<String>::new()
    );
    assert_eq!(
        bench.tick(Tick::Heartbeat),
        ["alive", &statuses(&[(WEB, "Up")])]
    );
    assert_eq!(
        bench.step(Input::StatusesWritten(true)),
        Vec::<String>::new()
    );
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive"]);
}

#[test]
fn a_host_endpoint_given_by_address_follows_its_address_to_another_interface() {
    let mut bench = Bench::new(&[]);
    let by_address = r#"{"expected_ipv4_addrs": ["192.0.2.1"], "profile_ids": []}"#;
    let status_key = "/calico/v1/host/h1/endpoint/by-address";
    let lines = bench.start(
        &[(HOST_EP, Some(by_address))],
        &[("eth0", "192.0.2.1"), ("eth1", "")],
        &["eth0", "eth1"],
    );
    assert_eq!(lines.last().unwrap(), &statuses(&[(status_key, "Up")]));
    assert!(
        bench.filter_rules("cali-hi-eth0").is_some(),
        "{}",
        bench.kernel.dump()
    );
    assert!(bench.filter_rules("cali-hi-eth1").is_none());

    // The address moves to eth1: an address event, the addresses read again, the chains move.
    assert_eq!(
        bench.step(Input::Links(vec![LinkEvent::Address { index: 3 }])),
        ["read interface addresses"]
    );
    assert_eq!(
        bench.step(addresses_read(&[("eth0", ""), ("eth1", "192.0.2.1")])),
        ["firewall: apply endpoints 1 → applied", "sync routes"]
    );
    assert!(
        bench.filter_rules("cali-hi-eth1").is_some(),
        "{}",
        bench.kernel.dump()
    );
    assert!(
        bench.filter_rules("cali-hi-eth0").is_none(),
        "{}",
        bench.kernel.dump()
    );

    // Gone from every interface: no chains, reported down.
    bench.step(routes_synced(&["eth0", "eth1"]));
    bench.step(Input::Links(vec![LinkEvent::Address { index: 3 }]));
    bench.step(addresses_read(&[("eth0", ""), ("eth1", "")]));
    assert_eq!(
        bench.step(routes_synced(&["eth0", "eth1"])),
        [statuses(&[(status_key, "Down")])]
    );
    assert!(bench.filter_rules("cali-hi-eth1").is_none());

    // A failed read of the addresses is retried on the heartbeat.
    bench.step(Input::Links(vec![LinkEvent::Address { index: 3 }]));
    let failed = RoutingError::Netlink(netlink_failure("address dump"));
    assert_eq!(
        bench.step(Input::InterfaceAddresses(Err(failed))),
        Vec::<String>::new()
    );
    assert_eq!(
        bench.tick(Tick::Heartbeat),
        ["alive", "read interface addresses"]
    );
}

#[test]
fn a_restart_needing_change_exits_naming_it_and_leaves_the_dataplane() {
    let mut bench = Bench::new(&[]);
    bench.start(&[(WEB, Some(WEB_BODY))], &[], &[]);
    let dump = bench.kernel.dump();
    let key = "/calico/v1/config/PrometheusMetricsEnabled";
    assert_eq!(bench.datastore(&[(key, Some("true"))]), ["read config"]);
    let values = ConfigValues {
        global: [("PrometheusMetricsEnabled".to_owned(), "true".to_owned())].into(),
        host: BTreeMap::new(),
    };
    assert_eq!(
        bench.step(Input::ConfigRead(Ok(values))),
        ["exit for a restart: PrometheusMetricsEnabled"]
    );
    assert_eq!(
        bench.datastore(&[(DB, Some(DB_BODY))]),
        Vec::<String>::new(),
        "nothing after"
    );
    assert_eq!(bench.tick(Tick::Heartbeat), Vec::<String>::new());
    assert_eq!(bench.kernel.dump(), dump, "the dataplane stays as it is");
}

#[test]
fn a_live_change_replaces_the_backend_with_a_full_sync() {
    let mut bench = Bench::new(&[]);
    bench.start(&[(WEB, Some(WEB_BODY))], &[], &[]);
    assert!(bench.kernel.dump().contains(":cali-wi-caliweb"));
    assert_eq!(bench.nft.snapshot(), None);

    let key = "/calico/v1/host/h1/config/NFTablesMode";
    assert_eq!(bench.datastore(&[(key, Some("Enabled"))]), ["read config"]);
    let values = ConfigValues {
        global: BTreeMap::new(),
        host: [("NFTablesMode".to_owned(), "Enabled".to_owned())].into(),
    };
    assert_eq!(
        bench.step(Input::ConfigRead(Ok(values))),
        [
            "retime: refresh 90s, route refresh 90s",
            "replace backend: NFTablesMode=Enabled",
            "firewall: full sync → synced",
        ]
    );
    assert!(
        bench
            .metrics
            .contains(&Metric::Backend(BackendKind::Nftables))
    );
    let table = bench.nft.snapshot().expect("the nftables backend's table");
    assert!(table.chains.contains_key("to-wl-caliweb"), "{table:?}");
    assert!(
        !bench.kernel.dump().contains("cali-"),
        "{}",
        bench.kernel.dump()
    );

    // The status key says which backend runs.
    let report = Tick::Report {
        time: SystemTime::now(),
        uptime: Duration::from_secs(3),
    };
    let effects = bench.core.step(Input::Tick(report));
    let [Effect::WriteFelixStatus { status, .. }] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert_eq!(status.dataplane.as_deref(), Some("nftables"));

    // A configuration that cannot be read keeps the running one, and the batch goes on.
    assert_eq!(
        bench.datastore(&[(key, Some("Disabled")), (DB, Some(DB_BODY))]),
        ["read config"]
    );
    let unreadable = DatastoreError::Unreachable {
        endpoints: "127.0.0.1:2379".to_owned(),
        reason: "injected by the test".to_owned(),
    };
    assert_eq!(
        bench.step(Input::ConfigRead(Err(unreadable))),
        ["firewall: apply endpoints 1 → applied", "sync routes"]
    );
    let table = bench.nft.snapshot().unwrap();
    assert!(table.chains.contains_key("to-wl-calidb"), "{table:?}");
}

#[test]
fn the_first_report_says_first_update_until_one_is_written() {
    let mut bench = Bench::new(&[("FELIX_REPORTINGTTLSECS", "30")]);
    bench.start(&[], &[], &[]);
    let report = || Tick::Report {
        time: UNIX_EPOCH + Duration::from_secs(1_464_782_400),
        uptime: Duration::from_millis(12_540),
    };
    let first_update = |effects: Vec<Effect>| match effects.as_slice() {
        [Effect::WriteFelixStatus { status, ttl }] => {
            assert_eq!(status.time, "2016-06-01T12:00:00Z");
            assert_eq!(status.uptime, 12.5);
            assert_eq!(status.dataplane.as_deref(), Some("iptables"));
            assert_eq!(*ttl, Duration::from_secs(30));
            status.first_update
        }
        other => panic!("{other:?}"),
    };
    assert!(first_update(bench.core.step(Input::Tick(report()))));
    let unreachable = DatastoreError::Unreachable {
        endpoints: "127.0.0.1:2379".to_owned(),
        reason: "injected by the test".to_owned(),
    };
    bench.core.step(Input::FelixStatusWritten(Err(unreachable)));
    assert!(
        first_update(bench.core.step(Input::Tick(report()))),
        "not written yet: still the first"
    );
    bench.core.step(Input::FelixStatusWritten(Ok(())));
    assert!(!first_update(bench.core.step(Input::Tick(report()))));
}

#[test]
fn the_drift_check_reads_off_the_update_path_and_repairs_after_the_changes() {
    let mut bench = Bench::new(&[]);
    bench.start(&[(WEB, Some(WEB_BODY))], &[], &["caliweb"]);
    assert_eq!(bench.tick(Tick::Refresh), ["read firewall for drift"]);
    assert_eq!(
        bench.tick(Tick::Refresh),
        Vec::<String>::new(),
        "one read at a time"
    );

    // Someone edits a chain; the read sees it. Updates go on while the read is out.
    let stranger = "*filter\n-I cali-wi-caliweb 1 -s 192.0.2.99 -j ACCEPT\nCOMMIT\n";
    FirewallTables::restore(&bench.kernel, Family::V4, stranger).unwrap();
    let reader = bench.drift.take().unwrap();
    let snapshot = reader.read().unwrap();
    assert_eq!(
        bench.datastore(&[(DB, Some(DB_BODY))]),
        ["firewall: apply endpoints 1 → applied", "sync routes"]
    );
    bench.step(routes_synced(&["caliweb"]));

    assert_eq!(
        bench.step(Input::DriftRead(Ok(snapshot))),
        ["firewall: repair drift → repaired", "sync routes"]
    );
    assert!(bench.metrics.contains(&Metric::Repaired));
    let rules = bench.filter_rules("cali-wi-caliweb").unwrap();
    assert!(!rules.iter().any(|r| r.contains("192.0.2.99")), "{rules:?}");
    bench.step(routes_synced(&["caliweb"]));

    // Nothing drifted: nothing rewritten.
    bench.kernel.clear_log();
    assert_eq!(bench.tick(Tick::Refresh), ["read firewall for drift"]);
    assert_eq!(
        bench.finish_drift_read(),
        ["firewall: repair drift → nothing drifted", "sync routes"]
    );
    let writes = bench
        .kernel
        .log()
        .iter()
        .filter(|(p, _)| p.contains("restore"))
        .count();
    assert_eq!(writes, 0, "{:?}", bench.kernel.log());
}

#[test]
fn a_failed_encapsulation_sync_is_retried_and_holds_readiness() {
    let mut bench = Bench::new(&[]);
    let mut events = vec![bench.event(READY, Some("true"))];
    events.push(WatchEvent::InSync { revision: 1 });
    bench.step(Input::Datastore(events));
    bench.step(addresses_read(&[]));
    assert_eq!(bench.step(routes_synced(&[])), Vec::<String>::new());
    let failed = Input::Encap(Err(netlink_failure("link add vxlan.calico")));
    assert_eq!(bench.step(failed), Vec::<String>::new(), "not ready");
    assert_eq!(bench.failures(), ["netlink"]);
    assert_eq!(bench.tick(Tick::Heartbeat), ["alive", "sync encapsulation"]);
    assert_eq!(
        bench.step(Input::Encap(Ok(EncapChanges::default()))),
        ["ready true", "write endpoint statuses:"]
    );
    // The route refresh compares routes and encapsulation with the kernel again.
    assert_eq!(
        bench.tick(Tick::RouteRefresh),
        ["sync routes", "sync encapsulation"]
    );
}

#[test]
fn flow_logs_get_the_names_of_a_changed_state_at_most_once_a_heartbeat() {
    let env = [
        ("FELIX_FLOWLOGSENABLED", "true"),
        ("FELIX_FLOWLOGSAGGREGATOR", "127.0.0.1:7480"),
    ];
    let mut bench = Bench::new(&env);
    let lines = bench.start(&[(WEB, Some(WEB_BODY))], &[], &["caliweb"]);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("flow names")).count(),
        1,
        "the first pass sends them: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "flow names: 1 addresses, 1 endpoints"),
        "{lines:?}"
    );
    let open = r#"{"inbound_rules": [{"action": "allow"}]}"#;
    let lines = bench.datastore(&[(WEB_RULES, Some(open))]);
    assert!(
        !lines.iter().any(|l| l.starts_with("flow names")),
        "not again before the next heartbeat: {lines:?}"
    );
    let lines = bench.tick(Tick::Heartbeat);
    assert_eq!(lines, ["alive", "flow names: 1 addresses, 1 endpoints"]);
    assert_eq!(
        bench.tick(Tick::Heartbeat),
        ["alive"],
        "nothing changed since"
    );

    // Without flow logs, never.
    let mut off = Bench::new(&[]);
    let lines = off.start(&[(WEB, Some(WEB_BODY))], &[], &["caliweb"]);
    assert!(
        !lines.iter().any(|l| l.starts_with("flow names")),
        "{lines:?}"
    );
}

#[test]
fn a_change_to_the_firewall_checks_it_at_once_and_again_after_a_read_under_way() {
    let mut bench = Bench::new(&[]);
    bench.start(&[(WEB, Some(WEB_BODY))], &[], &["caliweb"]);

    // Someone flushes a chain: the change is seen as it happens, no tick needed.
    let stranger = "*filter\n-F cali-wi-caliweb\nCOMMIT\n";
    FirewallTables::restore(&bench.kernel, Family::V4, stranger).unwrap();
    assert_eq!(
        bench.step(Input::FirewallChanged),
        ["read firewall for drift"]
    );
    assert_eq!(
        bench.finish_drift_read(),
        ["firewall: repair drift → repaired", "sync routes"]
    );
    bench.step(routes_synced(&["caliweb"]));
    assert!(bench.filter_rules("cali-wi-caliweb").unwrap().len() > 1);

    // A change while a read is out: that read may predate it, so another read follows.
    assert_eq!(
        bench.step(Input::FirewallChanged),
        ["read firewall for drift"]
    );
    assert_eq!(
        bench.step(Input::FirewallChanged),
        Vec::<String>::new(),
        "one read at a time"
    );
    // The read was taken before this flush.
    let early = bench.drift.take().unwrap().read().unwrap();
    FirewallTables::restore(&bench.kernel, Family::V4, stranger).unwrap();
    assert_eq!(
        bench.step(Input::DriftRead(Ok(early))),
        [
            "firewall: repair drift → nothing drifted",
            "sync routes",
            "read firewall for drift"
        ]
    );
    bench.step(routes_synced(&["caliweb"]));
    assert_eq!(
        bench.finish_drift_read(),
        ["firewall: repair drift → repaired", "sync routes"]
    );
    assert!(bench.filter_rules("cali-wi-caliweb").unwrap().len() > 1);
}
