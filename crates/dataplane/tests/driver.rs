//! The dataplane driver on a real kernel, in a network namespace per test: a sync programs
//! everything, changes apply incrementally, and a later sync repairs drift and removes what is
//! no longer needed, leaving exactly what a fresh sync of the same state leaves. The same logic
//! runs without root against the in-memory kernel (`in_memory_*`).

use calico_calc::Calculator;
use calico_dataplane::{Dataplane, RenderConfig};
use calico_linux::fake::FakeKernel;
use calico_linux::{Family, FirewallTables, IpSets, Netns};
use calico_testkit::NetNs;

const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";

fn calculator() -> Calculator {
    let mut calc = Calculator::new("h1");
    let updates = [
        (
            WEB,
            r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"], "labels": {"role": "web"}}"#,
        ),
        (
            DB,
            r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.0.0.2/32"], "labels": {"role": "db"}}"#,
        ),
        (
            "/calico/v1/host/h1/endpoint/eth0",
            r#"{"name": "eth0", "expected_ipv4_addrs": ["192.0.2.1"], "profile_ids": ["web"]}"#,
        ),
        (
            "/calico/v1/policy/profile/web/rules",
            r#"{"inbound_rules": [{"src_selector": "role == 'db'", "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
        ),
        (
            "/calico/v1/policy/profile/db/rules",
            r#"{"inbound_rules": [{"src_tag": "web", "protocol": "tcp", "dst_ports": [5432], "action": "allow"}]}"#,
        ),
        ("/calico/v1/policy/profile/web/tags", r#"["web"]"#),
        ("/calico/v1/policy/tier/t/metadata", r#"{"order": 1}"#),
        (
            "/calico/v1/policy/tier/t/policy/raw",
            r#"{"selector": "all()", "untracked": true, "inbound_rules": [{"protocol": "tcp", "dst_ports": [179], "action": "allow"}]}"#,
        ),
        (
            "/calico/v1/ipam/v4/pool/10.0.0.0-16",
            r#"{"cidr": "10.0.0.0/16", "masquerade": true}"#,
        ),
    ];
    for (key, value) in updates {
        calc.apply(key, Some(value));
    }
    calc.take_changes();
    calc
}

/// Our part of the kernel: every table's cali- chains and rules, the kernel-chain jumps, and
/// the sets with their members.
fn snapshot(ns: &NetNs) -> String {
    let mut out = String::new();
    for save in ["iptables-save", "ip6tables-save"] {
        let text = ns.run_ok(save, &[], "");
        for line in text.lines() {
            if line.contains("cali") && !line.starts_with('#') {
                out.push_str(line.split(" [").next().unwrap());
                out.push('\n');
            }
        }
    }
    let mut sets: Vec<String> = ns
        .run_ok("ipset", &["list", "-n"], "")
        .lines()
        .map(str::to_owned)
        .collect();
    sets.sort();
    for set in sets {
        let mut members: Vec<String> = ns
            .run_ok("ipset", &["list", &set], "")
            .lines()
            .skip_while(|l| !l.starts_with("Members:"))
            .skip(1)
            .map(str::to_owned)
            .collect();
        members.sort();
        out.push_str(&format!("set {set}: {}\n", members.join(" ")));
    }
    out
}

/// The same state synced into a fresh namespace.
fn fresh_snapshot(calc: &Calculator) -> String {
    let ns = NetNs::new("calico-fresh");
    let mut dataplane = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    let repairs = dataplane.sync(calc.state()).unwrap();
    assert_eq!(
        repairs.jumps.len(),
        16,
        "8 jumps per IP version on a fresh host"
    );
    snapshot(&ns)
}

#[test]
fn sync_apply_and_repair() {
    let mut calc = calculator();
    let ns = NetNs::new("calico-driver");
    let mut dataplane = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    dataplane.sync(calc.state()).unwrap();
    let synced = snapshot(&ns);
    assert!(synced.contains("-A INPUT -j cali-INPUT"), "{synced}");
    assert!(
        synced.contains("-A PREROUTING -j cali-PREROUTING"),
        "{synced}"
    );
    assert!(synced.contains("cali-wi-calidb"), "{synced}");
    assert_eq!(synced, fresh_snapshot(&calc));

    // Incremental: the db endpoint goes, web's profile changes.
    calc.apply(DB, None);
    calc.apply(
        "/calico/v1/policy/profile/web/rules",
        Some(r#"{"inbound_rules": [{"action": "deny"}]}"#),
    );
    let changes = calc.take_changes();
    dataplane.apply(calc.state(), &changes).unwrap();
    let applied = snapshot(&ns);
    assert!(!applied.contains("cali-wi-calidb"), "{applied}");
    assert_eq!(applied, fresh_snapshot(&calc));

    // Drift: someone removes a jump, edits one of our chains, adds a chain and a set of ours.
    ns.run_ok("iptables", &["-D", "FORWARD", "-j", "cali-FORWARD"], "");
    ns.run_ok("iptables", &["-I", "cali-wl-in", "1", "-j", "ACCEPT"], "");
    ns.run_ok("iptables", &["-N", "cali-leftover"], "");
    ns.run_ok("ipset", &["create", "cali4-leftover", "hash:ip"], "");
    let repairs = dataplane.sync(calc.state()).unwrap();
    assert_eq!(repairs.jumps, ["V4 filter FORWARD -> cali-FORWARD"]);
    assert_eq!(repairs.stale_chains, ["cali-leftover"]);
    assert_eq!(repairs.stale_sets, ["cali4-leftover"]);
    assert_eq!(snapshot(&ns), fresh_snapshot(&calc));

    // A second sync with nothing changed repairs nothing.
    assert!(dataplane.sync(calc.state()).unwrap().is_empty());
}

/// The periodic check against a real kernel, whose `iptables-save` gives rules back in its
/// own normal form: checks with nothing changed find nothing (and write nothing), and one after
/// someone edits a chain, removes a jump and empties a set repairs exactly that.
#[test]
fn drift_check_on_a_real_kernel() {
    let calc = calculator();
    let ns = NetNs::new("calico-drift");
    let mut dataplane = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    dataplane.sync(calc.state()).unwrap();
    let synced = snapshot(&ns);
    for _ in 0..2 {
        let read = dataplane.reader().read().unwrap();
        let repairs = dataplane.repair_drift(&read, calc.state()).unwrap();
        assert!(repairs.is_empty(), "{repairs:?}");
    }
    ns.run_ok(
        "iptables",
        &["-I", "cali-wi-calidb", "1", "-j", "ACCEPT"],
        "",
    );
    ns.run_ok("iptables", &["-D", "FORWARD", "-j", "cali-FORWARD"], "");
    let db_set = synced
        .lines()
        .find_map(|l| l.strip_prefix("set ").filter(|l| l.contains("10.0.0.2")))
        .and_then(|l| l.split(':').next())
        .expect("a set holding the db endpoint")
        .to_owned();
    ns.run_ok("ipset", &["flush", &db_set], "");
    let read = dataplane.reader().read().unwrap();
    let repairs = dataplane.repair_drift(&read, calc.state()).unwrap();
    assert_eq!(repairs.drifted_chains, ["V4 filter cali-wi-calidb"]);
    assert_eq!(repairs.jumps, ["V4 filter FORWARD -> cali-FORWARD"]);
    assert_eq!(repairs.drifted_sets, [db_set]);
    assert_eq!(snapshot(&ns), synced);
}

/// A restart (a new `Dataplane` on a kernel that already holds everything) reads the kernel and
/// writes nothing; one chain someone added a rule to is the only one written again.
#[test]
fn a_restart_with_everything_in_place_writes_nothing() {
    let calc = calculator();
    let ns = NetNs::new("calico-restart");
    let first = Dataplane::new(Netns::named(ns.name()), RenderConfig::default())
        .sync(calc.state())
        .unwrap();
    assert!(
        first.written_chains > 20 && first.written_sets > 0,
        "{first:?}"
    );
    let programmed = snapshot(&ns);

    let repairs = Dataplane::new(Netns::named(ns.name()), RenderConfig::default())
        .sync(calc.state())
        .unwrap();
    assert_eq!(
        (repairs.written_chains, repairs.written_sets),
        (0, 0),
        "{repairs:?}"
    );
    assert!(repairs.is_empty(), "{repairs:?}");
    assert_eq!(snapshot(&ns), programmed);

    ns.run_ok("iptables", &["-A", "cali-wi-calidb", "-j", "ACCEPT"], "");
    let repairs = Dataplane::new(Netns::named(ns.name()), RenderConfig::default())
        .sync(calc.state())
        .unwrap();
    assert_eq!(
        (repairs.written_chains, repairs.written_sets),
        (1, 0),
        "{repairs:?}"
    );
    assert_eq!(snapshot(&ns), programmed);
}

/// The nat table's metadata path follows the configuration across restarts: a Felix started
/// with `MetadataAddr=None` after one with the default leaves no DNAT and no metadata rule
/// (the chain stays, empty, with its jump), exactly as a fresh sync; a stale nat chain goes.
#[test]
fn metadata_path_comes_and_goes_with_the_configuration() {
    let calc = calculator();
    let ns = NetNs::new("calico-metadata");
    let mut with = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    with.sync(calc.state()).unwrap();
    let synced = snapshot(&ns);
    assert!(
        synced.contains("-A PREROUTING -j cali-PREROUTING"),
        "{synced}"
    );
    assert!(
        synced.contains("-j DNAT --to-destination 127.0.0.1:8775"),
        "{synced}"
    );
    assert!(synced.contains("--dport 8775 -j ACCEPT"), "{synced}");

    let none = RenderConfig {
        metadata: None,
        ..RenderConfig::default()
    };
    ns.run_ok("iptables", &["-t", "nat", "-N", "cali-leftover"], "");
    let mut without = Dataplane::new(Netns::named(ns.name()), none.clone());
    let repairs = without.sync(calc.state()).unwrap();
    assert_eq!(repairs.stale_chains, ["cali-leftover"]);
    assert!(repairs.jumps.is_empty(), "{repairs:?}");
    let after = snapshot(&ns);
    assert!(!after.contains("DNAT"), "{after}");
    assert!(!after.contains("8775"), "{after}");
    assert!(after.contains(":cali-PREROUTING"), "{after}");
    assert!(
        after.contains("-A PREROUTING -j cali-PREROUTING"),
        "{after}"
    );

    let fresh = NetNs::new("calico-metadata-fresh");
    Dataplane::new(Netns::named(fresh.name()), none)
        .sync(calc.state())
        .unwrap();
    assert_eq!(after, snapshot(&fresh));
}

/// A workload's NAT mapping is programmed by a sync and by an incremental apply (with the
/// nat table's `OUTPUT` jump), and a removed mapping leaves no rule behind: the kernel then
/// holds exactly what a fresh sync of the same state leaves.
#[test]
fn nat_mappings_come_and_go_with_the_endpoint() {
    let mut calc = calculator();
    let ns = NetNs::new("calico-fip");
    let mut dataplane = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    dataplane.sync(calc.state()).unwrap();
    let before = snapshot(&ns);
    assert!(before.contains("-A OUTPUT -j cali-OUTPUT"), "{before}");
    assert!(!before.contains("10.9.0.1"), "{before}");

    let natted = r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"], "ipv6_nets": ["fd00::1/128"], "ipv4_nat": [{"int_ip": "10.0.0.1", "ext_ip": "10.9.0.1"}], "ipv6_nat": [{"int_ip": "fd00::1", "ext_ip": "fd00::901"}], "labels": {"role": "web"}}"#;
    calc.apply(WEB, Some(natted));
    let changes = calc.take_changes();
    dataplane.apply(calc.state(), &changes).unwrap();
    let applied = snapshot(&ns);
    for rule in [
        "-A cali-fip-dnat -d 10.9.0.1/32 -j DNAT --to-destination 10.0.0.1",
        "-A cali-fip-snat -s 10.0.0.1/32 -d 10.0.0.1/32 -j SNAT --to-source 10.9.0.1",
        "-A cali-fip-dnat -d fd00::901/128 -j DNAT --to-destination fd00::1",
        "-A cali-fip-snat -s fd00::1/128 -d fd00::1/128 -j SNAT --to-source fd00::901",
    ] {
        assert!(applied.contains(rule), "{rule} in {applied}");
    }
    assert_eq!(applied, fresh_snapshot(&calc));

    // The mapping goes (the endpoint stays): nothing of it is left.
    calc.apply(
        WEB,
        Some(r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"], "labels": {"role": "web"}}"#),
    );
    let changes = calc.take_changes();
    dataplane.apply(calc.state(), &changes).unwrap();
    let removed = snapshot(&ns);
    assert!(!removed.contains("10.9.0.1"), "{removed}");
    assert!(!removed.contains("fd00::901"), "{removed}");
    assert!(
        !removed.contains("-j DNAT --to-destination 10.0.0.1"),
        "{removed}"
    );
    assert_eq!(removed, fresh_snapshot(&calc));
    assert!(dataplane.sync(calc.state()).unwrap().is_empty());
}

/// The same driver over the in-memory kernel (no root): a fresh sync hooks every kernel chain,
/// drift is repaired and reported, and a sync with nothing changed repairs nothing.
#[test]
fn in_memory_sync_repairs_drift() {
    let calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    let repairs = dataplane.sync(calc.state()).unwrap();
    assert_eq!(repairs.jumps.len(), 16, "{repairs:?}");
    let synced = kernel.dump();
    assert!(
        synced.contains("V4 filter FORWARD: -j cali-FORWARD"),
        "{synced}"
    );
    assert!(synced.contains("V6 raw OUTPUT: -j cali-OUTPUT"), "{synced}");

    let drift = "*filter\n-D FORWARD -j cali-FORWARD\n:cali-leftover - [0:0]\nCOMMIT\n";
    FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
    IpSets::restore(&kernel, "create cali4-leftover hash:ip\n").unwrap();
    let repairs = dataplane.sync(calc.state()).unwrap();
    assert_eq!(repairs.jumps, ["V4 filter FORWARD -> cali-FORWARD"]);
    assert_eq!(repairs.stale_chains, ["cali-leftover"]);
    assert_eq!(repairs.stale_sets, ["cali4-leftover"]);
    assert_eq!(kernel.dump(), synced);
    assert!(dataplane.sync(calc.state()).unwrap().is_empty());
}

/// A batch that fails half-way (the IPv6 tables refuse it) returns the error; the kernel keeps
/// what committed before, and the full sync that follows (what Felix does next) leaves exactly
/// what a fresh sync of the state leaves.
#[test]
fn in_memory_failed_batch_then_full_sync() {
    let mut calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    dataplane.sync(calc.state()).unwrap();
    calc.apply(DB, None);
    let changes = calc.take_changes();
    kernel.fail_next("ip6tables-restore");
    let error = dataplane.apply(calc.state(), &changes).unwrap_err();
    assert!(error.command.starts_with("ip6tables-restore"), "{error}");
    assert!(kernel.dump().contains("V6 filter :cali-wi-calidb"));
    dataplane.sync(calc.state()).unwrap();

    let fresh = FakeKernel::new();
    in_memory(&fresh).sync(calc.state()).unwrap();
    assert_eq!(kernel.dump(), fresh.dump());
    assert!(!fresh.dump().contains("calidb"));
}

/// The periodic check: the kernel is read (as on Felix's reader thread), the first check only
/// learns the kernel's normal form, and a later one rewrites exactly what someone changed —
/// an edited chain, a removed jump, an emptied set — removes what nothing needs, and leaves the
/// kernel as a fresh sync would.
#[test]
fn in_memory_drift_check_rewrites_only_what_drifted() {
    let calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    dataplane.sync(calc.state()).unwrap();
    let synced = kernel.dump();
    let snapshot = dataplane.reader().read().unwrap();
    assert!(
        dataplane
            .repair_drift(&snapshot, calc.state())
            .unwrap()
            .is_empty()
    );
    let snapshot = dataplane.reader().read().unwrap();
    kernel.clear_log();
    assert!(
        dataplane
            .repair_drift(&snapshot, calc.state())
            .unwrap()
            .is_empty()
    );
    assert!(kernel.log().is_empty(), "no drift: nothing written");

    let set = synced
        .lines()
        .find_map(|l| l.strip_prefix("set ").filter(|l| l.contains("10.0.0.2")))
        .and_then(|l| l.split(':').next())
        .expect("a set holding the db endpoint")
        .to_owned();
    let drift = "*filter\n-I cali-wi-calidb 1 -j ACCEPT\n-D FORWARD -j cali-FORWARD\n\
                 :cali-leftover - [0:0]\nCOMMIT\n";
    FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
    IpSets::restore(
        &kernel,
        &format!("flush {set}\ncreate cali4-leftover hash:ip\n"),
    )
    .unwrap();
    let snapshot = dataplane.reader().read().unwrap();
    kernel.clear_log();
    let repairs = dataplane.repair_drift(&snapshot, calc.state()).unwrap();
    assert_eq!(repairs.drifted_chains, ["V4 filter cali-wi-calidb"]);
    assert_eq!(repairs.jumps, ["V4 filter FORWARD -> cali-FORWARD"]);
    assert_eq!(repairs.stale_chains, ["cali-leftover"]);
    assert_eq!(repairs.drifted_sets, [set]);
    assert_eq!(repairs.stale_sets, ["cali4-leftover"]);
    assert_eq!(kernel.dump(), synced);
    let written: String = kernel.log().into_iter().map(|(_, input)| input).collect();
    assert!(
        !written.contains("cali-wi-caliweb"),
        "only what drifted is rewritten: {written}"
    );
}

/// An endpoint joining a set that already exists adds one member: one `add` line, not the set
/// rebuilt; leaving deletes it the same way.
#[test]
fn in_memory_a_member_change_writes_only_that_member() {
    let mut calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    dataplane.sync(calc.state()).unwrap();
    let remote = "/calico/v1/host/h2/workload/k8s/ns.db2/endpoint/eth0";
    let joined = r#"{"state": "active", "name": "calidb2", "profile_ids": ["db"], "ipv4_nets": ["10.0.1.7/32"], "labels": {"role": "db"}}"#;
    for value in [Some(joined), None] {
        calc.apply(remote, value);
        let changes = calc.take_changes();
        kernel.clear_log();
        dataplane.apply(calc.state(), &changes).unwrap();
        let sets: Vec<String> = kernel
            .log()
            .into_iter()
            .filter(|(program, _)| program == "ipset")
            .flat_map(|(_, input)| input.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        let verb = if value.is_some() { "add" } else { "del" };
        assert!(
            !sets.is_empty()
                && sets
                    .iter()
                    .all(|l| l.starts_with(verb) && l.ends_with(" 10.0.1.7")),
            "{sets:?}"
        );
    }
    let fresh = FakeKernel::new();
    in_memory(&fresh).sync(calc.state()).unwrap();
    assert_eq!(kernel.dump(), fresh.dump());
}

/// The same restart against the in-memory kernel: not one restore is run.
#[test]
fn in_memory_restart_runs_no_restore() {
    let calc = calculator();
    let kernel = FakeKernel::new();
    in_memory(&kernel).sync(calc.state()).unwrap();
    kernel.clear_log();
    let repairs = in_memory(&kernel).sync(calc.state()).unwrap();
    assert!(
        repairs.is_empty() && repairs.written_chains == 0,
        "{repairs:?}"
    );
    assert!(kernel.log().is_empty(), "{:?}", kernel.log());
}

/// The sync's plan is a value: read, plan, execute. Planning against a kernel where someone
/// edited a nat chain and removed a raw jump writes nothing by itself, and names exactly that
/// chain and that jump; against a kernel already in place it is empty.
#[test]
fn in_memory_sync_plans_before_it_writes() {
    let calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    dataplane.sync(calc.state()).unwrap();
    let snapshot = dataplane.reader().read().unwrap();
    assert!(dataplane.plan_sync(calc.state(), &snapshot).is_empty());

    let drift =
        "*nat\n-I cali-POSTROUTING 1 -j ACCEPT\nCOMMIT\n*raw\n-D OUTPUT -j cali-OUTPUT\nCOMMIT\n";
    FirewallTables::restore(&kernel, Family::V4, drift).unwrap();
    let snapshot = dataplane.reader().read().unwrap();
    kernel.clear_log();
    let plan = dataplane.plan_sync(calc.state(), &snapshot);
    assert!(kernel.log().is_empty(), "planning writes nothing");
    let v4 = &plan.planes[0];
    let written: Vec<(&str, &str)> = v4
        .tables
        .iter()
        .flat_map(|t| {
            t.write
                .iter()
                .map(move |(name, _)| (t.table, name.as_str()))
        })
        .collect();
    assert_eq!(written, [("nat", "cali-POSTROUTING")]);
    assert_eq!(v4.jumps, [("raw", "OUTPUT", "cali-OUTPUT")]);
    assert!(plan.planes[1].tables.iter().all(|t| t.write.is_empty()));
    assert_eq!(v4.sets, "", "every set already holds its members");
}

/// Other software's rule inserted above our jump (Docker's `iptables -I FORWARD 1 …`) and a
/// second copy of a jump are drift: the plan names both jumps, and the periodic check moves each
/// back to the top, alone, with the other rules kept after it in their order.
#[test]
fn in_memory_a_jump_pushed_down_is_planned_and_moved_back_to_the_top() {
    let calc = calculator();
    let kernel = FakeKernel::new();
    let mut dataplane = in_memory(&kernel);
    dataplane.sync(calc.state()).unwrap();
    let snapshot = dataplane.reader().read().unwrap();
    assert!(
        dataplane
            .repair_drift(&snapshot, calc.state())
            .unwrap()
            .is_empty()
    );

    let foreign = "-d 10.0.0.2/32 -p tcp -m tcp --dport 5432 -j ACCEPT";
    let docker = format!(
        "*filter\n-I FORWARD 1 {foreign}\nCOMMIT\n*nat\n-A POSTROUTING -j cali-POSTROUTING\nCOMMIT\n"
    );
    FirewallTables::restore(&kernel, Family::V4, &docker).unwrap();
    let snapshot = dataplane.reader().read().unwrap();
    let plan = dataplane.plan_sync(calc.state(), &snapshot);
    assert_eq!(
        plan.planes[0].jumps,
        [
            ("filter", "FORWARD", "cali-FORWARD"),
            ("nat", "POSTROUTING", "cali-POSTROUTING")
        ]
    );
    assert!(plan.planes[1].jumps.is_empty(), "{plan:?}");

    let repairs = dataplane.repair_drift(&snapshot, calc.state()).unwrap();
    assert_eq!(
        repairs.jumps,
        [
            "V4 filter FORWARD -> cali-FORWARD",
            "V4 nat POSTROUTING -> cali-POSTROUTING"
        ]
    );
    let forward = kernel.rules(Family::V4, "filter", "FORWARD").unwrap();
    assert_eq!(forward, ["-j cali-FORWARD", foreign]);
    let postrouting = kernel.rules(Family::V4, "nat", "POSTROUTING").unwrap();
    assert_eq!(postrouting, ["-j cali-POSTROUTING"]);
    let snapshot = dataplane.reader().read().unwrap();
    assert!(
        dataplane
            .repair_drift(&snapshot, calc.state())
            .unwrap()
            .is_empty()
    );
}

fn in_memory(kernel: &FakeKernel) -> Dataplane {
    Dataplane::with_kernel(
        Box::new(kernel.clone()),
        Box::new(kernel.clone()),
        RenderConfig::default(),
    )
}
