//! Values checked against their keys: IP pools, IPAM blocks and handles, BGP settings, Felix
//! status; the seed examples parse and round-trip, and every mismatch names the field.

mod common;

use calico_model::bgp::{AsNumber, BgpPeer, NodeMesh};
use calico_model::ipam::{AllocationBlock, AllocationHandle};
use calico_model::pool::{IpPool, VxlanMode};
use calico_model::{Key, ValidationError, Value, parse_value};
use common::{fixture, round_trip};

fn value(key: &str, raw: &str) -> Value {
    let key = Key::parse(key).unwrap();
    parse_value(&key, raw).unwrap_or_else(|e| panic!("{key}: {e}\n{raw}"))
}

fn refused(key: &str, raw: &str) -> ValidationError {
    let key = Key::parse(key).unwrap();
    match parse_value(&key, raw) {
        Ok(value) => panic!("{key}: accepted {raw} as {value:?}"),
        Err(err) => err,
    }
}

/// The fixtures of this file (the others belong to tests/objects.rs).
const TESTED: [&str; 6] = [
    "pool-v4.json",
    "pool-v6.json",
    "ipam-block.json",
    "ipam-handle.json",
    "bgp-node-mesh.json",
    "bgp-peer.json",
];

#[test]
fn every_fixture_is_tested() {
    common::assert_all_fixtures_tested(common::value_fixture, &TESTED);
}

#[test]
fn seed_pools_round_trip() {
    let v4: IpPool = round_trip(&fixture("pool-v4.json"));
    assert_eq!(v4.ipip.as_deref(), Some("tunl0"));
    assert!(v4.masquerade);
    let v6: IpPool = round_trip(&fixture("pool-v6.json"));
    assert_eq!(v6.ipip, None);
    assert!(matches!(
        value(
            "/calico/v1/ipam/v4/pool/192.168.0.0-16",
            &fixture("pool-v4.json")
        ),
        Value::Pool(_)
    ));
    value(
        "/calico/v1/ipam/v6/pool/fd80:24e2:f998:72d6::-64",
        &fixture("pool-v6.json"),
    );
}

#[test]
fn pool_rules() {
    let key = "/calico/v1/ipam/v6/pool/fd80::-64";
    let err = refused(key, r#"{"cidr": "fd80::/64", "ipip": "tunl0"}"#);
    assert_eq!(
        (err.field.as_str(), err.reason.as_str()),
        ("ipip", "IPIP is only supported on IPv4 pools")
    );
    let err = refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.1.0.0/16"}"#,
    );
    assert_eq!(err.field, "cidr");
    assert!(err.reason.contains("does not match the key"), "{err}");
    let err = refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.0.0.1/8"}"#,
    );
    assert!(err.reason.contains("host bits"), "{err}");
    let err = refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.0.0.0/33"}"#,
    );
    assert_eq!(err.field, "cidr");
    let err = refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.0.0.0/8", "masquerade": "yes"}"#,
    );
    assert_eq!(err.field, "masquerade");
    let err = refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.0.0.0/8", "ipip": "a/b"}"#,
    );
    assert_eq!(err.field, "ipip");
    // Unknown fields are tolerated.
    value(
        "/calico/v1/ipam/v4/pool/10.0.0.0-8",
        r#"{"cidr": "10.0.0.0/8", "nat_outgoing": true}"#,
    );
}

#[test]
fn vxlan_pools_and_tunnels() {
    let v4 = "/calico/v1/ipam/v4/pool/10.0.0.0-8";
    for (mode, expected) in [
        ("always", VxlanMode::Always),
        ("cross-subnet", VxlanMode::CrossSubnet),
        ("never", VxlanMode::Never),
    ] {
        let json = format!(r#"{{"cidr": "10.0.0.0/8", "vxlan_mode": "{mode}"}}"#);
        let Value::Pool(pool) = value(v4, &json) else {
            panic!("a pool");
        };
        assert_eq!(pool.vxlan_mode, expected);
    }
    let Value::Pool(pool) = value(v4, r#"{"cidr": "10.0.0.0/8"}"#) else {
        panic!("a pool");
    };
    assert_eq!(pool.vxlan_mode, VxlanMode::Never, "the default");
    let err = refused(v4, r#"{"cidr": "10.0.0.0/8", "vxlan_mode": "sometimes"}"#);
    assert_eq!(err.field, "vxlan_mode");
    let err = refused(
        v4,
        r#"{"cidr": "10.0.0.0/8", "vxlan_mode": "always", "ipip": "tunl0"}"#,
    );
    assert_eq!(err.field, "vxlan_mode");
    assert!(err.reason.contains("not both"), "{err}");
    let err = refused(
        "/calico/v1/ipam/v6/pool/fd80::-64",
        r#"{"cidr": "fd80::/64", "vxlan_mode": "always"}"#,
    );
    assert_eq!(
        (err.field.as_str(), err.reason.as_str()),
        ("vxlan_mode", "VXLAN is only supported on IPv4 pools")
    );

    let tunnel = "/calico/v1/host/h1/vxlan_tunnel";
    value(
        tunnel,
        r#"{"address": "10.0.0.1", "mac": "66:00:00:00:00:01", "parent_address": "192.0.2.1/24"}"#,
    );
    let err = refused(
        tunnel,
        r#"{"address": "fd00::1", "mac": "66:00:00:00:00:01", "parent_address": "192.0.2.1/24"}"#,
    );
    assert_eq!(err.field, "address");
    let err = refused(
        tunnel,
        r#"{"address": "10.0.0.1", "mac": "66:00:00:00:00:01"}"#,
    );
    assert!(err.reason.contains("parent_address"), "{err}");
}

#[test]
fn seed_block_round_trips() {
    let block: AllocationBlock = round_trip(&fixture("ipam-block.json"));
    assert_eq!(block.host(), Some("calico-host-01"));
    assert_eq!(block.size(), 256);
    assert_eq!(block.allocations[3], Some(1));
    assert_eq!(
        block.attributes[2].primary.as_deref(),
        Some("adf4589-11ab-c519-af11-098fade2190798")
    );
    value(
        "/calico/ipam/v2/assignment/ipv4/block/192.168.0.0-24",
        &fixture("ipam-block.json"),
    );
    let err = refused(
        "/calico/ipam/v2/assignment/ipv4/block/192.168.1.0-24",
        &fixture("ipam-block.json"),
    );
    assert_eq!(err.field, "cidr");
}

#[test]
fn block_rules() {
    let key = "/calico/ipam/v2/assignment/ipv4/block/10.0.0.0-30";
    let err = refused(
        key,
        r#"{"cidr": "10.0.0.0/30", "allocations": [0, null, null, null], "attributes": []}"#,
    );
    assert_eq!(
        (err.field.as_str(), err.reason.as_str()),
        ("allocations[0]", "refers to attribute 0, but there are 0")
    );
    let err = refused(
        key,
        r#"{"cidr": "10.0.0.0/30", "affinity": "calico-host-01", "allocations": [null, null, null, null]}"#,
    );
    assert_eq!(err.field, "affinity");
    let err = refused(
        key,
        r#"{"cidr": "10.0.0.0/30", "allocations": [0, null, null, null],
            "unallocated": [0], "attributes": [{}]}"#,
    );
    assert_eq!(
        (err.field.as_str(), err.reason.as_str()),
        ("unallocated[0]", "ordinal 0 is allocated")
    );
    let err = refused(
        key,
        r#"{"cidr": "10.0.0.0/30", "allocations": [null, null, null, null], "unallocated": [1, 1]}"#,
    );
    assert_eq!(err.field, "unallocated[1]");
    let err = refused(
        key,
        r#"{"cidr": "10.0.0.0/30", "allocations": [null, null, null, -1]}"#,
    );
    assert_eq!(err.field, "allocations[3]");
    let err = refused(
        "/calico/ipam/v2/assignment/ipv6/block/fd80::-64",
        r#"{"cidr": "fd80::/64", "allocations": []}"#,
    );
    assert!(err.reason.contains("at most 65536"), "{err}");
}

#[test]
fn seed_handle_round_trips() {
    let handle: AllocationHandle = round_trip(&fixture("ipam-handle.json"));
    assert_eq!(handle.block.values().sum::<u64>(), 7);
    value(
        "/calico/ipam/v2/handle/0cd47986-24ad-4c00-b9d3-5db9e5c02028",
        &fixture("ipam-handle.json"),
    );
    let err = refused("/calico/ipam/v2/handle/other", &fixture("ipam-handle.json"));
    assert_eq!(err.field, "id");
    let err = refused(
        "/calico/ipam/v2/handle/h",
        r#"{"id": "h", "block": {"not-a-cidr": 1}}"#,
    );
    assert!(err.field.starts_with("block"), "{err}");
}

#[test]
fn affinities_hold_no_value() {
    let key = "/calico/ipam/v2/host/h1/ipv4/block/10.0.0.0-26";
    assert_eq!(value(key, ""), Value::BlockAffinity);
    let err = refused(key, "yes");
    assert!(err.reason.contains("holds no value"), "{err}");
}

#[test]
fn seed_bgp_objects_round_trip() {
    let mesh: NodeMesh = round_trip(&fixture("bgp-node-mesh.json"));
    assert!(!mesh.enabled);
    value(
        "/calico/v1/config/bgp_node_mesh",
        &fixture("bgp-node-mesh.json"),
    );
    value("/calico/bgp/v1/global/node_mesh", r#"{"enabled": true}"#);
    let peer: BgpPeer = round_trip(&fixture("bgp-peer.json"));
    assert_eq!(peer.as_num, AsNumber(64567));
    for key in [
        "/calico/bgp/v1/global/peer_v4/192.0.2.1",
        "/calico/bgp/v1/host/node1/peer_v4/192.0.2.1",
        "/calico/v1/config/bgp_peer_v4/192.0.2.1",
        "/calico/v1/host/node1/bgp_peer_v4/192.0.2.1",
    ] {
        value(key, &fixture("bgp-peer.json"));
    }
    let err = refused(
        "/calico/bgp/v1/global/peer_v4/192.0.2.2",
        &fixture("bgp-peer.json"),
    );
    assert_eq!(err.field, "ip");
    let err = refused("/calico/bgp/v1/global/node_mesh", r#"{"enabled": "on"}"#);
    assert_eq!(err.field, "enabled");
    let err = refused(
        "/calico/bgp/v1/global/peer_v4/192.0.2.1",
        r#"{"ip": "192.0.2.1", "as_num": "big"}"#,
    );
    assert_eq!(err.field, "as_num");
}

#[test]
fn bgp_text_values() {
    assert_eq!(
        value("/calico/bgp/v1/global/as_num", "64511"),
        Value::AsNumber(AsNumber(64511))
    );
    assert_eq!(
        value("/calico/bgp/v1/host/n/as_num", "65000.1\n"),
        Value::AsNumber(AsNumber(65000 * 65536 + 1))
    );
    assert!(
        refused("/calico/bgp/v1/global/as_num", "-1")
            .reason
            .contains("AS number")
    );
    assert_eq!(
        value("/calico/bgp/v1/host/n/ip_addr_v4", "172.17.8.101"),
        Value::HostIp(Some("172.17.8.101".parse().unwrap()))
    );
    assert_eq!(
        value("/calico/bgp/v1/host/n/ip_addr_v6", ""),
        Value::HostIp(None)
    );
    let err = refused("/calico/bgp/v1/host/n/ip_addr_v6", "172.17.8.101");
    assert!(err.reason.contains("IPv6"), "{err}");
    value("/calico/bgp/v1/host/n/rr_cluster_id", "224.0.0.1");
    refused("/calico/bgp/v1/host/n/rr_cluster_id", "fd80::1");
    value("/calico/bgp/v1/global/loglevel", "debug");
    let err = refused("/calico/bgp/v1/host/n/loglevel", "loud");
    assert!(err.reason.contains("none, debug, info"), "{err}");
    value("/calico/v1/host/n/bird_ip", "172.17.8.101");
    refused("/calico/v1/host/n/bird_ip", "fd80::1");
}

#[test]
fn ready_and_config() {
    assert_eq!(value("/calico/v1/Ready", "true"), Value::Ready(true));
    assert_eq!(value("/calico/v1/Ready", "false\n"), Value::Ready(false));
    let err = refused("/calico/v1/Ready", "yes");
    assert_eq!(err.reason, r#"expected true or false, got "yes""#);
    assert_eq!(
        value("/calico/v1/config/LogSeverityScreen", "DEBUG"),
        Value::Config("DEBUG".into())
    );
    value("/calico/v1/host/h/config/marker", "created");
}

#[test]
fn felix_status_values() {
    value(
        "/calico/felix/v1/host/h/status",
        r#"{"time": "2016-06-01T12:00:00Z", "uptime": 30.5, "first_update": false}"#,
    );
    value(
        "/calico/felix/v1/host/h/workload/k8s/ns.pod/endpoint/eth0",
        r#"{"status": "up"}"#,
    );
    let err = refused(
        "/calico/felix/v1/host/h/endpoint/eth0",
        r#"{"status": "sideways"}"#,
    );
    assert_eq!(err.field, "status");
    let err = refused(
        "/calico/felix/v1/host/h/status",
        r#"{"time": "2016-06-01T12:00:00Z", "uptime": -1}"#,
    );
    assert_eq!(err.field, "uptime");
}

#[test]
fn security_objects_are_typed_by_key() {
    let policy = r#"{"selector": "role == 'webserver'", "order": 100,
                     "inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}],
                     "outbound_rules": [{"action": "allow"}]}"#;
    assert!(matches!(
        value("/calico/v1/policy/tier/my-tier/policy/webserver", policy),
        Value::Policy(_)
    ));
    // A staged policy holds a policy's JSON and is validated as one; never untracked.
    assert!(matches!(
        value(
            "/calico/v1/policy/tier/my-tier/stagedpolicy/webserver",
            policy
        ),
        Value::StagedPolicy(_)
    ));
    let staged = "/calico/v1/policy/tier/t/stagedpolicy/s";
    let err = refused(staged, r#"{"inbound_rules": [{"action": "sideways"}]}"#);
    assert!(err.field.starts_with("inbound_rules[0]"), "{err}");
    let err = refused(staged, r#"{"untracked": true}"#);
    assert_eq!(err.field, "untracked");
    assert!(err.reason.contains("cannot be untracked"), "{err}");
    // The same text is not a profile's rules (wrong shape for that key): the error names why.
    assert!(matches!(
        value(
            "/calico/v1/policy/tier/my-tier/metadata",
            r#"{"order": 100}"#
        ),
        Value::TierMetadata(_)
    ));
    let err = refused("/calico/v1/policy/profile/p/tags", r#"{"order": 100}"#);
    assert!(err.reason.contains("expected a sequence"), "{err}");
    let err = refused("/calico/v1/policy/profile/p/labels", r#"["a"]"#);
    assert!(err.reason.contains("expected a map"), "{err}");
}
