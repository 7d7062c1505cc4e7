//! Endpoints and profiles of the data model: what a workload or host endpoint, and a profile's
//! tags and labels, accept and how each refusal names its field and reason.

mod common;

use calico_model::endpoint::{EndpointState, HostEndpoint, WorkloadEndpoint};
use calico_model::profile::{ProfileLabels, ProfileTags};
use common::{refusal, refused, round_trip};

mod endpoints {
    use super::*;

    const BASE: &str = r#""state": "active", "name": "cali1", "mac": "ca:fe:1d:52:bb:e9""#;

    fn workload(extra: &str) -> String {
        match extra {
            "" => format!("{{{BASE}}}"),
            _ => format!("{{{BASE}, {extra}}}"),
        }
    }

    #[test]
    fn minimal_workload_endpoint() {
        let ep: WorkloadEndpoint = round_trip(r#"{"state": "inactive", "name": "tap1"}"#);
        assert_eq!((ep.state, ep.mac), (EndpointState::Inactive, None));
        assert!(ep.profile_ids.is_empty() && ep.labels.is_empty());
    }

    #[test]
    fn state_and_name_are_required() {
        refused::<WorkloadEndpoint>(r#"{"name": "tap1"}"#, "", "missing field `state`");
        refused::<WorkloadEndpoint>(r#"{"state": "active"}"#, "", "missing field `name`");
        let err = refusal::<WorkloadEndpoint>(r#"{"state": "moved", "name": "tap1"}"#);
        assert_eq!(
            (err.field.as_str(), err.reason.as_str()),
            (
                "state",
                "unknown variant `moved`, expected `active` or `inactive`"
            )
        );
    }

    #[test]
    fn interface_names_are_what_the_kernel_accepts() {
        let name = |n: &str| format!(r#"{{"state": "active", "name": "{n}"}}"#);
        refused::<WorkloadEndpoint>(
            &name("cali0123456789ab"),
            "name",
            "invalid interface name \"cali0123456789ab\": must be 1-15 bytes long",
        );
        refused::<WorkloadEndpoint>(
            &name(""),
            "name",
            "invalid interface name \"\": must be 1-15 bytes long",
        );
        refused::<WorkloadEndpoint>(
            &name("tap/1"),
            "name",
            "invalid interface name \"tap/1\": character '/' is not allowed",
        );
        refused::<WorkloadEndpoint>(
            &name("tap 1"),
            "name",
            "invalid interface name \"tap 1\": character ' ' is not allowed",
        );
        round_trip::<WorkloadEndpoint>(&name("cali0123456789a"));
    }

    #[test]
    fn mac_addresses() {
        let ep: WorkloadEndpoint =
            round_trip(r#"{"state": "active", "name": "t", "mac": "CA-FE-1D-52-BB-0A"}"#);
        assert_eq!(ep.mac.unwrap().to_string(), "ca:fe:1d:52:bb:0a");
        let bad = [
            r#""ca:fe:1d:52:bb""#,
            r#""ca:fe:1d:52:bb:e9:00""#,
            r#""ca:fe:1d:52:bb:+e""#,
            r#""cafe1d52bbe9""#,
        ];
        for mac in bad {
            let err = refusal::<WorkloadEndpoint>(&format!(
                r#"{{"state": "active", "name": "t", "mac": {mac}}}"#
            ));
            assert_eq!(err.field, "mac");
            assert!(
                err.reason.ends_with("expected the form aa:bb:cc:dd:ee:ff"),
                "{err}"
            );
        }
    }

    #[test]
    fn legacy_profile_id_is_one_profile() {
        let ep: WorkloadEndpoint = round_trip(&workload(r#""profile_id": "prof1""#));
        assert_eq!(ep.profile_ids, ["prof1"]);
        let ep: WorkloadEndpoint = round_trip(&workload(
            r#""profile_id": "old", "profile_ids": ["a", "b"]"#,
        ));
        assert_eq!(ep.profile_ids, ["a", "b"]);
        refused::<WorkloadEndpoint>(
            &workload(r#""profile_ids": ["a", "b c"]"#),
            "profile_ids[1]",
            "invalid profile id \"b c\": character ' ' is not allowed (only letters, digits, '_', '.' and '-')",
        );
        assert_eq!(
            refusal::<WorkloadEndpoint>(&workload(r#""profile_id": ["a"]"#)).field,
            "profile_id"
        );
    }

    #[test]
    fn nets_are_single_addresses_of_their_family() {
        let json = workload(r#""ipv4_nets": ["10.0.0.1/32", "10.0.0.0/24"]"#);
        let err = refusal::<WorkloadEndpoint>(&json);
        assert_eq!(
            err.to_string(),
            "ipv4_nets[1]: must be a /32, got 10.0.0.0/24"
        );
        refused::<WorkloadEndpoint>(
            &workload(r#""ipv6_nets": ["2001:db8::/64"]"#),
            "ipv6_nets[0]",
            "must be a /128, got 2001:db8::/64",
        );
        refused::<WorkloadEndpoint>(
            &workload(r#""ipv4_nets": ["2001:db8::1/128"]"#),
            "ipv4_nets[0]",
            "must be an IPv4 network, got 2001:db8::1/128",
        );
        let ep: WorkloadEndpoint = round_trip(&workload(r#""ipv4_nets": ["10.0.0.1"]"#));
        assert_eq!(ep.ipv4_nets[0].to_string(), "10.0.0.1/32");
    }

    #[test]
    fn nat_int_ip_must_be_one_of_the_nets() {
        let json = workload(
            r#""ipv4_nets": ["10.0.0.1/32"], "ipv4_nat": [{"int_ip": "10.0.0.9", "ext_ip": "192.0.2.1"}]"#,
        );
        refused::<WorkloadEndpoint>(
            &json,
            "ipv4_nat[0].int_ip",
            "10.0.0.9 is not one of ipv4_nets",
        );
        let json = workload(
            r#""ipv6_nets": ["2001:db8::1/128"], "ipv6_nat": [{"int_ip": "2001:db8::1", "ext_ip": "192.0.2.1"}]"#,
        );
        refused::<WorkloadEndpoint>(
            &json,
            "ipv6_nat[0].ext_ip",
            "must be an IPv6 address, got 192.0.2.1",
        );
        let json = workload(r#""ipv4_nat": [{"int_ip": "10.0.0.1"}]"#);
        refused::<WorkloadEndpoint>(&json, "ipv4_nat[0]", "missing field `ext_ip`");
    }

    #[test]
    fn gateways_are_of_their_family() {
        refused::<WorkloadEndpoint>(
            &workload(r#""ipv6_gateway": "10.0.0.1""#),
            "ipv6_gateway",
            "must be an IPv6 address, got 10.0.0.1",
        );
        assert_eq!(
            refusal::<WorkloadEndpoint>(&workload(r#""ipv4_gateway": "gw""#)).field,
            "ipv4_gateway"
        );
    }

    #[test]
    fn labels_are_validated() {
        refused::<WorkloadEndpoint>(
            &workload(r#""labels": {"a b": "x"}"#),
            "labels",
            "invalid label name \"a b\": character ' ' is not allowed (only letters, digits, '_', '.', '/' and '-')",
        );
        refused::<HostEndpoint>(
            r#"{"name": "eth0", "labels": {"role": "a\u0000"}}"#,
            "labels.role",
            "invalid label value \"a\\0\": control character '\\0' is not allowed",
        );
        assert_eq!(
            refusal::<WorkloadEndpoint>(&workload(r#""labels": {"n": 1}"#)).field,
            "labels.n"
        );
    }

    #[test]
    fn unknown_fields_are_tolerated() {
        let ep: WorkloadEndpoint = round_trip(&workload(
            r#""moved_to": "elsewhere", "expected_ipv4_addrs": []"#,
        ));
        assert_eq!(ep.name, "cali1");
        round_trip::<HostEndpoint>(r#"{"name": "eth0", "state": "active"}"#);
    }

    #[test]
    fn host_endpoint_needs_a_name_or_an_address() {
        let message = "'name' or 'expected_ipvX_addrs' must be present";
        refused::<HostEndpoint>("{}", "", message);
        refused::<HostEndpoint>(
            r#"{"expected_ipv4_addrs": [], "expected_ipv6_addrs": []}"#,
            "",
            message,
        );
        round_trip::<HostEndpoint>(r#"{"expected_ipv6_addrs": ["2001:db8::1"]}"#);
        round_trip::<HostEndpoint>(r#"{"name": "eth0"}"#);
    }

    #[test]
    fn host_endpoint_fields_are_checked() {
        refused::<HostEndpoint>(
            r#"{"expected_ipv6_addrs": ["10.0.0.1"]}"#,
            "expected_ipv6_addrs[0]",
            "must be an IPv6 address, got 10.0.0.1",
        );
        refused::<HostEndpoint>(
            r#"{"name": "eth:0"}"#,
            "name",
            "invalid interface name \"eth:0\": character ':' is not allowed",
        );
        refused::<HostEndpoint>(
            r#"{"name": "eth0", "profile_ids": [""]}"#,
            "profile_ids[0]",
            "profile id must not be empty",
        );
        assert_eq!(
            refusal::<HostEndpoint>(r#"{"expected_ipv4_addrs": "10.0.0.1"}"#).field,
            "expected_ipv4_addrs"
        );
    }
}

mod profiles {
    use super::*;

    #[test]
    fn tags_are_valid_names() {
        refused::<ProfileTags>(
            r#"["ok", "not/ok"]"#,
            "[1]",
            "invalid tag \"not/ok\": character '/' is not allowed (only letters, digits, '_', '.' and '-')",
        );
        let err = refusal::<ProfileTags>(r#"["ok", 2]"#);
        assert_eq!(err.field, "[1]");
        assert_eq!(refusal::<ProfileTags>(r#"{"tags": []}"#).field, "");
    }

    #[test]
    fn labels_are_a_string_map() {
        let labels: ProfileLabels = round_trip(r#"{"app.kubernetes.io/name": "db", "empty": ""}"#);
        assert_eq!(labels.0.len(), 2);
        refused::<ProfileLabels>(r#"{"": "x"}"#, "", "label name must not be empty");
        assert_eq!(refusal::<ProfileLabels>(r#"{"a": true}"#).field, "a");
    }
}
