//! Felix under stress, with real packets: kill -9 and restart mid-flow, drift in its chains and
//! routes, losing etcd for a while, and invalid objects.

mod common;

use std::process::Command;
use std::time::Duration;

use calico_testkit::eventually;
use common::{Backend, OPEN, TestLab};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";

/// How long a repair or restart may take.
const WAIT: Duration = Duration::from_secs(30);

/// A check's outcome for [`eventually`]: a failure carries the Felix logs, shown on timeout.
fn or_felix_logs(lab: &TestLab, done: bool) -> Result<(), String> {
    if done {
        Ok(())
    } else {
        Err(format!("\n{}", lab.felix_logs()))
    }
}

/// FAQ 6.4: restarting Felix (even kill -9) never cuts traffic, and the restarted Felix
/// changes nothing in a dataplane that is already right.
#[test]
fn kill_9_and_restart_keeps_flows_and_rules() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.put(
        "/calico/v1/policy/profile/web/rules",
        r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["web"], &[]);
    lab.wait();
    let before = lab.firewall_with_handles("host2");

    let to = format!("{W2}:80");
    let flow = lab.start_flow("client", &to, 5, 20, 1000);
    std::thread::sleep(Duration::from_millis(500));
    lab.ok(&["restart-felix", "host2"]);
    lab.ok(&["restart-felix", "host1"]);
    lab.wait();
    let out = flow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the flow was cut by the restart: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // On nftables with the rules' handles: a rule written again would have a new one.
    assert_eq!(
        lab.firewall_with_handles("host2"),
        before,
        "the restarted Felix changed the rules"
    );
    assert!(
        lab.tcp("client", W2, 80) && !lab.tcp("client", W2, 443),
        "policy still holds"
    );
}

/// A configuration change in etcd that Felix applies only at start (here its health port):
/// Felix exits cleanly, its supervisor starts it again with the new value, and an established
/// flow through both hosts keeps going (the stateless restart).
#[test]
fn a_restart_for_a_configuration_change_keeps_flows() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["open"], &[]);
    lab.wait();
    let to = format!("{W2}:80");
    let flow = lab.start_flow("client", &to, 8, 20, 1000);
    let established = || {
        let out = lab.in_host(
            "host2",
            "conntrack",
            &["-L", "-p", "tcp", "--dport", "80", "--state", "ESTABLISHED"],
        );
        String::from_utf8_lossy(&out.stdout).contains(W2)
    };
    eventually("the flow to be established", WAIT, || {
        or_felix_logs(&lab, established())
    });

    lab.put("/calico/v1/host/host2/config/HealthPort", "9199");
    let log = lab.state().log_path("felix-host2");
    eventually(
        "Felix on host2 restarting for the new health port",
        WAIT,
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let restarted =
                text.contains("restarting Felix to apply it") && text.contains("starting it again");
            or_felix_logs(&lab, restarted)
        },
    );
    eventually("the restarted Felix serving health on 9199", WAIT, || {
        let out = lab.in_host("host2", "ss", &["-Hltn", "sport = :9199"]);
        or_felix_logs(&lab, !out.stdout.is_empty())
    });
    lab.wait();
    let out = flow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the flow was cut by the restart: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(lab.tcp("client", W2, 80), "policy still holds");
}

/// Someone tampers with the firewall and deletes a route: Felix puts them back (the firewall
/// at once, told by nf_tables; the route at the periodic refresh) and says so. Each tampering lets packets skip the workloads' policy:
///
/// | backend | tampering |
/// | --- | --- |
/// | iptables | the kernel `FORWARD` chain's jump to `cali-FORWARD` deleted; `cali-wl-in` (dispatch to the workloads' inbound chains) flushed |
/// | nftables | `filter-forward`'s jump to `from-wl-dispatch` deleted; `to-wl-dispatch` flushed; an `accept` put first in the server's own chain `to-wl-<iface>` |
#[test]
fn drift_is_repaired() {
    let lab = TestLab::up(2, &["IptablesRefreshInterval=1", "RouteRefreshInterval=1"]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.put("/calico/v1/policy/profile/web/rules", WEB);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["web"], &[]);
    lab.wait();
    let before = lab.firewall("host2");
    let iface = lab.state().workload("server").unwrap().interface.clone();

    match lab.backend {
        Backend::Iptables => tamper_with_iptables(&lab),
        Backend::Nftables => tamper_with_nftables(&lab, &iface),
    }
    // No look at the firewall here: Felix hears of the tampering from nf_tables at once and may
    // have repaired it already; its log below says it found drift.
    let del_route = lab.in_host("host2", "ip", &["route", "del", W2, "dev", &iface]);
    assert!(del_route.status.success());

    eventually("the route to come back", WAIT, || {
        let routes = lab.in_host("host2", "ip", &["route", "show", "proto", "80"]);
        or_felix_logs(&lab, String::from_utf8_lossy(&routes.stdout).contains(W2))
    });
    eventually("the rules to come back", WAIT, || {
        or_felix_logs(&lab, lab.firewall("host2") == before)
    });
    assert!(lab.tcp("client", W2, 80), "the server's policy allows 80");
    assert!(!lab.tcp("client", W2, 443), "and denies 443 again");
    let log = std::fs::read_to_string(lab.state().log_path("felix-host2")).unwrap();
    assert!(log.contains("repaired dataplane drift"), "{log}");
}

/// Inbound TCP 80 only.
const WEB: &str = r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

fn tamper_with_iptables(lab: &TestLab) {
    for args in [
        &["-D", "FORWARD", "-j", "cali-FORWARD"][..],
        &["-F", "cali-wl-in"],
    ] {
        let out = lab.in_host("host2", "iptables", args);
        assert!(out.status.success(), "iptables {args:?}: {out:?}");
    }
}

fn tamper_with_nftables(lab: &TestLab, iface: &str) {
    let forward = lab.nft(
        "host2",
        &["-a", "list", "chain", "inet", "calico", "filter-forward"],
    );
    let handle = forward
        .lines()
        .find(|l| l.contains("jump from-wl-dispatch"))
        .and_then(|l| l.rsplit_once("# handle "))
        .map(|(_, handle)| handle.trim().to_owned())
        .unwrap_or_else(|| panic!("no jump to from-wl-dispatch in filter-forward:\n{forward}"));
    let chain = format!("to-wl-{iface}");
    for args in [
        &[
            "delete",
            "rule",
            "inet",
            "calico",
            "filter-forward",
            "handle",
            &handle,
        ][..],
        &["flush", "chain", "inet", "calico", "to-wl-dispatch"],
        &["insert", "rule", "inet", "calico", &chain, "accept"],
    ] {
        lab.nft("host2", args);
    }
}

/// Felix loses etcd: the dataplane stays as it was; what changed meanwhile (a delete among
/// it) is applied when etcd is back.
#[test]
fn etcd_outage_keeps_the_dataplane_and_resyncs() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.put("/calico/v1/policy/profile/extra/rules", OPEN);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["extra"], &[]);
    lab.wait();
    assert!(lab.tcp("client", W2, 80));

    // Cut host2 off from etcd (its Felix only: the workloads' traffic is forwarded, not output).
    let cuts = [
        ["OUTPUT", "-p", "tcp", "--dport", "2379", "-j", "DROP"],
        ["INPUT", "-p", "tcp", "--sport", "2379", "-j", "DROP"],
    ];
    for cut in &cuts {
        let insert = lab.in_host("host2", "iptables", &[&["-I"][..], cut].concat());
        assert!(insert.status.success());
    }
    // While it cannot see etcd, the profile goes away: the other host applies that...
    lab.del("/calico/v1/policy/profile/extra/rules");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        lab.tcp("client", W2, 80),
        "host2 keeps enforcing what it had"
    );

    for cut in &cuts {
        let heal = lab.in_host("host2", "iptables", &[&["-D"][..], cut].concat());
        assert!(heal.status.success());
    }
    eventually(
        "host2 to apply the delete made during the outage",
        WAIT,
        || or_felix_logs(&lab, !lab.tcp("client", W2, 80)),
    );
    lab.wait();
}

/// An invalid object is a warning and counts as missing; fixing it is picked up.
#[test]
fn invalid_objects_are_treated_as_missing() {
    let lab = TestLab::up(1, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "a", W1, &["open"], &[]);
    lab.workload("host1", "b", W2, &["p"], &[]);
    lab.put("/calico/v1/policy/profile/p/rules", OPEN);
    lab.wait();
    assert!(lab.tcp("a", W2, 80));

    lab.put(
        "/calico/v1/policy/profile/p/rules",
        r#"{"inbound_rules": [{"dst_ports": [80], "action": "allow"}], "outbound_rules": []}"#,
    );
    lab.wait();
    assert!(
        !lab.tcp("a", W2, 80),
        "invalid rules count as a missing profile: dropped"
    );
    let log = std::fs::read_to_string(lab.state().log_path("felix-host1")).unwrap();
    assert!(
        log.contains(
            "Validation failed for /calico/v1/policy/profile/p/rules, treating as missing"
        ),
        "{log}"
    );

    lab.put("/calico/v1/policy/profile/p/rules", OPEN);
    lab.wait();
    assert!(lab.tcp("a", W2, 80), "the fixed profile is picked up");
}

/// `down` finds everything of a lab from names alone: with the state directory gone (a crash,
/// a wiped /run), the namespaces, their processes and the relay in the caller's namespace go.
#[test]
fn down_cleans_up_without_the_state_directory() {
    let lab = TestLab::up(1, &[]);
    let relay = lab.state().pids.clone();
    assert!(!relay.is_empty(), "the lab records its relay");
    std::fs::remove_dir_all(&lab.state().dir).unwrap();
    lab.ok(&["down"]);
    for pid in relay {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        });
        assert!(!alive, "the relay {pid} is still running");
    }
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(
        !left
            .lines()
            .any(|l| l.starts_with(&format!("{}.", lab.name))),
        "namespaces left: {left}"
    );
}
