//! On the iptables backend, Felix keeps its jumps first in the kernel chains, with real
//! packets: a rule another program inserts at the top of `FORWARD` (as Docker does with
//! `iptables -I FORWARD`) lets a connection past Calico's policy only until Felix's next
//! refresh, which moves `-j cali-FORWARD` back to the top and keeps the other rule after it.

mod common;

use std::time::Duration;

use calico_testkit::eventually;
use common::{OPEN, TestLab};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";
const PORT: u16 = 5432;

/// How long Felix's refresh may take (the lab runs it every few seconds).
const WAIT: Duration = Duration::from_secs(30);

/// Everything inbound denied, everything outbound allowed.
const DENY_IN: &str =
    r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#;

/// The rules of host2's IPv4 `FORWARD` chain, as `iptables -S` prints them after `-A FORWARD `.
fn forward(lab: &TestLab) -> Vec<String> {
    let out = lab.in_host("host2", "iptables", &["-w", "-S", "FORWARD"]);
    assert!(out.status.success(), "iptables -S FORWARD: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("-A FORWARD "))
        .map(str::to_owned)
        .collect()
}

fn iptables(lab: &TestLab, args: &[&str]) {
    let out = lab.in_host("host2", "iptables", args);
    assert!(out.status.success(), "iptables {args:?}: {out:?}");
}

#[test]
fn a_rule_inserted_above_cali_forward_is_moved_after_it() {
    // A refresh every 5 s: long enough to see the foreign rule work, short for the test.
    let lab = TestLab::up(2, &["NFTablesMode=Disabled", "IptablesRefreshInterval=5"]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.put("/calico/v1/policy/profile/closed/rules", DENY_IN);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["closed"], &[]);
    lab.wait();
    assert_eq!(forward(&lab)[0], "-j cali-FORWARD", "Felix's jump is first");
    assert!(
        !lab.tcp("client", W2, PORT),
        "the server's policy denies it"
    );

    // What Docker does: an ACCEPT inserted at the top of FORWARD. Until Felix's refresh it
    // wins over Calico's policy; a refresh between inserting it and the probe is retried.
    let spec = format!("-d {W2}/32 -p tcp -m tcp --dport {PORT} -j ACCEPT");
    let rule: Vec<&str> = spec.split(' ').collect();
    eventually("the foreign rule to let a connection through", WAIT, || {
        let _ = lab.in_host(
            "host2",
            "iptables",
            &[&["-w", "-D", "FORWARD"], &rule[..]].concat(),
        );
        iptables(&lab, &[&["-w", "-I", "FORWARD", "1"], &rule[..]].concat());
        let through = lab.tcp("client", W2, PORT);
        match (through, forward(&lab)[0] == spec) {
            (true, true) => Ok(()),
            (through, first) => Err(format!("through: {through}, still first: {first}")),
        }
    });

    eventually("cali-FORWARD to be first again", WAIT, || {
        let rules = forward(&lab);
        match rules.first().map(String::as_str) == Some("-j cali-FORWARD") {
            true => Ok(()),
            false => Err(format!("FORWARD: {rules:?}\n{}", lab.felix_logs())),
        }
    });
    let rules = forward(&lab);
    assert_eq!(
        rules.iter().filter(|r| **r == "-j cali-FORWARD").count(),
        1,
        "one jump: {rules:?}"
    );
    assert_eq!(rules[1], spec, "the foreign rule stays, after ours");
    assert!(
        !lab.tcp("client", W2, PORT),
        "Calico's policy decides again, the foreign rule still present"
    );
    let log = std::fs::read_to_string(lab.state().log_path("felix-host2")).unwrap();
    assert!(log.contains("repaired dataplane drift"), "{log}");
}
