//! The BGP configuration of the cluster as one value, kept up to date from datastore changes:
//! AS numbers, the mesh switch, peers, registered nodes (their addresses and route-reflector
//! cluster ids), pools and each host's IPAM blocks.
//!
//! Both the `bgp/v1` tree and the 1.x keys (`/calico/v1/config/bgp_node_mesh`,
//! `…/bgp_peer_vX/<ip>`, `/calico/v1/host/<host>/bgp_peer_vX/<ip>`) are read; where both say
//! something, the `bgp/v1` tree wins.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use calico_model::bgp::{AsNumber, BgpPeer};
use calico_model::key::{PeerScope, Prefix};
use calico_model::pool::IpPool;
use calico_model::{IpVersion, Key, Value};
use ipnet::IpNet;

/// The AS number when none is configured (Calico's default).
pub const DEFAULT_AS: AsNumber = AsNumber(64512);

/// The datastore prefixes whose keys make up the BGP configuration: of one host (`Some(host)`:
/// what `calico-node` watches to render that host's BIRD configuration) or of the whole cluster
/// (`None`: what `calicoctl node list` reads). Every key [`BgpConfig::is_relevant`] accepts for
/// that scope lies under one of them, in both trees:
///
/// - `/calico/bgp/v1/`: AS numbers, the mesh, peers, each host's addresses, AS, route-reflector
///   cluster id and log level;
/// - `/calico/v1/config/bgp_`: the 1.x mesh switch and global peers;
/// - `/calico/v1/host/<host>/bgp_peer_`: the 1.x peers of the host (for the whole cluster
///   every host's: `/calico/v1/host/`, which also holds endpoints; filter with `is_relevant`);
/// - `/calico/v1/ipam/`: the pools;
/// - `/calico/ipam/v2/host/<host>/`: the host's block affinities (every host's for `None`).
///
/// This is the one list: `calico-node` and `calicoctl` both use it, so they cannot disagree on
/// whether, say, the mesh is on.
pub fn datastore_prefixes(host: Option<&str>) -> Vec<String> {
    let (legacy_peers, affinities) = match host {
        Some(host) => (
            Prefix::LegacyHostBgpPeers {
                hostname: host.to_owned(),
            },
            Prefix::IpamHost {
                hostname: host.to_owned(),
            },
        ),
        None => (Prefix::Hosts, Prefix::IpamHosts),
    };
    [
        Prefix::Bgp,
        Prefix::LegacyGlobalBgp,
        legacy_peers,
        Prefix::Pools,
        affinities,
    ]
    .iter()
    .map(Prefix::to_string)
    .collect()
}

/// What the datastore says about one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub as_num: Option<AsNumber>,
    /// Set on route reflectors.
    pub rr_cluster_id: Option<Ipv4Addr>,
    pub log_level: Option<String>,
    /// The IPAM blocks this host has affinity to.
    pub blocks: BTreeSet<IpNet>,
}

impl Node {
    /// Whether the node is registered (has announced an address).
    pub fn is_registered(&self) -> bool {
        self.ipv4.is_some() || self.ipv6.is_some()
    }
}

/// Where a peer was configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tree {
    Current,
    Legacy,
}

/// The cluster's BGP configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BgpConfig {
    global_as: Option<AsNumber>,
    mesh: BTreeMap<Tree, bool>,
    log_level: Option<String>,
    /// (tree, host or None for global) → peer address → peer.
    peers: BTreeMap<(Tree, Option<String>), BTreeMap<IpAddr, BgpPeer>>,
    pub nodes: BTreeMap<String, Node>,
    pub pools: BTreeMap<IpNet, IpPool>,
}

impl BgpConfig {
    /// The cluster's default AS number.
    pub fn global_as(&self) -> AsNumber {
        self.global_as.unwrap_or(DEFAULT_AS)
    }

    /// A host's AS number: its own, else the cluster's.
    pub fn as_of(&self, host: &str) -> AsNumber {
        self.nodes
            .get(host)
            .and_then(|n| n.as_num)
            .unwrap_or_else(|| self.global_as())
    }

    /// Whether the node-to-node mesh is on (missing = on).
    pub fn mesh_enabled(&self) -> bool {
        self.mesh
            .get(&Tree::Current)
            .or_else(|| self.mesh.get(&Tree::Legacy))
            .copied()
            .unwrap_or(true)
    }

    /// The cluster's BGP log level (`bgp/v1/global/loglevel`), if set.
    pub fn global_log_level(&self) -> Option<&str> {
        self.log_level.as_deref()
    }

    /// The explicit peers for every host (`None`) or one host, the `bgp/v1` tree winning.
    pub fn peers(&self, host: Option<&str>) -> BTreeMap<IpAddr, BgpPeer> {
        let host = host.map(str::to_owned);
        let mut peers = self
            .peers
            .get(&(Tree::Legacy, host.clone()))
            .cloned()
            .unwrap_or_default();
        if let Some(current) = self.peers.get(&(Tree::Current, host)) {
            peers.extend(current.iter().map(|(ip, p)| (*ip, *p)));
        }
        peers
    }

    /// Whether `key` is one this configuration is made from.
    pub fn is_relevant(key: &Key) -> bool {
        matches!(
            key,
            Key::GlobalAsNum
                | Key::NodeMesh { .. }
                | Key::GlobalBgpLogLevel
                | Key::BgpPeer { .. }
                | Key::HostIp { .. }
                | Key::HostAsNum { .. }
                | Key::RrClusterId { .. }
                | Key::HostBgpLogLevel { .. }
                | Key::Pool { .. }
                | Key::BlockAffinity { .. }
        )
    }

    /// Applies one datastore change: `Some(value)` for a write, `None` for a deletion (or a
    /// value that did not validate, which counts as missing).
    pub fn apply(&mut self, key: &Key, value: Option<&Value>) {
        match (key, value) {
            (Key::GlobalAsNum, Some(Value::AsNumber(n))) => self.global_as = Some(*n),
            (Key::GlobalAsNum, _) => self.global_as = None,
            (Key::NodeMesh { legacy }, value) => {
                let tree = if *legacy { Tree::Legacy } else { Tree::Current };
                match value {
                    Some(Value::NodeMesh(mesh)) => {
                        self.mesh.insert(tree, mesh.enabled);
                    }
                    _ => {
                        self.mesh.remove(&tree);
                    }
                }
            }
            (Key::GlobalBgpLogLevel, Some(Value::BgpLogLevel(level))) => {
                self.log_level = Some(level.clone());
            }
            (Key::GlobalBgpLogLevel, _) => self.log_level = None,
            (Key::BgpPeer { scope, ip }, value) => {
                let (tree, host) = match scope {
                    PeerScope::Global => (Tree::Current, None),
                    PeerScope::Host(h) => (Tree::Current, Some(h.clone())),
                    PeerScope::LegacyGlobal => (Tree::Legacy, None),
                    PeerScope::LegacyHost(h) => (Tree::Legacy, Some(h.clone())),
                };
                let peers = self.peers.entry((tree, host)).or_default();
                match value {
                    Some(Value::BgpPeer(peer)) => {
                        peers.insert(*ip, *peer);
                    }
                    _ => {
                        peers.remove(ip);
                    }
                }
            }
            (Key::HostIp { hostname, version }, value) => {
                let node = self.nodes.entry(hostname.clone()).or_default();
                let ip = match value {
                    Some(Value::HostIp(ip)) => *ip,
                    _ => None,
                };
                match version {
                    IpVersion::V4 => {
                        node.ipv4 = match ip {
                            Some(IpAddr::V4(v4)) => Some(v4),
                            _ => None,
                        }
                    }
                    IpVersion::V6 => {
                        node.ipv6 = match ip {
                            Some(IpAddr::V6(v6)) => Some(v6),
                            _ => None,
                        }
                    }
                }
            }
            (Key::HostAsNum { hostname }, value) => {
                self.nodes.entry(hostname.clone()).or_default().as_num = match value {
                    Some(Value::AsNumber(n)) => Some(*n),
                    _ => None,
                };
            }
            (Key::RrClusterId { hostname }, value) => {
                self.nodes
                    .entry(hostname.clone())
                    .or_default()
                    .rr_cluster_id = match value {
                    Some(Value::RrClusterId(id)) => *id,
                    _ => None,
                };
            }
            (Key::HostBgpLogLevel { hostname }, value) => {
                self.nodes.entry(hostname.clone()).or_default().log_level = match value {
                    Some(Value::BgpLogLevel(level)) => Some(level.clone()),
                    _ => None,
                };
            }
            (Key::Pool { cidr }, Some(Value::Pool(pool))) => {
                self.pools.insert(*cidr, pool.clone());
            }
            (Key::Pool { cidr }, _) => {
                self.pools.remove(cidr);
            }
            (Key::BlockAffinity { hostname, cidr }, value) => {
                let node = self.nodes.entry(hostname.clone()).or_default();
                if value.is_some() {
                    node.blocks.insert(*cidr);
                } else {
                    node.blocks.remove(cidr);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use calico_model::parse_value;

    fn set(config: &mut BgpConfig, key: &str, value: &str) {
        let key = Key::parse(key).unwrap();
        let value = parse_value(&key, value).unwrap();
        config.apply(&key, Some(&value));
    }

    /// Every key the configuration is made from lies under one of the prefixes, for the host
    /// (its own keys) and for the whole cluster (every host's).
    #[test]
    fn the_prefixes_cover_every_key_the_config_reads() {
        let keys = [
            "/calico/bgp/v1/global/as_num",
            "/calico/bgp/v1/global/node_mesh",
            "/calico/bgp/v1/global/loglevel",
            "/calico/bgp/v1/global/peer_v4/192.0.2.1",
            "/calico/bgp/v1/host/h1/peer_v6/2001:db8::1",
            "/calico/bgp/v1/host/h1/ip_addr_v4",
            "/calico/bgp/v1/host/h1/as_num",
            "/calico/bgp/v1/host/h1/rr_cluster_id",
            "/calico/bgp/v1/host/h1/loglevel",
            "/calico/v1/config/bgp_node_mesh",
            "/calico/v1/config/bgp_peer_v4/192.0.2.1",
            "/calico/v1/host/h1/bgp_peer_v4/192.0.2.2",
            "/calico/v1/ipam/v4/pool/10.0.0.0-16",
            "/calico/ipam/v2/host/h1/ipv4/block/10.0.0.0-26",
        ];
        for key in keys {
            let parsed = Key::parse(key).unwrap();
            assert!(BgpConfig::is_relevant(&parsed), "{key}");
            for host in [Some("h1"), None] {
                assert!(
                    datastore_prefixes(host).iter().any(|p| key.starts_with(p)),
                    "{key} is not under the prefixes for {host:?}"
                );
            }
        }
        let other = datastore_prefixes(Some("h2"));
        assert!(
            !other
                .iter()
                .any(|p| "/calico/v1/host/h1/bgp_peer_v4/192.0.2.2".starts_with(p))
        );
    }

    #[test]
    fn the_bgp_v1_tree_wins_over_the_1x_keys() {
        let mut config = BgpConfig::default();
        assert!(config.mesh_enabled(), "missing = on");
        set(
            &mut config,
            "/calico/v1/config/bgp_node_mesh",
            r#"{"enabled": false}"#,
        );
        assert!(!config.mesh_enabled());
        set(
            &mut config,
            "/calico/bgp/v1/global/node_mesh",
            r#"{"enabled": true}"#,
        );
        assert!(config.mesh_enabled());
        set(
            &mut config,
            "/calico/v1/config/bgp_peer_v4/192.0.2.1",
            r#"{"ip": "192.0.2.1", "as_num": 65001}"#,
        );
        set(
            &mut config,
            "/calico/bgp/v1/global/peer_v4/192.0.2.1",
            r#"{"ip": "192.0.2.1", "as_num": 65002}"#,
        );
        set(
            &mut config,
            "/calico/v1/config/bgp_peer_v4/192.0.2.9",
            r#"{"ip": "192.0.2.9", "as_num": 65009}"#,
        );
        let peers = config.peers(None);
        assert_eq!(peers.len(), 2);
        assert_eq!(
            peers[&"192.0.2.1".parse::<IpAddr>().unwrap()].as_num,
            AsNumber(65002)
        );
        let key = Key::parse("/calico/bgp/v1/global/node_mesh").unwrap();
        config.apply(&key, None);
        assert!(!config.mesh_enabled(), "back to the 1.x key");
    }

    #[test]
    fn hosts_have_their_own_as_or_the_cluster_s() {
        let mut config = BgpConfig::default();
        assert_eq!(config.as_of("a"), DEFAULT_AS);
        set(&mut config, "/calico/bgp/v1/global/as_num", "64600");
        set(&mut config, "/calico/bgp/v1/host/b/as_num", "65100");
        assert_eq!(config.as_of("a"), AsNumber(64600));
        assert_eq!(config.as_of("b"), AsNumber(65100));
    }
}
