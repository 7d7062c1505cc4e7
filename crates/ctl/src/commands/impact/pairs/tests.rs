//! Pairs judged before and after a change, on clusters built from keys and JSON.

use calico_calc::{Applied, Cluster, Verdict};
use calico_model::key::Key;
use calico_model::rule::{IpVersion, Rule};
use ipnet::IpNet;

use super::super::probes::probes;
use super::*;

const FRONT: &str = "/calico/v1/host/h1/workload/k8s/ns.front/endpoint/eth0";
const DB: &str = "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0";
const OTHER: &str = "/calico/v1/host/h2/workload/k8s/ns.other/endpoint/eth0";
const GUARD: &str = "/calico/v1/policy/tier/default/policy/db-guard";

fn put(cluster: &mut Cluster, key: &str, value: &str) {
    let applied = cluster.apply(key, Some(value));
    assert_eq!(applied, Applied::Changed, "{key}");
}

fn wep(ip: &str, role: &str) -> String {
    format!(
        r#"{{"state": "active", "name": "cali{}", "profile_ids": ["open"],
            "ipv4_nets": ["{ip}/32"], "labels": {{"role": "{role}"}}}}"#,
        ip.replace('.', "")
    )
}

/// front (10.0.0.1), db (10.0.0.2) and other (10.0.0.3), all in profile "open" (allow all).
fn cluster() -> Cluster {
    let mut cluster = Cluster::default();
    put(&mut cluster, FRONT, &wep("10.0.0.1", "front"));
    put(&mut cluster, DB, &wep("10.0.0.2", "db"));
    put(&mut cluster, OTHER, &wep("10.0.0.3", "other"));
    let open =
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
    put(&mut cluster, "/calico/v1/policy/profile/open/rules", open);
    cluster
}

/// db-guard: db's port 5432 is denied to front, and its other traffic allowed.
const DENY_FRONT: &str = r#"{"selector": "role == 'db'", "order": 10,
    "inbound_rules": [
        {"action": "deny", "protocol": "tcp", "src_selector": "role == 'front'", "dst_ports": [5432]},
        {"action": "allow"}],
    "outbound_rules": [{"action": "allow"}]}"#;

fn judge(before: &Cluster, after: &Cluster, changed: &[Key]) -> (Scope, Pairs) {
    let rules: Vec<Rule> = [before, after]
        .iter()
        .filter_map(|c| c.tiers.get("default")?.policies.get("db-guard"))
        .flat_map(|p| p.inbound_rules.iter().chain(&p.outbound_rules))
        .cloned()
        .collect();
    let scope = scope(before, after, changed);
    let ends = |version: IpVersion| ends(before, rules.iter(), version);
    let nets: Vec<IpNet> = rules
        .iter()
        .flat_map(|r| r.nets().map(|(_, n)| *n))
        .collect();
    let pairs = judge_pairs(before, after, &scope, ends, &probes(rules.iter()), &nets);
    (scope, pairs)
}

#[test]
fn a_new_deny_changes_exactly_the_pair_and_port_it_names() {
    let before = cluster();
    let mut after = before.clone();
    put(&mut after, GUARD, DENY_FRONT);
    let (scope, pairs) = judge(&before, &after, &[Key::parse(GUARD).unwrap()]);
    let db = judge::endpoint_key(&calico_model::flow::FlowEndpoint {
        kind: calico_model::flow::EndpointKind::Wep,
        key: Some(DB.into()),
        net: None,
        address: None,
        profiles: vec![],
        labels: Default::default(),
    })
    .unwrap();
    assert_eq!(scope, Scope::Some([db].into()), "only db is selected");
    let changed: Vec<(String, String, String, Verdict, Verdict)> = (pairs.changes.iter())
        .map(|c| {
            let probe = c.probe.to_string();
            (
                c.source.clone(),
                c.destination.clone(),
                probe,
                c.before,
                c.after,
            )
        })
        .collect();
    assert_eq!(
        changed,
        [(
            FRONT.to_owned(),
            DB.to_owned(),
            "tcp/5432 from 32768".to_owned(),
            Verdict::Allow,
            Verdict::Deny
        )]
    );
    let (side, before_side, after_side) = &pairs.changes[0].sides[0];
    assert_eq!(*side, "destination inbound");
    assert_eq!(
        before_side.as_ref().unwrap().step,
        "profile open rule 1: allow"
    );
    assert_eq!(
        after_side.as_ref().unwrap().step,
        "tier default policy db-guard rule 1: deny"
    );
    // Pairs with db at one end, every probe: front, other <-> db, 3 v4 probes (tcp/5432,
    // tcp/1024, icmp echo) — and no v6 end.
    assert_eq!(pairs.judged, 4 * 3);
}

#[test]
fn an_unchanged_model_changes_nothing_and_a_net_end_is_probed() {
    let before = cluster();
    let (_, pairs) = judge(&before, &before, &[]);
    assert_eq!((pairs.judged, pairs.changes.len()), (0, 0));

    // Outside traffic: a policy for db denying 192.0.2.0/24 on every port.
    let mut after = before.clone();
    let outside = r#"{"selector": "role == 'db'",
        "inbound_rules": [{"action": "deny", "src_net": "192.0.2.0/24"}, {"action": "allow"}],
        "outbound_rules": [{"action": "allow"}]}"#;
    put(&mut after, GUARD, outside);
    let (_, pairs) = judge(&before, &after, &[Key::parse(GUARD).unwrap()]);
    let sources: Vec<&str> = pairs.changes.iter().map(|c| c.source.as_str()).collect();
    assert!(!sources.is_empty());
    assert!(
        sources.iter().all(|s| *s == "192.0.2.1 (in 192.0.2.0/24)"),
        "{sources:?}"
    );
    assert!(pairs.changes.iter().all(|c| c.destination == DB));
}

#[test]
fn a_profile_label_change_puts_every_endpoint_in_scope() {
    let before = cluster();
    let key = Key::parse("/calico/v1/policy/profile/open/labels").unwrap();
    assert_eq!(scope(&before, &before, &[key]), Scope::All);
}

#[test]
fn ends_alike_are_judged_once_and_every_pair_of_them_is_reported() {
    let mut before = cluster();
    let twin = "/calico/v1/host/h3/workload/k8s/ns.front2/endpoint/eth0";
    put(&mut before, twin, &wep("10.0.0.4", "front"));
    let mut after = before.clone();
    put(&mut after, GUARD, DENY_FRONT);
    let (_, pairs) = judge(&before, &after, &[Key::parse(GUARD).unwrap()]);
    let changed: Vec<(&str, &str)> = (pairs.changes.iter())
        .map(|c| (c.source.as_str(), c.destination.as_str()))
        .collect();
    assert_eq!(changed, [(FRONT, DB), (twin, DB)]);
    // 6 ordered pairs with db at one end (front, front2, other, both ways), 3 probes each.
    assert_eq!(pairs.judged, 6 * 3);
    // Two fronts are one class; judging it against itself needs two of them.
    let ends = ends(&before, [], IpVersion::V4);
    assert_eq!(classes(&before, &ends, &[]).len(), 3);
}
