//! Key prefixes: what the system lists, watches and deletes under, spelled here beside the
//! keys so that no other crate spells the keyspace. Each ends in `/`, except the name prefixes
//! (`bgp_peer_`, `bgp_`) that select keys by the start of their last segment.

use std::fmt;

use super::{BGP_V1, FELIX_V1, IPAM_V2, OPENSTACK_V1, V1, v_segment};
use crate::rule::IpVersion;

/// A prefix of the keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    /// `/calico/`: everything Calico stores.
    Calico,
    /// `/calico/v1/`: what Felix watches.
    V1,
    /// `/calico/v1/config/`: the global Felix parameters.
    GlobalConfig,
    /// `/calico/v1/config/bgp_`: the 1.x global BGP settings (`bgp_node_mesh`, `bgp_peer_vX`).
    LegacyGlobalBgp,
    /// `/calico/v1/host/`: every host's endpoints, parameters and records.
    Hosts,
    /// `/calico/v1/host/<hostname>/`.
    Host { hostname: String },
    /// `/calico/v1/host/<hostname>/config/`: the host's Felix parameters.
    HostConfig { hostname: String },
    /// `/calico/v1/host/<hostname>/bgp_peer_`: the host's 1.x BGP peers.
    LegacyHostBgpPeers { hostname: String },
    /// `/calico/v1/host/<hostname>/workload/<orchestrator>/`: one orchestrator's workloads on
    /// the host.
    Workloads {
        hostname: String,
        orchestrator: String,
    },
    /// `/calico/v1/policy/`: tiers, policies and profiles.
    Policy,
    /// `/calico/v1/policy/tier/`.
    Tiers,
    /// `/calico/v1/policy/tier/<tier>/policy/`: the policies of one tier.
    TierPolicies { tier: String },
    /// `/calico/v1/policy/tier/<tier>/stagedpolicy/`: the staged policies of one tier.
    TierStagedPolicies { tier: String },
    /// `/calico/v1/policy/profile/`.
    Profiles,
    /// `/calico/v1/policy/profile/<profile>/`: its rules, tags and labels.
    Profile { profile: String },
    /// `/calico/v1/ipam/`: every IP pool.
    Pools,
    /// `/calico/v1/ipam/v4/pool/` or `…/v6/pool/`.
    PoolsOf(IpVersion),
    /// `/calico/v1/ipam/space/`: the pools of every private address space.
    SpacePools,
    /// `/calico/v1/ipam/space/<space>/`: the pools of one private address space.
    SpacePoolsOf { space: String },
    /// `/calico/v1/address_space/`: the translation prefix, the spaces and the mappings.
    AddressSpaces,
    /// `/calico/ipam/v2/`: blocks, handles, affinities and the IPAM config.
    Ipam,
    /// `/calico/ipam/v2/host/`: every host's block affinities.
    IpamHosts,
    /// `/calico/ipam/v2/host/<hostname>/`.
    IpamHost { hostname: String },
    /// `/calico/bgp/v1/`: the BGP tree.
    Bgp,
    /// `/calico/bgp/v1/host/`: every host's BGP records.
    BgpHosts,
    /// `/calico/bgp/v1/host/<hostname>/`.
    BgpHost { hostname: String },
    /// `/calico/felix/v1/host/<hostname>/`: what Felix reports about the host.
    Status { hostname: String },
    /// `/calico/libnetwork/v1/host/<hostname>/pending/`: the Docker driver's endpoints between
    /// `CreateEndpoint` and `Join` (its own records, outside the tree Felix reads).
    DockerPending { hostname: String },
    /// `/calico/openstack/v1/left-out/`: the security group rules calico-neutron left out.
    LeftOut,
}

impl Prefix {
    /// Every prefix a host's records live under (`calicoctl node remove` and `diags`): its
    /// endpoints and parameters, BGP records, Felix's reports and block affinities.
    pub fn of_host(hostname: &str) -> [Prefix; 4] {
        let hostname = hostname.to_owned();
        [
            Prefix::Host {
                hostname: hostname.clone(),
            },
            Prefix::BgpHost {
                hostname: hostname.clone(),
            },
            Prefix::Status {
                hostname: hostname.clone(),
            },
            Prefix::IpamHost { hostname },
        ]
    }

    /// Whether `key` is under this prefix.
    pub fn holds(&self, key: &str) -> bool {
        key.starts_with(&self.to_string())
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefix::Calico => write!(f, "/calico/"),
            Prefix::V1 => write!(f, "{V1}/"),
            Prefix::GlobalConfig => write!(f, "{V1}/config/"),
            Prefix::LegacyGlobalBgp => write!(f, "{V1}/config/bgp_"),
            Prefix::Hosts => write!(f, "{V1}/host/"),
            Prefix::Host { hostname } => write!(f, "{V1}/host/{hostname}/"),
            Prefix::HostConfig { hostname } => write!(f, "{V1}/host/{hostname}/config/"),
            Prefix::LegacyHostBgpPeers { hostname } => {
                write!(f, "{V1}/host/{hostname}/bgp_peer_")
            }
            Prefix::Workloads {
                hostname,
                orchestrator,
            } => write!(f, "{V1}/host/{hostname}/workload/{orchestrator}/"),
            Prefix::Policy => write!(f, "{V1}/policy/"),
            Prefix::Tiers => write!(f, "{V1}/policy/tier/"),
            Prefix::TierPolicies { tier } => write!(f, "{V1}/policy/tier/{tier}/policy/"),
            Prefix::TierStagedPolicies { tier } => {
                write!(f, "{V1}/policy/tier/{tier}/stagedpolicy/")
            }
            Prefix::Profiles => write!(f, "{V1}/policy/profile/"),
            Prefix::Profile { profile } => write!(f, "{V1}/policy/profile/{profile}/"),
            Prefix::Pools => write!(f, "{V1}/ipam/"),
            Prefix::PoolsOf(version) => write!(f, "{V1}/ipam/{}/pool/", v_segment(*version)),
            Prefix::SpacePools => write!(f, "{V1}/ipam/space/"),
            Prefix::SpacePoolsOf { space } => write!(f, "{V1}/ipam/space/{space}/"),
            Prefix::AddressSpaces => write!(f, "{V1}/address_space/"),
            Prefix::Ipam => write!(f, "{IPAM_V2}/"),
            Prefix::IpamHosts => write!(f, "{IPAM_V2}/host/"),
            Prefix::IpamHost { hostname } => write!(f, "{IPAM_V2}/host/{hostname}/"),
            Prefix::Bgp => write!(f, "{BGP_V1}/"),
            Prefix::BgpHosts => write!(f, "{BGP_V1}/host/"),
            Prefix::BgpHost { hostname } => write!(f, "{BGP_V1}/host/{hostname}/"),
            Prefix::Status { hostname } => write!(f, "{FELIX_V1}/host/{hostname}/"),
            Prefix::DockerPending { hostname } => {
                write!(f, "/calico/libnetwork/v1/host/{hostname}/pending/")
            }
            Prefix::LeftOut => write!(f, "{OPENSTACK_V1}/left-out/"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{HostEndpointId, Key, PeerScope, WorkloadEndpointId};

    /// Each prefix holds the keys it is for, and not those of a host whose name it starts.
    #[test]
    fn prefixes_hold_their_keys() {
        let h = || "h1".to_owned();
        let workload = Key::WorkloadEndpoint(WorkloadEndpointId {
            hostname: h(),
            orchestrator: "k8s".into(),
            workload: "ns.pod".into(),
            endpoint: "eth0".into(),
        });
        let cases = [
            (Prefix::Calico, Key::Ready),
            (Prefix::V1, Key::Ready),
            (Prefix::GlobalConfig, Key::GlobalConfig { name: "X".into() }),
            (Prefix::LegacyGlobalBgp, Key::NodeMesh { legacy: true }),
            (Prefix::Hosts, workload.clone()),
            (Prefix::Host { hostname: h() }, workload.clone()),
            (
                Prefix::Workloads {
                    hostname: h(),
                    orchestrator: "k8s".into(),
                },
                workload,
            ),
            (
                Prefix::HostConfig { hostname: h() },
                Key::HostConfig {
                    hostname: h(),
                    name: "X".into(),
                },
            ),
            (
                Prefix::LegacyHostBgpPeers { hostname: h() },
                Key::BgpPeer {
                    scope: PeerScope::LegacyHost(h()),
                    ip: "192.0.2.1".parse().unwrap(),
                },
            ),
            (
                Prefix::TierPolicies { tier: "t".into() },
                Key::Policy {
                    tier: "t".into(),
                    policy: "p".into(),
                },
            ),
            (
                Prefix::TierStagedPolicies { tier: "t".into() },
                Key::StagedPolicy {
                    tier: "t".into(),
                    policy: "p".into(),
                },
            ),
            (Prefix::Tiers, Key::TierMetadata { tier: "t".into() }),
            (Prefix::Policy, Key::TierMetadata { tier: "t".into() }),
            (
                Prefix::Profile {
                    profile: "p".into(),
                },
                Key::ProfileRules {
                    profile: "p".into(),
                },
            ),
            (
                Prefix::Profiles,
                Key::ProfileTags {
                    profile: "p".into(),
                },
            ),
            (
                Prefix::PoolsOf(IpVersion::V6),
                Key::Pool {
                    cidr: "fd00::/64".parse().unwrap(),
                },
            ),
            (
                Prefix::Pools,
                Key::Pool {
                    cidr: "10.0.0.0/16".parse().unwrap(),
                },
            ),
            (Prefix::Ipam, Key::IpamConfig),
            (
                Prefix::IpamHost { hostname: h() },
                Key::BlockAffinity {
                    hostname: h(),
                    cidr: "10.0.0.0/26".parse().unwrap(),
                },
            ),
            (Prefix::Bgp, Key::GlobalAsNum),
            (
                Prefix::BgpHost { hostname: h() },
                Key::HostAsNum { hostname: h() },
            ),
            (
                Prefix::Status { hostname: h() },
                Key::HostEndpointStatus(HostEndpointId {
                    hostname: h(),
                    endpoint: "eth0".into(),
                }),
            ),
        ];
        for (prefix, key) in cases {
            let text = key.to_string();
            assert!(prefix.holds(&text), "{prefix} should hold {text}");
            assert_eq!(Key::parse(&text), Ok(key));
        }
        for prefix in Prefix::of_host("h1") {
            assert!(prefix.to_string().ends_with("/h1/"), "{prefix}");
            assert!(!prefix.holds(&prefix.to_string().replace("/h1/", "/h12/")));
        }
        assert_eq!(
            Prefix::DockerPending { hostname: h() }.to_string(),
            "/calico/libnetwork/v1/host/h1/pending/"
        );
    }
}
