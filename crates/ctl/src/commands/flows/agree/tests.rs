//! The comparison of explain with a recorded trail, on clusters built from keys and JSON.

use calico_calc::{Applied, Cluster, explain};
use calico_flowlog::protocol::FlowResult;
use calico_model::flow::FlowRecord;
use serde_json::json;

use super::*;

const FRONT: &str = "/calico/v1/host/h1/workload/k8s/ns.front/endpoint/eth0";
const DB: &str = "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0";
const GUARD: &str = "/calico/v1/policy/tier/default/policy/db-guard";
const DENY_FRONT: &str = r#"{"selector": "role == 'db'",
    "inbound_rules": [
        {"action": "deny", "protocol": "tcp", "src_selector": "role == 'front'", "dst_ports": [5432]},
        {"action": "allow"}],
    "outbound_rules": [{"action": "allow"}]}"#;

fn put(cluster: &mut Cluster, key: &str, value: &str) {
    assert_eq!(cluster.apply(key, Some(value)), Applied::Changed, "{key}");
}

/// front (10.0.0.1) and db (10.0.0.2) in profile "open" (allow all), and db-guard.
fn cluster(guard: Option<&str>) -> Cluster {
    let mut cluster = Cluster::default();
    let wep = |ip: &str, role: &str| {
        json!({"state": "active", "name": format!("cali{role}"), "profile_ids": ["open"],
               "ipv4_nets": [format!("{ip}/32")], "labels": {"role": role}})
        .to_string()
    };
    put(&mut cluster, FRONT, &wep("10.0.0.1", "front"));
    put(&mut cluster, DB, &wep("10.0.0.2", "db"));
    let open =
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
    put(&mut cluster, "/calico/v1/policy/profile/open/rules", open);
    if let Some(guard) = guard {
        put(&mut cluster, GUARD, guard);
    }
    cluster
}

/// front -> db tcp/5432, reported by h2 on the way in, decided by db-guard rule `index`.
fn record(index: u32, action: &str, end: u64) -> FlowRecord {
    serde_json::from_value(json!({
        "reporter": "h2", "start_time": end - 15, "end_time": end,
        "source": {"kind": "wep", "key": FRONT}, "destination": {"kind": "wep", "key": DB},
        "protocol": "tcp", "dst_port": 5432, "direction": "ingress", "action": action,
        "policies": {"enforced": [{"kind": "policy", "tier": "default", "name": "db-guard",
                                   "rule_index": index, "action": action}]},
        "packets_in": 1, "bytes_in": 60, "packets_out": 0, "bytes_out": 0,
        "connections_started": 1
    }))
    .unwrap()
}

const T: u64 = 1_767_225_615;

fn compare_with(cluster: &Cluster, flow: &FlowRecord, newer: &[FlowResult]) -> Agreement {
    let judged = judge::packet_of(cluster, flow);
    let explained = judged
        .as_ref()
        .ok()
        .map(|j| explain(cluster, &j.endpoint, j.direction, &j.packet));
    compare(cluster, flow, &judged, explained.as_ref(), newer)
}

#[test]
fn the_same_step_and_verdict_agree() {
    let cluster = cluster(Some(DENY_FRONT));
    assert_eq!(
        compare_with(&cluster, &record(0, "deny", T), &[]),
        Agreement::Agree
    );
}

#[test]
fn a_policy_gone_or_a_rule_changed_is_a_change_since() {
    let gone = compare_with(&cluster(None), &record(0, "deny", T), &[]);
    assert_eq!(
        gone,
        Agreement::ChangedSince(vec!["tier default no longer exists".into()])
    );
    let allowing = DENY_FRONT.replacen(r#""action": "deny""#, r#""action": "allow""#, 1);
    let changed = compare_with(&cluster(Some(&allowing)), &record(0, "deny", T), &[]);
    assert_eq!(
        changed,
        Agreement::ChangedSince(vec![
            "rule 1 of policy db-guard of tier default is allow now, was deny".into()
        ])
    );
    let mut gone_endpoint = cluster(Some(DENY_FRONT));
    gone_endpoint.apply(FRONT, None);
    let found = compare_with(&gone_endpoint, &record(0, "deny", T), &[]);
    assert_eq!(
        found,
        Agreement::ChangedSince(vec![format!(
            "the source {FRONT} is no longer in the datastore"
        )])
    );
}

#[test]
fn a_newer_record_decided_as_explain_says_is_a_change_since() {
    // Recorded: allowed by rule 2; now rule 1 denies, and so does a newer record.
    let cluster = cluster(Some(DENY_FRONT));
    let newer = FlowResult {
        id: "00000000000000aa".into(),
        records: 1,
        flow: record(0, "deny", T + 30),
    };
    let agreement = compare_with(
        &cluster,
        &record(1, "allow", T),
        std::slice::from_ref(&newer),
    );
    let Agreement::ChangedSince(evidence) = agreement else {
        panic!("{agreement:?}")
    };
    assert!(
        evidence[0].contains("newer record (flow 00000000000000aa"),
        "{evidence:?}"
    );
    // An older record of the same connection proves nothing.
    let mut older = newer;
    older.flow = record(0, "deny", T - 30);
    let agreement = compare_with(&cluster, &record(1, "allow", T), &[older]);
    assert_eq!(agreement.cause(), "bug", "{agreement:?}");
}

#[test]
fn a_policy_the_recorded_trail_never_reached_is_a_change_since() {
    // Recorded: allowed by profile open; now db-guard decides first.
    let mut flow = record(0, "allow", T);
    flow.policies.enforced = vec![PolicyHit::profile(
        "open",
        0,
        calico_model::rule::Action::Allow,
    )];
    let agreement = compare_with(&cluster(Some(DENY_FRONT)), &flow, &[]);
    assert_eq!(
        agreement,
        Agreement::ChangedSince(vec![
            "policy db-guard of tier default decides now (tier default policy db-guard rule 1: \
             deny), and the recorded trail never reached it: it was added, or its selector or \
             rules or the endpoints' labels changed, after 2026-01-01T00:00:15Z"
                .into()
        ])
    );
}

#[test]
fn every_recorded_step_holding_yet_another_decision_is_a_bug() {
    // Rule 2 of db-guard allows (it still does), but the model denies at rule 1.
    let cluster = cluster(Some(DENY_FRONT));
    let agreement = compare_with(&cluster, &record(1, "allow", T), &[]);
    let Agreement::Bug(detail) = &agreement else {
        panic!("{agreement:?}")
    };
    assert!(
        detail.contains("the record names policy db-guard of tier default, which decides now"),
        "{detail}"
    );
    assert!(agreement.to_string().starts_with("disagree: a bug: "));
}
