//! Pool masquerade with real packets: a workload in a `masquerade: true` pool reaches a server
//! outside every pool (on the fabric, which has no route to the pools) with its host's
//! address; traffic between pools keeps its source; a pool without masquerade is not NATed.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{OPEN, TestLab, tcp};

/// host1's fabric address: what the fabric sees a masqueraded workload as.
const HOST1: &str = "10.99.0.11";
const FABRIC: &str = "10.99.0.1";
/// In pool 10.65.0.0/16.
const W1: &str = "10.65.1.1";
/// In pool 10.66.0.0/16.
const W2: &str = "10.66.2.1";

/// A host's conntrack entries for TCP to `port`, as text.
fn connections(lab: &TestLab, host: &str, port: u16) -> String {
    let out = lab.in_host(
        host,
        "conntrack",
        &["-L", "-p", "tcp", "--dport", &port.to_string()],
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn set_masquerade(lab: &TestLab, cidr: &str, on: bool) {
    let key = format!("/calico/v1/ipam/v4/pool/{}", cidr.replace('/', "-"));
    let value = serde_json::json!({ "cidr": cidr, "masquerade": on }).to_string();
    lab.put(&key, &value);
    lab.wait();
}

#[test]
fn pool_masquerade() {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "w1", W1, &["open"], &[]);
    lab.workload("host2", "w2", W2, &["open"], &[]);
    let _server = lab.serve_in("fabric", &[8080]);
    lab.wait();
    assert!(
        !lab.tcp("w1", FABRIC, 8080),
        "without masquerade the fabric cannot answer a pool address (it has no route to it)"
    );

    set_masquerade(&lab, "10.65.0.0/16", true);
    eventually("masquerade", Duration::from_secs(30), || {
        match lab.tcp("w1", FABRIC, 8080) {
            true => Ok(()),
            false => Err(lab.felix_logs()),
        }
    });
    // The reply is addressed to host1: the fabric saw host1's address, not the workload's.
    let seen = connections(&lab, "host1", 8080);
    assert!(
        seen.lines()
            .any(|l| l.contains(&format!("src={W1} dst={FABRIC} "))
                && l.contains(&format!("src={FABRIC} dst={HOST1} "))),
        "w1's connection is masqueraded as host1:\n{seen}"
    );
    assert!(
        !lab.tcp("w2", FABRIC, 8080),
        "10.66.0.0/16 has no masquerade: not NATed, so not answered"
    );

    // Between pools the source is kept: w2 sees w1's own address.
    let out = lab.ok(&["exec", "w1", "--", common::BIN, "probe", &tcp(W2, 8080)]);
    assert!(out.contains(" ok"), "w1 reaches w2: {out}");
    let seen = connections(&lab, "host2", 8080);
    assert!(
        seen.contains(&format!("src={W1} dst={W2}")) && seen.contains(&format!("dst={W1} ")),
        "host2 sees w1's own address, un-NATed:\n{seen}"
    );

    // Masquerade off again: not NATed any more.
    set_masquerade(&lab, "10.65.0.0/16", false);
    eventually("masquerade off", Duration::from_secs(30), || {
        match lab.tcp("w1", FABRIC, 8080) {
            false => Ok(()),
            true => Err("still answered".to_owned()),
        }
    });
}
