//! Every key of the seed keyspace parses to the right `Key` and prints back exactly; keys
//! outside the keyspace are refused with a reason.

use calico_model::IpVersion;
use calico_model::key::{HostEndpointId, Key, PeerScope, WorkloadEndpointId};

fn parsed(text: &str) -> Key {
    let key = Key::parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(key.to_string(), text, "round trip of {key:?}");
    key
}

fn refused(text: &str, reason_part: &str) {
    match Key::parse(text) {
        Ok(key) => panic!("accepted {text} as {key:?}"),
        Err(err) => {
            assert_eq!(err.key, text);
            assert!(
                err.reason.contains(reason_part),
                "{text}: {err} (expected {reason_part:?})"
            );
        }
    }
}

fn wep(hostname: &str, orchestrator: &str, workload: &str, endpoint: &str) -> WorkloadEndpointId {
    WorkloadEndpointId {
        hostname: hostname.into(),
        orchestrator: orchestrator.into(),
        workload: workload.into(),
        endpoint: endpoint.into(),
    }
}

#[test]
fn ready_and_felix_config() {
    assert_eq!(parsed("/calico/v1/Ready"), Key::Ready);
    for name in [
        "LogFilePath",
        "IpInIpEnabled",
        "LogSeverityScreen",
        "InterfacePrefix",
        "LogSeverityFile",
    ] {
        assert_eq!(
            parsed(&format!("/calico/v1/config/{name}")),
            Key::GlobalConfig { name: name.into() }
        );
    }
    assert_eq!(
        parsed("/calico/v1/host/my-host/config/marker"),
        Key::HostConfig {
            hostname: "my-host".into(),
            name: "marker".into()
        }
    );
    assert_eq!(
        parsed("/calico/v1/host/my-host/bird_ip"),
        Key::BirdIp {
            hostname: "my-host".into()
        }
    );
    assert_eq!(
        parsed("/calico/v1/host/my-host/vxlan_tunnel"),
        Key::VxlanTunnel {
            hostname: "my-host".into()
        }
    );
}

#[test]
fn endpoints() {
    assert_eq!(
        parsed("/calico/v1/host/compute-1/workload/openstack/vm-1/endpoint/tap1234"),
        Key::WorkloadEndpoint(wep("compute-1", "openstack", "vm-1", "tap1234"))
    );
    assert_eq!(
        parsed("/calico/v1/host/node1/workload/docker/ba11f1de4fc4/endpoint/eth0"),
        Key::WorkloadEndpoint(wep("node1", "docker", "ba11f1de4fc4", "eth0"))
    );
    // Kubernetes workload ids carry the namespace: `namespace.pod`.
    assert_eq!(
        parsed("/calico/v1/host/node1/workload/k8s/default.nginx-1/endpoint/eth0"),
        Key::WorkloadEndpoint(wep("node1", "k8s", "default.nginx-1", "eth0"))
    );
    assert_eq!(
        parsed("/calico/v1/host/my-host/endpoint/data-1"),
        Key::HostEndpoint(HostEndpointId {
            hostname: "my-host".into(),
            endpoint: "data-1".into()
        })
    );
}

#[test]
fn profiles_tiers_and_policies() {
    let profile = || "db-user".to_owned();
    assert_eq!(
        parsed("/calico/v1/policy/profile/db-user/rules"),
        Key::ProfileRules { profile: profile() }
    );
    assert_eq!(
        parsed("/calico/v1/policy/profile/db-user/tags"),
        Key::ProfileTags { profile: profile() }
    );
    assert_eq!(
        parsed("/calico/v1/policy/profile/db-user/labels"),
        Key::ProfileLabels { profile: profile() }
    );
    assert_eq!(
        parsed("/calico/v1/policy/tier/failsafe/metadata"),
        Key::TierMetadata {
            tier: "failsafe".into()
        }
    );
    assert_eq!(
        parsed("/calico/v1/policy/tier/my-tier/policy/webserver"),
        Key::Policy {
            tier: "my-tier".into(),
            policy: "webserver".into()
        }
    );
    // 001's form: policies directly in the default tier.
    assert_eq!(
        parsed("/calico/v1/policy/tier/default/policy/allow-dns"),
        Key::Policy {
            tier: "default".into(),
            policy: "allow-dns".into()
        }
    );
}

#[test]
fn staged_policies_live_beside_the_policies_of_their_tier() {
    let key = parsed("/calico/v1/policy/tier/my-tier/stagedpolicy/lockdown");
    assert_eq!(
        key,
        Key::StagedPolicy {
            tier: "my-tier".into(),
            policy: "lockdown".into()
        }
    );
    assert_eq!(key.kind(), "staged policy");
    assert_ne!(
        key,
        parsed("/calico/v1/policy/tier/my-tier/policy/lockdown"),
        "a staged policy and a policy of the same name are two objects"
    );
    refused(
        "/calico/v1/policy/tier/t/stagedpolicy/p@1",
        "invalid policy id",
    );
    refused(
        "/calico/v1/policy/tier/a+b/stagedpolicy/p",
        "invalid tier name",
    );
    refused("/calico/v1/policy/tier/t/stagedpolicy", "not a key");
}

#[test]
fn pools_in_both_versions() {
    let v4 = parsed("/calico/v1/ipam/v4/pool/192.168.0.0-16");
    assert_eq!(
        v4,
        Key::Pool {
            cidr: "192.168.0.0/16".parse().unwrap()
        }
    );
    let v6 = parsed("/calico/v1/ipam/v6/pool/fd80:24e2:f998:72d6::-64");
    assert_eq!(
        v6,
        Key::Pool {
            cidr: "fd80:24e2:f998:72d6::/64".parse().unwrap()
        }
    );
}

#[test]
fn ipam_blocks_handles_and_affinities() {
    assert_eq!(
        parsed("/calico/ipam/v2/assignment/ipv4/block/192.168.0.0-24"),
        Key::Block {
            cidr: "192.168.0.0/24".parse().unwrap()
        }
    );
    assert_eq!(
        parsed("/calico/ipam/v2/assignment/ipv6/block/2001:abcd:def0::-120"),
        Key::Block {
            cidr: "2001:abcd:def0::/120".parse().unwrap()
        }
    );
    assert_eq!(
        parsed("/calico/ipam/v2/handle/0cd47986-24ad-4c00-b9d3-5db9e5c02028"),
        Key::Handle {
            handle: "0cd47986-24ad-4c00-b9d3-5db9e5c02028".into()
        }
    );
    assert_eq!(
        parsed("/calico/ipam/v2/host/calico-host-01/ipv4/block/192.168.0.0-26"),
        Key::BlockAffinity {
            hostname: "calico-host-01".into(),
            cidr: "192.168.0.0/26".parse().unwrap()
        }
    );
    parsed("/calico/ipam/v2/host/calico-host-01/ipv6/block/fd80::-122");
}

#[test]
fn bgp_tree() {
    assert_eq!(parsed("/calico/bgp/v1/global/as_num"), Key::GlobalAsNum);
    assert_eq!(
        parsed("/calico/bgp/v1/global/node_mesh"),
        Key::NodeMesh { legacy: false }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/global/loglevel"),
        Key::GlobalBgpLogLevel
    );
    assert_eq!(
        parsed("/calico/bgp/v1/global/peer_v4/192.0.2.1"),
        Key::BgpPeer {
            scope: PeerScope::Global,
            ip: "192.0.2.1".parse().unwrap()
        }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/global/peer_v6/2001:db8::1"),
        Key::BgpPeer {
            scope: PeerScope::Global,
            ip: "2001:db8::1".parse().unwrap()
        }
    );
    let host = || "node1".to_owned();
    assert_eq!(
        parsed("/calico/bgp/v1/host/node1/ip_addr_v4"),
        Key::HostIp {
            hostname: host(),
            version: IpVersion::V4
        }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/host/node1/ip_addr_v6"),
        Key::HostIp {
            hostname: host(),
            version: IpVersion::V6
        }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/host/node1/as_num"),
        Key::HostAsNum { hostname: host() }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/host/node1/rr_cluster_id"),
        Key::RrClusterId { hostname: host() }
    );
    assert_eq!(
        parsed("/calico/bgp/v1/host/node1/peer_v4/198.51.100.7"),
        Key::BgpPeer {
            scope: PeerScope::Host(host()),
            ip: "198.51.100.7".parse().unwrap()
        }
    );
    parsed("/calico/bgp/v1/host/node1/peer_v6/2001:db8::7");
    parsed("/calico/bgp/v1/host/node1/loglevel");
}

#[test]
fn legacy_bgp_keys_of_the_prose() {
    assert_eq!(
        parsed("/calico/v1/config/bgp_node_mesh"),
        Key::NodeMesh { legacy: true }
    );
    assert_eq!(
        parsed("/calico/v1/config/bgp_peer_v4/192.0.2.1"),
        Key::BgpPeer {
            scope: PeerScope::LegacyGlobal,
            ip: "192.0.2.1".parse().unwrap()
        }
    );
    parsed("/calico/v1/config/bgp_peer_v6/2001:db8::1");
    assert_eq!(
        parsed("/calico/v1/host/node1/bgp_peer_v4/192.0.2.9"),
        Key::BgpPeer {
            scope: PeerScope::LegacyHost("node1".into()),
            ip: "192.0.2.9".parse().unwrap()
        }
    );
    parsed("/calico/v1/host/node1/bgp_peer_v6/2001:db8::9");
}

#[test]
fn felix_status() {
    assert_eq!(
        parsed("/calico/felix/v1/host/node1/status"),
        Key::FelixStatus {
            hostname: "node1".into()
        }
    );
    parsed("/calico/felix/v1/host/node1/last_reported_status");
    assert_eq!(
        parsed("/calico/felix/v1/host/node1/workload/k8s/default.nginx/endpoint/eth0"),
        Key::WorkloadEndpointStatus(wep("node1", "k8s", "default.nginx", "eth0"))
    );
    parsed("/calico/felix/v1/host/node1/endpoint/data-1");
}

#[test]
fn every_key_has_a_kind() {
    let key = parsed("/calico/v1/ipam/v4/pool/10.0.0.0-8");
    assert_eq!(key.kind(), "IP pool");
    assert_eq!(
        parsed("/calico/v1/host/h/endpoint/e").kind(),
        "host endpoint"
    );
}

#[test]
fn keys_outside_the_keyspace_are_refused() {
    refused("/foo/v1/Ready", "start with /calico/");
    refused("calico/v1/Ready", "start with /calico/");
    refused("/calico/v2/Ready", "not a key of the Calico data model");
    refused("/calico/v1/ready", "not a key of the Calico data model");
    refused("/calico/v1/Ready/", "empty path segment");
    refused("/calico/v1//Ready", "empty path segment");
    refused(
        "/calico/v1/policy/profile/p/colour",
        "rules, tags and labels",
    );
    refused("/calico/v1/policy/tier/t/policy", "not a key");
    refused("/calico/v1/host/h/workload/docker/c/endpoint", "not a key");
    refused("/calico/v1/host/h/workload/docker/c/eth0", "not a key");
    refused("/calico/bgp/v1/host/h/colour", "not a key");
    refused("/calico/felix/v1/host/h/colour", "not a key");
    refused(
        "/calico/ipam/v2/assignment/handle/h1",
        "/calico/ipam/v2/handle/h1",
    );
}

#[test]
fn cidrs_in_keys() {
    refused("/calico/v1/ipam/v4/pool/10.0.0.0/8", "not a key");
    refused("/calico/v1/ipam/v4/pool/10.0.0.0", "not a CIDR in key form");
    refused(
        "/calico/v1/ipam/v4/pool/10.0.0.0-33",
        "not a CIDR in key form",
    );
    refused("/calico/v1/ipam/v4/pool/10.0.0.1-8", "host bits");
    refused("/calico/v1/ipam/v4/pool/fd80::-64", "not an IPv4 network");
    refused("/calico/v1/ipam/v6/pool/10.0.0.0-8", "not an IPv6 network");
    refused("/calico/v1/ipam/ipv4/pool/10.0.0.0-8", "expected v4 or v6");
    refused(
        "/calico/ipam/v2/assignment/v4/block/10.0.0.0-26",
        "expected ipv4 or ipv6",
    );
    refused("/calico/v1/ipam/v6/pool/FD80::-64", "write fd80::-64");
    refused(
        "/calico/bgp/v1/global/peer_v4/2001:db8::1",
        "not an IPv4 address",
    );
    refused(
        "/calico/bgp/v1/global/peer_v6/192.0.2.1",
        "not an IPv6 address",
    );
    refused("/calico/bgp/v1/global/peer_v4/192.0.2", "not an IP address");
    refused(
        "/calico/bgp/v1/global/peer_v6/2001:DB8::1",
        "write 2001:db8::1",
    );
}

#[test]
fn names_in_keys_follow_the_id_rules() {
    refused(
        "/calico/v1/policy/profile/bad profile/rules",
        "invalid profile id",
    );
    refused("/calico/v1/policy/tier/a+b/metadata", "invalid tier name");
    refused("/calico/v1/policy/tier/t/policy/p@1", "invalid policy id");
    refused("/calico/v1/host/h/endpoint/eth 0", "invalid endpoint id");
    refused("/calico/v1/host/h h/endpoint/eth0", "invalid hostname");
    refused("/calico/v1/config/Log-Severity", "invalid config name");
    refused("/calico/v1/host/../config/Marker", "invalid hostname");
}
