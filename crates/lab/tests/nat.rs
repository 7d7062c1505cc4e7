//! 1:1 NAT of a workload endpoint (`ipv4_nat`) with real packets: connections to the `ext_ip`
//! reach the endpoint's `int_ip` from another host, from the same host and from the host
//! itself; the endpoint's own connections keep their source, except to its own `ext_ip`
//! (hairpin, SNATed to come from it); the `ext_ip`'s route (Felix's, protocol 80) reaches the
//! other host over BGP because the `ext_ip` is inside a (disabled) pool. Removing the mapping
//! removes its rules and routes, and the `ext_ip` stops answering.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{OPEN, TestLab, tcp};

/// host1's fabric address: host2's BGP route to the ext_ip goes through it.
const HOST1: &str = "10.99.0.11";
/// The NATed endpoint, on host1.
const W1: &str = "10.65.1.1";
/// On host2.
const W2: &str = "10.66.2.1";
/// Another workload on host1.
const W3: &str = "10.65.1.3";
/// w1's external address, in a pool of its own that IPAM never hands out from.
const EXT: &str = "10.67.0.1";
const EXT_POOL: &str = "10.67.0.0/16";
const W1_KEY: &str = "/calico/v1/host/host1/workload/cni/w1/endpoint/eth0";

fn text(out: std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A host's conntrack entries for TCP to `port`.
fn connections(lab: &TestLab, host: &str, port: u16) -> String {
    text(lab.in_host(
        host,
        "conntrack",
        &["-L", "-p", "tcp", "--dport", &port.to_string()],
    ))
}

fn forget_connections(lab: &TestLab, host: &str) {
    // conntrack exits 1 when there was nothing to delete.
    let _ = lab.in_host(host, "conntrack", &["-D", "-p", "tcp"]);
}

/// w1's endpoint as the lab (CNI) wrote it.
fn endpoint(lab: &TestLab) -> serde_json::Value {
    let out = lab.etcdctl(&["get", "--print-value-only", W1_KEY]);
    assert!(out.status.success(), "etcdctl get {W1_KEY}");
    serde_json::from_str(text(out).trim()).expect("the endpoint is JSON")
}

fn routes(lab: &TestLab, host: &str, args: &[&str]) -> String {
    let mut all = vec!["route", "show"];
    all.extend(args);
    text(lab.in_host(host, "ip", &all))
}

fn route_to(routes: &str) -> Option<&str> {
    routes
        .lines()
        .find(|l| l.split_whitespace().next() == Some(EXT))
}

#[test]
fn one_to_one_nat() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    let pool = serde_json::json!({ "cidr": EXT_POOL, "disabled": true }).to_string();
    lab.put(
        &format!("/calico/v1/ipam/v4/pool/{}", EXT_POOL.replace('/', "-")),
        &pool,
    );
    lab.workload("host1", "w1", W1, &["open"], &[]);
    lab.workload("host2", "w2", W2, &["open"], &[]);
    lab.workload("host1", "w3", W3, &["open"], &[]);
    lab.wait();
    assert!(!lab.tcp("w2", EXT, 8080), "no mapping yet: {EXT} is nobody");

    let original = endpoint(&lab);
    let mut natted = original.clone();
    natted["ipv4_nat"] = serde_json::json!([{ "int_ip": W1, "ext_ip": EXT }]);
    lab.put(W1_KEY, &natted.to_string());
    lab.wait();

    // Felix routes the ext_ip through w1's interface; BIRD exports it (inside a pool) and
    // host2 learns it, through host1.
    let felix_routes = routes(&lab, "host1", &["proto", "80"]);
    assert!(
        route_to(&felix_routes).is_some_and(|r| r.contains("dev cali")),
        "host1 routes {EXT} to w1:\n{felix_routes}"
    );
    eventually("host2 learns the ext_ip", Duration::from_secs(60), || {
        let host2 = routes(&lab, "host2", &[]);
        match route_to(&host2) {
            Some(r) if r.contains(&format!("via {HOST1}")) => Ok(()),
            _ => Err(host2),
        }
    });

    // From the other host: w2 reaches w1 at its ext_ip, translated on host1.
    eventually(
        "w2 reaches the ext_ip",
        Duration::from_secs(30),
        || match lab.tcp("w2", EXT, 8080) {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        },
    );
    let seen = connections(&lab, "host1", 8080);
    assert!(
        seen.lines()
            .any(|l| l.contains(&format!("src={W2} dst={EXT} "))
                && l.contains(&format!("src={W1} dst={W2} "))),
        "host1 DNATs {EXT} to {W1}:\n{seen}"
    );
    let seen = connections(&lab, "host2", 8080);
    assert!(
        seen.contains(&format!("src={W2} dst={EXT} ")),
        "host2 sent it to the ext_ip:\n{seen}"
    );

    // From the same host, and from host1 itself (the nat OUTPUT path).
    assert!(lab.tcp("w3", EXT, 8080), "w3 reaches w1 at its ext_ip");
    let words = lab.probe_in("host1", &[tcp(EXT, 8080)]);
    assert!(common::arrived(&words[0]), "host1 reaches {EXT}: {words:?}");

    // w1's own connections keep their source: host2 sees w1's own address.
    forget_connections(&lab, "host2");
    assert!(lab.tcp("w1", W2, 6379), "w1 reaches w2");
    let seen = connections(&lab, "host2", 6379);
    assert!(
        seen.lines()
            .any(|l| l.contains(&format!("src={W1} dst={W2} "))
                && l.contains(&format!("src={W2} dst={W1} "))),
        "w1's connection keeps its source {W1}, not {EXT}:\n{seen}"
    );
    assert!(!seen.contains(EXT), "{seen}");

    // Hairpin: w1 connecting to its own ext_ip comes back to itself from the ext_ip.
    forget_connections(&lab, "host1");
    assert!(lab.tcp("w1", EXT, 5432), "w1 reaches itself at its ext_ip");
    let seen = connections(&lab, "host1", 5432);
    assert!(
        seen.lines()
            .any(|l| l.contains(&format!("src={W1} dst={EXT} "))
                && l.contains(&format!("src={W1} dst={EXT} sport=5432"))),
        "DNATed to {W1} and SNATed to come from {EXT}:\n{seen}"
    );

    // The mapping goes: its rules, its routes on both hosts, and the ext_ip's answers.
    let mapped = lab.firewall("host1");
    assert!(
        mapped.contains(EXT),
        "host1's firewall NATs {EXT}:\n{mapped}"
    );
    lab.put(W1_KEY, &original.to_string());
    lab.wait();
    let nat = lab.firewall("host1");
    assert!(!nat.contains(EXT), "no rule mentions {EXT}:\n{nat}");
    let felix_routes = routes(&lab, "host1", &["proto", "80"]);
    assert!(route_to(&felix_routes).is_none(), "{felix_routes}");
    eventually("host2 forgets the ext_ip", Duration::from_secs(60), || {
        let host2 = routes(&lab, "host2", &[]);
        match route_to(&host2) {
            None => Ok(()),
            Some(_) => Err(host2),
        }
    });
    eventually(
        "the ext_ip stops answering",
        Duration::from_secs(30),
        || match lab.tcp("w2", EXT, 8080) || lab.tcp("w3", EXT, 8080) {
            false => Ok(()),
            true => Err("still answered".to_owned()),
        },
    );
    assert!(lab.tcp("w2", W1, 8080), "w1 itself is still reachable");
}
