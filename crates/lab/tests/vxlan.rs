//! VXLAN with real packets, across hosts on two subnets (`up --subnets 2`) joined by the fabric
//! as a router that knows only the hosts' networks: unencapsulated workload traffic between the
//! subnets is dropped there; with a pool's `vxlan_mode` it is encapsulated (UDP 4789 between
//! the hosts) and gets through, policy still applying at both ends; `cross-subnet`
//! encapsulates only between subnets.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{OPEN, TestLab};

/// host1 (subnet 1).
const W1: &str = "10.65.1.1";
/// host2 (subnet 2).
const W2: &str = "10.65.2.1";
/// host3 (subnet 1, with 3 hosts).
const W3: &str = "10.65.3.1";
const POOL_KEY: &str = "/calico/v1/ipam/v4/pool/10.65.0.0-16";
const WAIT: Duration = Duration::from_secs(60);

/// `ip route show proto 81` on a host: Felix's routes through the tunnel.
fn tunnel_routes(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "ip", &["route", "show", "proto", "81"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a host has a proto 81 route to exactly `address`.
fn tunnel_route_to(lab: &TestLab, host: &str, address: &str) -> bool {
    tunnel_routes(lab, host)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(address))
}

/// The TX packet counter of a host's `vxlan.calico` (`ip -s -j link show`).
fn tunnel_tx_packets(lab: &TestLab, host: &str) -> u64 {
    let out = lab.in_host(host, "ip", &["-s", "-j", "link", "show", "vxlan.calico"]);
    assert!(
        out.status.success(),
        "no vxlan.calico on {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip -j prints JSON");
    links[0]["stats64"]["tx"]["packets"]
        .as_u64()
        .expect("a TX packet counter")
}

fn set_pool(lab: &TestLab, vxlan_mode: Option<&str>) {
    let mut pool = serde_json::json!({ "cidr": "10.65.0.0/16" });
    if let Some(mode) = vxlan_mode {
        pool["vxlan_mode"] = serde_json::json!(mode);
    }
    lab.put(POOL_KEY, &pool.to_string());
    lab.wait();
}

fn tunnel_record(lab: &TestLab, host: &str) -> String {
    let key = format!("/calico/v1/host/{host}/vxlan_tunnel");
    let out = lab.etcdctl(&["get", &key, "--print-value-only"]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn wait_for_tunnel_records(lab: &TestLab, hosts: &[&str]) {
    for host in hosts {
        eventually(
            &format!("{host}'s VXLAN tunnel record"),
            WAIT,
            || match tunnel_record(lab, host).is_empty() {
                false => Ok(()),
                true => Err("no record yet".to_owned()),
            },
        );
    }
}

fn wait_for_tunnel_route(lab: &TestLab, host: &str, address: &str) {
    eventually(
        &format!("{host}'s proto 81 route to {address}"),
        WAIT,
        || match tunnel_route_to(lab, host, address) {
            true => Ok(()),
            false => Err(format!(
                "ip route show proto 81:\n{}\n{}",
                tunnel_routes(lab, host),
                lab.felix_logs()
            )),
        },
    );
}

#[test]
fn vxlan_always_across_subnets() {
    let lab = TestLab::up_with(2, &["--subnets", "2"]);
    let state = lab.state();
    assert_eq!(state.host("host1").unwrap().ip.to_string(), "10.99.0.11");
    assert_eq!(state.host("host2").unwrap().ip.to_string(), "10.99.1.12");
    lab.put("/calico/v1/policy/profile/open1/rules", OPEN);
    lab.put("/calico/v1/policy/profile/open2/rules", OPEN);
    lab.workload("host1", "w1", W1, &["open1"], &[]);
    lab.workload("host2", "w2", W2, &["open2"], &[]);
    lab.wait();

    // (a) Not encapsulated: the router between the subnets has no route to the pool.
    assert!(!lab.tcp("w1", W2, 8080), "w1 reaches w2 unencapsulated");
    assert!(!lab.ping("w1", W2), "w1 pings w2 unencapsulated");
    assert!(!lab.tcp("w2", W1, 8080), "w2 reaches w1 unencapsulated");
    assert!(
        tunnel_routes(&lab, "host1").trim().is_empty(),
        "no tunnel routes without VXLAN"
    );

    // (b) VXLAN always: encapsulated, and through.
    set_pool(&lab, Some("always"));
    wait_for_tunnel_records(&lab, &["host1", "host2"]);
    wait_for_tunnel_route(&lab, "host1", W2);
    wait_for_tunnel_route(&lab, "host2", W1);
    let before = tunnel_tx_packets(&lab, "host1");
    eventually("w1 to reach w2 through the tunnel", WAIT, || {
        match lab.tcp("w1", W2, 8080) {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
    assert!(lab.ping("w1", W2), "w1 pings w2 through the tunnel");
    assert!(lab.tcp("w2", W1, 8080), "w2 reaches w1 through the tunnel");
    assert!(lab.ping("w2", W1), "w2 pings w1 through the tunnel");
    let after = tunnel_tx_packets(&lab, "host1");
    assert!(
        after > before,
        "host1's vxlan.calico sent packets ({before} before, {after} after)"
    );

    // (c) Policy at both ends: w2 lets in only TCP 8080; w1 may not send to 6379.
    lab.put(
        "/calico/v1/policy/profile/open2/rules",
        r#"{"inbound_rules": [{"action": "allow", "protocol": "tcp", "dst_ports": [8080]}],
            "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.put(
        "/calico/v1/policy/profile/open1/rules",
        r#"{"inbound_rules": [{"action": "allow"}],
            "outbound_rules": [{"action": "deny", "protocol": "tcp", "dst_ports": [6379]},
                               {"action": "allow"}]}"#,
    );
    lab.wait();
    assert!(lab.tcp("w1", W2, 8080), "8080 is allowed into w2");
    assert!(!lab.tcp("w1", W2, 5432), "5432 is denied into w2");
    assert!(!lab.tcp("w1", W2, 6379), "6379 is denied out of w1");
    assert!(lab.tcp("w2", W1, 6379), "w1 still lets 6379 in");

    // (d) VXLAN off again: no tunnel routes, no way through.
    set_pool(&lab, None);
    eventually(
        "host1's tunnel routes to go",
        WAIT,
        || match tunnel_routes(&lab, "host1").trim() {
            "" => Ok(()),
            left => Err(format!("left: {left}")),
        },
    );
    assert!(!lab.tcp("w1", W2, 8080), "w1 reaches w2 without VXLAN");
    assert!(!lab.ping("w1", W2), "w1 pings w2 without VXLAN");
}

#[test]
fn vxlan_cross_subnet_encapsulates_only_between_subnets() {
    // host1 and host3 on subnet 1, host2 on subnet 2.
    let lab = TestLab::up_with(3, &["--subnets", "2"]);
    let state = lab.state();
    assert_eq!(state.host("host3").unwrap().ip.to_string(), "10.99.0.13");
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "w1", W1, &["open"], &[]);
    lab.workload("host2", "w2", W2, &["open"], &[]);
    lab.workload("host3", "w3", W3, &["open"], &[]);
    lab.wait();
    assert!(!lab.tcp("w1", W2, 8080), "w1 reaches w2 unencapsulated");
    assert!(lab.tcp("w1", W3, 8080), "w1 reaches w3 on its subnet");

    set_pool(&lab, Some("cross-subnet"));
    wait_for_tunnel_records(&lab, &["host1", "host2", "host3"]);
    wait_for_tunnel_route(&lab, "host1", W2);
    wait_for_tunnel_route(&lab, "host3", W2);
    wait_for_tunnel_route(&lab, "host2", W1);
    wait_for_tunnel_route(&lab, "host2", W3);
    eventually("w1 to reach w2 through the tunnel", WAIT, || {
        match lab.tcp("w1", W2, 8080) {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
    assert!(lab.tcp("w2", W3, 8080), "w2 reaches w3 through the tunnel");
    // Within subnet 1: routed as it is (BGP), not encapsulated.
    assert!(
        !tunnel_route_to(&lab, "host1", W3),
        "host1 encapsulates to host3 on its own subnet:\n{}",
        tunnel_routes(&lab, "host1")
    );
    assert!(
        !tunnel_route_to(&lab, "host3", W1),
        "host3 encapsulates to host1"
    );
    let out = lab.in_host("host1", "ip", &["route", "get", W3]);
    let route = String::from_utf8_lossy(&out.stdout);
    assert!(
        route.contains("via 10.99.0.13 dev eth0"),
        "host1 routes w3 straight to host3: {route}"
    );
    assert!(lab.tcp("w1", W3, 8080), "w1 still reaches w3");
    assert!(lab.ping("w3", W1), "w3 still pings w1");
}
