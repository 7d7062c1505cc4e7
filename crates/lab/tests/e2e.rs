//! End to end, with real packets: two hosts running calico-felix, workloads in namespaces,
//! policy written to etcd with etcdctl, and probes that say whether a packet arrived.

mod common;

use common::{OPEN, TestLab};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";
const W3: &str = "10.65.2.2";

/// The seed's tag example: `database` admits TCP 5432 from endpoints with the `db-user` tag,
/// and ping (ICMP type 8) from anyone. Without any profile an endpoint drops everything.
#[test]
fn profiles_with_tags_and_default_deny() {
    let lab = TestLab::up(2, &[]);
    lab.workload("host1", "frontend", W1, &["db-user"], &[]);
    lab.workload("host2", "db", W2, &["database"], &[]);
    lab.workload("host2", "bare", W3, &[], &[]);
    without_profiles(&lab, "bare");
    lab.wait();
    assert!(
        !lab.tcp("frontend", W2, 5432),
        "profiles do not exist yet: dropped"
    );

    lab.put("/calico/v1/policy/profile/db-user/tags", r#"["db-user"]"#);
    lab.put(
        "/calico/v1/policy/profile/db-user/rules",
        r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.put("/calico/v1/policy/profile/database/tags", r#"["database"]"#);
    lab.put(
        "/calico/v1/policy/profile/database/rules",
        r#"{"inbound_rules": [
              {"protocol": "tcp", "src_tag": "db-user", "dst_ports": [5432], "action": "allow"},
              {"protocol": "icmp", "icmp_type": 8, "action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();
    assert!(
        lab.tcp("frontend", W2, 5432),
        "db-user reaches the database on 5432"
    );
    assert!(!lab.tcp("frontend", W2, 80), "but not on 80");
    assert!(
        lab.ping("frontend", W2),
        "ping (echo request) is allowed from anyone"
    );
    assert!(
        !lab.tcp("db", W1, 80),
        "db-user's inbound denies everything"
    );
    assert!(
        !lab.tcp("bare", W2, 5432),
        "bare is not a db-user (and has no profile)"
    );
    assert!(
        !lab.tcp("db", W3, 80),
        "an endpoint without profiles drops what comes in"
    );

    // A profile that vanishes: its endpoints drop again.
    lab.del("/calico/v1/policy/profile/database/rules");
    lab.wait();
    assert!(!lab.tcp("frontend", W2, 5432), "missing profile: dropped");
}

/// Takes every profile off a workload's endpoint, as an orchestrator can (`workload add`
/// without `--profile` keeps the network's profile the CNI plugin gave it).
fn without_profiles(lab: &TestLab, workload: &str) {
    let key = lab.state().workload(workload).unwrap().key.clone();
    let out = lab.etcdctl(&["get", &key, "--print-value-only"]);
    let mut endpoint: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        endpoint["profile_ids"],
        serde_json::json!(["lab"]),
        "{endpoint}"
    );
    endpoint["profile_ids"] = serde_json::json!([]);
    lab.put(&key, &endpoint.to_string());
}

/// Tiers in order, `next-tier`, the drop at the end of a tier whose policies applied,
/// deny before allow, selectors, port ranges and UDP.
#[test]
fn tiered_policies_with_selectors() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "client", W1, &["open"], &["role=client"]);
    lab.workload(
        "host2",
        "web",
        W2,
        &["open"],
        &["role=webserver", "env=prod"],
    );
    lab.workload("host2", "other", W3, &["open"], &["role=db"]);
    lab.wait();
    assert!(
        lab.tcp("client", W2, 8080) && lab.tcp("client", W3, 5432),
        "profiles allow all"
    );

    // Tier 1: passes web's inbound to the next tier, except TCP 6379 which it denies first.
    lab.put("/calico/v1/policy/tier/first/metadata", r#"{"order": 10}"#);
    lab.put(
        "/calico/v1/policy/tier/first/policy/gate",
        r#"{"selector": "role == \"webserver\"", "order": 1,
            "inbound_rules": [{"protocol": "tcp", "dst_ports": [6379], "action": "deny"},
                              {"protocol": "tcp", "dst_ports": [6379], "action": "allow"},
                              {"action": "next-tier"}],
            "outbound_rules": [{"action": "next-tier"}]}"#,
    );
    // Tier 2: allows 80 and 8000:8100 over TCP from role=client, UDP 5432; the rest drops.
    lab.put("/calico/v1/policy/tier/second/metadata", r#"{"order": 20}"#);
    lab.put(
        "/calico/v1/policy/tier/second/policy/web",
        r#"{"selector": "role == \"webserver\" && env in {\"prod\", \"staging\"}", "order": 1,
            "inbound_rules": [
              {"protocol": "tcp", "src_selector": "role == \"client\"", "dst_ports": [80, "8000:8100"], "action": "allow"},
              {"protocol": "udp", "dst_ports": [5432], "action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();
    assert!(lab.tcp("client", W2, 80), "tier 2 allows 80 from clients");
    assert!(lab.tcp("client", W2, 8080), "and the 8000:8100 range");
    assert!(!lab.tcp("client", W2, 443), "the end of tier 2 drops 443");
    assert!(
        !lab.tcp("client", W2, 6379),
        "deny comes before allow in tier 1"
    );
    assert!(lab.udp("client", W2, 5432), "UDP 5432 is allowed");
    assert!(!lab.udp("client", W2, 443), "UDP 443 is not");
    assert!(!lab.tcp("other", W2, 80), "other is not a client");
    assert!(
        lab.tcp("client", W3, 5432),
        "policies do not select other: its profile allows"
    );

    // The selector stops matching when a label changes: back to the profile.
    lab.ok(&["workload", "del", "web"]);
    lab.workload(
        "host2",
        "web",
        W2,
        &["open"],
        &["role=webserver", "env=dev"],
    );
    lab.wait();
    assert!(!lab.tcp("client", W2, 6379), "tier 1 still denies 6379");
    assert!(
        lab.tcp("client", W2, 443),
        "tier 2 no longer applies: the profile allows 443"
    );
}

/// `!src_selector` (not from endpoints matching) vs a negated selector (from endpoints that
/// have the label with another value, or lack it), and ICMP types.
#[test]
fn negated_selectors_and_icmp_types() {
    let lab = TestLab::up(1, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "a", W1, &["open"], &["team=a"]);
    lab.workload("host1", "b", W2, &["open"], &["team=b"]);
    lab.workload("host1", "nolabel", W3, &["open"], &[]);
    lab.workload("host1", "target", "10.65.3.1", &["open"], &["app=target"]);
    lab.put("/calico/v1/policy/tier/t/metadata", r#"{"order": 1}"#);
    lab.put(
        "/calico/v1/policy/tier/t/policy/p",
        r#"{"selector": "app == \"target\"", "order": 1,
            "inbound_rules": [
              {"protocol": "tcp", "dst_ports": [80], "!src_selector": "team == \"a\"", "action": "allow"},
              {"protocol": "tcp", "dst_ports": [443], "src_selector": "team != \"a\"", "action": "allow"},
              {"protocol": "icmp", "!icmp_type": 8, "action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();
    let target = "10.65.3.1";
    assert!(!lab.tcp("a", target, 80), "!src_selector excludes team a");
    assert!(lab.tcp("b", target, 80) && lab.tcp("nolabel", target, 80));
    assert!(!lab.tcp("a", target, 443), "team != a excludes team a");
    assert!(lab.tcp("b", target, 443), "team b matches team != a");
    assert!(
        lab.tcp("nolabel", target, 443),
        "no team label also matches team != a"
    );
    assert!(
        !lab.ping("b", target),
        "echo requests are excluded by !icmp_type 8"
    );
}

/// Return traffic of an allowed connection flows even though the other direction is denied;
/// workload to host follows DefaultEndpointToHostAction; spoofed sources are dropped;
/// inactive and deleted endpoints pass nothing.
#[test]
fn conntrack_host_traffic_spoofing_inactive_and_deleted_endpoints() {
    let lab = TestLab::up(2, &[]);
    let one_way =
        r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#;
    lab.put("/calico/v1/policy/profile/out-only/rules", one_way);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "w1", W1, &["out-only"], &[]);
    lab.workload("host2", "w2", W2, &["open"], &[]);
    lab.wait();
    assert!(
        lab.tcp("w1", W2, 80),
        "w1's connection out works, replies included"
    );
    assert!(!lab.tcp("w2", W1, 80), "new connections into w1 are denied");

    // Workload to its own host: dropped by default (DefaultEndpointToHostAction=DROP).
    let host1 = lab.state().host("host1").unwrap().ip.to_string();
    assert!(
        !lab.tcp("w1", &host1, 22),
        "workload to host is dropped by default"
    );
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "DefaultEndpointToHostAction=ACCEPT",
    ]);
    lab.wait();
    assert!(
        lab.tcp("w1", &host1, 22),
        "ACCEPT lets it reach the host (refused: nothing listens)"
    );

    // A spoofed source address is dropped: w1 adds 10.65.1.99 and pings from it.
    let add = lab.cli(&[
        "exec",
        "w1",
        "--",
        "ip",
        "addr",
        "add",
        "10.65.1.99/32",
        "dev",
        "eth0",
    ]);
    assert!(add.status.success());
    let spoofed = lab.cli(&[
        "exec",
        "w1",
        "--",
        "ping",
        "-c1",
        "-W1",
        "-I",
        "10.65.1.99",
        W2,
    ]);
    assert!(
        !spoofed.status.success(),
        "a packet from an address w1 does not own is dropped"
    );
    let honest = lab.cli(&["exec", "w1", "--", "ping", "-c1", "-W1", "-I", W1, W2]);
    assert!(
        honest.status.success(),
        "{}",
        String::from_utf8_lossy(&honest.stdout)
    );

    // Felix reports each endpoint's status, and its own with a lease (TTL).
    let key = lab.state().workload("w2").unwrap().key.clone();
    let status_key = key.replace("/calico/v1/", "/calico/felix/v1/");
    let status = |lab: &TestLab| {
        String::from_utf8(
            lab.etcdctl(&["get", &status_key, "--print-value-only"])
                .stdout,
        )
        .unwrap()
    };
    assert_eq!(status(&lab).trim(), r#"{"status":"up"}"#);
    let felix = lab.etcdctl(&["get", "/calico/felix/v1/host/host2/status", "-w", "json"]);
    let felix: serde_json::Value = serde_json::from_slice(&felix.stdout).unwrap();
    assert!(
        felix["kvs"][0]["lease"].as_i64().unwrap_or(0) != 0,
        "status without a lease: {felix}"
    );
    // `calicoctl status` on host2 says which firewall backend programs it.
    let report = calicoctl_status(&lab, "host2");
    let line = report
        .lines()
        .find(|l| l.starts_with("Felix last status report: "))
        .unwrap_or_else(|| panic!("no status report line:\n{report}"));
    assert!(
        line.ends_with(&format!(", dataplane {})", lab.backend.name())),
        "{line}"
    );

    // Inactive: everything to and from w2 drops; and its route goes.
    let endpoint =
        String::from_utf8(lab.etcdctl(&["get", &key, "--print-value-only"]).stdout).unwrap();
    let inactive = endpoint.replace(r#""state":"active""#, r#""state":"inactive""#);
    assert_ne!(inactive, endpoint, "{endpoint}");
    lab.put(&key, inactive.trim());
    lab.wait();
    assert!(!lab.tcp("w1", W2, 80), "inactive endpoint: dropped");
    assert_eq!(status(&lab).trim(), r#"{"status":"down"}"#);
    lab.put(&key, endpoint.trim());
    lab.wait();
    assert!(lab.tcp("w1", W2, 80), "active again");

    // Felix's health endpoint says it is live and ready.
    let health = |path: &str| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(calico_lab::check::fetch_in_netns(
            &format!("{}.host2", lab.name),
            9099,
            path,
        ))
        .unwrap()
    };
    assert_eq!(health("/liveness").trim(), "live");
    assert_eq!(health("/readiness").trim(), "ready");

    // Deleted: its route and static ARP entry go, its connections are forgotten, traffic stops.
    let tracked = |lab: &TestLab| {
        let out = lab.in_host("host2", "conntrack", &["-L", "-d", W2]);
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    assert!(
        tracked(&lab) > 0,
        "the probes above left conntrack entries to w2"
    );
    lab.del(&key);
    lab.wait();
    assert_eq!(
        tracked(&lab),
        0,
        "conntrack entries of a deleted endpoint are flushed"
    );
    assert!(!lab.tcp("w1", W2, 80), "deleted endpoint: dropped");
    let routes = lab.in_host("host2", "ip", &["route", "show", "proto", "80"]);
    assert!(
        !String::from_utf8_lossy(&routes.stdout).contains(W2),
        "route removed"
    );
}

/// `calicoctl status` inside a host, as an operator runs it there (Felix's health port on
/// 127.0.0.1, etcd on the fabric).
fn calicoctl_status(lab: &TestLab, host: &str) -> String {
    let ctl = std::path::PathBuf::from(common::BIN).with_file_name("calicoctl");
    let out = calico_lab::sh::command_in(&lab.netns(host), &ctl)
        .env("ETCD_ENDPOINTS", lab.state().etcd_endpoints())
        .args(["status", "--hostname", host])
        .output()
        .expect("calicoctl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "calicoctl status on {host}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// An open flow keeps going when policy changes (conntrack), new connections follow the new
/// policy.
#[test]
fn policy_change_while_a_flow_is_open() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["open"], &[]);
    lab.wait();
    let to = format!("{W2}:80");
    // The flow's defaults: an echo every 50 ms, 3 s patience.
    let flow = lab.start_flow("client", &to, 4, 50, 3000);
    std::thread::sleep(std::time::Duration::from_millis(500)); // let the flow start
    lab.put(
        "/calico/v1/policy/profile/open/rules",
        r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();
    assert!(!lab.tcp("client", W2, 80), "new connections are denied now");
    let out = flow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the open flow was cut: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// IPv6 workloads: routes via the host's link-local address, policy by port.
#[test]
fn ipv6_workloads() {
    let lab = TestLab::up(2, &[]);
    lab.put(
        "/calico/v1/policy/profile/web6/rules",
        r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.workload("host1", "a6", "fd00:65::1", &["web6"], &[]);
    lab.workload("host2", "b6", "fd00:65::2", &["web6"], &[]);
    lab.wait();
    assert!(
        lab.tcp("a6", "fd00:65::2", 80),
        "TCP 80 over IPv6 across hosts"
    );
    assert!(!lab.tcp("a6", "fd00:65::2", 443), "443 dropped");
}

/// What a script does first: `up`, one workload on each host without `--profile`, and at once
/// a ping and a TCP connection each way, without `calico-lab wait`. `up` returns only when BGP
/// is established and every Felix is in sync, `workload add` only when the workload is
/// programmed and routed everywhere; and the workloads keep the network's profile `lab` that
/// the CNI plugin gave them (inbound from the network, outbound everything).
#[test]
fn first_probes_after_up_and_workload_add_get_through() {
    let lab = TestLab::up(2, &[]);
    lab.workload("host1", "first", W1, &[], &[]);
    lab.workload("host2", "second", W2, &[], &[]);
    for (from, to) in [("first", W2), ("second", W1)] {
        let targets = [format!("icmp:{to}"), common::tcp(to, 80)];
        let words = lab.probe_single(from, &targets, 1500);
        assert_eq!(
            words,
            ["ok", "ok"],
            "the first ping and TCP connection from {from} to {to}\n{}",
            lab.felix_logs()
        );
    }
}
