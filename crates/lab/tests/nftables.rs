//! The nftables backend (`NFTablesMode`) with real packets, where it is not the same as
//! iptables: switching a running cluster between the backends through etcd, iptables rules of
//! other programs beside Felix's table, and a tier of many policies dispatched by verdict map.
//! Every other lab test runs on nftables too with `CALICO_TEST_BACKEND=nftables`
//! (`scripts/test.sh` runs them so); these tests choose their backend themselves.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use calico_testkit::eventually;
use common::{BIN, Backend, OPEN, TestLab, firewall, flow_report, tcp};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";
/// Beside the client, with its profile: the policy is probed from here, not from the client,
/// whose namespace holds only the switching test's flow (a probe's blocked SYN, sent again,
/// would count as a segment the flow lost).
const PROBER: &str = "10.65.1.2";
const WAIT: Duration = Duration::from_secs(30);

/// Inbound denied, outbound allowed: the client's replies come back only as part of a
/// connection conntrack knows, so a switch that lost a connection's state would drop them.
const CLIENT: &str =
    r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#;
/// Inbound TCP 80 and 6379 only.
const SERVER: &str = r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80, 6379], "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

/// A client and a prober on host1 and a server on host2, with [`CLIENT`] and [`SERVER`].
fn client_and_server(lab: &TestLab) {
    lab.put("/calico/v1/policy/profile/client/rules", CLIENT);
    lab.put("/calico/v1/policy/profile/server/rules", SERVER);
    lab.workload("host1", "client", W1, &["client"], &["role=client"]);
    lab.workload("host1", "prober", PROBER, &["client"], &["role=client"]);
    lab.workload("host2", "server", W2, &["server"], &["role=server"]);
    lab.wait();
}

/// The policy of [`client_and_server`] holds on every host.
fn assert_policy_holds(lab: &TestLab, when: &str) {
    let words = lab.probe("prober", &[tcp(W2, 80), tcp(W2, 443)]);
    assert_eq!(words, ["ok", "blocked"], "{when}: client to server");
    assert!(
        !lab.tcp("server", PROBER, 80),
        "{when}: the client's inbound denies new connections"
    );
}

/// `NFTablesMode` changed in etcd while Felix runs, globally and for one host: each host
/// moves to the backend it is given and nothing of the other backend is left in its kernel
/// (no `cali-` chain or jump in `iptables-save`/`ip6tables-save` and no `cali4`/`cali6` IP
/// set; or no table `inet calico`), the policy holds at every step, also with the two hosts
/// on different backends, and a TCP connection established before the first switch loses no
/// echo and no segment through all of them.
#[test]
fn switching_the_backend_in_etcd_keeps_flows_and_leaves_nothing_of_the_other() {
    // No FELIX_NFTABLESMODE: it would override etcd.
    let lab = TestLab::up_as_given(2, &[]);
    lab.assert_backend(Backend::Iptables);
    client_and_server(&lab);
    // Ended by `down` with the lab's other processes if the test fails before it ends.
    let mut flow = lab.start_flow("client", &format!("{W2}:80"), FLOW_SECONDS, 20, 3000);
    eventually("the flow to be established", WAIT, || {
        let out = lab.in_host(
            "host2",
            "conntrack",
            &["-L", "-p", "tcp", "--dport", "80", "--state", "ESTABLISHED"],
        );
        match String::from_utf8_lossy(&out.stdout).contains(W2) {
            true => Ok(()),
            false => Err("no established connection to the server yet".to_owned()),
        }
    });

    let global = "/calico/v1/config/NFTablesMode";
    let host2 = "/calico/v1/host/host2/config/NFTablesMode";
    let steps: [(&str, Option<&str>, [Backend; 2]); 3] = [
        ("Enabled globally", Some("Enabled"), [Backend::Nftables; 2]),
        (
            "Disabled for host2 only",
            None,
            [Backend::Nftables, Backend::Iptables],
        ),
        (
            "Disabled globally",
            Some("Disabled"),
            [Backend::Iptables; 2],
        ),
    ];
    for (step, global_value, backends) in steps {
        match global_value {
            Some(value) => {
                lab.put(global, value);
                lab.del(host2);
            }
            None => lab.put(host2, "Disabled"),
        }
        for (host, backend) in ["host1", "host2"].into_iter().zip(backends) {
            eventually(
                &format!("{step}: {host} on {}", backend.name()),
                WAIT,
                || {
                    lab.check_backend(host, backend)
                        .map_err(|why| format!("{why}\n{}", lab.felix_logs()))
                },
            );
        }
        lab.wait();
        assert_policy_holds(&lab, step);
        assert!(
            flow.try_wait().unwrap().is_none(),
            "the flow ended before the last switch ({step}): it lasts {FLOW_SECONDS} s, make \
             FLOW_SECONDS longer for this machine"
        );
    }
    let out = flow.wait_with_output().unwrap();
    let report = flow_report(&out);
    assert!(
        out.status.success() && report.cut.is_none() && report.sent == report.echoed,
        "the flow lost echoes while the backends were switched: {report:?}"
    );
    let lost: Vec<_> = report.late.iter().filter(|l| l.retransmits > 0).collect();
    assert!(
        lost.is_empty(),
        "TCP sent segments again (packets lost) during the switches: {lost:?}"
    );
    for host in ["host1", "host2"] {
        let log = std::fs::read_to_string(lab.state().log_path(&format!("felix-{host}")))
            .unwrap_or_default();
        assert!(
            log.contains("firewall backend: NFTablesMode=Enabled"),
            "{host}'s Felix says which backend it chose and why:\n{log}"
        );
    }
}

/// How long the switching test's flow runs: long enough for three switches on a slow machine.
const FLOW_SECONDS: u32 = 45;

/// With `NFTablesMode=Enabled` Felix's rules are in its own table, not in iptables; a rule
/// another program puts in iptables' `FORWARD` chain judges the same packets beside it. A
/// packet is delivered only if both accept it: iptables' drop drops what Calico allows,
/// Calico's drop drops what iptables accepts, and Calico's accept does not end iptables'
/// walk (so a `FORWARD` policy of DROP, Docker's, drops workload traffic until iptables
/// accepts it too; with the iptables backend, whose ACCEPT is in that `FORWARD` chain, it
/// does not). Felix moving from iptables back to nftables leaves the other program's rules
/// alone.
#[test]
fn iptables_rules_of_other_programs_judge_packets_beside_the_nftables_table() {
    let lab = TestLab::up(2, &["NFTablesMode=Enabled"]);
    client_and_server(&lab);
    for host in ["host1", "host2"] {
        let iptables = lab.iptables_save(host);
        assert!(
            !iptables.contains("cali"),
            "{host}'s iptables has Calico's rules:\n{iptables}"
        );
        let sets = lab.ipsets(host);
        assert!(sets.iter().all(|s| !s.starts_with("cali")), "{sets:?}");
    }
    let targets = [tcp(W2, 80), tcp(W2, 6379), tcp(W2, 443)];
    assert_eq!(lab.probe("client", &targets), ["ok", "ok", "blocked"]);

    // Another program drops TCP 6379 in iptables: dropped, though Calico allows it.
    let drop_6379 = ["FORWARD", "-p", "tcp", "--dport", "6379", "-j", "DROP"];
    iptables(&lab, "host2", &[&["-I"][..], &drop_6379].concat());
    assert_eq!(
        lab.probe("client", &targets),
        ["ok", "blocked", "blocked"],
        "iptables' drop drops what Calico allows"
    );

    // host2's Felix moved to iptables: its jump to cali-FORWARD goes first in FORWARD and
    // ACCEPTs what Calico allows, so the DROP after it no longer sees that traffic.
    lab.ok(&[
        "restart-felix",
        "host2",
        "--felix-config",
        "NFTablesMode=Disabled",
    ]);
    lab.wait();
    lab.assert_backend_on("host2", Backend::Iptables);
    assert_eq!(
        lab.probe("client", &targets),
        ["ok", "ok", "blocked"],
        "the iptables backend's ACCEPT in FORWARD skips the DROP after it"
    );
    // And back to nftables: Calico's chains and jumps leave iptables, the other rule stays.
    lab.ok(&["restart-felix", "host2"]);
    lab.wait();
    lab.assert_backend_on("host2", Backend::Nftables);
    assert!(
        lab.iptables_save("host2").contains("--dport 6379 -j DROP"),
        "moving back to nftables removed another program's rule:\n{}",
        lab.iptables_save("host2")
    );
    assert_eq!(
        lab.probe("client", &targets),
        ["ok", "blocked", "blocked"],
        "and it drops again"
    );
    iptables(&lab, "host2", &[&["-D"][..], &drop_6379].concat());

    // iptables accepts everything forwarded: Calico's drop still drops.
    iptables(&lab, "host2", &["-I", "FORWARD", "-j", "ACCEPT"]);
    assert_eq!(
        lab.probe("client", &targets),
        ["ok", "ok", "blocked"],
        "Calico's drop drops what iptables accepts"
    );
    iptables(&lab, "host2", &["-D", "FORWARD", "-j", "ACCEPT"]);

    // Docker's FORWARD policy: DROP. Calico's accept does not skip it.
    iptables(&lab, "host2", &["-P", "FORWARD", "DROP"]);
    assert_eq!(
        lab.probe("client", &targets),
        ["blocked", "blocked", "blocked"],
        "iptables' FORWARD policy DROP drops workload traffic Calico accepts"
    );
    for direction in ["-i", "-o"] {
        iptables(
            &lab,
            "host2",
            &["-A", "FORWARD", direction, "cali+", "-j", "ACCEPT"],
        );
    }
    assert_eq!(
        lab.probe("client", &targets),
        ["ok", "ok", "blocked"],
        "with workload interfaces accepted in iptables too, Calico's policy decides again"
    );
}

/// `iptables ARGS` in a host; must succeed.
fn iptables(lab: &TestLab, host: &str, args: &[&str]) {
    let out = lab.in_host(host, "iptables", args);
    assert!(
        out.status.success(),
        "iptables {args:?} in {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tier `t` of [`a_tier_of_port_keyed_policies_is_dispatched_by_map_in_tier_order`]: a
/// run of keyed policies (p1 to p5; p6 has no inbound rules and takes no part), one that
/// matches any protocol (p7, which splits the tier), and a second run (p8 to p10). Ports and
/// ranges overlap, so only the tier's order decides.
const KEYED_TIER: [(&str, &str); 10] = [
    (
        "p1",
        r#"[{"protocol": "tcp", "dst_ports": [80], "action": "deny"}]"#,
    ),
    (
        "p2",
        r#"[{"protocol": "tcp", "dst_ports": ["1:1000"], "action": "allow"}]"#,
    ),
    (
        "p3",
        r#"[{"protocol": "udp", "dst_ports": [5432], "action": "next-tier"}]"#,
    ),
    (
        "p4",
        r#"[{"protocol": "tcp", "dst_ports": [6379], "action": "allow"},
            {"protocol": "udp", "dst_ports": [6379], "action": "deny"}]"#,
    ),
    (
        "p5",
        r#"[{"protocol": "icmp", "icmp_type": 8, "action": "allow"}]"#,
    ),
    ("p6", "[]"),
    ("p7", r#"[{"src_net": "10.65.9.0/24", "action": "deny"}]"#),
    (
        "p8",
        r#"[{"protocol": "tcp", "dst_ports": [8080], "action": "next-tier"}]"#,
    ),
    (
        "p9",
        r#"[{"protocol": "tcp", "dst_ports": [8500], "action": "deny"}]"#,
    ),
    (
        "p10",
        r#"[{"protocol": "tcp", "dst_ports": ["8000:9000"], "action": "allow"}]"#,
    ),
];

/// What the client's probes to the server meet, and why.
const KEYED_EXPECTED: [(&str, u16, &str); 12] = [
    ("tcp", 80, "blocked"),   // p1 denies before p2 allows 1:1000
    ("tcp", 22, "refused"),   // p2 allows (nothing listens)
    ("tcp", 443, "ok"),       // p2
    ("tcp", 5432, "blocked"), // no policy names it: the end of tier t
    ("udp", 5432, "ok"),      // p3 passes to tier after, whose q allows it
    ("tcp", 6379, "ok"),      // p4
    ("udp", 6379, "blocked"), // p4 denies
    ("icmp", 0, "ok"),        // p5
    ("tcp", 8080, "blocked"), // p8 passes before p10 allows; q does not allow it
    ("tcp", 8500, "blocked"), // p9 denies before p10 allows
    ("tcp", 8600, "refused"), // p10 allows (nothing listens)
    ("tcp", 3000, "blocked"), // no policy names it
];

/// A tier of ten policies on nftables: its runs of policies keyed by protocol and port are
/// looked up in verdict maps (the tier's dispatch chain has two map lookups and one plain
/// jump, to p7; p6 is left out), and every probe meets the verdict of the tier's order, which
/// is also what `calicoctl policy explain` says.
#[test]
fn a_tier_of_port_keyed_policies_is_dispatched_by_map_in_tier_order() {
    let lab = TestLab::up(2, &["NFTablesMode=Enabled"]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "client", W1, &["open"], &["role=client"]);
    lab.workload("host2", "server", W2, &["open"], &["role=server"]);
    lab.put("/calico/v1/policy/tier/t/metadata", r#"{"order": 1}"#);
    for (order, (name, inbound)) in KEYED_TIER.iter().enumerate() {
        let policy = format!(
            r#"{{"selector": "role == 'server'", "order": {order}, "inbound_rules": {inbound}, "outbound_rules": []}}"#
        );
        lab.put(&format!("/calico/v1/policy/tier/t/policy/{name}"), &policy);
    }
    lab.put("/calico/v1/policy/tier/after/metadata", r#"{"order": 2}"#);
    lab.put(
        "/calico/v1/policy/tier/after/policy/q",
        r#"{"selector": "role == 'server'", "order": 1,
            "inbound_rules": [{"protocol": "udp", "dst_ports": [5432], "action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();

    let table = lab.firewall("host2");
    let iface = lab.state().workload("server").unwrap().interface.clone();
    let endpoint_chain = firewall::nft_block(&table, "chain", &format!("to-wl-{iface}"))
        .unwrap_or_else(|| panic!("no chain to-wl-{iface}:\n{table}"));
    let tier_chain = endpoint_chain
        .split_whitespace()
        .find(|w| w.starts_with("tier-in-"))
        .unwrap_or_else(|| panic!("the server's chain jumps to no tier chain:\n{endpoint_chain}"));
    let dispatch = firewall::nft_block(&table, "chain", tier_chain).unwrap();
    assert_eq!(
        dispatch.matches("meta l4proto . th dport vmap @").count(),
        2,
        "two runs of keyed policies, each one map lookup:\n{dispatch}"
    );
    assert!(dispatch.contains("jump pol-in-t.p7"), "{dispatch}");
    assert!(
        !table.contains("jump pol-in-t.p6"),
        "p6 has no inbound rules:\n{table}"
    );

    let targets: Vec<String> = KEYED_EXPECTED
        .iter()
        .map(|(protocol, port, _)| match *protocol {
            "icmp" => format!("icmp:{W2}"),
            _ => format!("{protocol}:{W2}:{port}"),
        })
        .collect();
    let words = lab.probe("client", &targets);
    let server = lab.state().workload("server").unwrap().key.clone();
    let client = lab.state().workload("client").unwrap().key.clone();
    for ((target, (protocol, port, expected)), word) in
        targets.iter().zip(KEYED_EXPECTED).zip(&words)
    {
        assert_eq!(word, expected, "{target}\n{}", lab.felix_logs());
        let explained = explain(&lab, &client, "outbound", protocol, port)
            && explain(&lab, &server, "inbound", protocol, port);
        assert_eq!(
            common::arrived(word),
            explained,
            "{target}: the kernel and calicoctl policy explain disagree"
        );
    }
}

/// Whether `calicoctl policy explain` allows the client's packet at one end.
fn explain(lab: &TestLab, endpoint: &str, direction: &str, protocol: &str, port: u16) -> bool {
    let ctl = PathBuf::from(BIN).with_file_name("calicoctl");
    let port = port.to_string();
    let mut args = vec![
        "policy",
        "explain",
        "--endpoint",
        endpoint,
        "--direction",
        direction,
        "--src",
        W1,
        "--dst",
        W2,
        "--protocol",
        protocol,
    ];
    match protocol {
        "icmp" => args.extend(["--icmp-type", "8", "--icmp-code", "0"]),
        _ => args.extend(["--dst-port", &port]),
    }
    let out = std::process::Command::new(ctl)
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(&args)
        .output()
        .expect("calicoctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines().last().unwrap_or("").starts_with("allow")
}
