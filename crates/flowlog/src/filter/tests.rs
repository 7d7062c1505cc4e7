use calico_model::flow::{FlowEndpoint, PolicyHit, PolicyTrail};
use calico_model::key::WorkloadEndpointId;
use calico_model::rule::{Action, Protocol};

use super::*;

fn wep(host: &str, workload: &str, profile: &str) -> FlowEndpoint {
    let id = WorkloadEndpointId {
        hostname: host.into(),
        orchestrator: "k8s".into(),
        workload: workload.into(),
        endpoint: "eth0".into(),
    };
    FlowEndpoint::workload(&id, vec![profile.into()], Default::default())
}

/// web (h1) → db (h2), ingress at db, denied by tier default policy db-guard.
fn flow() -> FlowRecord {
    FlowRecord {
        reporter: "h2".into(),
        start_time: 1_767_225_600,
        end_time: 1_767_225_615,
        source: wep("h1", "ns.web", "web").with_address("10.65.0.10".parse().unwrap()),
        destination: wep("h2", "ns.db", "db").with_address("10.65.1.20".parse().unwrap()),
        protocol: Protocol::Tcp,
        dst_port: Some(5432),
        direction: FlowDirection::Ingress,
        action: Verdict::Deny,
        policies: PolicyTrail {
            enforced: vec![PolicyHit::policy("default", "db-guard", 1, Action::Deny)],
            pending: vec![PolicyHit::staged("default", "db-open", 0, Action::Allow)],
        },
        packets_in: 1,
        bytes_in: 60,
        packets_out: 0,
        bytes_out: 0,
        connections_started: 1,
    }
}

fn passes(query: &str) -> bool {
    FlowFilter::from_query(query)
        .unwrap()
        .matches(&flow(), 1_767_225_700)
}

#[test]
fn each_parameter_narrows() {
    let cases = [
        ("", true),
        ("endpoint=ns.web", true),
        ("endpoint=ns.other", false),
        ("endpoint=ns.other&endpoint=ns.db", true),
        ("address=10.65.0.10", true),
        ("address=10.65.1.20", true),
        ("address=10.65.0.11", false),
        ("address=10.65.1.0/24", true),
        ("address=10.65.1.7/24", true),
        ("address=10.66.0.0/16", false),
        ("address=10.66.0.0/16&address=10.65.0.0/16", true),
        ("address=fd00::10", false),
        ("address=10.65.0.10&endpoint=ns.other", false),
        ("profile=db", true),
        ("profile=dbx", false),
        ("tier=default", true),
        ("tier=security", false),
        ("policy=db-guard", true),
        ("policy=db-open", true),
        ("policy=web", false),
        ("action=deny", true),
        ("action=allow", false),
        ("reporter=h2", true),
        ("reporter=h1", false),
        ("direction=ingress", true),
        ("direction=egress", false),
        ("start_gte=1767225600", true),
        ("start_gte=1767225601", false),
        ("start_lt=1767225600", false),
        ("start_gte=-100", true),
        ("start_gte=-99", false),
        ("profile=db&action=allow", false),
    ];
    for (query, expected) in cases {
        assert_eq!(passes(query), expected, "{query}");
    }
}

#[test]
fn queries_round_trip_with_any_characters() {
    let filter = FlowFilter {
        endpoints: vec!["<script>alert(1)</script> & =".into()],
        addresses: vec![
            "10.65.0.10/32".parse().unwrap(),
            "fd00::/64".parse().unwrap(),
        ],
        actions: vec![Verdict::Deny],
        directions: vec![FlowDirection::Egress],
        start_gte: -300,
        ..FlowFilter::default()
    };
    let query = filter.to_query();
    assert!(!query.contains('<') && !query.contains(' '), "{query}");
    assert_eq!(FlowFilter::from_query(&query).unwrap(), filter);
    assert_eq!(
        FlowFilter::from_query("endpoint=a+b").unwrap().endpoints,
        ["a b"]
    );
}

#[test]
fn an_address_filter_matches_a_net_of_a_record_without_addresses() {
    let mut old = flow();
    old.source = FlowEndpoint::net("192.0.2.0/28".parse().unwrap());
    old.destination.address = None;
    let at = 1_767_225_700;
    let filter = |q: &str| FlowFilter::from_query(q).unwrap();
    assert!(filter("address=192.0.2.0/24").matches(&old, at));
    assert!(
        !filter("address=192.0.2.1").matches(&old, at),
        "the net is wider"
    );
    assert!(!filter("address=10.65.1.20").matches(&old, at));
    assert_eq!(
        filter("address=10.65.0.10").to_query(),
        "address=10%2E65%2E0%2E10"
    );
}

#[test]
fn bad_parameters_are_refused_by_name() {
    for (query, name, reason) in [
        ("action=maybe", "action", "expected allow or deny"),
        ("direction=up", "direction", "expected ingress or egress"),
        ("start_gte=yesterday", "start_gte", "unix seconds"),
        ("profile=", "profile", "must not be empty"),
        ("address=10.65.0.300", "address", "expected an IP address"),
        ("address=web", "address", "or a CIDR"),
        ("colour=red", "colour", "unknown parameter"),
        ("endpoint=%ff", "%ff", "not UTF-8"),
    ] {
        let error = FlowFilter::from_query(query).unwrap_err();
        assert_eq!(error.name, name, "{query}");
        assert!(error.reason.contains(reason), "{query}: {error}");
    }
}
