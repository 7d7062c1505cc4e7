//! `calicoctl policy impact -f FILE` against a real etcd and the real aggregator: the endpoint
//! pairs and observed flows a change would flip, and nothing written.

#[path = "common/aggregator.rs"]
mod aggregator;
mod common;

use aggregator::{Aggregator, ingress, profile_step, wep, wep_key};
use calico_testkit::refusing_port;
use common::{Ctl, doc, text};
use serde_json::{Value, json};

/// front (10.65.0.1), db (10.65.0.2) and other (10.65.0.3), all in profile "open" (allow all).
fn cluster() -> Ctl {
    let ctl = Ctl::start();
    let wep = |ip: &str, role: &str| {
        json!({"state": "active", "name": format!("cali{role}"), "profile_ids": ["open"],
               "ipv4_nets": [format!("{ip}/32")], "labels": {"role": role}})
    };
    let bundle = json!({
        wep_key("h1", "ns.front"): wep("10.65.0.1", "front"),
        wep_key("h2", "ns.db"): wep("10.65.0.2", "db"),
        wep_key("h2", "ns.other"): wep("10.65.0.3", "other"),
        "/calico/v1/policy/profile/open/rules":
            {"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]},
    });
    ctl.ok(&["load", "-f", "-"], &bundle.to_string());
    ctl
}

/// db-guard: front may not reach db's port 5432; everything else is allowed.
fn guard(kind: &str) -> String {
    doc(
        kind,
        "{name: db-guard, tier: default}",
        "{selector: \"role == 'db'\", inbound_rules: [{action: deny, protocol: tcp, \
         src_selector: \"role == 'front'\", dst_ports: [5432]}, {action: allow}], \
         outbound_rules: [{action: allow}]}",
    )
}

/// What the aggregator saw: front -> db and other -> db on 5432, both allowed by profile open.
fn observed() -> Aggregator {
    let flows = Aggregator::start(&[]);
    let allowed = profile_step("open", 0, "allow");
    flows.post(&[
        ingress(
            wep("h1", "ns.front", "open"),
            "ns.db",
            5432,
            allowed.clone(),
            30,
        ),
        ingress(wep("h2", "ns.other", "open"), "ns.db", 5432, allowed, 60),
    ]);
    flows
}

fn impact(ctl: &Ctl, args: &[&str], file: &str) -> String {
    let mut all = vec!["policy", "impact", "-f", "-"];
    all.extend_from_slice(args);
    let before = ctl.revision();
    let out = ctl.ok(&all, file);
    assert_eq!(
        ctl.revision(),
        before,
        "policy impact wrote to etcd:\n{out}"
    );
    out
}

/// The rows of the table that follows the line starting with `title`, as cells.
fn table_after(out: &str, title: &str) -> Vec<Vec<String>> {
    let lines = out.lines().skip_while(|l| !l.starts_with(title)).skip(2);
    lines
        .take_while(|l| !l.is_empty() && !l.starts_with("  not judged"))
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn a_new_deny_names_the_pair_and_the_observed_flow_it_flips_and_writes_nothing() {
    let ctl = cluster();
    let flows = observed();
    let url = flows.url();
    let out = impact(&ctl, &["--flows-url", &url], &guard("policy"));
    assert!(out.starts_with("policy \"db-guard\" in tier \"default\": would be created (1 key(s) written)\nnothing was written\n"), "{out}");
    assert!(out.contains("probes: tcp/1024 from 32768, tcp/5432 from 32768, icmp type 8 code 0, icmpv6 type 128 code 0"), "{out}");
    // db is the one endpoint the change selects: pairs with db at one end, 3 IPv4 probes.
    assert!(out.contains("endpoint pairs: 1 of 12 judged change verdict (the pairs of 3 end(s) with an end among the 1 endpoint(s) the change can judge differently"), "{out}");
    let pairs = table_after(&out, "endpoint pairs:");
    assert_eq!(
        pairs,
        [[
            "h1/ns.front/eth0",
            "h2/ns.db/eth0",
            "tcp/5432 from 32768",
            "allow",
            "deny",
            "destination inbound: tier default policy db-guard rule 1: deny"
        ]]
    );
    assert!(out.contains(&format!("observed flows (from {url}, started in the last 15m): 2 read, 2 judged, 0 not judged, 1 change verdict")), "{out}");
    let flows_changed = table_after(&out, "observed flows");
    assert_eq!(flows_changed.len(), 1, "{out}");
    assert_eq!(
        &flows_changed[0][2..10],
        [
            "h1/ns.front/eth0",
            "h2/ns.db/eth0",
            "tcp/5432",
            "ingress",
            "allow",
            "allow",
            "deny",
            "tier default policy db-guard rule 1: deny"
        ]
    );

    // The same as JSON, for scripts.
    let report: Value = serde_json::from_str(&impact(
        &ctl,
        &["--flows-url", &url, "-o", "json"],
        &guard("policy"),
    ))
    .unwrap();
    assert_eq!(report["written"], json!(false));
    assert_eq!(report["changes"][0]["outcome"], json!("created"));
    assert_eq!(
        report["changes"][0]["writes"],
        json!(["put /calico/v1/policy/tier/default/policy/db-guard"])
    );
    assert_eq!(
        report["pairs"]["changed"][0]["source"],
        json!(wep_key("h1", "ns.front"))
    );
    assert_eq!(
        report["pairs"]["changed"][0]["sides"][0]["after"]["decidedBy"]["rule_index"],
        json!(0)
    );
    assert_eq!(report["flows"]["changed"].as_array().unwrap().len(), 1);
    assert_eq!(
        report["flows"]["changed"][0]["flow"]["source"]["key"],
        json!(wep_key("h1", "ns.front"))
    );
    let yaml = impact(&ctl, &["--flows-url", &url, "-o", "yaml"], &guard("policy"));
    let back: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(back["pairs"], report["pairs"]);
}

#[test]
fn a_staged_policy_is_judged_as_enforced_and_deleting_is_judged_too() {
    let ctl = cluster();
    let flows = observed();
    let url = flows.url();
    let staged = impact(&ctl, &["--flows-url", &url], &guard("stagedPolicy"));
    assert!(staged.starts_with("policy \"db-guard\" in tier \"default\" (from a stagedPolicy: enforced): would be created"), "{staged}");
    assert_eq!(table_after(&staged, "endpoint pairs:").len(), 1, "{staged}");

    // Once applied, the same file changes nothing, and deleting it flips the pair back.
    ctl.ok(&["apply", "-f", "-"], &guard("policy"));
    let unchanged = impact(&ctl, &["--no-flows"], &guard("policy"));
    assert!(
        unchanged.contains("would be unchanged (0 key(s) written)"),
        "{unchanged}"
    );
    assert!(
        unchanged.contains("endpoint pairs: 0 of 0 judged change verdict"),
        "{unchanged}"
    );
    assert!(
        unchanged.contains("observed flows: not read (--no-flows)"),
        "{unchanged}"
    );
    let deleted = impact(&ctl, &["--no-flows", "--delete"], &guard("policy"));
    assert!(
        deleted.contains("would be deleted (1 key(s) written)"),
        "{deleted}"
    );
    let pairs = table_after(&deleted, "endpoint pairs:");
    assert_eq!(&pairs[0][3..5], ["deny", "allow"], "{deleted}");
}

#[test]
fn what_impact_cannot_judge_is_refused_by_name_and_a_missing_aggregator_is_said() {
    let ctl = cluster();
    // An invalid document: named by its field, nothing judged.
    let bad = doc(
        "policy",
        "{name: db-guard, tier: default}",
        "{inbound_rules: [{action: maybe}]}",
    );
    let out = ctl.stdin(&["policy", "impact", "-f", "-"], &bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("inbound_rules[0].action"),
        "{}",
        text(&out.stderr)
    );
    // Kinds that are not policy.
    let pool = doc("ipPool", "{name: 10.70.0.0/24}", "{}");
    let out = ctl.stdin(&["policy", "impact", "-f", "-"], &pool);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("document 1: ipPool \"10.70.0.0/24\": policy impact judges policy, stagedPolicy, profile and tier documents"), "{}", text(&out.stderr));
    // Deleting what does not exist is refused as delete -f refuses it.
    let out = ctl.stdin(
        &["policy", "impact", "-f", "-", "--delete", "--no-flows"],
        &guard("policy"),
    );
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );
    // No aggregator: the pairs are still judged, the flows said not read, exit 0.
    let refusing = refusing_port();
    let url = refusing.url();
    let out = ctl.stdin(
        &["policy", "impact", "-f", "-", "--flows-url", &url],
        &guard("policy"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("endpoint pairs: 1 of 12 judged change verdict"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "observed flows: not read: cannot reach the flow aggregator at {url} ("
        )),
        "{stdout}"
    );
    assert!(stdout.contains("or give --no-flows"), "{stdout}");
    assert!(
        text(&out.stderr).starts_with("warning: observed flows not judged: cannot reach"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_profile_change_is_judged_for_the_endpoints_that_list_it_and_its_ports() {
    let ctl = cluster();
    // "open" stops allowing ssh in; adding a label as well moves every selector.
    let ssh = "{inbound_rules: [{action: deny, protocol: tcp, dst_ports: [22]}, {action: allow}], \
               outbound_rules: [{action: allow}]}";
    let out = impact(&ctl, &["--no-flows"], &doc("profile", "{name: open}", ssh));
    assert!(
        out.contains("probes: tcp/22 from 32768, tcp/1024 from 32768,"),
        "{out}"
    );
    let pairs = table_after(&out, "endpoint pairs:");
    // Every ordered pair of the three endpoints, on port 22 only.
    assert_eq!(pairs.len(), 6, "{out}");
    for row in &pairs {
        assert_eq!(
            &row[2..],
            [
                "tcp/22 from 32768",
                "allow",
                "deny",
                "destination inbound: profile open rule 1: deny"
            ]
        );
    }
    assert!(
        out.contains("the 3 endpoint(s) the change can judge differently"),
        "{out}"
    );
    let labelled =
        "{inbound_rules: [{action: allow}], outbound_rules: [{action: allow}], labels: {zone: a}}";
    let out = impact(
        &ctl,
        &["--no-flows"],
        &doc("profile", "{name: open}", labelled),
    );
    assert!(
        out.contains("among every endpoint the change can judge differently"),
        "{out}"
    );
    assert!(out.contains("endpoint pairs: 0 of "), "{out}");
}
