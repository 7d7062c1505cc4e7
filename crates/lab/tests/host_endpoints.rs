//! Host endpoints with real packets: a lab host's fabric interface (`eth0`, 10.99.0.11 on
//! host1) protected by policy, connections to and from the host, the failsafe ports,
//! `DropActionOverride`, untracked policy, and host endpoints given only by their addresses.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{Backend, Background, OPEN, TestLab, firewall, tcp};

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

/// Counts the packets that go through one of host1's drop-logging rules (`calico-drop: `).
///
/// - iptables: the packet counters of the LOG rules (IPv4 filter table).
/// - nftables: rules have no counters, and a LOG in a network namespace other than the
///   machine's own logs nothing by default (`net.netfilter.nf_log_all_netns=0`). A table of the
///   test's own (`inet drop-trace`, hook priority -400, before everything of Felix's) marks
///   TCP to port 8080 for tracing, and `nft monitor trace` in host1 reports every rule such a
///   packet meets: each meeting with a rule of `inet calico` that logs `calico-drop: ` counts.
///   The monitor names a rule from the ruleset it read when it started, so start one after
///   Felix last rewrote its chains.
enum DropLog<'a> {
    Counters(&'a TestLab),
    Trace {
        lab: &'a TestLab,
        output: tempfile::NamedTempFile,
        _monitor: Background,
    },
}

const TRACE_TABLE: &str = "table inet drop-trace {}
flush table inet drop-trace
table inet drop-trace {
    chain in { type filter hook prerouting priority -400; tcp dport 8080 meta nftrace set 1; }
    chain out { type filter hook output priority -400; tcp dport 8080 meta nftrace set 1; }
}
";

impl DropLog<'_> {
    fn start(lab: &TestLab) -> DropLog<'_> {
        if lab.backend == Backend::Iptables {
            return DropLog::Counters(lab);
        }
        let load = calico_lab::sh::output_with_stdin(
            calico_lab::sh::command_in(&lab.netns("host1"), "nft").args(["-f", "-"]),
            TRACE_TABLE,
        )
        .expect("nft runs");
        assert!(load.status.success(), "nft -f: {load:?}");
        let output = tempfile::NamedTempFile::new().expect("a temporary file");
        let monitor = calico_lab::sh::command_in(&lab.netns("host1"), "nft")
            .args(["monitor", "trace"])
            .stdout(output.reopen().expect("the trace file"))
            .spawn()
            .expect("nft monitor trace starts");
        let log = DropLog::Trace {
            lab,
            output,
            _monitor: Background(monitor),
        };
        // The monitor listens once it reports a packet: host1's own connection to 8080.
        eventually(
            "nft monitor trace to listen",
            Duration::from_secs(10),
            || {
                reach(lab, "host1", &[tcp("127.0.0.1", 8080)]);
                match log.trace().contains("trace id") {
                    true => Ok(()),
                    false => Err("no trace yet".to_owned()),
                }
            },
        );
        log
    }

    fn trace(&self) -> String {
        match self {
            DropLog::Counters(_) => String::new(),
            DropLog::Trace { output, .. } => {
                std::fs::read_to_string(output.path()).expect("the trace file")
            }
        }
    }

    fn count(&self) -> u64 {
        match self {
            DropLog::Counters(lab) => logged_by_counters(lab),
            DropLog::Trace { .. } => self
                .trace()
                .lines()
                .filter(|l| {
                    l.contains(" inet calico ") && l.contains("log prefix \"calico-drop: \"")
                })
                .count() as u64,
        }
    }

    fn lab(&self) -> &TestLab {
        match self {
            DropLog::Counters(lab) | DropLog::Trace { lab, .. } => lab,
        }
    }

    /// The count goes up (the trace may print a moment after the packet).
    fn went_up_from(&self, before: u64, what: &str) {
        eventually(what, Duration::from_secs(10), || match self.count() {
            n if n > before => Ok(()),
            n => Err(format!("still {n}\n{}", self.lab().felix_logs())),
        });
    }
}

/// The packet counters of host1's LOG rules with `calico-drop` (IPv4 filter table).
fn logged_by_counters(lab: &TestLab) -> u64 {
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

/// The interfaces whose inbound traffic host1 dispatches to a host endpoint's chain: `-i X`
/// in `cali-hep-in`, or the elements of the map `to-hep`.
fn inbound_host_endpoints(lab: &TestLab) -> Vec<String> {
    match lab.backend {
        Backend::Iptables => {
            let out = lab.in_host("host1", "iptables", &["-S", "cali-hep-in"]);
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.split_once(" -i ")?.1.split_whitespace().next())
                .map(str::to_owned)
                .collect()
        }
        Backend::Nftables => {
            let table = lab.firewall("host1");
            let map = firewall::nft_block(&table, "map", "to-hep")
                .unwrap_or_else(|| panic!("no map to-hep:\n{table}"));
            map.split('"')
                .skip(1)
                .step_by(2)
                .filter(|word| !word.starts_with("interface"))
                .map(str::to_owned)
                .collect()
        }
    }
}

/// Whether host1 has any chain of a host endpoint.
fn has_host_endpoint_chains(lab: &TestLab) -> bool {
    let text = lab.firewall("host1");
    let names: &[&str] = match lab.backend {
        Backend::Iptables => &["cali-hi-", "cali-he-"],
        Backend::Nftables => &["chain to-hep-", "chain from-hep-"],
    };
    names.iter().any(|n| text.contains(n))
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
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "DropActionOverride=LOG-and-DROP",
    ]);
    eventually("the LOG rule", Duration::from_secs(30), || {
        match lab.firewall("host1").contains("calico-drop") {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
    let logged = DropLog::start(&lab);
    let before = logged.count();
    assert!(
        !reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "LOG-and-DROP drops"
    );
    logged.went_up_from(before, "the LOG rule to count the packet");

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
    let logged = DropLog::start(&lab);
    let before = logged.count();
    assert!(
        reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "LOG-and-ACCEPT lets the packet through"
    );
    logged.went_up_from(before, "the LOG rule to count the accepted packet");

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
            let interfaces = inbound_host_endpoints(&lab);
            let hepa = interfaces.iter().any(|i| i == "hepa");
            match hepa && !interfaces.iter().any(|i| i == "eth0") {
                true => Ok(()),
                false => Err(format!("host endpoints on {interfaces:?}")),
            }
        },
    );
    assert!(
        reach(&lab, "host2", &[tcp(HOST1, 8080)])[0],
        "eth0 is no longer a host endpoint"
    );
    await_status(&lab, "up");
    assert!(has_host_endpoint_chains(&lab), "hepa's chains are there");

    // Gone from every interface: down, and no host endpoint chains are left.
    lab.in_host("host1", "ip", &["link", "del", "hepa"]);
    await_status(&lab, "down");
    assert!(
        !has_host_endpoint_chains(&lab),
        "no host endpoint chain without an interface:\n{}",
        lab.firewall("host1")
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
