use serde_json::{Value, json};

use super::*;
use crate::from_json;
use crate::rule::Action;

const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
const DB: &str = "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0";

/// An egress flow from web (on h1) to db, denied by policy `db-guard` rule 2, that a staged
/// policy would allow.
fn egress() -> Value {
    json!({
        "reporter": "h1",
        "start_time": 1_767_225_600u64,
        "end_time": 1_767_225_615u64,
        "source": {"kind": "wep", "key": WEB, "profiles": ["web"], "labels": {"role": "web"}},
        "destination": {"kind": "wep", "key": DB, "profiles": ["db"]},
        "protocol": "tcp",
        "dst_port": 5432,
        "direction": "egress",
        "action": "deny",
        "policies": {
            "enforced": [
                {"kind": "policy", "tier": "security", "name": "quarantine", "rule_index": 0, "action": "next-tier"},
                {"kind": "policy", "tier": "default", "name": "db-guard", "rule_index": 1, "action": "deny"}
            ],
            "pending": [
                {"kind": "staged-policy", "tier": "default", "name": "db-open", "rule_index": 0, "action": "allow"}
            ]
        },
        "packets_in": 0, "bytes_in": 0, "packets_out": 3, "bytes_out": 180,
        "connections_started": 3
    })
}

/// A change to the sample record.
type Edit = Box<dyn FnOnce(&mut Value)>;

fn parse(value: &Value) -> Result<FlowRecord, ValidationError> {
    from_json(&value.to_string())
}

/// The refusal of `value` after `edit`: (field, reason).
fn refused(edit: impl FnOnce(&mut Value)) -> (String, String) {
    let mut value = egress();
    edit(&mut value);
    let error = parse(&value).expect_err("the record should be refused");
    (error.field, error.reason)
}

#[test]
fn a_record_parses_and_round_trips() {
    let record = parse(&egress()).unwrap();
    assert_eq!(record.action, Verdict::Deny);
    assert_eq!(record.pending_action(), Verdict::Allow);
    assert_eq!(
        record.policies.enforced[1].to_string(),
        "tier default policy db-guard rule 2: deny"
    );
    let text = serde_json::to_string(&record).unwrap();
    assert_eq!(from_json::<FlowRecord>(&text).unwrap(), record);
}

#[test]
fn the_builders_make_valid_records() {
    let id = WorkloadEndpointId {
        hostname: "h1".into(),
        orchestrator: "k8s".into(),
        workload: "ns.web".into(),
        endpoint: "eth0".into(),
    };
    let source = FlowEndpoint::workload(&id, vec!["web".into()], LabelMap::new());
    assert_eq!(source.key.as_deref(), Some(WEB));
    let mut record = parse(&egress()).unwrap();
    record.source = source;
    record.destination = FlowEndpoint::net("10.0.0.9/32".parse().unwrap());
    record.policies = PolicyTrail {
        enforced: vec![PolicyHit::no_profile_matched()],
        pending: vec![],
    };
    assert!(record.validate().is_ok(), "{:?}", record.validate());
    assert_eq!(record.pending_action(), Verdict::Deny);
}

#[test]
fn each_refusal_names_the_field_and_the_reason() {
    let cases: Vec<(Edit, &str, &str)> = vec![
        (
            Box::new(|v| v["reporter"] = json!("a/b")),
            "reporter",
            "character '/'",
        ),
        (
            Box::new(|v| v["start_time"] = json!(1_767_225_600_000u64)),
            "start_time",
            "milliseconds",
        ),
        (
            Box::new(|v| v["end_time"] = json!(1_767_225_600u64)),
            "end_time",
            "is not after start_time",
        ),
        (
            Box::new(|v| v["end_time"] = json!(1_767_235_600u64)),
            "end_time",
            "the limit is 3600",
        ),
        (
            Box::new(|v| v["source"]["key"] = json!("/calico/v1/host/h1/endpoint/eth0")),
            "source.key",
            "is a host endpoint key, not the key of a wep",
        ),
        (
            Box::new(|v| v["source"]["key"] = json!("/calico/v1/nope")),
            "source.key",
            "nope",
        ),
        (
            Box::new(|v| {
                v["destination"] = json!({"kind": "net", "net": "10.0.0.9", "profiles": ["x"]})
            }),
            "destination.profiles",
            "a net has no profiles",
        ),
        (
            Box::new(|v| v["destination"] = json!({"kind": "net"})),
            "destination.net",
            "needs the address",
        ),
        (
            Box::new(|v| v["destination"]["profiles"] = json!(["<script>alert(1)</script>"])),
            "destination.profiles[0]",
            "invalid profile id",
        ),
        (
            Box::new(|v| v["destination"]["profiles"] = json!(vec!["p"; 33])),
            "destination.profiles",
            "the limit is 32",
        ),
        (
            Box::new(|v| v["source"]["labels"] = json!({"bad name": "x"})),
            "source.labels",
            "invalid label name",
        ),
        (
            Box::new(|v| v["reporter"] = json!("h2")),
            "source.key",
            "on host \"h1\" but the reporter is \"h2\"",
        ),
        (
            Box::new(|v| {
                v["direction"] = json!("ingress");
                v["destination"] = json!({"kind": "net", "net": "10.0.0.9"});
            }),
            "destination.kind",
            "must be a wep or hep, not a net",
        ),
        (
            Box::new(|v| {
                v["dst_port"].take();
            }),
            "dst_port",
            "a tcp flow needs its destination port",
        ),
        (Box::new(|v| v["dst_port"] = json!(0)), "dst_port", "port 0"),
        (
            Box::new(|v| v["protocol"] = json!("icmp")),
            "dst_port",
            "protocol icmp has no ports",
        ),
        (
            Box::new(|v| v["dst_port"] = json!(70000)),
            "dst_port",
            "invalid value",
        ),
        (
            Box::new(|v| v["direction"] = json!("sideways")),
            "direction",
            "unknown variant",
        ),
        (
            Box::new(|v| v["policies"]["enforced"] = json!([])),
            "policies.enforced",
            "at least the step that decided",
        ),
        (
            Box::new(|v| v["policies"]["enforced"][0]["action"] = json!("allow")),
            "policies.enforced[1]",
            "step 0 (tier security policy quarantine rule 1: allow) decided",
        ),
        (
            Box::new(|v| v["policies"]["enforced"][1]["action"] = json!("next-tier")),
            "policies.enforced[1]",
            "must decide",
        ),
        (
            Box::new(|v| v["policies"]["enforced"][1]["action"] = json!("log")),
            "policies.enforced[1].action",
            "log rules do not decide",
        ),
        (
            Box::new(|v| v["policies"]["enforced"][1]["kind"] = json!("staged-policy")),
            "policies.enforced[1].kind",
            "belong in the pending trail",
        ),
        (
            Box::new(|v| {
                v["policies"]["enforced"][1]["rule_index"].take();
            }),
            "policies.enforced[1].rule_index",
            "needs its rule_index",
        ),
        (
            Box::new(|v| {
                v["policies"]["enforced"][1] =
                    json!({"kind": "end-of-tier", "tier": "default", "action": "allow"})
            }),
            "policies.enforced[1].action",
            "action is deny, not allow",
        ),
        (
            Box::new(|v| {
                v["policies"]["enforced"][1] =
                    json!({"kind": "no-profile-matched", "name": "x", "action": "deny"})
            }),
            "policies.enforced[1].name",
            "has no name",
        ),
        (
            Box::new(|v| v["policies"]["enforced"][1]["tier"] = json!("<b>")),
            "policies.enforced[1].tier",
            "invalid tier name",
        ),
        (
            Box::new(|v| v["policies"]["pending"][0]["action"] = json!("next-tier")),
            "policies.pending[0]",
            "must decide",
        ),
        (
            Box::new(|v| {
                v["policies"]["enforced"] = json!(vec![
                    json!({"kind": "policy", "tier": "t", "name": "p", "rule_index": 0, "action": "next-tier"});
                    65
                ])
            }),
            "policies.enforced",
            "65 steps, the limit is 64",
        ),
        (
            Box::new(|v| v["action"] = json!("allow")),
            "action",
            "the action is allow but the enforced trail ends in tier default policy db-guard rule 2: deny",
        ),
        (
            Box::new(|v| v["packets_out"] = json!(0)),
            "bytes_out",
            "180 bytes in 0 packets",
        ),
        (
            Box::new(|v| v["packets_in"] = json!(-1)),
            "packets_in",
            "invalid value",
        ),
        (
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("connections_started");
            }),
            "",
            "missing field `connections_started`",
        ),
    ];
    for (edit, field, reason) in cases {
        let (got_field, got_reason) = refused(edit);
        assert_eq!(got_field, field, "reason: {got_reason}");
        assert!(
            got_reason.contains(reason),
            "{field}: {got_reason:?} lacks {reason:?}"
        );
    }
}

#[test]
fn addresses_round_trip_and_old_records_without_them_are_accepted() {
    // A 1.0 record (no addresses) still validates and keeps having none.
    let old = parse(&egress()).unwrap();
    assert_eq!((old.source.address, old.destination.address), (None, None));
    assert!(!serde_json::to_string(&old).unwrap().contains("address"));
    let mut value = egress();
    value["source"]["address"] = json!("10.65.0.10");
    value["destination"]["address"] = json!("10.65.1.20");
    let record = parse(&value).unwrap();
    assert_eq!(record.source.address, Some("10.65.0.10".parse().unwrap()));
    assert_eq!(
        record.destination.address,
        Some("10.65.1.20".parse().unwrap())
    );
    let text = serde_json::to_string(&record).unwrap();
    assert_eq!(from_json::<FlowRecord>(&text).unwrap(), record);
    // A net keeps its net and carries the packet's address inside it.
    value["destination"] = json!({"kind": "net", "net": "10.0.0.0/8", "address": "10.0.0.9"});
    let record = parse(&value).unwrap();
    assert_eq!(
        record.destination.address,
        Some("10.0.0.9".parse().unwrap())
    );
    assert_eq!(record.destination.name(), "10.0.0.0/8");
}

#[test]
fn bad_addresses_are_refused_by_field() {
    let cases: Vec<(Edit, &str, &str)> = vec![
        (
            Box::new(|v| v["source"]["address"] = json!("10.65.0.300")),
            "source.address",
            "invalid IP address",
        ),
        (
            Box::new(|v| v["destination"]["address"] = json!("10.65.1.0/24")),
            "destination.address",
            "invalid IP address",
        ),
        (
            Box::new(|v| {
                v["source"]["address"] = json!("10.65.0.10");
                v["destination"]["address"] = json!("fd00::20");
            }),
            "destination.address",
            "fd00::20 is IPv6 but the other side is IPv4",
        ),
        (
            Box::new(|v| {
                v["source"]["address"] = json!("fd00::10");
                v["destination"] = json!({"kind": "net", "net": "10.0.0.9"});
            }),
            "source.address",
            "fd00::10 is IPv6 but the other side is IPv4",
        ),
        (
            Box::new(|v| {
                v["destination"] =
                    json!({"kind": "net", "net": "10.0.0.0/8", "address": "11.0.0.1"});
            }),
            "destination.address",
            "11.0.0.1 is not inside the net 10.0.0.0/8",
        ),
    ];
    for (edit, field, reason) in cases {
        let (got_field, got_reason) = refused(edit);
        assert_eq!(got_field, field, "reason: {got_reason}");
        assert!(
            got_reason.contains(reason),
            "{field}: {got_reason:?} lacks {reason:?}"
        );
    }
}

#[test]
fn unknown_fields_are_tolerated_and_keys_canonical() {
    let mut value = egress();
    value["from_a_newer_felix"] = json!(true);
    value["destination"] = json!({"kind": "net", "net": "10.0.0.9"});
    let record = parse(&value).unwrap();
    assert_eq!(record.destination.name(), "10.0.0.9/32");
    assert_eq!(record.source.hostname().as_deref(), Some("h1"));
}

#[test]
fn trails_describe_every_kind_of_step() {
    let steps = [
        (
            PolicyHit::end_of_tier("default", Some("web")),
            "end of tier default (policy web applied): deny",
        ),
        (
            PolicyHit::end_of_tier("default", None),
            "end of tier default: deny",
        ),
        (
            PolicyHit::profile("lab", 0, Action::Allow),
            "profile lab rule 1: allow",
        ),
        (
            PolicyHit::missing_profile("gone"),
            "missing profile gone: deny",
        ),
        (
            PolicyHit::no_profile_matched(),
            "no profile rule matched: deny",
        ),
        (
            PolicyHit::staged("default", "x", 2, Action::Deny),
            "tier default staged policy x rule 3: deny",
        ),
    ];
    for (step, text) in steps {
        assert_eq!(step.to_string(), text);
    }
    assert_eq!(
        PolicyHit::profile("lab", 0, Action::NextTier).verdict(),
        Some(Verdict::Allow)
    );
    assert_eq!(
        PolicyHit::policy("t", "p", 0, Action::NextTier).verdict(),
        None
    );
}
