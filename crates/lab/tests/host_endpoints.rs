//! Host endpoints with real packets: a lab host's fabric interface (`eth0`, 10.99.0.11 on
//! host1) protected by policy, connections to and from the host, the failsafe ports,
//! `DropActionOverride`, untracked policy, and host endpoints given only by their addresses.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{OPEN, TestLab, tcp};

const HOST1: &str = "10.99.0.11";
const HOST2: &str = "10.99.0.12";
/// etcd on the fabric: a port the outbound failsafe list keeps open.
const FABRIC: &str = "10.99.0.1";
const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";

const HEP: &str = "/calico/v1/host/host1/endpoint/fabric";
const HEP_STATUS: &str = "/calico/felix/v1/host/host1/endpoint/fabric";
const DENY_ALL: &str =
    r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "deny"}]}"#;

fn arrived(word: &str) -> bool {
    common::arrived(word)
}

/// The probe results from `node` to each target, as `arrived` booleans.
fn reach(lab: &TestLab, node: &str, targets: &[String]) -> Vec<bool> {
    lab.probe_in(node, targets)
        .iter()
        .map(|w| arrived(w))
        .collect()
}

/// The status Felix reports for host1's host endpoint (`up`, `down`, or `none`).
fn hep_status(lab: &TestLab) -> String {
    let out = lab.etcdctl(&["get", "--print-value-only", HEP_STATUS]);
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim() {
        "" => "none".to_owned(),
        json => serde_json::from_str::<serde_json::Value>(json).expect("status is JSON")["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
    }
}

fn await_status(lab: &TestLab, want: &str) {
    eventually(
        &format!("host endpoint status {want}"),
        Duration::from_secs(30),
        || match hep_status(lab) {
            s if s == want => Ok(()),
            s => Err(format!("status is {s}\n{}", lab.felix_logs())),
        },
    );
}

/// How many packets host1's drop-logging rules (`calico-drop: `, IPv4 filter table) have seen.
fn logged_drops(lab: &TestLab) -> u64 {
    let out = lab.in_host("host1", "iptables-save", &["-c", "-t", "filter"]);
    assert!(out.status.success(), "iptables-save: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("-j LOG") && l.contains("calico-drop"))
        .filter_map(|l| {
            let counters = l.strip_prefix('[')?.split(']').next()?;
            counters.split(':').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// A deny-all host endpoint on host1's fabric interface, by name: new connections to and from
/// the host are dropped, the failsafe ports still connect, other interfaces and traffic
/// forwarded to and from workloads are untouched; `DropActionOverride` logs and drops, or logs
/// and accepts; an empty failsafe list closes the failsafe ports.
#[test]
fn host_endpoint_policy_and_failsafe_ports() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "w1", W1, &["open"], &[]);
    lab.workload("host2", "w2", W2, &["open"], &[]);
    let _host1 = lab.serve_in("host1", &[22, 8080]);
    let _host2 = lab.serve_in("host2", &[8080]);
    lab.wait();
    let into_host1 = [tcp(HOST1, 8080), tcp(HOST1, 22)];
    let out_of_host1 = [tcp(HOST2, 8080), tcp(FABRIC, 2379)];
    assert_eq!(reach(&lab, "host2", &into_host1), [true, true]);
    assert_eq!(reach(&lab, "host1", &out_of_host1), [true, true]);

    lab.put("/calico/v1/policy/profile/host-deny/rules", DENY_ALL);
    lab.put(
        HEP,
        r#"{"name": "eth0", "expected_ipv4_addrs": ["10.99.0.11"], "profile_ids": ["host-deny"]}"#,
    );
    lab.wait();
    await_status(&lab, "up");
    assert_eq!(
        reach(&lab, "host2", &into_host1),
        [false, true],
        "into host1: 8080 dropped, the inbound failsafe port 22 open"
    );
    assert_eq!(
        reach(&lab, "host1", &out_of_host1),
        [false, true],
        "out of host1: 8080 dropped, the outbound failsafe port 2379 (etcd) open"
    );
    assert!(
        reach(&lab, "host1", &[tcp("127.0.0.1", 8080)])[0],
        "loopback is not a host endpoint: untouched"
    );
    assert!(
        lab.tcp("w1", W2, 8080) && lab.tcp("w2", W1, 8080),
        "traffic forwarded between workloads is not host endpoint policy's (Calico 1.4)"
    );
    assert!(
        lab.tcp("w2", HOST1, 22),
        "a workload on another host reaches host1's failsafe port"
    );

    // DropActionOverride: the drop logs first, then drops or accepts.
    let logged = logged_drops;
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "DropActionOverride=LOG-and-DROP",
    ]);
    eventually("the LOG rule", Duration::from_secs(30), || {
        match lab.in_host("host1", "iptables-save", &["-t", "filter"]) {
            out if String::from_utf8_lossy(&out.stdout).contains("calico-drop") => Ok(()),
            _ => Err(lab.felix_logs()),
        }
    });
    let before = logged(&lab);
    assert!(
        !reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "LOG-and-DROP drops"
    );
    assert!(logged(&lab) > before, "and the LOG rule counted the packet");

    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "DropActionOverride=LOG-and-ACCEPT",
    ]);
    eventually("LOG-and-ACCEPT", Duration::from_secs(30), || {
        match reach(&lab, "host2", &[tcp(HOST1, 8080)])[0] {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
    let before = logged(&lab);
    assert!(
        reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "LOG-and-ACCEPT lets the packet through"
    );
    assert!(logged(&lab) > before, "after logging it");

    // No failsafe ports: port 22 is closed like the rest.
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "FailsafeInboundHostPorts=",
    ]);
    eventually("port 22 closed", Duration::from_secs(30), || {
        match reach(&lab, "host2", &into_host1) == [false, false] {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
}

/// A host endpoint given only by its expected addresses applies to the interface holding
/// them, follows an address that moves to another interface, and is reported `down` (with no
/// policy anywhere) while no interface holds it.
#[test]
fn host_endpoint_found_by_address() {
    let lab = TestLab::up(2, &[]);
    let _host1 = lab.serve_in("host1", &[8080]);
    lab.put("/calico/v1/policy/profile/host-deny/rules", DENY_ALL);
    // 10.99.0.111 is nowhere yet.
    lab.put(
        HEP,
        r#"{"expected_ipv4_addrs": ["10.99.0.111"], "profile_ids": ["host-deny"]}"#,
    );
    lab.wait();
    await_status(&lab, "down");
    assert!(
        reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "no interface holds the address: nothing is policed"
    );

    // The address appears on eth0: eth0 is the host endpoint.
    lab.in_host(
        "host1",
        "ip",
        &["addr", "add", "10.99.0.111/32", "dev", "eth0"],
    );
    await_status(&lab, "up");
    eventually("eth0 policed", Duration::from_secs(30), || {
        match reach(&lab, "host2", &[tcp(HOST1, 8080)])[0] {
            false => Ok(()),
            true => Err(lab.felix_logs()),
        }
    });

    // It moves to another interface (a veth pair inside host1): eth0 is free again.
    for args in [
        &[
            "link", "add", "hepa", "type", "veth", "peer", "name", "hepb",
        ][..],
        &["link", "set", "hepa", "up"],
        &["link", "set", "hepb", "up"],
        &["addr", "del", "10.99.0.111/32", "dev", "eth0"],
        &["addr", "add", "10.99.0.111/32", "dev", "hepa"],
    ] {
        let out = lab.in_host("host1", "ip", args);
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    }
    eventually(
        "the policy follows the address",
        Duration::from_secs(30),
        || {
            let rules = lab.in_host("host1", "iptables", &["-S", "cali-hep-in"]);
            let rules = String::from_utf8_lossy(&rules.stdout).into_owned();
            match rules.contains("-i hepa") && !rules.contains("-i eth0") {
                true => Ok(()),
                false => Err(rules),
            }
        },
    );
    assert!(
        reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "eth0 is no longer a host endpoint"
    );
    await_status(&lab, "up");

    // Gone from every interface: down, and no host endpoint chains are left.
    lab.in_host("host1", "ip", &["link", "del", "hepa"]);
    await_status(&lab, "down");
    let rules = lab.in_host("host1", "iptables-save", &["-t", "filter"]);
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        !rules.contains("cali-hi-") && !rules.contains("cali-he-"),
        "no host endpoint chain without an interface:\n{rules}"
    );
}

/// Untracked policy: an untracked allow lets the packet through before connection tracking
/// (no conntrack entry is made), and the reply needs an untracked rule of its own.
#[test]
fn untracked_policy_skips_conntrack() {
    let lab = TestLab::up(2, &[]);
    let _host1 = lab.serve_in("host1", &[22, 8080, 9090]);
    lab.put("/calico/v1/policy/profile/host-deny/rules", DENY_ALL);
    lab.put(
        HEP,
        r#"{"name": "eth0", "profile_ids": ["host-deny"], "labels": {"role": "fabric"}}"#,
    );
    // Inbound 8080 and 9090 untracked; the reply direction only for 9090.
    lab.put("/calico/v1/policy/tier/raw/metadata", r#"{"order": 1}"#);
    lab.put(
        "/calico/v1/policy/tier/raw/policy/untracked-in",
        r#"{"selector": "role == \"fabric\"", "untracked": true, "order": 1,
            "inbound_rules": [{"protocol": "tcp", "dst_ports": [8080, 9090], "action": "allow"}],
            "outbound_rules": [{"protocol": "tcp", "src_ports": [9090], "action": "allow"}]}"#,
    );
    lab.wait();
    await_status(&lab, "up");
    let conntrack = |port: u16| {
        let out = lab.in_host(
            "host1",
            "conntrack",
            &["-L", "-p", "tcp", "--dport", &port.to_string()],
        );
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    lab.in_host("host1", "conntrack", &["-F"]);
    assert_eq!(
        reach(&lab, "host2", &[tcp(HOST1, 9090), tcp(HOST1, 8080)]),
        [true, false],
        "9090 is allowed both ways untracked; 8080's reply is untracked and dropped by the \
         tracked deny-all (it is not ESTABLISHED)"
    );
    assert_eq!(
        conntrack(9090),
        0,
        "the untracked connection left no conntrack entry"
    );

    // Without the untracked policy the deny-all profile decides, with conntrack as usual.
    lab.del("/calico/v1/policy/tier/raw/policy/untracked-in");
    lab.wait();
    assert_eq!(
        reach(&lab, "host2", &[tcp(HOST1, 9090), tcp(HOST1, 22)]),
        [false, true]
    );
    assert!(
        conntrack(22) > 0,
        "a tracked connection (the failsafe port) has a conntrack entry"
    );
}
