//! The semantics of policy, one rule per test, through the reference evaluator. Clusters are
//! built from datastore keys and JSON exactly as operators write them.

use calico_calc::{
    Applied, Cluster, Direction, EndpointKey, Explanation, Packet, Reason, Verdict, explain,
};
use calico_model::Key;
use calico_model::rule::{Action, Protocol};
use proptest::prelude::*;

const WEB: &str = "/calico/v1/host/h1/workload/k8s/default.web/endpoint/eth0";
const DB: &str = "/calico/v1/host/h1/workload/k8s/default.db/endpoint/eth0";
const CLIENT: &str = "/calico/v1/host/h2/workload/k8s/default.client/endpoint/eth0";
const HOST: &str = "/calico/v1/host/h2/endpoint/eth0";
const OUTSIDE: &str = "192.0.2.1";

fn endpoint(key: &str) -> EndpointKey {
    match Key::parse(key).unwrap() {
        Key::WorkloadEndpoint(id) => EndpointKey::Workload(id),
        Key::HostEndpoint(id) => EndpointKey::Host(id),
        other => panic!("{other} is not an endpoint"),
    }
}

fn wep(ip: &str, profiles: &str, labels: &str) -> String {
    format!(
        r#"{{"state": "active", "name": "cali{}", "profile_ids": [{profiles}],
            "ipv4_nets": ["{ip}/32"], "labels": {{{labels}}}}}"#,
        ip.replace('.', "")
    )
}

/// Three workloads: web (10.0.0.1, role=webserver), db (10.0.0.2, role=db) and client
/// (10.0.0.3, no labels), with profiles of the same names that allow everything.
fn cluster() -> Cluster {
    let mut c = Cluster::default();
    put(
        &mut c,
        WEB,
        &wep("10.0.0.1", r#""web""#, r#""role": "webserver""#),
    );
    put(&mut c, DB, &wep("10.0.0.2", r#""db""#, r#""role": "db""#));
    put(&mut c, CLIENT, &wep("10.0.0.3", r#""client""#, ""));
    for profile in ["web", "db", "client"] {
        put(&mut c, &profile_rules(profile), ALLOW_ALL);
    }
    c
}

const ALLOW_ALL: &str =
    r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

fn profile_rules(name: &str) -> String {
    format!("/calico/v1/policy/profile/{name}/rules")
}

fn policy_key(tier: &str, name: &str) -> String {
    format!("/calico/v1/policy/tier/{tier}/policy/{name}")
}

fn tier_key(tier: &str) -> String {
    format!("/calico/v1/policy/tier/{tier}/metadata")
}

#[track_caller]
fn put(cluster: &mut Cluster, key: &str, json: &str) {
    let applied = cluster.apply(key, Some(json));
    assert_eq!(applied, Applied::Changed, "{key}: {json}");
}

fn tcp(src: &str, dst: &str, dst_port: u16) -> Packet {
    Packet {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        protocol: Protocol::Tcp,
        src_port: Some(40000),
        dst_port: Some(dst_port),
        icmp_type: None,
        icmp_code: None,
    }
}

fn icmp(src: &str, dst: &str, icmp_type: u8, code: u8) -> Packet {
    Packet {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        protocol: Protocol::Icmp,
        src_port: None,
        dst_port: None,
        icmp_type: Some(icmp_type),
        icmp_code: Some(code),
    }
}

fn inbound(c: &Cluster, key: &str, packet: &Packet) -> Explanation {
    explain(c, &endpoint(key), Direction::Inbound, packet)
}

fn to_db(c: &Cluster, src: &str, port: u16) -> Explanation {
    inbound(c, DB, &tcp(src, "10.0.0.2", port))
}

fn rule_of(explanation: &Explanation) -> (String, usize, Action) {
    match &explanation.reason {
        Reason::Rule {
            source,
            index,
            action,
        } => (source.to_string(), *index, *action),
        other => panic!("decided by {other:?}, not a rule\n{explanation}"),
    }
}

// ---- profiles ----

#[test]
fn no_profiles_and_no_policies_drop_everything() {
    let mut c = cluster();
    put(&mut c, DB, &wep("10.0.0.2", "", ""));
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(
        (e.verdict, e.reason),
        (Verdict::Deny, Reason::NoRuleMatched)
    );
}

/// A negated net pins its rule to the net's IP version, as the dataplane renders it (in that
/// version's table only): packets of the other version never meet the rule.
#[test]
fn a_negated_net_keeps_its_rule_to_its_ip_version() {
    let mut c = cluster();
    let dual = r#"{"state": "active", "name": "calidb", "profile_ids": ["db"],
        "ipv4_nets": ["10.0.0.2/32"], "ipv6_nets": ["fd00::2/128"]}"#;
    put(&mut c, DB, dual);
    let rules = r#"{"inbound_rules": [{"action": "allow", "!src_net": "10.65.1.0/24"}],
        "outbound_rules": []}"#;
    put(&mut c, &profile_rules("db"), rules);
    let v4 = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(v4.verdict, Verdict::Allow, "{v4}");
    let v6 = inbound(&c, DB, &tcp("fd00::3", "fd00::2", 5432));
    assert_eq!(
        (v6.verdict, &v6.reason),
        (Verdict::Deny, &Reason::NoRuleMatched),
        "{v6}"
    );
}

#[test]
fn a_missing_profile_drops_everything() {
    let mut c = cluster();
    put(&mut c, DB, &wep("10.0.0.2", r#""db", "gone""#, ""));
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(e.verdict, Verdict::Deny);
    assert_eq!(
        e.reason,
        Reason::MissingProfile {
            profile: "gone".into()
        }
    );
    // A profile with tags but no rules does not exist for policy either.
    put(&mut c, "/calico/v1/policy/profile/gone/tags", r#"["x"]"#);
    assert_eq!(to_db(&c, "10.0.0.3", 5432).verdict, Verdict::Deny);
    put(&mut c, &profile_rules("gone"), ALLOW_ALL);
    assert_eq!(to_db(&c, "10.0.0.3", 5432).verdict, Verdict::Allow);
}

#[test]
fn tags_resolve_to_the_addresses_of_endpoints_whose_profiles_list_them() {
    let mut c = cluster();
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"protocol": "tcp", "src_tag": "db-user", "dst_ports": [5432], "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 5432).verdict, Verdict::Deny);
    put(
        &mut c,
        "/calico/v1/policy/profile/client/tags",
        r#"["db-user"]"#,
    );
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(e.verdict, Verdict::Allow);
    assert_eq!(rule_of(&e), ("profile db".into(), 0, Action::Allow));
    assert_eq!(
        to_db(&c, "10.0.0.1", 5432).verdict,
        Verdict::Deny,
        "web is no db-user"
    );
    assert_eq!(to_db(&c, OUTSIDE, 5432).verdict, Verdict::Deny);
    assert_eq!(to_db(&c, "10.0.0.3", 22).verdict, Verdict::Deny);
    // Negated tag: everything not from a db-user, including outside Calico.
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"!src_tag": "db-user", "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 5432).verdict, Verdict::Deny);
    assert_eq!(to_db(&c, OUTSIDE, 5432).verdict, Verdict::Allow);
}

#[test]
fn the_first_matching_rule_decides_and_log_carries_on() {
    let mut c = cluster();
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [
            {"protocol": "udp", "action": "allow"},
            {"action": "log", "log_prefix": "db"},
            {"protocol": "tcp", "dst_ports": [22], "action": "deny"},
            {"protocol": "tcp", "action": "allow"}
        ]}"#,
    );
    let e = to_db(&c, "10.0.0.3", 22);
    assert_eq!((e.verdict, rule_of(&e).1), (Verdict::Deny, 2));
    assert!(
        e.trace.iter().any(|s| s.contains("rule 2 matches (log)")),
        "{e}"
    );
    let e = to_db(&c, "10.0.0.3", 80);
    assert_eq!((e.verdict, rule_of(&e).1), (Verdict::Allow, 3));
}

#[test]
fn profiles_apply_in_profile_ids_order_and_next_tier_means_allow() {
    let mut c = cluster();
    put(&mut c, DB, &wep("10.0.0.2", r#""first", "second""#, ""));
    put(
        &mut c,
        &profile_rules("first"),
        r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "next-tier"}]}"#,
    );
    put(
        &mut c,
        &profile_rules("second"),
        r#"{"inbound_rules": [{"action": "deny"}]}"#,
    );
    let e = to_db(&c, "10.0.0.3", 80);
    assert_eq!(e.verdict, Verdict::Allow);
    assert_eq!(rule_of(&e), ("profile first".into(), 0, Action::NextTier));
    let e = to_db(&c, "10.0.0.3", 81);
    assert_eq!(rule_of(&e), ("profile second".into(), 0, Action::Deny));
}

#[test]
fn outbound_traffic_uses_the_outbound_rules() {
    let mut c = cluster();
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "deny"}]}"#,
    );
    let packet = tcp("10.0.0.2", "10.0.0.1", 80);
    let out = explain(&c, &endpoint(DB), Direction::Outbound, &packet);
    assert_eq!(out.verdict, Verdict::Deny);
    let back = explain(
        &c,
        &endpoint(DB),
        Direction::Inbound,
        &tcp("10.0.0.1", "10.0.0.2", 80),
    );
    assert_eq!(back.verdict, Verdict::Allow);
}

// ---- tiers and policies ----

#[test]
fn an_allow_in_a_tier_wins_over_the_profiles() {
    let mut c = cluster();
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"action": "deny"}]}"#,
    );
    put(&mut c, &tier_key("t"), r#"{"order": 10}"#);
    put(
        &mut c,
        &policy_key("t", "db-access"),
        r#"{"selector": "role == 'db'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [5432], "action": "allow"}, {"action": "next-tier"}]}"#,
    );
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(
        rule_of(&e),
        ("tier t policy db-access".into(), 0, Action::Allow)
    );
    // next-tier goes on to the profiles, which deny.
    let e = to_db(&c, "10.0.0.3", 80);
    assert_eq!(rule_of(&e), ("profile db".into(), 0, Action::Deny));
}

#[test]
fn a_tier_whose_policies_apply_but_do_not_decide_drops() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 10}"#);
    put(
        &mut c,
        &policy_key("t", "only-web"),
        r#"{"selector": "role == 'db'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}]}"#,
    );
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(
        (e.verdict, e.reason),
        (Verdict::Deny, Reason::EndOfTier { tier: "t".into() })
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
}

#[test]
fn a_tier_where_no_policy_applies_is_skipped() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 10}"#);
    put(
        &mut c,
        &policy_key("t", "web-only"),
        r#"{"selector": "role == 'webserver'", "inbound_rules": [{"action": "deny"}]}"#,
    );
    let e = to_db(&c, "10.0.0.3", 5432);
    assert_eq!(rule_of(&e), ("profile db".into(), 0, Action::Allow));
    assert!(
        e.trace[0].contains("tier t: no policy applies, skipped"),
        "{e}"
    );
    // The web endpoint is selected and denied.
    let e = inbound(&c, WEB, &tcp("10.0.0.3", "10.0.0.1", 80));
    assert_eq!(
        rule_of(&e),
        ("tier t policy web-only".into(), 0, Action::Deny)
    );
}

#[test]
fn tiers_apply_by_order_then_name_with_default_last() {
    let mut c = cluster();
    let deny = r#"{"inbound_rules": [{"action": "deny"}]}"#;
    let allow = r#"{"inbound_rules": [{"action": "allow"}]}"#;
    put(&mut c, &tier_key("zzz"), r#"{"order": 1}"#);
    put(&mut c, &policy_key("zzz", "p"), allow);
    put(&mut c, &tier_key("aaa"), r#"{"order": "default"}"#);
    put(&mut c, &policy_key("aaa", "p"), deny);
    let e = to_db(&c, "10.0.0.3", 1);
    assert_eq!(rule_of(&e).0, "tier zzz policy p");
    put(&mut c, &tier_key("aaa"), r#"{"order": 1}"#);
    let e = to_db(&c, "10.0.0.3", 1);
    assert_eq!(rule_of(&e).0, "tier aaa policy p", "equal orders: by name");
    put(&mut c, &tier_key("aaa"), r#"{"order": 2}"#);
    assert_eq!(rule_of(&to_db(&c, "10.0.0.3", 1)).0, "tier zzz policy p");
    // A tier without metadata (policies in `tier/default` of 001) has the default order.
    put(&mut c, &policy_key("default", "p"), deny);
    c.apply(&policy_key("zzz", "p"), None);
    c.apply(&policy_key("aaa", "p"), None);
    assert_eq!(
        rule_of(&to_db(&c, "10.0.0.3", 1)).0,
        "tier default policy p"
    );
}

#[test]
fn policies_apply_by_order_then_name() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    put(
        &mut c,
        &policy_key("t", "b"),
        r#"{"order": 5, "inbound_rules": [{"action": "allow"}]}"#,
    );
    put(
        &mut c,
        &policy_key("t", "a"),
        r#"{"order": 5, "inbound_rules": [{"action": "deny"}]}"#,
    );
    put(
        &mut c,
        &policy_key("t", "c"),
        r#"{"inbound_rules": [{"action": "allow"}]}"#,
    );
    assert_eq!(rule_of(&to_db(&c, "10.0.0.3", 1)).0, "tier t policy a");
    put(
        &mut c,
        &policy_key("t", "a"),
        r#"{"order": 6, "inbound_rules": [{"action": "deny"}]}"#,
    );
    assert_eq!(rule_of(&to_db(&c, "10.0.0.3", 1)).0, "tier t policy b");
    // Missing order sorts after every number: c only decides once a and b fall through.
    put(
        &mut c,
        &policy_key("t", "a"),
        r#"{"order": 6, "inbound_rules": []}"#,
    );
    put(
        &mut c,
        &policy_key("t", "b"),
        r#"{"order": 5, "inbound_rules": [{"protocol": "udp"}]}"#,
    );
    assert_eq!(rule_of(&to_db(&c, "10.0.0.3", 1)).0, "tier t policy c");
}

#[test]
fn not_equal_also_selects_endpoints_without_the_label() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    put(
        &mut c,
        &policy_key("t", "not-db"),
        r#"{"selector": "role != 'db'", "inbound_rules": [{"action": "deny"}]}"#,
    );
    let client = inbound(&c, CLIENT, &tcp("10.0.0.1", "10.0.0.3", 80));
    assert_eq!(client.verdict, Verdict::Deny, "client has no role label");
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
}

#[test]
fn negated_selector_versus_negated_match() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    // Selects traffic from Calico endpoints without `role`: only the client.
    put(
        &mut c,
        &policy_key("t", "p"),
        r#"{"selector": "role == 'db'", "inbound_rules": [{"src_selector": "!has(role)", "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
    assert_eq!(to_db(&c, "10.0.0.1", 80).verdict, Verdict::Deny);
    assert_eq!(
        to_db(&c, OUTSIDE, 80).verdict,
        Verdict::Deny,
        "not a Calico endpoint"
    );
    // Everything not from an endpoint with `role`: the client and the outside world.
    put(
        &mut c,
        &policy_key("t", "p"),
        r#"{"selector": "role == 'db'", "inbound_rules": [{"!src_selector": "has(role)", "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
    assert_eq!(to_db(&c, "10.0.0.1", 80).verdict, Verdict::Deny);
    assert_eq!(to_db(&c, OUTSIDE, 80).verdict, Verdict::Allow);
}

#[test]
fn selectors_see_labels_inherited_from_profiles() {
    let mut c = cluster();
    put(
        &mut c,
        CLIENT,
        &wep("10.0.0.3", r#""client", "extra""#, r#""env": "own""#),
    );
    put(&mut c, &profile_rules("extra"), ALLOW_ALL);
    put(
        &mut c,
        "/calico/v1/policy/profile/client/labels",
        r#"{"team": "a", "env": "profile"}"#,
    );
    put(
        &mut c,
        "/calico/v1/policy/profile/extra/labels",
        r#"{"team": "b", "zone": "z1"}"#,
    );
    let labels = c.effective_labels(&c.endpoints[&endpoint(CLIENT)]);
    assert_eq!(labels.get("env"), Some("own"), "own labels win");
    assert_eq!(labels.get("team"), Some("a"), "the first profile wins");
    assert_eq!(labels.get("zone"), Some("z1"));
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"src_selector": "team == 'a' && zone == 'z1'", "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
}

#[test]
fn host_endpoints_are_found_by_their_expected_addresses() {
    let mut c = cluster();
    put(
        &mut c,
        HOST,
        r#"{"name": "eth0", "expected_ipv4_addrs": ["198.51.100.7"], "profile_ids": ["client"], "labels": {"role": "management"}}"#,
    );
    put(
        &mut c,
        &profile_rules("db"),
        r#"{"inbound_rules": [{"src_selector": "role == 'management'", "action": "allow"}]}"#,
    );
    assert_eq!(to_db(&c, "198.51.100.7", 22).verdict, Verdict::Allow);
    assert_eq!(to_db(&c, "198.51.100.8", 22).verdict, Verdict::Deny);
    let e = inbound(&c, HOST, &tcp("10.0.0.2", "198.51.100.7", 22));
    assert_eq!(e.verdict, Verdict::Allow);
}

#[test]
fn untracked_policies_apply_to_host_endpoints_first_and_fall_through() {
    let mut c = cluster();
    put(
        &mut c,
        HOST,
        r#"{"name": "eth0", "expected_ipv4_addrs": ["198.51.100.7"], "profile_ids": ["client"], "labels": {"role": "management"}}"#,
    );
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    // Tracked: only port 22 reaches the host.
    put(
        &mut c,
        &policy_key("t", "tracked"),
        r#"{"selector": "has(role)", "inbound_rules": [{"protocol": "tcp", "dst_ports": [22], "action": "allow"}]}"#,
    );
    // Untracked: BGP from 10.0.0.1 allowed, everything from 10.0.0.2 denied, the rest falls through.
    put(
        &mut c,
        &policy_key("t", "raw"),
        r#"{"selector": "has(role)", "untracked": true, "inbound_rules": [
            {"protocol": "tcp", "src_net": "10.0.0.1/32", "dst_ports": [179], "action": "allow"},
            {"src_net": "10.0.0.2/32", "action": "deny"}
        ]}"#,
    );
    let host = |src: &str, port: u16| inbound(&c, HOST, &tcp(src, "198.51.100.7", port));
    let e = host("10.0.0.1", 179);
    assert_eq!(rule_of(&e), ("tier t policy raw".into(), 0, Action::Allow));
    let e = host("10.0.0.2", 22);
    assert_eq!(
        rule_of(&e),
        ("tier t policy raw".into(), 1, Action::Deny),
        "untracked decides first"
    );
    let e = host("10.0.0.3", 22);
    assert_eq!(
        rule_of(&e),
        ("tier t policy tracked".into(), 0, Action::Allow)
    );
    assert!(
        e.trace
            .iter()
            .any(|s| s.contains("untracked policies did not decide")),
        "{e}"
    );
    let e = host("10.0.0.3", 179);
    assert_eq!(e.reason, Reason::EndOfTier { tier: "t".into() });
    // Workloads ignore untracked policies: web (role=webserver) is only under the tracked one.
    let e = inbound(&c, WEB, &tcp("10.0.0.2", "10.0.0.1", 22));
    assert_eq!(
        rule_of(&e),
        ("tier t policy tracked".into(), 0, Action::Allow)
    );
}

// ---- matches ----

fn with_db_rule(rule: &str) -> Cluster {
    let mut c = cluster();
    let rules = format!(r#"{{"inbound_rules": [{rule}]}}"#);
    put(&mut c, &profile_rules("db"), &rules);
    c
}

#[test]
fn ports_positive_lists_or_negated_lists_and() {
    let c = with_db_rule(
        r#"{"protocol": "tcp", "dst_ports": [80, "8000:8080"], "!dst_ports": [8008], "action": "allow"}"#,
    );
    for (port, expected) in [
        (80, Verdict::Allow),
        (81, Verdict::Deny),
        (8000, Verdict::Allow),
        (8080, Verdict::Allow),
        (8081, Verdict::Deny),
        (8008, Verdict::Deny),
    ] {
        assert_eq!(to_db(&c, "10.0.0.3", port).verdict, expected, "port {port}");
    }
    let c = with_db_rule(
        r#"{"protocol": "tcp", "!dst_ports": [22, 23], "!src_ports": ["0:1023"], "action": "allow"}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
    assert_eq!(to_db(&c, "10.0.0.3", 23).verdict, Verdict::Deny);
    let mut low_source = tcp("10.0.0.3", "10.0.0.2", 80);
    low_source.src_port = Some(1000);
    assert_eq!(inbound(&c, DB, &low_source).verdict, Verdict::Deny);
}

#[test]
fn protocols_by_name_number_and_negation() {
    let c = with_db_rule(r#"{"protocol": 6, "action": "allow"}"#);
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
    assert_eq!(
        inbound(&c, DB, &icmp("10.0.0.3", "10.0.0.2", 8, 0)).verdict,
        Verdict::Deny
    );
    let c = with_db_rule(r#"{"!protocol": "tcp", "action": "allow"}"#);
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Deny);
    assert_eq!(
        inbound(&c, DB, &icmp("10.0.0.3", "10.0.0.2", 8, 0)).verdict,
        Verdict::Allow
    );
}

#[test]
fn icmp_type_code_and_the_negated_pair() {
    let ping = |t, code| icmp("10.0.0.3", "10.0.0.2", t, code);
    let c = with_db_rule(r#"{"protocol": "icmp", "icmp_type": 8, "action": "allow"}"#);
    assert_eq!(inbound(&c, DB, &ping(8, 0)).verdict, Verdict::Allow);
    assert_eq!(inbound(&c, DB, &ping(0, 0)).verdict, Verdict::Deny);
    let c =
        with_db_rule(r#"{"protocol": "icmp", "icmp_type": 3, "icmp_code": 4, "action": "allow"}"#);
    assert_eq!(inbound(&c, DB, &ping(3, 4)).verdict, Verdict::Allow);
    assert_eq!(inbound(&c, DB, &ping(3, 1)).verdict, Verdict::Deny);
    // The negated pair excludes only packets with both that type and that code.
    let c = with_db_rule(
        r#"{"protocol": "icmp", "!icmp_type": 3, "!icmp_code": 4, "action": "allow"}"#,
    );
    assert_eq!(inbound(&c, DB, &ping(3, 4)).verdict, Verdict::Deny);
    assert_eq!(inbound(&c, DB, &ping(3, 1)).verdict, Verdict::Allow);
    assert_eq!(inbound(&c, DB, &ping(8, 4)).verdict, Verdict::Allow);
    let c = with_db_rule(r#"{"protocol": "icmp", "!icmp_type": 3, "action": "allow"}"#);
    assert_eq!(inbound(&c, DB, &ping(3, 1)).verdict, Verdict::Deny);
}

#[test]
fn nets_and_their_negations() {
    let c = with_db_rule(
        r#"{"src_net": "10.0.0.0/24", "!src_net": "10.0.0.1/32", "dst_net": "10.0.0.2", "action": "allow"}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
    assert_eq!(to_db(&c, "10.0.0.1", 80).verdict, Verdict::Deny);
    assert_eq!(to_db(&c, OUTSIDE, 80).verdict, Verdict::Deny);
    let c = with_db_rule(r#"{"!dst_net": "10.0.0.0/8", "action": "allow"}"#);
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Deny);
}

// ---- bad and changing input ----

#[test]
fn inactive_and_unknown_endpoints_get_nothing() {
    let mut c = cluster();
    let inactive = wep("10.0.0.2", r#""db""#, "").replace("\"active\"", "\"inactive\"");
    put(&mut c, DB, &inactive);
    assert_eq!(to_db(&c, "10.0.0.3", 80).reason, Reason::Inactive);
    c.apply(DB, None);
    assert_eq!(to_db(&c, "10.0.0.3", 80).reason, Reason::UnknownEndpoint);
}

#[test]
fn an_invalid_endpoint_is_treated_as_missing_until_fixed() {
    let mut c = cluster();
    let applied = c.apply(
        DB,
        Some(r#"{"state": "active", "name": "cali1", "ipv4_nets": ["10.0.0.2/24"]}"#),
    );
    assert!(
        matches!(&applied, Applied::Invalid { reason } if reason.contains("ipv4_nets[0]")),
        "{applied:?}"
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).reason, Reason::UnknownEndpoint);
    put(&mut c, DB, &wep("10.0.0.2", r#""db""#, ""));
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
}

#[test]
fn an_invalid_policy_is_treated_as_missing() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    put(
        &mut c,
        &policy_key("t", "p"),
        r#"{"inbound_rules": [{"action": "deny"}]}"#,
    );
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Deny);
    let applied = c.apply(&policy_key("t", "p"), Some(r#"{"selector": "role ="}"#));
    assert!(matches!(applied, Applied::Invalid { .. }));
    assert_eq!(to_db(&c, "10.0.0.3", 80).verdict, Verdict::Allow);
}

#[test]
fn keys_outside_policy_are_ignored() {
    let mut c = cluster();
    assert_eq!(c.apply("/calico/v1/Ready", Some("true")), Applied::Ignored);
    assert_eq!(c.apply("/not/calico", Some("x")), Applied::Ignored);
    assert_eq!(
        c.apply("/calico/bgp/v1/global/as_num", Some("64512")),
        Applied::Ignored
    );
}

#[test]
fn removing_the_last_policy_and_metadata_removes_the_tier() {
    let mut c = cluster();
    put(&mut c, &tier_key("t"), r#"{"order": 1}"#);
    put(&mut c, &policy_key("t", "p"), r#"{}"#);
    c.apply(&policy_key("t", "p"), None);
    assert!(c.tiers.contains_key("t"));
    c.apply(&tier_key("t"), None);
    assert!(c.tiers.is_empty());
}

// ---- properties: order of updates does not matter ----

/// A pool of updates a random cluster is made from.
fn updates() -> Vec<(String, String)> {
    let mut u = vec![
        (WEB.to_owned(), wep("10.0.0.1", r#""web""#, r#""role": "webserver""#)),
        (DB.to_owned(), wep("10.0.0.2", r#""db", "shared""#, r#""role": "db""#)),
        (CLIENT.to_owned(), wep("10.0.0.3", r#""client""#, "")),
        (profile_rules("web"), r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}]}"#.to_owned()),
        (profile_rules("db"), r#"{"inbound_rules": [{"src_tag": "db-user", "action": "allow"}, {"action": "deny"}]}"#.to_owned()),
        (profile_rules("client"), ALLOW_ALL.to_owned()),
        (profile_rules("shared"), ALLOW_ALL.to_owned()),
        ("/calico/v1/policy/profile/client/tags".to_owned(), r#"["db-user"]"#.to_owned()),
        ("/calico/v1/policy/profile/client/labels".to_owned(), r#"{"role": "client"}"#.to_owned()),
        (tier_key("t1"), r#"{"order": 1}"#.to_owned()),
        (tier_key("t2"), r#"{"order": 2}"#.to_owned()),
        (policy_key("t1", "p1"), r#"{"selector": "role != 'db'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [22], "action": "deny"}, {"action": "next-tier"}]}"#.to_owned()),
        (policy_key("t2", "p2"), r#"{"selector": "has(role)", "order": 3, "inbound_rules": [{"src_selector": "role == 'webserver'", "action": "allow"}, {"protocol": "icmp", "action": "log"}]}"#.to_owned()),
        (policy_key("t2", "p3"), r#"{"selector": "all()", "order": 4, "inbound_rules": [{"!src_net": "10.0.0.0/24", "action": "deny"}, {"action": "next-tier"}]}"#.to_owned()),
    ];
    u.sort();
    u
}

fn packets() -> Vec<(&'static str, Packet)> {
    let mut out = Vec::new();
    for target in [(WEB, "10.0.0.1"), (DB, "10.0.0.2"), (CLIENT, "10.0.0.3")] {
        for src in ["10.0.0.1", "10.0.0.2", "10.0.0.3", OUTSIDE] {
            for port in [22, 80, 5432] {
                out.push((target.0, tcp(src, target.1, port)));
            }
            out.push((target.0, icmp(src, target.1, 8, 0)));
        }
    }
    out
}

fn verdicts(c: &Cluster) -> Vec<Explanation> {
    packets()
        .iter()
        .map(|(key, packet)| inbound(c, key, packet))
        .collect()
}

fn build(order: &[usize]) -> Cluster {
    let all = updates();
    let mut c = Cluster::default();
    for &i in order {
        put(&mut c, &all[i].0, &all[i].1);
    }
    c
}

proptest! {
    #[test]
    fn verdicts_do_not_depend_on_the_order_of_updates(
        order in Just((0..updates().len()).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        let sorted: Vec<usize> = (0..updates().len()).collect();
        prop_assert_eq!(verdicts(&build(&order)), verdicts(&build(&sorted)));
    }

    #[test]
    fn an_update_then_its_revert_changes_nothing(
        index in 0..14usize,
        change in prop::sample::select(vec![
            r#"{"inbound_rules": [{"action": "deny"}]}"#,
            r#"["db-user", "other"]"#,
            r#"{"order": 0}"#,
            "not json",
        ]),
    ) {
        let all = updates();
        let sorted: Vec<usize> = (0..all.len()).collect();
        let mut c = build(&sorted);
        let before = verdicts(&c);
        let (key, original) = &all[index];
        c.apply(key, Some(change));
        c.apply(key, Some(original));
        prop_assert_eq!(verdicts(&c), before.clone());
        c.apply(key, None);
        c.apply(key, Some(original));
        prop_assert_eq!(verdicts(&c), before);
    }
}
