//! The incremental calculator always equals the from-scratch desired state, and reports every
//! piece of state that changed.

use std::collections::BTreeSet;

use calico_calc::{Calculator, DesiredState, EndpointKey, desired_state};
use calico_model::Key;
use proptest::prelude::*;

const HOST: &str = "h1";

/// Keys and the values they may take (`None`: deleted). Endpoints on two hosts, profiles with
/// rules, tags and labels, three tiers, policies with selectors and tag/selector rules, and
/// staged policies (one named as a policy of its tier, one alone in a tier of its own).
fn pool() -> Vec<(String, Vec<Option<String>>)> {
    let wep = |host: &str, name: &str| {
        format!("/calico/v1/host/{host}/workload/k8s/ns.{name}/endpoint/eth0")
    };
    let body = |ip: &str, profiles: &str, labels: &str| {
        Some(format!(
            r#"{{"state": "active", "name": "cali{}", "profile_ids": [{profiles}], "ipv4_nets": ["{ip}/32"], "labels": {{{labels}}}}}"#,
            ip.replace('.', "")
        ))
    };
    let s = |text: &str| Some(text.to_owned());
    vec![
        (
            wep(HOST, "a"),
            vec![
                body("10.0.0.1", r#""p1""#, r#""role": "web""#),
                body("10.0.0.1", r#""p1", "p2""#, r#""role": "db""#),
                body("10.0.0.9", r#""p2""#, ""),
                s(r#"{"state": "inactive", "name": "calia", "profile_ids": ["p3"]}"#),
                s(
                    r#"{"state": "active", "name": "calia", "profile_ids": ["p1"], "ipv4_nets": ["10.0.0.1/32"], "ipv4_nat": [{"int_ip": "10.0.0.1", "ext_ip": "10.2.0.1"}]}"#,
                ),
                s(
                    r#"{"state": "active", "name": "calia", "profile_ids": ["p1"], "ipv4_nets": ["10.0.0.1/32"], "ipv4_nat": [{"int_ip": "10.0.0.1", "ext_ip": "10.2.0.2"}], "ipv6_nets": ["fd00::1/128"], "ipv6_nat": [{"int_ip": "fd00::1", "ext_ip": "fd02::1"}]}"#,
                ),
                s("not json"),
                None,
            ],
        ),
        (
            wep(HOST, "b"),
            vec![
                body("10.0.0.2", r#""p2""#, r#""role": "db""#),
                body("10.0.0.1", r#""p3", "p1""#, r#""env": "prod""#),
                None,
            ],
        ),
        (
            wep("h2", "c"),
            vec![
                body("10.0.1.1", r#""p1""#, r#""role": "web""#),
                body("10.0.0.2", r#""p3""#, r#""role": "db", "env": "dev""#),
                None,
            ],
        ),
        (
            "/calico/v1/host/h2/endpoint/eth0".to_owned(),
            vec![
                s(
                    r#"{"name": "eth0", "expected_ipv4_addrs": ["198.51.100.1"], "profile_ids": ["p2"], "labels": {"role": "host"}}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p1/rules".to_owned(),
            vec![
                s(
                    r#"{"inbound_rules": [{"src_tag": "t1", "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
                ),
                s(
                    r#"{"inbound_rules": [{"src_selector": "role == 'db'", "action": "allow"}, {"!dst_tag": "t2", "action": "deny"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p2/rules".to_owned(),
            vec![
                s(
                    r#"{"inbound_rules": [{"src_tag": "t1", "action": "deny"}, {"src_selector": "has(env)"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p3/rules".to_owned(),
            vec![
                s(r#"{"outbound_rules": [{"dst_selector": "role == 'db'", "action": "allow"}]}"#),
                s("[]"),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p1/tags".to_owned(),
            vec![s(r#"["t1"]"#), s(r#"["t1", "t2"]"#), None],
        ),
        (
            "/calico/v1/policy/profile/p2/tags".to_owned(),
            vec![s(r#"["t2"]"#), None],
        ),
        (
            "/calico/v1/policy/profile/p1/labels".to_owned(),
            vec![s(r#"{"env": "prod"}"#), s(r#"{"role": "db"}"#), None],
        ),
        (
            "/calico/v1/policy/profile/p3/labels".to_owned(),
            vec![s(r#"{"role": "web"}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t1/metadata".to_owned(),
            vec![s(r#"{"order": 1}"#), s(r#"{"order": 30}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t2/metadata".to_owned(),
            vec![s(r#"{"order": 20}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t1/policy/web".to_owned(),
            vec![
                s(
                    r#"{"selector": "role == 'web'", "order": 5, "inbound_rules": [{"src_selector": "role == 'db'", "action": "allow"}]}"#,
                ),
                s(
                    r#"{"selector": "role != 'db'", "order": 50, "inbound_rules": [{"src_tag": "t2", "action": "next-tier"}]}"#,
                ),
                s(r#"{"selector": "role ="}"#),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t1/policy/all".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "order": 10, "outbound_rules": [{"dst_selector": "has(role)", "action": "allow"}]}"#,
                ),
                s(r#"{"order": 1}"#),
                s(
                    r#"{"selector": "role != 'db'", "outbound_rules": [{"dst_selector": "role != 'web'", "action": "allow"}], "inbound_rules": [{"src_selector": "has(env) || role == 'web'", "action": "allow"}, {"src_selector": "all()", "action": "deny"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t2/policy/db".to_owned(),
            vec![
                s(
                    r#"{"selector": "has(env) || role == 'db'", "inbound_rules": [{"src_tag": "t1"}, {"src_selector": "role == 'db'", "action": "deny"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t1/stagedpolicy/web".to_owned(),
            vec![
                s(
                    r#"{"selector": "role == 'web'", "order": 1, "inbound_rules": [{"src_selector": "env == 'staged'", "action": "deny"}]}"#,
                ),
                s(
                    r#"{"selector": "has(env)", "order": 100, "outbound_rules": [{"dst_tag": "t2", "action": "allow"}]}"#,
                ),
                s(r#"{"untracked": true}"#),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t3/stagedpolicy/only".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "inbound_rules": [{"src_selector": "role == 'db'", "action": "deny"}]}"#,
                ),
                s(r#"{"selector": "role == 'db'", "order": 2}"#),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t3/metadata".to_owned(),
            vec![s(r#"{"order": 5}"#), None],
        ),
        (
            "/calico/v1/policy/tier/default/policy/d".to_owned(),
            vec![
                s(
                    r#"{"selector": "env == 'prod'", "inbound_rules": [{"!src_selector": "role == 'web'", "action": "allow"}]}"#,
                ),
                None,
            ],
        ),
    ]
}

/// Endpoints, policies, staged policies, profiles and IP sets (by name).
type Differences = (
    BTreeSet<EndpointKey>,
    BTreeSet<String>,
    BTreeSet<String>,
    BTreeSet<String>,
    BTreeSet<String>,
);

/// Every key whose value differs between two states.
fn differences(a: &DesiredState, b: &DesiredState) -> Differences {
    fn keys<K: Ord + Clone, V: PartialEq>(
        a: &std::collections::BTreeMap<K, V>,
        b: &std::collections::BTreeMap<K, V>,
    ) -> BTreeSet<K> {
        a.keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect()
    }
    let policies = keys(&a.policies, &b.policies)
        .into_iter()
        .map(|id| format!("{}/{}", id.tier, id.name))
        .collect();
    let staged = keys(&a.staged_policies, &b.staged_policies)
        .into_iter()
        .map(|id| format!("{}/{}", id.tier, id.name))
        .collect();
    (
        keys(&a.endpoints, &b.endpoints),
        policies,
        staged,
        keys(&a.profiles, &b.profiles),
        keys(&a.ipsets, &b.ipsets),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn incremental_state_equals_the_state_computed_from_scratch(
        steps in prop::collection::vec((0..20usize, 0..6usize), 1..60),
        offset in 0..20usize,
    ) {
        let pool = pool();
        let mut calc = Calculator::new(HOST);
        for (key_index, value_index) in steps {
            let (key, values) = &pool[(key_index + offset) % pool.len()];
            let value = &values[value_index % values.len()];
            let before = calc.state().clone();
            calc.apply(key, value.as_deref());
            let expected = desired_state(calc.cluster(), HOST);
            prop_assert_eq!(calc.state(), &expected, "after {} = {:?}", key, value);
            let changes = calc.take_changes();
            let (endpoints, policies, staged, profiles, ipsets) = differences(&before, &expected);
            prop_assert!(endpoints.is_subset(&changes.endpoints), "unreported endpoints after {}", key);
            let reported: BTreeSet<String> = changes.policies.iter().map(|id| format!("{}/{}", id.tier, id.name)).collect();
            prop_assert!(policies.is_subset(&reported), "unreported policies after {}", key);
            let reported: BTreeSet<String> = changes.staged_policies.iter().map(|id| format!("{}/{}", id.tier, id.name)).collect();
            prop_assert!(staged.is_subset(&reported), "unreported staged policies after {}", key);
            prop_assert!(profiles.is_subset(&changes.profiles), "unreported profiles after {}", key);
            prop_assert!(ipsets.is_subset(&changes.ipsets), "unreported ipsets after {}", key);
            let pools_differ = before.pools != expected.pools
                || before.masquerade_pools != expected.masquerade_pools;
            prop_assert!(!pools_differ || changes.pools, "unreported pools after {}", key);
        }
    }
}

#[test]
fn only_local_endpoints_are_programmed_and_sets_span_the_cluster() {
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        if let Some(value) = &values[0] {
            calc.apply(&key, Some(value));
        }
    }
    let state = calc.state();
    assert!(state.endpoints.keys().all(|k| k.hostname() == HOST));
    assert_eq!(state.endpoints.len(), 2);
    // role == 'db' selects b (10.0.0.2, on h1); the web endpoint on h2 is in the web selector.
    let db = state
        .ipsets
        .values()
        .find(|s| matches!(&s.source, calico_calc::IpSetSource::Selector(sel) if sel.canonical() == r#"role == "db""#))
        .expect("the role == 'db' set");
    assert_eq!(db.members, BTreeSet::from(["10.0.0.2".parse().unwrap()]));
    let key = Key::parse("/calico/v1/host/h1/workload/k8s/ns.a/endpoint/eth0").unwrap();
    let Key::WorkloadEndpoint(id) = key else {
        unreachable!()
    };
    let program = &state.endpoints[&EndpointKey::Workload(id)];
    let tiers: Vec<&str> = program.tiers.iter().map(|t| t.name.as_str()).collect();
    // a is role=web and inherits env=prod from p1: every tier has a policy (t3 a staged one)
    // for it.
    assert_eq!(tiers, ["t1", "t3", "t2", "default"], "{program:?}");
    let t1: Vec<&str> = program.tiers[0]
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(t1, ["web", "all"], "by order: web (5) before all (10)");
}

#[test]
fn routes_go_to_active_local_workloads_only() {
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        if let Some(value) = &values[0] {
            calc.apply(&key, Some(value));
        }
    }
    let routes: Vec<(String, &str)> = calc
        .state()
        .routes()
        .into_iter()
        .map(|(net, iface)| (net.to_string(), iface))
        .collect();
    assert_eq!(
        routes,
        [
            ("10.0.0.1/32".to_owned(), "cali10001"),
            ("10.0.0.2/32".to_owned(), "cali10002")
        ]
    );
    // a goes inactive: its route goes.
    let a = "/calico/v1/host/h1/workload/k8s/ns.a/endpoint/eth0";
    calc.apply(
        a,
        Some(r#"{"state": "inactive", "name": "cali10001", "ipv4_nets": ["10.0.0.1/32"]}"#),
    );
    assert_eq!(calc.state().routes().len(), 1);
}

/// An endpoint's NAT mappings are in its program, each `ext_ip` is routed through its
/// interface, and a changed or removed mapping changes the endpoint and its routes.
#[test]
fn nat_mappings_are_programmed_and_routed() {
    use std::net::IpAddr;

    let key = "/calico/v1/host/h1/workload/k8s/ns.a/endpoint/eth0";
    let Ok(Key::WorkloadEndpoint(id)) = Key::parse(key) else {
        panic!("a workload endpoint key");
    };
    let endpoint = EndpointKey::Workload(id);
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    let mut calc = Calculator::new(HOST);
    calc.apply(
        key,
        Some(
            r#"{"state": "active", "name": "calia", "ipv4_nets": ["10.0.0.1/32"], "ipv4_nat": [{"int_ip": "10.0.0.1", "ext_ip": "10.2.0.1"}], "ipv6_nets": ["fd00::1/128"], "ipv6_nat": [{"int_ip": "fd00::1", "ext_ip": "fd02::1"}]}"#,
        ),
    );
    calc.take_changes();
    assert_eq!(
        calc.state().endpoints[&endpoint].nat,
        [
            (ip("10.0.0.1"), ip("10.2.0.1")),
            (ip("fd00::1"), ip("fd02::1"))
        ]
    );
    let routes = |calc: &Calculator| -> Vec<(String, String)> {
        calc.state()
            .routes()
            .into_iter()
            .map(|(net, iface)| (net.to_string(), iface.to_owned()))
            .collect()
    };
    let route = |net: &str| (net.to_owned(), "calia".to_owned());
    assert_eq!(
        routes(&calc),
        [
            route("10.0.0.1/32"),
            route("10.2.0.1/32"),
            route("fd00::1/128"),
            route("fd02::1/128")
        ]
    );
    // The mapping goes: the endpoint changed, and the ext_ips' routes are gone.
    calc.apply(
        key,
        Some(r#"{"state": "active", "name": "calia", "ipv4_nets": ["10.0.0.1/32"], "ipv6_nets": ["fd00::1/128"]}"#),
    );
    assert!(calc.take_changes().endpoints.contains(&endpoint));
    assert!(calc.state().endpoints[&endpoint].nat.is_empty());
    assert_eq!(routes(&calc), [route("10.0.0.1/32"), route("fd00::1/128")]);
}

/// The model refuses a mapping whose int_ip is not one of the endpoint's nets: the endpoint is
/// invalid (reported as `Applied::Invalid` for the caller to log) and treated as missing.
#[test]
fn a_nat_mapping_to_a_foreign_address_makes_the_endpoint_invalid() {
    let key = "/calico/v1/host/h1/workload/k8s/ns.a/endpoint/eth0";
    let mut calc = Calculator::new(HOST);
    calc.apply(
        key,
        Some(
            r#"{"state": "active", "name": "calia", "ipv4_nets": ["10.0.0.1/32"], "ipv4_nat": [{"int_ip": "10.0.0.7", "ext_ip": "10.2.0.1"}]}"#,
        ),
    );
    assert!(calc.state().endpoints.is_empty());
    assert!(calc.state().routes().is_empty());
}

/// A host endpoint given only by expected addresses applies to the interface that holds one,
/// follows the address to another interface, and has none while no interface holds it.
#[test]
fn host_endpoint_by_address_follows_the_address() {
    use std::collections::BTreeMap;
    use std::net::IpAddr;

    let key = "/calico/v1/host/h1/endpoint/fabric";
    let Ok(Key::HostEndpoint(id)) = Key::parse(key) else {
        panic!("a host endpoint key");
    };
    let endpoint = EndpointKey::Host(id);
    let mut calc = Calculator::new(HOST);
    calc.apply(
        key,
        Some(r#"{"expected_ipv4_addrs": ["10.99.0.11"], "profile_ids": []}"#),
    );
    calc.take_changes();
    let interface = |calc: &Calculator| calc.state().endpoints[&endpoint].interface.clone();
    assert_eq!(interface(&calc), None, "no interface known yet");

    let ip: IpAddr = "10.99.0.11".parse().unwrap();
    let other: IpAddr = "10.99.0.12".parse().unwrap();
    let with = |pairs: &[(&str, IpAddr)]| -> BTreeMap<String, BTreeSet<IpAddr>> {
        pairs
            .iter()
            .map(|(name, ip)| ((*name).to_owned(), BTreeSet::from([*ip])))
            .collect()
    };
    calc.set_interface_addresses(with(&[("eth0", ip), ("eth1", other)]));
    assert_eq!(interface(&calc).as_deref(), Some("eth0"));
    assert!(calc.take_changes().endpoints.contains(&endpoint));
    assert_eq!(calc.interfaces_of(&endpoint), ["eth0"]);

    calc.set_interface_addresses(with(&[("eth0", other), ("eth1", ip)]));
    assert_eq!(
        interface(&calc).as_deref(),
        Some("eth1"),
        "the address moved"
    );
    assert!(calc.take_changes().endpoints.contains(&endpoint));

    calc.set_interface_addresses(with(&[("eth0", other)]));
    assert_eq!(interface(&calc), None, "no interface holds it");
    assert!(calc.take_changes().endpoints.contains(&endpoint));

    // An endpoint with a name keeps it whatever the addresses say.
    calc.apply(
        key,
        Some(r#"{"name": "eth7", "expected_ipv4_addrs": ["10.99.0.12"], "profile_ids": []}"#),
    );
    assert_eq!(interface(&calc).as_deref(), Some("eth7"));
}

/// Staged policies are selected like policies and listed per tier beside them, in their own
/// order; a tier where only staged policies apply enforces nothing; a staged policy and a
/// policy of the same tier and name are two objects.
#[test]
fn staged_policies_are_listed_per_tier_and_never_make_a_tier_enforce() {
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        if let Some(value) = &values[0] {
            calc.apply(&key, Some(value));
        }
    }
    let a = Key::parse("/calico/v1/host/h1/workload/k8s/ns.a/endpoint/eth0").unwrap();
    let Key::WorkloadEndpoint(id) = a else {
        unreachable!()
    };
    let program = &calc.state().endpoints[&EndpointKey::Workload(id)];
    let tiers: Vec<(&str, Vec<String>, Vec<String>)> = program
        .tiers
        .iter()
        .map(|t| {
            let names = |ids: &[calico_calc::PolicyId]| -> Vec<String> {
                ids.iter().map(|p| p.name.clone()).collect()
            };
            (t.name.as_str(), names(&t.policies), names(&t.staged))
        })
        .collect();
    assert_eq!(
        tiers,
        [
            (
                "t1",
                vec!["web".to_owned(), "all".to_owned()],
                vec!["web".to_owned()]
            ),
            ("t3", vec![], vec!["only".to_owned()]),
            ("t2", vec!["db".to_owned()], vec![]),
            ("default", vec!["d".to_owned()], vec![]),
        ],
        "{program:?}"
    );
    assert!(program.tiers[0].enforces());
    assert!(
        !program.tiers[1].enforces(),
        "t3 holds only a staged policy"
    );
    let staged = calico_calc::PolicyId {
        tier: "t1".into(),
        name: "web".into(),
    };
    let state = calc.state();
    assert_ne!(
        state.staged_policies.get(&staged),
        state.policies.get(&staged),
        "the staged web and the enforced web keep their own rules"
    );
    // The staged policy's selector set is active like any other rule's.
    assert!(state.ipsets.values().any(|s| matches!(&s.source, calico_calc::IpSetSource::Selector(sel) if sel.canonical() == r#"env == "staged""#)));
    // Deleted: gone from the tier and the state, and reported.
    calc.take_changes();
    calc.apply("/calico/v1/policy/tier/t3/stagedpolicy/only", None);
    let changes = calc.take_changes();
    assert!(changes.staged_policies.iter().any(|id| id.name == "only"));
    assert!(
        calc.state()
            .endpoints
            .values()
            .all(|p| p.tiers.iter().all(|t| t.name != "t3")),
        "t3 has nothing left for anyone"
    );
}
