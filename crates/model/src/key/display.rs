//! Writing a key back: `Display` of [`Key`] and of the endpoint identities, the exact
//! inverse of `Key::parse` (the round trip is tested in `key.rs` and `tests/keys.rs`).

use std::fmt;

use super::{
    BGP_V1, FELIX_V1, HostEndpointId, IPAM_V2, Key, OPENSTACK_V1, PeerScope, V1,
    WorkloadEndpointId, format_key_cidr, v_segment,
};
use crate::rule::IpVersion;

impl fmt::Display for WorkloadEndpointId {
    /// The part below the host: `<hostname>/workload/<orch>/<workload>/endpoint/<endpoint>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/workload/{}/{}/endpoint/{}",
            self.hostname, self.orchestrator, self.workload, self.endpoint
        )
    }
}

impl fmt::Display for HostEndpointId {
    /// The part below the host: `<hostname>/endpoint/<endpoint>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/endpoint/{}", self.hostname, self.endpoint)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Ready => write!(f, "{V1}/Ready"),
            Key::GlobalConfig { name } => write!(f, "{V1}/config/{name}"),
            Key::HostConfig { hostname, name } => write!(f, "{V1}/host/{hostname}/config/{name}"),
            Key::BirdIp { hostname } => write!(f, "{V1}/host/{hostname}/bird_ip"),
            Key::VxlanTunnel { hostname } => write!(f, "{V1}/host/{hostname}/vxlan_tunnel"),
            Key::WorkloadEndpoint(id) => write!(f, "{V1}/host/{id}"),
            Key::HostEndpoint(id) => write!(f, "{V1}/host/{id}"),
            Key::ProfileRules { profile } => write!(f, "{V1}/policy/profile/{profile}/rules"),
            Key::ProfileTags { profile } => write!(f, "{V1}/policy/profile/{profile}/tags"),
            Key::ProfileLabels { profile } => write!(f, "{V1}/policy/profile/{profile}/labels"),
            Key::TierMetadata { tier } => write!(f, "{V1}/policy/tier/{tier}/metadata"),
            Key::Policy { tier, policy } => write!(f, "{V1}/policy/tier/{tier}/policy/{policy}"),
            Key::StagedPolicy { tier, policy } => {
                write!(f, "{V1}/policy/tier/{tier}/stagedpolicy/{policy}")
            }
            Key::Pool { cidr } => {
                let family = v_segment(IpVersion::of_net(cidr));
                write!(f, "{V1}/ipam/{family}/pool/{}", format_key_cidr(cidr))
            }
            Key::SpacePool { space, cidr } => {
                let family = v_segment(IpVersion::of_net(cidr));
                let cidr = format_key_cidr(cidr);
                write!(f, "{V1}/ipam/space/{space}/{family}/pool/{cidr}")
            }
            Key::SpaceConfig => write!(f, "{V1}/address_space/config"),
            Key::AddressSpace { space } => write!(f, "{V1}/address_space/space/{space}"),
            Key::SpaceMapping { scope, id } => {
                write!(f, "{V1}/address_space/{}/{id}", scope.as_str())
            }
            Key::Block { cidr } => {
                let family = ip_segment(IpVersion::of_net(cidr));
                write!(
                    f,
                    "{IPAM_V2}/assignment/{family}/block/{}",
                    format_key_cidr(cidr)
                )
            }
            Key::Handle { handle } => write!(f, "{IPAM_V2}/handle/{handle}"),
            Key::IpamConfig => write!(f, "{IPAM_V2}/config"),
            Key::BlockAffinity { hostname, cidr } => {
                let family = ip_segment(IpVersion::of_net(cidr));
                let cidr = format_key_cidr(cidr);
                write!(f, "{IPAM_V2}/host/{hostname}/{family}/block/{cidr}")
            }
            Key::GlobalAsNum => write!(f, "{BGP_V1}/global/as_num"),
            Key::NodeMesh { legacy: true } => write!(f, "{V1}/config/bgp_node_mesh"),
            Key::NodeMesh { legacy: false } => write!(f, "{BGP_V1}/global/node_mesh"),
            Key::GlobalBgpLogLevel => write!(f, "{BGP_V1}/global/loglevel"),
            Key::BgpPeer { scope, ip } => {
                let family = v_segment(IpVersion::of_addr(ip));
                match scope {
                    PeerScope::Global => write!(f, "{BGP_V1}/global/peer_{family}/{ip}"),
                    PeerScope::Host(h) => write!(f, "{BGP_V1}/host/{h}/peer_{family}/{ip}"),
                    PeerScope::LegacyGlobal => write!(f, "{V1}/config/bgp_peer_{family}/{ip}"),
                    PeerScope::LegacyHost(h) => write!(f, "{V1}/host/{h}/bgp_peer_{family}/{ip}"),
                }
            }
            Key::HostIp { hostname, version } => {
                write!(
                    f,
                    "{BGP_V1}/host/{hostname}/ip_addr_{}",
                    v_segment(*version)
                )
            }
            Key::HostAsNum { hostname } => write!(f, "{BGP_V1}/host/{hostname}/as_num"),
            Key::RrClusterId { hostname } => write!(f, "{BGP_V1}/host/{hostname}/rr_cluster_id"),
            Key::HostBgpLogLevel { hostname } => write!(f, "{BGP_V1}/host/{hostname}/loglevel"),
            Key::FelixStatus { hostname } => write!(f, "{FELIX_V1}/host/{hostname}/status"),
            Key::FelixLastReportedStatus { hostname } => {
                write!(f, "{FELIX_V1}/host/{hostname}/last_reported_status")
            }
            Key::WorkloadEndpointStatus(id) => write!(f, "{FELIX_V1}/host/{id}"),
            Key::HostEndpointStatus(id) => write!(f, "{FELIX_V1}/host/{id}"),
            Key::LeftOut { group } => write!(f, "{OPENSTACK_V1}/left-out/{group}"),
        }
    }
}

fn ip_segment(version: IpVersion) -> &'static str {
    match version {
        IpVersion::V4 => "ipv4",
        IpVersion::V6 => "ipv6",
    }
}
