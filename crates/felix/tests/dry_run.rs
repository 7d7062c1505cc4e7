//! `calico-felix --dry-run` for real: etcd and Felix in a network namespace made for the test.
//! It prints the chains and the routing plan for what etcd says, and leaves the namespace as it
//! was.

use std::process::{Command, Stdio};

use calico_testkit::{EtcdServer, NetNs};

#[test]
fn dry_run_prints_the_chains_and_routing_plan_and_changes_nothing() {
    let ns = NetNs::new("calico-felix-dry");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0",
        r#"{"state": "active", "name": "calidb", "mac": "ee:ee:ee:00:00:02", "profile_ids": ["db"], "ipv4_nets": ["10.65.0.2/32"]}"#,
    );
    etcd.put(
        "/calico/v1/policy/profile/db/rules",
        r#"{"inbound_rules": [{"src_tag": "web", "action": "allow"}]}"#,
    );
    etcd.put("/calico/v1/Ready", "true");
    ns.run_ok(
        "ip",
        &[
            "link", "add", "calidb", "type", "veth", "peer", "name", "db0",
        ],
        "",
    );
    ns.run_ok("ip", &["link", "set", "calidb", "up"], "");
    ns.run_ok("ip", &["link", "set", "db0", "up"], "");
    let proxy_arp = || ns.run_ok("sysctl", &["-n", "net.ipv4.conf.calidb.proxy_arp"], "");
    let proxy_arp_before = proxy_arp();

    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            env!("CARGO_BIN_EXE_calico-felix"),
            "--dry-run",
        ])
        .env("FELIX_ETCDENDPOINTS", etcd.endpoint())
        .env("FELIX_FELIXHOSTNAME", "h1")
        .env("FELIX_LOGFILEPATH", "none")
        .stdin(Stdio::null())
        .output()
        .expect("calico-felix runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "--dry-run failed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
    for expected in [
        ":cali-wi-calidb",
        "profile db inbound rule 1",
        "route add 10.65.0.2/32 dev calidb",
        "neighbour add 10.65.0.2 lladdr ee:ee:ee:00:00:02 dev calidb",
        "sysctl net/ipv4/conf/calidb/proxy_arp=1",
        "sysctl net/ipv4/ip_forward=1",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected:?} not in the report\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        );
    }

    // Nothing was changed.
    let iptables = ns.run_ok("iptables-save", &[], "");
    assert!(!iptables.contains("cali-"), "{iptables}");
    let ip6tables = ns.run_ok("ip6tables-save", &[], "");
    assert!(!ip6tables.contains("cali-"), "{ip6tables}");
    let ipsets = ns.run_ok("ipset", &["list", "-n"], "");
    assert!(!ipsets.contains("cali"), "{ipsets}");
    let routes = ns.run_ok("ip", &["route", "show", "proto", "80"], "");
    assert_eq!(routes.trim(), "", "a Calico route was added");
    let neighbours = ns.run_ok(
        "ip",
        &["neigh", "show", "dev", "calidb", "nud", "permanent"],
        "",
    );
    assert_eq!(neighbours.trim(), "", "a static neighbour was added");
    assert_eq!(
        proxy_arp(),
        proxy_arp_before,
        "an interface setting was changed"
    );
}

#[test]
fn the_help_says_what_either_backend_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_calico-felix"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(help.contains("iptables-restore"), "{help}");
    assert!(help.contains("nft -f"), "{help}");
}
