//! Flow logs end to end, with real packets: a lab whose Felixes log every decision to NFLOG and
//! send their flows to the lab's `calico-flows`; a connection denied by a policy shows in
//! `calicoctl flows` and in the console (a real headless chromium) with the policy and the
//! rule that denied it, and a staged policy's deny shows as "would deny" while the traffic it
//! names still flows. Each record carries the addresses the packets used, and `--address`
//! finds it by them. Runs on the backend `CALICO_TEST_BACKEND` names (both in CI).

mod common;

use std::process::Command;
use std::time::Duration;

use calico_testkit::eventually;
use calico_testkit::webdriver::Browser;
use common::TestLab;
use common::guarded::{CLIENT, WEB, guarded_web};
use serde_json::Value;

/// Felix sends every 5 s in the lab; the aggregator and the console add at most a refresh.
const WITHIN: Duration = Duration::from_secs(30);

/// `calicoctl flows -o json ARGS` against the lab's aggregator: the flows listed.
fn flows(lab: &TestLab, url: &str, args: &[&str]) -> Vec<Value> {
    let ctl = std::path::PathBuf::from(common::BIN).with_file_name("calicoctl");
    let out = Command::new(&ctl)
        .env("CALICO_FLOWS_URL", url)
        .env("ETCD_ENDPOINTS", &lab.state().client_endpoint)
        .args(["flows", "-o", "json"])
        .args(args)
        .output()
        .expect("calicoctl runs");
    assert!(
        out.status.success(),
        "calicoctl flows {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("calicoctl flows -o json");
    answer["flows"].as_array().cloned().unwrap_or_default()
}

/// The flow to `WEB:port` reported by host2 (the destination's host, inbound).
fn to_web(all: &[Value], port: u16) -> Option<Value> {
    all.iter()
        .map(|result| &result["flow"])
        .find(|flow| {
            flow["dst_port"] == port
                && flow["reporter"] == "host2"
                && flow["destination"]["key"]
                    .as_str()
                    .is_some_and(|key| key.contains("/workload/"))
        })
        .cloned()
}

#[test]
fn a_denied_connection_shows_with_its_policy_in_calicoctl_flows_and_the_console() {
    let (lab, url) = guarded_web();
    assert!(!lab.tcp("client", WEB, 6379), "no-redis denies 6379");
    assert!(lab.tcp("client", WEB, 80), "the profile allows 80");

    // calicoctl flows: the denied connection, with the policy and the rule that denied it.
    let mut denied = Value::Null;
    eventually("the denied flow in calicoctl flows", WITHIN, || {
        let listed = flows(&lab, &url, &["--action", "deny"]);
        match to_web(&listed, 6379) {
            Some(flow) => {
                denied = flow;
                Ok(())
            }
            None => Err(format!("listed: {listed:#?}")),
        }
    });
    assert_eq!(denied["action"], "deny", "{denied:#}");
    assert_eq!(denied["direction"], "ingress", "{denied:#}");
    assert_eq!(
        (
            &denied["source"]["address"],
            &denied["destination"]["address"]
        ),
        (&Value::from(CLIENT), &Value::from(WEB)),
        "both workloads' addresses, as the packets had them: {denied:#}"
    );
    for (cidr, found) in [("10.65.1.0/24", true), (WEB, true), ("10.65.9.0/24", false)] {
        let listed = flows(&lab, &url, &["--action", "deny", "--address", cidr]);
        assert_eq!(
            to_web(&listed, 6379).is_some(),
            found,
            "--address {cidr}: {listed:#?}"
        );
    }
    let last = denied["policies"]["enforced"]
        .as_array()
        .and_then(|steps| steps.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (
            &last["kind"],
            &last["tier"],
            &last["name"],
            &last["rule_index"],
            &last["action"]
        ),
        (
            &Value::from("policy"),
            &Value::from("guard"),
            &Value::from("no-redis"),
            &Value::from(1),
            &Value::from("deny")
        ),
        "the deciding step names the policy and its second inbound rule: {denied:#}"
    );
    // Each connection's record goes out on its own soon after its first packet: the allowed
    // one, made after the denied attempt timed out, may come a moment later.
    let mut allowed = Value::Null;
    eventually("the allowed connection to 80 listed too", WITHIN, || {
        let listed = flows(&lab, &url, &["--action", "allow", "--endpoint", "web"]);
        match to_web(&listed, 80) {
            Some(flow) => {
                allowed = flow;
                Ok(())
            }
            None => Err(format!("listed: {listed:#?}")),
        }
    });
    let steps: Vec<(&str, &str)> = allowed["policies"]["enforced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or(""),
                s["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [("no-redis", "next-tier"), ("open", "allow")],
        "80: passed on by the policy, allowed by the profile: {allowed:#}"
    );

    // The console shows the same flow with its policy, in a real browser.
    let browser = Browser::start();
    browser.open(&format!("{url}/"));
    let mut rows = Vec::new();
    eventually("the denied flow in the console", WITHIN, || {
        rows = browser.texts("#flows tbody tr");
        match rows.iter().any(|row| {
            row.contains("deny")
                && row.contains("no-redis")
                && row.contains("6379")
                && row.contains(&format!("({CLIENT})"))
                && row.contains(&format!("({WEB})"))
        }) {
            true => Ok(()),
            false => Err(format!("rows: {rows:#?}")),
        }
    });

    // A staged deny of 80: the connection still gets through, and its flow says what the
    // staged policy would do.
    lab.put(
        "/calico/v1/policy/tier/guard/stagedpolicy/lockdown",
        r#"{"selector": "role == \"web\"", "order": 0,
            "inbound_rules": [{"action": "deny", "protocol": "tcp", "dst_ports": [80]}],
            "outbound_rules": []}"#,
    );
    lab.wait();
    let mut staged = Value::Null;
    eventually(
        "a flow to 80 that the staged policy would deny",
        WITHIN,
        || {
            assert!(
                lab.tcp("client", WEB, 80),
                "a staged policy enforces nothing"
            );
            let listed = flows(&lab, &url, &["--action", "allow", "--policy", "lockdown"]);
            match to_web(&listed, 80) {
                Some(flow) => {
                    staged = flow;
                    Ok(())
                }
                None => Err(format!("listed: {listed:#?}")),
            }
        },
    );
    let pending = staged["policies"]["pending"].as_array().cloned();
    assert!(
        pending.is_some_and(|steps| steps.iter().any(|s| s["kind"] == "staged-policy"
            && s["name"] == "lockdown"
            && s["action"] == "deny")),
        "the flow is allowed and would be denied by lockdown: {staged:#}"
    );
}
