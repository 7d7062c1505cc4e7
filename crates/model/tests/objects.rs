//! The security objects of the data model: every seed example parses, validates and
//! round-trips; every validation rule refuses with the field path and reason it documents.

mod common;

use std::fmt::Debug;

use calico_model::endpoint::{EndpointState, HostEndpoint, MacAddr, WorkloadEndpoint};
use calico_model::policy::{Order, Policy, TierMetadata};
use calico_model::profile::{ProfileLabels, ProfileRules, ProfileTags};
use calico_model::rule::{Action, IpVersion, PortRange, Protocol, Rule};
use calico_model::selector::Selector;
use calico_model::{Validate, from_json};
use common::{fixture, refusal, refused, round_trip};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn seed<T>(name: &str) -> T
where
    T: DeserializeOwned + Serialize + Validate + PartialEq + Debug,
{
    round_trip(&fixture(name))
}

fn rule(json: &str) -> Rule {
    round_trip(json)
}

fn selector(text: &str) -> Selector {
    Selector::parse(text).unwrap()
}

mod seeds {
    use super::*;

    const TESTED: [&str; 19] = [
        "tier-failsafe-metadata.json",
        "tier-my-tier-metadata.json",
        "tier-metadata-default.json",
        "policy-failsafe.json",
        "policy-webserver.json",
        "policy-template.json",
        "rule-bgp.json",
        "rule-template-ports.json",
        "rule-template-icmp.json",
        "rule-docker.json",
        "profile-rules.json",
        "profile-tags.json",
        "profile-labels.json",
        "workload-endpoint.json",
        "workload-endpoint-docker.json",
        "host-endpoint-named.json",
        "host-endpoint-by-address.json",
        "host-endpoint-template.json",
        "host-endpoint-invalid.json",
    ];

    #[test]
    fn every_fixture_is_tested() {
        common::assert_all_fixtures_tested(|name| !common::value_fixture(name), &TESTED);
    }

    #[test]
    fn tier_metadata() {
        let orders = [TESTED[0], TESTED[1], TESTED[2]].map(|name| seed::<TierMetadata>(name).order);
        assert_eq!(
            orders,
            [Order::Number(0.0), Order::Number(100.0), Order::Default]
        );
    }

    #[test]
    fn failsafe_policy() {
        let policy: Policy = seed("policy-failsafe.json");
        assert_eq!(policy.selector, selector("all()"));
        assert_eq!(policy.order, Order::Number(100.0));
        let ssh = &policy.inbound_rules[0];
        assert_eq!(ssh.protocol, Some(Protocol::Tcp));
        assert_eq!(ssh.dst_ports, [PortRange::single(22)]);
        assert_eq!(ssh.src_net, Some("192.0.2.0/24".parse().unwrap()));
        assert_eq!(policy.inbound_rules[2].action, Action::NextTier);
        assert_eq!(policy.outbound_rules[0].dst_ports.len(), 4);
        assert!(!policy.untracked);
    }

    #[test]
    fn webserver_and_template_policies() {
        let web: Policy = seed("policy-webserver.json");
        assert_eq!(web.selector, selector("role == \"webserver\""));
        assert_eq!(web.outbound_rules, [Rule::default()]);
        let template: Policy = seed("policy-template.json");
        assert_eq!(template.order, Order::Default);
        assert!(template.untracked);
    }

    #[test]
    fn rules() {
        let bgp: Rule = seed("rule-bgp.json");
        assert_eq!(bgp.dst_ports, [PortRange::single(179)]);
        let ports: Rule = seed("rule-template-ports.json");
        assert_eq!(ports.not_protocol, Some(Protocol::Udp));
        assert_eq!(ports.not_src_tag.as_deref(), Some("blocked"));
        assert_eq!(ports.not_src_selector, Some(selector("!has(label_name)")));
        assert_eq!(ports.not_dst_ports, [PortRange::new(3000, 3100).unwrap()]);
        assert_eq!(ports.src_ports[1], PortRange::new(2048, 4000).unwrap());
        assert_eq!(ports.action, Action::Deny);
        let icmp: Rule = seed("rule-template-icmp.json");
        assert_eq!((icmp.not_icmp_type, icmp.not_icmp_code), (Some(3), Some(1)));
        assert_eq!(icmp.action, Action::Log);
    }

    #[test]
    fn docker_rule_without_action_allows() {
        let docker: Rule = seed("rule-docker.json");
        assert_eq!(docker.action, Action::Allow);
        let written = serde_json::to_value(&docker).unwrap();
        assert_eq!(written["action"], "allow");
    }

    #[test]
    fn profiles() {
        let rules: ProfileRules = seed("profile-rules.json");
        assert_eq!(rules.inbound_rules[0].src_tag.as_deref(), Some("db-user"));
        assert_eq!(rules.inbound_rules[1].icmp_type, Some(8));
        let tags: ProfileTags = seed("profile-tags.json");
        assert_eq!(tags.0, ["A", "B", "C"]);
        let labels: ProfileLabels = seed("profile-labels.json");
        assert_eq!(labels.0["deployment"], "prod");
    }

    #[test]
    fn workload_endpoints() {
        let ep: WorkloadEndpoint = seed("workload-endpoint.json");
        assert_eq!(ep.state, EndpointState::Active);
        assert_eq!(ep.mac, Some(MacAddr([0xca, 0xfe, 0x1d, 0x52, 0xbb, 0xe9])));
        assert_eq!(
            ep.ipv6_nat[0].ext_ip,
            "2001::2".parse::<std::net::IpAddr>().unwrap()
        );
        let docker: WorkloadEndpoint = seed("workload-endpoint-docker.json");
        assert_eq!(docker.profile_ids, ["prof1"]);
        let written = serde_json::to_value(&docker).unwrap();
        assert_eq!(written["profile_ids"], serde_json::json!(["prof1"]));
        assert!(written.get("profile_id").is_none());
    }

    #[test]
    fn host_endpoints() {
        let named: HostEndpoint = seed("host-endpoint-named.json");
        assert_eq!(named.name.as_deref(), Some("eth0"));
        let by_address: HostEndpoint = seed("host-endpoint-by-address.json");
        assert_eq!(by_address.name, None);
        assert_eq!(by_address.labels["role"], "webserver");
        let template: HostEndpoint = seed("host-endpoint-template.json");
        assert_eq!(template.expected_ipv6_addrs.len(), 1);
    }

    #[test]
    fn invalid_host_endpoint_gets_the_seed_message() {
        let json = fixture("host-endpoint-invalid.json");
        let err = refusal::<HostEndpoint>(&json);
        assert_eq!(err.field, "");
        assert_eq!(
            err.to_string(),
            "'name' or 'expected_ipvX_addrs' must be present"
        );
    }
}

mod rule_validation {
    use super::*;

    /// A policy whose third inbound rule is `rule`, to check full field paths.
    fn third_inbound(rule: &str) -> String {
        format!(r#"{{"inbound_rules": [{{}}, {{"action": "deny"}}, {rule}]}}"#)
    }

    #[test]
    fn ports_need_a_positive_protocol() {
        let reason = "ports need a positive protocol match of tcp, udp, sctp or udplite";
        refused::<Policy>(
            &third_inbound(r#"{"dst_ports": [80]}"#),
            "inbound_rules[2].dst_ports",
            reason,
        );
        refused::<Rule>(
            r#"{"!protocol": "tcp", "!src_ports": [80]}"#,
            "!src_ports",
            reason,
        );
    }

    #[test]
    fn ports_need_a_protocol_that_has_ports() {
        let json = r#"{"protocol": "icmp", "!dst_ports": ["1:2"]}"#;
        refused::<Rule>(
            json,
            "!dst_ports",
            "ports need protocol tcp, udp, sctp or udplite, not icmp",
        );
        refused::<Rule>(
            r#"{"protocol": 47, "src_ports": [1]}"#,
            "src_ports",
            "ports need protocol tcp, udp, sctp or udplite, not 47",
        );
        for protocol in ["\"sctp\"", "\"udplite\"", "17", "\"6\""] {
            rule(&format!(r#"{{"protocol": {protocol}, "src_ports": [1]}}"#));
        }
    }

    #[test]
    fn icmp_matches_need_a_positive_icmp_protocol() {
        let json = third_inbound(r#"{"protocol": "tcp", "icmp_type": 8}"#);
        refused::<Policy>(
            &json,
            "inbound_rules[2].icmp_type",
            "needs protocol icmp or icmpv6, not tcp",
        );
        refused::<Rule>(
            r#"{"!protocol": "icmp", "!icmp_type": 8}"#,
            "!icmp_type",
            "needs a positive protocol match of icmp or icmpv6",
        );
        rule(r#"{"protocol": "icmpv6", "!icmp_type": 128, "!icmp_code": 0}"#);
    }

    #[test]
    fn icmp_code_needs_icmp_type() {
        refused::<Rule>(
            r#"{"protocol": "icmp", "icmp_code": 0}"#,
            "icmp_code",
            "needs icmp_type as well: the kernel cannot match a code alone",
        );
        let json = r#"{"protocol": "icmp", "icmp_type": 8, "!icmp_code": 0}"#;
        refused::<Rule>(
            json,
            "!icmp_code",
            "needs !icmp_type as well: the kernel cannot match a code alone",
        );
    }

    #[test]
    fn icmp_type_is_0_to_254_and_code_0_to_255() {
        refused::<Rule>(
            r#"{"protocol": "icmp", "icmp_type": 255}"#,
            "icmp_type",
            "icmp type 255 is out of range 0-254",
        );
        let err = refusal::<Rule>(r#"{"protocol": "icmp", "icmp_type": 0, "icmp_code": 256}"#);
        assert_eq!(err.field, "icmp_code");
        assert!(err.reason.contains("256"), "{err}");
        rule(r#"{"protocol": "icmp", "icmp_type": 254, "icmp_code": 255}"#);
    }

    #[test]
    fn nets_of_a_rule_are_one_ip_version() {
        let json = r#"{"src_net": "10.0.0.0/8", "!dst_net": "2001:db8::/32"}"#;
        refused::<Rule>(
            json,
            "!dst_net",
            "IPv6 network 2001:db8::/32 mixes IP versions with src_net 10.0.0.0/8",
        );
    }

    #[test]
    fn icmp_protocols_pin_the_ip_version() {
        refused::<Rule>(
            r#"{"protocol": "icmp", "dst_net": "2001:db8::/64"}"#,
            "protocol",
            "protocol icmp cannot match the IPv6 network 2001:db8::/64 of dst_net",
        );
        refused::<Rule>(
            r#"{"protocol": "icmpv6", "!src_net": "10.0.0.1"}"#,
            "protocol",
            "protocol icmpv6 cannot match the IPv4 network 10.0.0.1/32 of !src_net",
        );
        // A negated protocol pins nothing.
        rule(r#"{"!protocol": "icmp", "dst_net": "2001:db8::/64"}"#);
    }

    #[test]
    fn ip_version_comes_from_nets_or_icmp() {
        assert_eq!(
            rule(r#"{"protocol": "icmp"}"#).ip_version(),
            Some(IpVersion::V4)
        );
        assert_eq!(
            rule(r#"{"!dst_net": "2001:db8::1"}"#).ip_version(),
            Some(IpVersion::V6)
        );
        assert_eq!(rule(r#"{"protocol": "tcp"}"#).ip_version(), None);
    }

    /// `ip_version` as networking-calico writes it from a group rule's ethertype: it pins the
    /// rule by itself, round-trips as a number, and a net or ICMP of the other version is refused.
    #[test]
    fn ip_version_field_pins_the_rule_and_must_agree_with_nets_and_icmp() {
        let v6 = rule(r#"{"ip_version": 6, "src_tag": "sg-a"}"#);
        assert_eq!(v6.ip_version(), Some(IpVersion::V6));
        assert_eq!(
            serde_json::to_string(&v6).unwrap(),
            r#"{"ip_version":6,"src_tag":"sg-a","action":"allow"}"#
        );
        let v4 = rule(r#"{"ip_version": 4, "protocol": "icmp", "dst_net": "10.0.0.0/8"}"#);
        assert_eq!(v4.ip_version(), Some(IpVersion::V4));
        refused::<Rule>(
            r#"{"ip_version": 6, "src_net": "10.0.0.0/8"}"#,
            "src_net",
            "IPv4 network 10.0.0.0/8 in a rule of ip_version 6",
        );
        refused::<Rule>(
            r#"{"ip_version": 4, "!dst_net": "2001:db8::/32"}"#,
            "!dst_net",
            "IPv6 network 2001:db8::/32 in a rule of ip_version 4",
        );
        refused::<Rule>(
            r#"{"ip_version": 6, "protocol": "icmp"}"#,
            "protocol",
            "protocol icmp cannot match in a rule of ip_version 6",
        );
        refused::<Rule>(
            r#"{"ip_version": 4, "protocol": "icmpv6"}"#,
            "protocol",
            "protocol icmpv6 cannot match in a rule of ip_version 4",
        );
        for bad in ["5", "\"4\"", "-1"] {
            let err = refusal::<Rule>(&format!(r#"{{"ip_version": {bad}}}"#));
            assert_eq!(err.field, "ip_version", "{bad}: {err}");
        }
    }

    #[test]
    fn nets_are_normalised() {
        let r = rule(r#"{"src_net": "10.1.2.3", "dst_net": "10.1.2.3/8"}"#);
        assert_eq!(r.src_net, Some("10.1.2.3/32".parse().unwrap()));
        assert_eq!(r.dst_net, Some("10.0.0.0/8".parse().unwrap()));
        let err = refusal::<Rule>(r#"{"src_net": "10.0.0.0/33"}"#);
        assert_eq!(err.field, "src_net");
        assert!(
            err.reason.starts_with("invalid network \"10.0.0.0/33\""),
            "{err}"
        );
    }

    #[test]
    fn log_prefix_is_truncated_to_27_characters() {
        let r = rule(r#"{"action": "log", "log_prefix": "abcdefghijklmnopqrstuvwxyz0123456789"}"#);
        assert_eq!(r.log_prefix.as_deref(), Some("abcdefghijklmnopqrstuvwxyz0"));
    }

    #[test]
    fn log_prefix_is_sanitised() {
        let r = rule(r#"{"log_prefix": "drop \"$USER\"; x\u00e9 [a] (b):/c.d-e_f"}"#);
        assert_eq!(r.log_prefix.as_deref(), Some("drop __USER__ x_ [a] (b):/c"));
        assert_eq!(
            rule(r#"{"log_prefix": "a\nb\tc"}"#).log_prefix.as_deref(),
            Some("a_b_c")
        );
    }

    #[test]
    fn unknown_actions_are_refused_naming_the_allowed_set() {
        let err = refusal::<Policy>(&third_inbound(r#"{"action": "drop"}"#));
        assert_eq!(err.field, "inbound_rules[2].action");
        assert_eq!(
            err.reason,
            "unknown variant `drop`, expected one of `allow`, `deny`, `next-tier`, `log`"
        );
    }

    #[test]
    fn missing_action_is_allow() {
        assert_eq!(rule("{}").action, Action::Allow);
        assert_eq!(rule(r#"{"action": "next-tier"}"#).action, Action::NextTier);
    }

    #[test]
    fn selectors_must_parse() {
        let err = refusal::<Rule>(r#"{"!dst_selector": "a == 'b' &&& c"}"#);
        assert_eq!(err.field, "!dst_selector");
        assert!(
            err.reason.starts_with("invalid selector at character "),
            "{err}"
        );
    }

    #[test]
    fn tags_must_be_valid_names() {
        refused::<Rule>(
            r#"{"!src_tag": "db user"}"#,
            "!src_tag",
            "invalid tag \"db user\": character ' ' is not allowed (only letters, digits, '_', '.' and '-')",
        );
    }

    #[test]
    fn protocol_forms() {
        assert_eq!(rule(r#"{"protocol": "6"}"#).protocol, Some(Protocol::Tcp));
        assert_eq!(rule(r#"{"protocol": 58}"#).protocol, Some(Protocol::Icmpv6));
        assert_eq!(
            rule(r#"{"!protocol": "47"}"#).not_protocol,
            Some(Protocol::Number(47))
        );
        let written =
            serde_json::to_string(&rule(r#"{"protocol": "132", "!protocol": 47}"#)).unwrap();
        assert!(
            written.starts_with(r#"{"protocol":"sctp","!protocol":47,"#),
            "{written}"
        );
        let expected = "expected tcp, udp, icmp, icmpv6, sctp, udplite or a number 1-255";
        refused::<Rule>(
            r#"{"protocol": 0}"#,
            "protocol",
            &format!("invalid protocol 0: {expected}"),
        );
        refused::<Rule>(
            r#"{"protocol": "TCP"}"#,
            "protocol",
            &format!("invalid protocol \"TCP\": {expected}"),
        );
        refused::<Rule>(
            r#"{"!protocol": 256}"#,
            "!protocol",
            &format!("invalid protocol 256: {expected}"),
        );
    }

    #[test]
    fn port_forms() {
        let r = rule(r#"{"protocol": "tcp", "dst_ports": [0, "80", "1:65535", "9:9"]}"#);
        let expected =
            [(0, 0), (80, 80), (1, 65535), (9, 9)].map(|(a, b)| PortRange::new(a, b).unwrap());
        assert_eq!(r.dst_ports, expected);
        let err = refusal::<Rule>(r#"{"protocol": "tcp", "dst_ports": [1, "90:80"]}"#);
        assert_eq!(
            err.to_string(),
            "dst_ports[1]: invalid port range \"90:80\": first port is above last"
        );
        let err = refusal::<Rule>(r#"{"protocol": "tcp", "src_ports": [65536]}"#);
        assert_eq!(
            err.to_string(),
            "src_ports[0]: invalid port 65536: expected a port 0-65535"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let err = refusal::<Policy>(&third_inbound(r#"{"protocol": "tcp", "dst_ports": "80"}"#));
        assert_eq!(err.field, "inbound_rules[2].dst_ports");
        assert!(
            err.reason.starts_with("invalid type: string \"80\""),
            "{err}"
        );
        let err = refusal::<Rule>(r#"{"icmp_type": "8"}"#);
        assert_eq!(err.field, "icmp_type");
        let err = refusal::<ProfileRules>(r#"{"outbound_rules": {}}"#);
        assert_eq!(err.field, "outbound_rules");
    }

    #[test]
    fn unknown_fields_are_tolerated() {
        let r = rule(r#"{"ip_version": 4, "comment": {"any": ["thing"]}, "action": "deny"}"#);
        assert_eq!(r.action, Action::Deny);
        round_trip::<Policy>(r#"{"selector": "a == 'b'", "owner": "netsec"}"#);
        round_trip::<ProfileRules>(r#"{"id": "prof1"}"#);
    }

    #[test]
    fn validation_is_idempotent() {
        let mut r = rule(r#"{"protocol": 6, "src_net": "10.9.8.7/16", "log_prefix": "é!"}"#);
        let once = r.clone();
        r.validate().unwrap();
        assert_eq!(r, once);
        assert_eq!(once.protocol, Some(Protocol::Tcp));
    }
}

mod policies {
    use super::*;

    #[test]
    fn order_is_a_number_or_default() {
        let order = |json: &str| round_trip::<TierMetadata>(json).order;
        assert_eq!(order(r#"{"order": "default"}"#), Order::Default);
        assert_eq!(order("{}"), Order::Default);
        assert_eq!(order(r#"{"order": -2.5}"#), Order::Number(-2.5));
        assert_eq!(
            order(r#"{"order": 18446744073709551615}"#),
            Order::Number(u64::MAX as f64)
        );
    }

    #[test]
    fn other_orders_are_refused() {
        refused::<TierMetadata>(
            r#"{"order": "first"}"#,
            "order",
            "invalid order \"first\": expected a number or \"default\"",
        );
        let err = refusal::<Policy>(r#"{"order": true}"#);
        assert_eq!(err.field, "order");
        assert_eq!(
            err.reason,
            "invalid type: boolean `true`, expected a number or \"default\""
        );
        assert_eq!(refusal::<Policy>(r#"{"order": null}"#).field, "order");
    }

    #[test]
    fn default_order_sorts_last() {
        let mut orders = [
            Order::Default,
            Order::Number(10.0),
            Order::Number(-1.0),
            Order::Number(0.5),
        ];
        orders.sort_by(Order::total_cmp);
        let shown = orders.map(|o| o.to_string());
        assert_eq!(shown, ["-1", "0.5", "10", "default"]);
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let policy: Policy = round_trip("{}");
        assert_eq!(policy, Policy::default());
        assert_eq!(policy.selector, selector("all()"));
        assert_eq!(policy.order, Order::Default);
        assert!(policy.inbound_rules.is_empty() && !policy.untracked);
        let written = serde_json::to_value(&policy).unwrap();
        assert_eq!(written["order"], "default");
        assert!(written.get("untracked").is_none());
    }

    #[test]
    fn bad_selector_and_nested_rule_errors_name_the_field() {
        let err = refusal::<Policy>(r#"{"selector": "a == 'b' &&& c"}"#);
        assert_eq!(err.field, "selector");
        let json = r#"{"outbound_rules": [{"protocol": "udp", "icmp_type": 1}]}"#;
        refused::<Policy>(
            json,
            "outbound_rules[0].icmp_type",
            "needs protocol icmp or icmpv6, not udp",
        );
        refused::<ProfileRules>(
            json,
            "outbound_rules[0].icmp_type",
            "needs protocol icmp or icmpv6, not udp",
        );
    }
}

mod round_trips {
    use super::*;
    use ipnet::{IpNet, Ipv4Net, Ipv6Net};
    use proptest::collection::vec;
    use proptest::prelude::*;

    const SELECTORS: [&str; 5] = [
        "all()",
        "role == \"webserver\"",
        "type in {\"frontend\", \"backend\"} && deployment != \"dev\"",
        "! has(label_name)",
        "(a == 'x' || b not in {'y'}) && has(c)",
    ];

    fn net(v6: bool) -> BoxedStrategy<IpNet> {
        if v6 {
            (any::<u128>(), 0..=128u8)
                .prop_map(|(a, len)| IpNet::V6(Ipv6Net::new(a.into(), len).unwrap()))
                .boxed()
        } else {
            (any::<u32>(), 0..=32u8)
                .prop_map(|(a, len)| IpNet::V4(Ipv4Net::new(a.into(), len).unwrap()))
                .boxed()
        }
    }

    fn ports(enabled: bool) -> BoxedStrategy<Vec<PortRange>> {
        let range = (any::<u16>(), any::<u16>())
            .prop_map(|(a, b)| PortRange::new(a.min(b), a.max(b)).unwrap());
        vec(range, if enabled { 0..4 } else { 0..1 }).boxed()
    }

    fn protocol(v6: bool) -> impl Strategy<Value = Option<Protocol>> {
        let icmp = if v6 { Protocol::Icmpv6 } else { Protocol::Icmp };
        let other = (2..=255u8)
            .prop_filter("not icmpv6", |n| *n != 58)
            .prop_map(Protocol::from_number);
        prop_oneof![
            Just(None),
            Just(Some(Protocol::Tcp)),
            Just(Some(Protocol::Sctp)),
            Just(Some(icmp)),
            other.prop_map(Some)
        ]
    }

    fn icmp(enabled: bool) -> BoxedStrategy<(Option<u8>, Option<u8>)> {
        if !enabled {
            return Just((None, None)).boxed();
        }
        prop_oneof![
            Just((None, None)),
            (0..=254u8).prop_map(|t| (Some(t), None)),
            (0..=254u8, any::<u8>()).prop_map(|(t, c)| (Some(t), Some(c))),
        ]
        .boxed()
    }

    fn tag() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-zA-Z0-9_.-]{1,12}")
    }

    fn selector_match() -> impl Strategy<Value = Option<Selector>> {
        proptest::option::of(proptest::sample::select(&SELECTORS[..]).prop_map(selector))
    }

    fn action() -> impl Strategy<Value = Action> {
        proptest::sample::select(&[Action::Allow, Action::Deny, Action::NextTier, Action::Log][..])
    }

    /// Valid by construction: ports only with tcp/sctp, ICMP fields only with ICMP, nets of one
    /// version matching the ICMP protocol.
    fn valid_rule() -> impl Strategy<Value = Rule> {
        (any::<bool>(), any::<bool>())
            .prop_flat_map(|(v6, _)| (Just(v6), protocol(v6)))
            .prop_flat_map(|(v6, protocol)| {
                let with_ports = protocol.is_some_and(Protocol::has_ports);
                let with_icmp = protocol.is_some_and(Protocol::is_icmp);
                let nets = [0; 4].map(|_| proptest::option::of(net(v6)));
                let ports = [0; 4].map(|_| ports(with_ports));
                let matches = (
                    tag(),
                    tag(),
                    tag(),
                    tag(),
                    selector_match(),
                    selector_match(),
                    selector_match(),
                    selector_match(),
                );
                let rest = (
                    icmp(with_icmp),
                    icmp(with_icmp),
                    proptest::option::of(".{0,40}"),
                    action(),
                    proptest::option::of((1..=255u8).prop_map(Protocol::from_number)),
                );
                (Just(protocol), nets, ports, matches, rest)
            })
            .prop_map(
                |(protocol, [sn, nsn, dn, ndn], [sp, nsp, dp, ndp], m, r)| Rule {
                    ip_version: None,
                    protocol,
                    not_protocol: r.4,
                    src_tag: m.0,
                    not_src_tag: m.1,
                    dst_tag: m.2,
                    not_dst_tag: m.3,
                    src_selector: m.4,
                    not_src_selector: m.5,
                    dst_selector: m.6,
                    not_dst_selector: m.7,
                    src_net: sn,
                    not_src_net: nsn,
                    dst_net: dn,
                    not_dst_net: ndn,
                    src_ports: sp,
                    not_src_ports: nsp,
                    dst_ports: dp,
                    not_dst_ports: ndp,
                    icmp_type: r.0.0,
                    icmp_code: r.0.1,
                    not_icmp_type: r.1.0,
                    not_icmp_code: r.1.1,
                    log_prefix: r.2,
                    action: r.3,
                },
            )
    }

    proptest! {
        #[test]
        fn valid_rules_serialise_and_parse_back_equal(mut rule in valid_rule()) {
            rule.validate().unwrap_or_else(|e| panic!("generated an invalid rule: {e}\n{rule:?}"));
            let written = serde_json::to_string(&rule).unwrap();
            let parsed: Rule = from_json(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
            prop_assert_eq!(parsed, rule);
        }
    }
}
