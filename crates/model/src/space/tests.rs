use super::*;
use crate::error::{from_json, to_json};
use crate::key::Key;
use crate::value::parse_value;

fn prefix(text: &str) -> TranslationPrefix {
    text.parse().unwrap()
}

#[test]
fn the_room_is_one_group_at_most() {
    assert_eq!(prefix("fd5a:5a5a::/80").max_id(), 65535);
    assert_eq!(prefix("fd5a:5a5a::/48").max_id(), 65535);
    assert_eq!(prefix("fd5a:5a5a::/88").max_id(), 255);
    assert_eq!(prefix("fd00::/95").max_id(), 1);
}

#[test]
fn an_id_outside_the_room_is_refused_naming_the_room() {
    let p = prefix("fd5a:5a5a::/80");
    assert!(p.check_id(65535).is_ok());
    let err = p.check_id(65536).unwrap_err();
    assert!(
        err.contains("65536 is outside the room of the translation prefix fd5a:5a5a::/80")
            && err.contains("16-bit IDs run from 1 to 65535"),
        "{err}"
    );
    assert!(p.check_id(0).is_err());
}

#[test]
fn the_config_refuses_prefixes_without_room_or_not_unicast() {
    let ok: SpaceConfig = from_json(r#"{"translation_prefix": "fd5a:5a5a::/80"}"#).unwrap();
    assert_eq!(
        to_json(&ok).unwrap(),
        r#"{"translation_prefix":"fd5a:5a5a::/80"}"#
    );
    for (raw, part) in [
        (
            r#"{"translation_prefix": "fd5a::/96"}"#,
            "must be at most /95",
        ),
        (r#"{"translation_prefix": "fd5a::1/80"}"#, "host bits"),
        (r#"{"translation_prefix": "ff05::/80"}"#, "multicast"),
        (r#"{"translation_prefix": "fe80::/80"}"#, "link-local"),
        (
            r#"{"translation_prefix": "10.0.0.0/8"}"#,
            "not an IPv6 CIDR",
        ),
        (r#"{"prefix": "fd5a::/80"}"#, "unknown field"),
    ] {
        let err = from_json::<SpaceConfig>(raw).unwrap_err();
        assert!(err.to_string().contains(part), "{raw}: {err}");
    }
    let err = from_json::<SpaceConfig>(r#"{"translation_prefix": "fd5a::/96"}"#).unwrap_err();
    assert_eq!(err.field, "translation_prefix");
}

#[test]
fn a_space_has_an_id_from_one() {
    let space: AddressSpace = from_json(r#"{"id": 7}"#).unwrap();
    assert_eq!(space.id, 7);
    let err = from_json::<AddressSpace>(r#"{"id": 0}"#).unwrap_err();
    assert_eq!(err.field, "id");
    assert!(err.reason.contains("IDs start at 1"), "{err}");
    assert!(from_json::<AddressSpace>(r#"{"id": -1}"#).is_err());
    assert!(from_json::<AddressSpace>(r#"{"id": 4294967296}"#).is_err());
    assert!(from_json::<AddressSpace>(r#"{}"#).is_err());
}

#[test]
fn a_private_pool_is_ipv4_and_neither_tunnelled_nor_masqueraded() {
    let key = Key::parse("/calico/v1/ipam/space/a/v4/pool/10.0.0.0-24").unwrap();
    assert!(parse_value(&key, r#"{"cidr": "10.0.0.0/24"}"#).is_ok());
    for (raw, field) in [
        (r#"{"cidr": "10.0.0.0/24", "ipip": "tunl0"}"#, "ipip"),
        (
            r#"{"cidr": "10.0.0.0/24", "vxlan_mode": "always"}"#,
            "vxlan_mode",
        ),
        (
            r#"{"cidr": "10.0.0.0/24", "masquerade": true}"#,
            "masquerade",
        ),
        (r#"{"cidr": "10.0.1.0/24"}"#, "cidr"),
    ] {
        let err = parse_value(&key, raw).unwrap_err();
        assert_eq!(err.field, field, "{raw}: {err}");
    }
}

#[test]
fn an_endpoint_names_its_space_and_shared_is_no_space() {
    let base =
        r#""state": "active", "name": "tap1", "profile_ids": [], "ipv4_nets": ["10.0.0.5/32"]"#;
    let endpoint: crate::endpoint::WorkloadEndpoint =
        from_json(&format!(r#"{{{base}, "address_space": "tenant-a"}}"#)).unwrap();
    assert_eq!(endpoint.private_space(), Some("tenant-a"));
    assert!(
        to_json(&endpoint)
            .unwrap()
            .contains(r#""address_space":"tenant-a""#)
    );
    let shared: crate::endpoint::WorkloadEndpoint =
        from_json(&format!(r#"{{{base}, "address_space": "shared"}}"#)).unwrap();
    assert_eq!(shared.address_space, None);
    assert!(!to_json(&shared).unwrap().contains("address_space"));
    let err = from_json::<crate::endpoint::WorkloadEndpoint>(&format!(
        r#"{{{base}, "address_space": "a b"}}"#
    ))
    .unwrap_err();
    assert_eq!(err.field, "address_space");
}

#[test]
fn a_mapping_names_a_space_or_shared() {
    let key = Key::parse("/calico/v1/address_space/network/net-1").unwrap();
    assert!(parse_value(&key, r#"{"address_space": "shared"}"#).is_ok());
    let err = parse_value(&key, r#"{"address_space": ""}"#).unwrap_err();
    assert_eq!(err.field, "address_space");
}
