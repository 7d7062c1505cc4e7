//! Typed keys of the seed keyspace: `Key::parse` reads an etcd key, `Display`
//! (`key/display.rs`) writes it back exactly. CIDRs in keys use the seeds' `/`→`-` form
//! (`10.65.0.0-26`, `fd80:24e2::-64`).
//!
//! Decisions where the seeds disagree or are silent (see docs/keys.md):
//! - Allocation handles live at `/calico/ipam/v2/handle/<id>` (the keyspace tree of 001/003); the
//!   prose's `ipam/v2/assignment/handle/<id>` is refused with a hint naming the tree form.
//! - `/calico/v1/config/bgp_node_mesh` and `/calico/v1/{config,host/<h>}/bgp_peer_vX/<ip>` are the
//!   1.x BGP keys of the prose; the `/calico/bgp/v1/...` tree is the current form. Both parse.
//! - Felix status keys follow Felix 1.x: `/calico/felix/v1/host/<h>/status`,
//!   `.../last_reported_status` and per-endpoint status below the same host prefix.

mod display;
pub mod prefix;

use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::ValidationError;
use crate::names::{self, SHARED};
use crate::rule::IpVersion;
use crate::space::{self, MappingScope};

pub use prefix::Prefix;

/// A workload endpoint's identity:
/// `/calico/v1/host/<hostname>/workload/<orchestrator>/<workload>/endpoint/<endpoint>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadEndpointId {
    pub hostname: String,
    pub orchestrator: String,
    pub workload: String,
    pub endpoint: String,
}

/// A host endpoint's identity: `/calico/v1/host/<hostname>/endpoint/<endpoint>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostEndpointId {
    pub hostname: String,
    pub endpoint: String,
}

/// Where a BGP peer is configured.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeerScope {
    /// `/calico/bgp/v1/global/peer_vX/<ip>`: every host peers with it.
    Global,
    /// `/calico/bgp/v1/host/<hostname>/peer_vX/<ip>`: only this host.
    Host(String),
    /// `/calico/v1/config/bgp_peer_vX/<ip>` (1.x prose form of a global peer).
    LegacyGlobal,
    /// `/calico/v1/host/<hostname>/bgp_peer_vX/<ip>` (1.x prose form of a host peer).
    LegacyHost(String),
}

impl PeerScope {
    /// The host this peer is for, or `None` for every host.
    pub fn hostname(&self) -> Option<&str> {
        match self {
            PeerScope::Global | PeerScope::LegacyGlobal => None,
            PeerScope::Host(h) | PeerScope::LegacyHost(h) => Some(h),
        }
    }
}

/// Every key of the seed keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// `/calico/v1/Ready`: `true` once the datastore is initialised.
    Ready,
    /// `/calico/v1/config/<name>`: a global Felix parameter.
    GlobalConfig {
        name: String,
    },
    /// `/calico/v1/host/<hostname>/config/<name>`: a per-host Felix parameter.
    HostConfig {
        hostname: String,
        name: String,
    },
    /// `/calico/v1/host/<hostname>/bird_ip`: the host's IPv4 address (legacy, "to be retired").
    BirdIp {
        hostname: String,
    },
    /// `/calico/v1/host/<hostname>/vxlan_tunnel`: the host's VXLAN tunnel endpoint (ours).
    VxlanTunnel {
        hostname: String,
    },
    WorkloadEndpoint(WorkloadEndpointId),
    HostEndpoint(HostEndpointId),
    /// `/calico/v1/policy/profile/<profile>/rules`
    ProfileRules {
        profile: String,
    },
    /// `/calico/v1/policy/profile/<profile>/tags`
    ProfileTags {
        profile: String,
    },
    /// `/calico/v1/policy/profile/<profile>/labels`
    ProfileLabels {
        profile: String,
    },
    /// `/calico/v1/policy/tier/<tier>/metadata`
    TierMetadata {
        tier: String,
    },
    /// `/calico/v1/policy/tier/<tier>/policy/<policy>` (`tier` may be `default`).
    Policy {
        tier: String,
        policy: String,
    },
    /// `/calico/v1/policy/tier/<tier>/stagedpolicy/<policy>`: a staged policy (ours, not in
    /// the seeds): a policy's JSON, evaluated without enforcing (its verdicts only reach the
    /// flow logs).
    StagedPolicy {
        tier: String,
        policy: String,
    },
    /// `/calico/v1/ipam/v4/pool/<CIDR>` or `/calico/v1/ipam/v6/pool/<CIDR>`.
    Pool {
        cidr: IpNet,
    },
    /// `/calico/v1/ipam/space/<space>/v4/pool/<CIDR>`: a pool of a private address space (ours).
    SpacePool {
        space: String,
        cidr: IpNet,
    },
    /// `/calico/v1/address_space/config`: the translation prefix of address spaces (ours).
    SpaceConfig,
    /// `/calico/v1/address_space/space/<space>`: a private address space and its ID (ours).
    AddressSpace {
        space: String,
    },
    /// `/calico/v1/address_space/network/<id>` or `.../project/<id>`: the space of a Neutron
    /// network's or project's ports (ours).
    SpaceMapping {
        scope: MappingScope,
        id: String,
    },
    /// `/calico/ipam/v2/assignment/ipvX/block/<CIDR>`
    Block {
        cidr: IpNet,
    },
    /// `/calico/ipam/v2/handle/<handle>`
    Handle {
        handle: String,
    },
    /// `/calico/ipam/v2/host/<hostname>/ipvX/block/<CIDR>`: the host has affinity to the block.
    BlockAffinity {
        hostname: String,
        cidr: IpNet,
    },
    /// `/calico/ipam/v2/config`: cluster-wide IPAM settings (`strict_affinity`, `auto_allocate_blocks`).
    IpamConfig,
    /// `/calico/bgp/v1/global/as_num`
    GlobalAsNum,
    /// `/calico/bgp/v1/global/node_mesh`, or the 1.x `/calico/v1/config/bgp_node_mesh`.
    NodeMesh {
        legacy: bool,
    },
    /// `/calico/bgp/v1/global/loglevel`
    GlobalBgpLogLevel,
    /// A BGP peer, global or per host, in the current or the 1.x form.
    BgpPeer {
        scope: PeerScope,
        ip: IpAddr,
    },
    /// `/calico/bgp/v1/host/<hostname>/ip_addr_v4` or `ip_addr_v6`.
    HostIp {
        hostname: String,
        version: IpVersion,
    },
    /// `/calico/bgp/v1/host/<hostname>/as_num`
    HostAsNum {
        hostname: String,
    },
    /// `/calico/bgp/v1/host/<hostname>/rr_cluster_id`: set on route reflectors.
    RrClusterId {
        hostname: String,
    },
    /// `/calico/bgp/v1/host/<hostname>/loglevel`
    HostBgpLogLevel {
        hostname: String,
    },
    /// `/calico/felix/v1/host/<hostname>/status`: Felix's periodic liveness report.
    FelixStatus {
        hostname: String,
    },
    /// `/calico/felix/v1/host/<hostname>/last_reported_status`
    FelixLastReportedStatus {
        hostname: String,
    },
    /// `/calico/felix/v1/host/<hostname>/workload/<orch>/<workload>/endpoint/<endpoint>`
    WorkloadEndpointStatus(WorkloadEndpointId),
    /// `/calico/felix/v1/host/<hostname>/endpoint/<endpoint>`
    HostEndpointStatus(HostEndpointId),
    /// `/calico/openstack/v1/left-out/<security-group-id>`: the group's Neutron rules that
    /// calico-neutron left out of its profile (ours; Felix never reads it).
    LeftOut {
        group: String,
    },
}

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid key {key:?}: {reason}")]
pub struct KeyError {
    pub key: String,
    pub reason: String,
}

/// The roots of the three trees.
pub const V1: &str = "/calico/v1";
pub const IPAM_V2: &str = "/calico/ipam/v2";
pub const BGP_V1: &str = "/calico/bgp/v1";
pub const FELIX_V1: &str = "/calico/felix/v1";
/// The root of what calico-neutron records for operators (not read by Felix).
pub const OPENSTACK_V1: &str = "/calico/openstack/v1";

impl Key {
    /// Parses an etcd key of the seed keyspace.
    pub fn parse(key: &str) -> Result<Key, KeyError> {
        let fail = |reason: String| KeyError {
            key: key.to_owned(),
            reason,
        };
        let segments = split(key).map_err(fail)?;
        let parsed = parse_segments(&segments).map_err(fail)?;
        parsed.check_names().map_err(|e| fail(e.reason))?;
        Ok(parsed)
    }

    /// Checks the names in the key with the rules of `names` (ids `[a-zA-Z0-9_.-]`, hostnames
    /// and workload ids any printable character but `/`).
    fn check_names(&self) -> Result<(), ValidationError> {
        match self {
            Key::BirdIp { hostname }
            | Key::VxlanTunnel { hostname }
            | Key::HostIp { hostname, .. }
            | Key::HostAsNum { hostname }
            | Key::RrClusterId { hostname }
            | Key::HostBgpLogLevel { hostname }
            | Key::BlockAffinity { hostname, .. }
            | Key::FelixStatus { hostname }
            | Key::FelixLastReportedStatus { hostname } => names::validate_hostname(hostname),
            Key::HostConfig { hostname, name } => {
                names::validate_hostname(hostname)?;
                names::validate_config_name(name)
            }
            Key::BgpPeer { scope, .. } => scope.hostname().map_or(Ok(()), names::validate_hostname),
            Key::WorkloadEndpoint(id) | Key::WorkloadEndpointStatus(id) => {
                names::validate_hostname(&id.hostname)?;
                names::validate_orchestrator_id(&id.orchestrator)?;
                names::validate_workload_id(&id.workload)?;
                names::validate_endpoint_id(&id.endpoint)
            }
            Key::HostEndpoint(id) | Key::HostEndpointStatus(id) => {
                names::validate_hostname(&id.hostname)?;
                names::validate_endpoint_id(&id.endpoint)
            }
            Key::ProfileRules { profile }
            | Key::ProfileTags { profile }
            | Key::ProfileLabels { profile } => names::validate_profile_id(profile),
            Key::LeftOut { group } => names::validate_tag(group),
            Key::TierMetadata { tier } => names::validate_tier_name(tier),
            Key::Policy { tier, policy } | Key::StagedPolicy { tier, policy } => {
                names::validate_tier_name(tier)?;
                names::validate_policy_id(policy)
            }
            Key::Handle { handle } => names::validate_handle_id(handle),
            Key::GlobalConfig { name } => names::validate_config_name(name),
            Key::AddressSpace { space: name } => space::validate_space_object_name(name),
            Key::SpacePool { space, .. } => names::validate_space_name(space),
            Key::SpaceMapping { id, .. } => names::validate_neutron_id(id),
            _ => Ok(()),
        }
    }

    /// What the key holds, in the words of the docs ("workload endpoint", "IP pool", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Key::Ready => "ready flag",
            Key::GlobalConfig { .. } => "global Felix config",
            Key::HostConfig { .. } => "host Felix config",
            Key::BirdIp { .. } => "host BIRD IP",
            Key::VxlanTunnel { .. } => "host VXLAN tunnel",
            Key::WorkloadEndpoint(_) => "workload endpoint",
            Key::HostEndpoint(_) => "host endpoint",
            Key::ProfileRules { .. } => "profile rules",
            Key::ProfileTags { .. } => "profile tags",
            Key::ProfileLabels { .. } => "profile labels",
            Key::TierMetadata { .. } => "tier metadata",
            Key::Policy { .. } => "policy",
            Key::StagedPolicy { .. } => "staged policy",
            Key::Pool { .. } => "IP pool",
            Key::SpacePool { .. } => "IP pool of an address space",
            Key::SpaceConfig => "address space config",
            Key::AddressSpace { .. } => "address space",
            Key::SpaceMapping { .. } => "address space mapping",
            Key::Block { .. } => "IPAM block",
            Key::Handle { .. } => "IPAM handle",
            Key::BlockAffinity { .. } => "IPAM block affinity",
            Key::IpamConfig => "IPAM config",
            Key::GlobalAsNum => "global AS number",
            Key::NodeMesh { .. } => "BGP node mesh",
            Key::GlobalBgpLogLevel => "global BGP log level",
            Key::BgpPeer { .. } => "BGP peer",
            Key::HostIp { .. } => "host BGP address",
            Key::HostAsNum { .. } => "host AS number",
            Key::RrClusterId { .. } => "route reflector cluster ID",
            Key::HostBgpLogLevel { .. } => "host BGP log level",
            Key::FelixStatus { .. } => "Felix status",
            Key::FelixLastReportedStatus { .. } => "Felix last reported status",
            Key::WorkloadEndpointStatus(_) => "workload endpoint status",
            Key::HostEndpointStatus(_) => "host endpoint status",
            Key::LeftOut { .. } => "left-out security group rules",
        }
    }
}

/// Splits `/a/b/c` into segments; every segment must be non-empty.
fn split(key: &str) -> Result<Vec<&str>, String> {
    let rest = key
        .strip_prefix("/calico/")
        .ok_or("keys start with /calico/")?;
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err("empty path segment (doubled or trailing '/')".to_owned());
    }
    Ok(segments)
}

fn parse_segments(segments: &[&str]) -> Result<Key, String> {
    match segments {
        ["v1", rest @ ..] => parse_v1(rest),
        ["ipam", "v2", rest @ ..] => parse_ipam(rest),
        ["bgp", "v1", rest @ ..] => parse_bgp(rest),
        ["felix", "v1", "host", hostname, rest @ ..] => parse_felix(hostname, rest),
        ["openstack", "v1", "left-out", group] => Ok(Key::LeftOut {
            group: (*group).to_owned(),
        }),
        _ => Err(unknown(
            "/calico/v1, /calico/ipam/v2, /calico/bgp/v1, /calico/felix/v1 or \
             /calico/openstack/v1/left-out/<security-group-id>",
        )),
    }
}

fn unknown(expected: &str) -> String {
    format!("not a key of the Calico data model (expected {expected}; see docs/keys.md)")
}

fn parse_v1(segments: &[&str]) -> Result<Key, String> {
    let owned = |s: &&str| (*s).to_owned();
    Ok(match segments {
        ["Ready"] => Key::Ready,
        ["config", "bgp_node_mesh"] => Key::NodeMesh { legacy: true },
        ["config", family, ip] if family.starts_with("bgp_peer_v") => Key::BgpPeer {
            scope: PeerScope::LegacyGlobal,
            ip: peer_ip(family.trim_start_matches("bgp_peer_"), ip)?,
        },
        ["config", name] => Key::GlobalConfig { name: owned(name) },
        ["host", hostname, rest @ ..] => parse_v1_host(hostname, rest)?,
        ["policy", "profile", profile, leaf] => {
            let profile = owned(profile);
            match *leaf {
                "rules" => Key::ProfileRules { profile },
                "tags" => Key::ProfileTags { profile },
                "labels" => Key::ProfileLabels { profile },
                _ => return Err("a profile has only rules, tags and labels".to_owned()),
            }
        }
        ["policy", "tier", tier, "metadata"] => Key::TierMetadata { tier: owned(tier) },
        ["policy", "tier", tier, "policy", policy] => Key::Policy {
            tier: owned(tier),
            policy: owned(policy),
        },
        ["policy", "tier", tier, "stagedpolicy", policy] => Key::StagedPolicy {
            tier: owned(tier),
            policy: owned(policy),
        },
        ["ipam", family, "pool", cidr] => Key::Pool {
            cidr: cidr_of(family, V, cidr)?,
        },
        ["ipam", "space", name, family, "pool", cidr] => parse_space_pool(name, family, cidr)?,
        ["address_space", rest @ ..] => parse_address_space(rest)?,
        _ => return Err(unknown("a key listed in docs/keys.md under /calico/v1")),
    })
}

/// Below `/calico/v1/address_space/` (the keys of address spaces, ours: docs/keys.md).
fn parse_address_space(segments: &[&str]) -> Result<Key, String> {
    Ok(match segments {
        ["config"] => Key::SpaceConfig,
        ["space", space] => Key::AddressSpace {
            space: (*space).to_owned(),
        },
        [scope, id] => match MappingScope::from_segment(scope) {
            Some(scope) => Key::SpaceMapping {
                scope,
                id: (*id).to_owned(),
            },
            None => return Err(expected_space_key()),
        },
        _ => return Err(expected_space_key()),
    })
}

fn expected_space_key() -> String {
    unknown(
        "/calico/v1/address_space/config, .../space/<space>, .../network/<network_id> or \
         .../project/<project_id>",
    )
}

/// `/calico/v1/ipam/space/<space>/<family>/pool/<CIDR>`: IPv4 only, never the shared space.
fn parse_space_pool(space: &str, family: &str, cidr: &str) -> Result<Key, String> {
    let cidr = cidr_of(family, V, cidr)?;
    if IpVersion::of_net(&cidr) != IpVersion::V4 {
        return Err(format!(
            "{cidr}: a private space holds IPv4 pools only (IPv6 pools are the shared space's, \
             at /calico/v1/ipam/v6/pool/<CIDR>)"
        ));
    }
    if space == SHARED {
        return Err(format!(
            "the shared space's pools are at /calico/v1/ipam/v4/pool/{}",
            format_key_cidr(&cidr)
        ));
    }
    Ok(Key::SpacePool {
        space: space.to_owned(),
        cidr,
    })
}

fn parse_v1_host(hostname: &str, segments: &[&str]) -> Result<Key, String> {
    let hostname = hostname.to_owned();
    Ok(match segments {
        ["config", name] => Key::HostConfig {
            hostname,
            name: (*name).to_owned(),
        },
        ["bird_ip"] => Key::BirdIp { hostname },
        ["vxlan_tunnel"] => Key::VxlanTunnel { hostname },
        ["workload", orchestrator, workload, "endpoint", endpoint] => {
            Key::WorkloadEndpoint(WorkloadEndpointId {
                hostname,
                orchestrator: (*orchestrator).to_owned(),
                workload: (*workload).to_owned(),
                endpoint: (*endpoint).to_owned(),
            })
        }
        ["endpoint", endpoint] => Key::HostEndpoint(HostEndpointId {
            hostname,
            endpoint: (*endpoint).to_owned(),
        }),
        [family, ip] if family.starts_with("bgp_peer_v") => Key::BgpPeer {
            scope: PeerScope::LegacyHost(hostname),
            ip: peer_ip(family.trim_start_matches("bgp_peer_"), ip)?,
        },
        _ => {
            return Err(unknown(
                "a key listed in docs/keys.md under /calico/v1/host/<hostname>",
            ));
        }
    })
}

fn parse_ipam(segments: &[&str]) -> Result<Key, String> {
    Ok(match segments {
        ["assignment", family, "block", cidr] => Key::Block {
            cidr: cidr_of(family, IPV, cidr)?,
        },
        ["assignment", "handle", handle] => {
            return Err(format!(
                "handles live at /calico/ipam/v2/handle/{handle} (the keyspace tree's form)"
            ));
        }
        ["config"] => Key::IpamConfig,
        ["handle", handle] => Key::Handle {
            handle: (*handle).to_owned(),
        },
        ["host", hostname, family, "block", cidr] => Key::BlockAffinity {
            hostname: (*hostname).to_owned(),
            cidr: cidr_of(family, IPV, cidr)?,
        },
        _ => {
            return Err(unknown(
                "a key listed in docs/keys.md under /calico/ipam/v2",
            ));
        }
    })
}

fn parse_bgp(segments: &[&str]) -> Result<Key, String> {
    Ok(match segments {
        ["global", "as_num"] => Key::GlobalAsNum,
        ["global", "node_mesh"] => Key::NodeMesh { legacy: false },
        ["global", "loglevel"] => Key::GlobalBgpLogLevel,
        ["global", family, ip] if family.starts_with("peer_v") => Key::BgpPeer {
            scope: PeerScope::Global,
            ip: peer_ip(family.trim_start_matches("peer_"), ip)?,
        },
        ["host", hostname, rest @ ..] => {
            let hostname = (*hostname).to_owned();
            match rest {
                ["ip_addr_v4"] => Key::HostIp {
                    hostname,
                    version: IpVersion::V4,
                },
                ["ip_addr_v6"] => Key::HostIp {
                    hostname,
                    version: IpVersion::V6,
                },
                ["as_num"] => Key::HostAsNum { hostname },
                ["rr_cluster_id"] => Key::RrClusterId { hostname },
                ["loglevel"] => Key::HostBgpLogLevel { hostname },
                [family, ip] if family.starts_with("peer_v") => Key::BgpPeer {
                    scope: PeerScope::Host(hostname),
                    ip: peer_ip(family.trim_start_matches("peer_"), ip)?,
                },
                _ => {
                    return Err(unknown(
                        "a key listed in docs/keys.md under /calico/bgp/v1/host",
                    ));
                }
            }
        }
        _ => return Err(unknown("a key listed in docs/keys.md under /calico/bgp/v1")),
    })
}

fn parse_felix(hostname: &str, segments: &[&str]) -> Result<Key, String> {
    let hostname = hostname.to_owned();
    Ok(match segments {
        ["status"] => Key::FelixStatus { hostname },
        ["last_reported_status"] => Key::FelixLastReportedStatus { hostname },
        ["workload", orchestrator, workload, "endpoint", endpoint] => {
            Key::WorkloadEndpointStatus(WorkloadEndpointId {
                hostname,
                orchestrator: (*orchestrator).to_owned(),
                workload: (*workload).to_owned(),
                endpoint: (*endpoint).to_owned(),
            })
        }
        ["endpoint", endpoint] => Key::HostEndpointStatus(HostEndpointId {
            hostname,
            endpoint: (*endpoint).to_owned(),
        }),
        _ => {
            return Err(unknown(
                "a key listed in docs/keys.md under /calico/felix/v1",
            ));
        }
    })
}

/// Reads the IP version segment: `v4`/`v6` (pools, peers) or `ipv4`/`ipv6` (IPAM), whichever
/// `expected` (one of those two pairs) the key uses at this place.
fn version_of(segment: &str, expected: [&str; 2]) -> Result<IpVersion, String> {
    match segment {
        s if s == expected[0] => Ok(IpVersion::V4),
        s if s == expected[1] => Ok(IpVersion::V6),
        other => Err(format!(
            "unknown IP version {other:?} (expected {} or {})",
            expected[0], expected[1]
        )),
    }
}

const V: [&str; 2] = ["v4", "v6"];
const IPV: [&str; 2] = ["ipv4", "ipv6"];

/// Reads the IP version segment and the CIDR segment, and checks that they agree.
fn cidr_of(version: &str, expected: [&str; 2], segment: &str) -> Result<IpNet, String> {
    let wanted = version_of(version, expected)?;
    let cidr = parse_key_cidr(segment)?;
    if IpVersion::of_net(&cidr) != wanted {
        return Err(format!(
            "{cidr} is not an IPv{} network, as the key's {version} says",
            wanted.number()
        ));
    }
    Ok(cidr)
}

/// Reads the peer address and checks it against the key's IP version.
fn peer_ip(family: &str, segment: &str) -> Result<IpAddr, String> {
    let family = version_of(family, V)?;
    let ip: IpAddr = segment
        .parse()
        .map_err(|_| format!("{segment:?} is not an IP address"))?;
    if ip.to_string() != segment {
        return Err(format!(
            "{segment:?} is not written canonically; write {ip}"
        ));
    }
    if IpVersion::of_addr(&ip) != family {
        return Err(format!(
            "{ip} is not an IPv{} address, as the key says",
            family.number()
        ));
    }
    Ok(ip)
}

/// Reads a CIDR in the key form `10.0.0.0-8` (the `/` replaced by `-`, split at the last `-`).
/// The network must be written canonically (no host bits), so the key has one spelling.
pub fn parse_key_cidr(segment: &str) -> Result<IpNet, String> {
    let bad = || format!("{segment:?} is not a CIDR in key form (e.g. 10.65.0.0-26, fd80::-64)");
    let (addr, len) = segment.rsplit_once('-').ok_or_else(bad)?;
    let cidr: IpNet = format!("{addr}/{len}").parse().map_err(|_| bad())?;
    if cidr.trunc() != cidr {
        return Err(format!(
            "{cidr} has host bits set; the network is {}",
            cidr.trunc()
        ));
    }
    if format_key_cidr(&cidr) != segment {
        return Err(format!(
            "{segment:?} is not written canonically; write {}",
            format_key_cidr(&cidr)
        ));
    }
    Ok(cidr)
}

/// Writes a CIDR in the key form: `10.0.0.0/8` → `10.0.0.0-8`.
pub fn format_key_cidr(cidr: &IpNet) -> String {
    format!("{}-{}", cidr.addr(), cidr.prefix_len())
}

pub(crate) fn v_segment(version: IpVersion) -> &'static str {
    match version {
        IpVersion::V4 => "v4",
        IpVersion::V6 => "v6",
    }
}

impl std::str::FromStr for Key {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Key, KeyError> {
        Key::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_cidrs_split_at_the_last_dash() {
        let v6 = parse_key_cidr("fd80:24e2:f998:72d6::-64").unwrap();
        assert_eq!(v6.to_string(), "fd80:24e2:f998:72d6::/64");
        assert_eq!(format_key_cidr(&v6), "fd80:24e2:f998:72d6::-64");
    }

    #[test]
    fn left_out_keys_round_trip_and_check_the_group_id() {
        let text = "/calico/openstack/v1/left-out/sg-1";
        let key = Key::parse(text).unwrap();
        assert_eq!(
            key,
            Key::LeftOut {
                group: "sg-1".into()
            }
        );
        assert_eq!(key.to_string(), text);
        assert_eq!(
            Prefix::LeftOut.to_string(),
            "/calico/openstack/v1/left-out/"
        );
        assert!(Prefix::LeftOut.holds(text));
        let err = Key::parse("/calico/openstack/v1/left-out/a b").unwrap_err();
        assert!(err.reason.contains("' '"), "{err}");
        assert!(Key::parse("/calico/openstack/v1/left-out/a/b").is_err());
    }

    #[test]
    fn key_cidrs_must_be_canonical_networks() {
        let err = parse_key_cidr("10.0.0.1-8").unwrap_err();
        assert!(err.contains("host bits"), "{err}");
        let err = parse_key_cidr("10.0.0.0/8").unwrap_err();
        assert!(err.contains("key form"), "{err}");
    }

    #[test]
    fn space_keys_round_trip() {
        for text in [
            "/calico/v1/address_space/config",
            "/calico/v1/address_space/space/tenant-a",
            "/calico/v1/address_space/network/3f1c2a9e-2b7d-4c0e-9a51-0d6f7b1e8c44",
            "/calico/v1/address_space/project/ed34337f935745bb911eeb741bc4374b",
            "/calico/v1/ipam/space/tenant-a/v4/pool/10.0.0.0-24",
        ] {
            let key = Key::parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(key.to_string(), text);
        }
    }

    #[test]
    fn the_shared_space_has_no_space_keys_and_private_pools_are_ipv4() {
        let err = Key::parse("/calico/v1/address_space/space/shared").unwrap_err();
        assert!(err.reason.contains("shared space's name"), "{err}");
        let err = Key::parse("/calico/v1/ipam/space/shared/v4/pool/10.0.0.0-24").unwrap_err();
        assert!(
            err.reason.contains("/calico/v1/ipam/v4/pool/10.0.0.0-24"),
            "{err}"
        );
        let err = Key::parse("/calico/v1/ipam/space/a/v6/pool/fd00::-64").unwrap_err();
        assert!(err.reason.contains("IPv4 pools only"), "{err}");
        let err = Key::parse("/calico/v1/address_space/tenant/x").unwrap_err();
        assert!(err.reason.contains(".../network/<network_id>"), "{err}");
        let err = Key::parse("/calico/v1/address_space/space/a b").unwrap_err();
        assert!(err.reason.contains("address space name"), "{err}");
    }
}
