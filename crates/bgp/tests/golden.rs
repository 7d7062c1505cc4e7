//! The rendered BIRD configurations, as golden files (`tests/snapshots/`), for each way the
//! cluster can be set up; every one is also checked by BIRD itself (`bird -p`).

use std::process::Command;

use calico_bgp::{BgpConfig, render};
use calico_model::{Key, parse_value};
use calico_testkit::require_tool;

/// A cluster from `etcdctl put`-style pairs.
fn cluster(pairs: &[(&str, &str)]) -> BgpConfig {
    let mut config = BgpConfig::default();
    for (key, value) in pairs {
        let key = Key::parse(key).unwrap_or_else(|e| panic!("{key}: {e}"));
        let value = parse_value(&key, value).unwrap_or_else(|e| panic!("{key}: {e}"));
        config.apply(&key, Some(&value));
    }
    config
}

/// Three registered hosts, two pools, blocks on host1 and host2.
const BASE: &[(&str, &str)] = &[
    (
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        r#"{"cidr": "10.65.0.0/16"}"#,
    ),
    ("/calico/bgp/v1/host/host1/ip_addr_v4", "10.99.0.11"),
    ("/calico/bgp/v1/host/host2/ip_addr_v4", "10.99.0.12"),
    ("/calico/bgp/v1/host/host3/ip_addr_v4", "10.99.0.13"),
    ("/calico/ipam/v2/host/host1/ipv4/block/10.65.1.0-26", ""),
    ("/calico/ipam/v2/host/host1/ipv4/block/10.65.1.64-26", ""),
    ("/calico/ipam/v2/host/host2/ipv4/block/10.65.2.0-26", ""),
];

fn with(extra: &[(&'static str, &'static str)]) -> BgpConfig {
    let mut pairs = BASE.to_vec();
    pairs.extend_from_slice(extra);
    cluster(&pairs)
}

/// Renders, asks BIRD to parse the result, and returns it.
fn checked(config: &BgpConfig, host: &str) -> String {
    let text = render(config, host).unwrap();
    require_tool("bird");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bird.conf");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new("bird")
        .arg("-p")
        .arg("-c")
        .arg(&file)
        .output()
        .expect("bird runs");
    assert!(
        out.status.success(),
        "BIRD rejects the configuration of {host}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn full_mesh() {
    insta::assert_snapshot!(checked(&with(&[]), "host1"));
}

#[test]
fn mesh_off_with_global_peers() {
    let config = with(&[
        ("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#),
        ("/calico/bgp/v1/global/as_num", "64600"),
        (
            "/calico/bgp/v1/global/peer_v4/192.0.2.1",
            r#"{"ip": "192.0.2.1", "as_num": 65001}"#,
        ),
        // The 1.x form of a global peer is read too.
        (
            "/calico/v1/config/bgp_peer_v4/192.0.2.2",
            r#"{"ip": "192.0.2.2", "as_num": 64600}"#,
        ),
    ]);
    insta::assert_snapshot!(checked(&config, "host2"));
}

#[test]
fn per_host_peers_and_as_numbers() {
    let config = with(&[
        ("/calico/bgp/v1/host/host3/as_num", "65003"),
        (
            "/calico/bgp/v1/host/host1/peer_v4/10.99.0.1",
            r#"{"ip": "10.99.0.1", "as_num": 65100}"#,
        ),
        (
            "/calico/v1/host/host1/bgp_peer_v4/10.99.0.2",
            r#"{"ip": "10.99.0.2", "as_num": 65100}"#,
        ),
        (
            "/calico/bgp/v1/host/host2/peer_v4/10.99.0.3",
            r#"{"ip": "10.99.0.3", "as_num": 65100}"#,
        ),
    ]);
    let host1 = checked(&config, "host1");
    assert!(!host1.contains("10.99.0.3"), "host2's peer is not host1's");
    insta::assert_snapshot!(host1);
    insta::assert_snapshot!(checked(&config, "host3"));
}

#[test]
fn route_reflectors_without_the_mesh() {
    let config = with(&[
        ("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#),
        ("/calico/bgp/v1/host/host4/ip_addr_v4", "10.99.0.14"),
        ("/calico/bgp/v1/host/host1/rr_cluster_id", "1.0.0.1"),
        ("/calico/bgp/v1/host/host4/rr_cluster_id", "1.0.0.1"),
    ]);
    // A reflector: clients get `rr client`, the other reflector is a plain peer.
    insta::assert_snapshot!(checked(&config, "host1"));
    // A client: sessions to the reflectors only.
    let client = checked(&config, "host2");
    assert!(
        !client.contains("10.99.0.13"),
        "clients do not peer with each other"
    );
    insta::assert_snapshot!(client);
}

#[test]
fn ipv6_and_log_levels() {
    let config = with(&[
        (
            "/calico/v1/ipam/v6/pool/fd00:65::-64",
            r#"{"cidr": "fd00:65::/64"}"#,
        ),
        ("/calico/bgp/v1/host/host1/ip_addr_v6", "fd00:99::11"),
        ("/calico/bgp/v1/host/host2/ip_addr_v6", "fd00:99::12"),
        ("/calico/ipam/v2/host/host1/ipv6/block/fd00:65::-122", ""),
        ("/calico/bgp/v1/global/loglevel", "warning"),
        ("/calico/bgp/v1/host/host1/loglevel", "debug"),
    ]);
    insta::assert_snapshot!(checked(&config, "host1"));
    let host2 = checked(&config, "host2");
    assert!(
        host2.contains("log stderr { warning, error, fatal, bug };"),
        "{host2}"
    );
}

#[test]
fn a_host_that_is_not_registered_is_an_error_naming_the_key() {
    let error = render(&with(&[]), "host9").unwrap_err().to_string();
    assert!(
        error.contains("/calico/bgp/v1/host/host9/ip_addr_v4"),
        "{error}"
    );
}
