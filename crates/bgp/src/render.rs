//! The BIRD 2 configuration of one host, rendered from [`BgpConfig`] (template:
//! `bird.conf.j2`). Pure: the same configuration always renders the same text.

use std::net::{IpAddr, Ipv4Addr};

use calico_model::bgp::AsNumber;
use ipnet::IpNet;
use serde::Serialize;

use crate::config::{BgpConfig, Node};

const TEMPLATE: &str = include_str!("bird.conf.j2");

/// Why a host's configuration cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error(
        "host {0} is not registered: /calico/bgp/v1/host/{0}/ip_addr_v4 (or ip_addr_v6) is missing; \
         start calico-node there or write the address"
    )]
    NotRegistered(String),
    #[error("the BIRD template failed: {0}")]
    Template(String),
}

/// How a session came about (named in `calicoctl node status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerKind {
    /// Node-to-node mesh.
    Mesh,
    /// A route reflector, or (on a reflector) another reflector or a client.
    Rr,
    /// A global peer (`bgp/v1/global/peer_vX`).
    Global,
    /// A peer of this host only (`bgp/v1/host/<host>/peer_vX`).
    Node,
}

impl PeerKind {
    /// The prefix of the protocol names of this kind.
    pub fn prefix(self) -> &'static str {
        match self {
            PeerKind::Mesh => "Mesh",
            PeerKind::Rr => "Rr",
            PeerKind::Global => "Global",
            PeerKind::Node => "Node",
        }
    }

    /// The kind of a BIRD protocol name this renderer made, if it is one.
    pub fn of_protocol(name: &str) -> Option<PeerKind> {
        [
            PeerKind::Mesh,
            PeerKind::Rr,
            PeerKind::Global,
            PeerKind::Node,
        ]
        .into_iter()
        .find(|k| name.starts_with(&format!("{}_", k.prefix())))
    }
}

/// One BGP session of the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Peer {
    pub name: String,
    pub kind: PeerKind,
    pub ip: IpAddr,
    pub as_num: u32,
    /// `v4` or `v6`: which template (and channel) the session uses.
    pub family: &'static str,
    /// Between Calico hosts (mesh and route reflection): multi-hop, next hops resolved
    /// recursively, as Calico 1.x's template had it, so hosts on different subnets peer through
    /// the routers between them.
    pub multihop: bool,
    /// Set when this host reflects routes to the peer.
    pub rr_cluster_id: Option<Ipv4Addr>,
    pub comment: String,
}

#[derive(Serialize)]
struct Context<'a> {
    host: &'a str,
    router_id: Ipv4Addr,
    log: String,
    as_num: u32,
    ipv4: Option<IpAddr>,
    ipv6: Option<IpAddr>,
    blocks_v4: Vec<String>,
    blocks_v6: Vec<String>,
    pools_v4: Vec<String>,
    pools_v6: Vec<String>,
    peers: Vec<Peer>,
}

/// The BIRD configuration of `host`.
pub fn render(config: &BgpConfig, host: &str) -> Result<String, RenderError> {
    let me = config
        .nodes
        .get(host)
        .filter(|n| n.is_registered())
        .ok_or_else(|| RenderError::NotRegistered(host.to_owned()))?;
    let (pools_v4, pools_v6) = split(config.pools.keys());
    let (blocks_v4, blocks_v6) = split(me.blocks.iter());
    let context = Context {
        host,
        router_id: me.ipv4.unwrap_or_else(|| router_id_from_name(host)),
        log: log_statement(me.log_level.as_deref().or(config.global_log_level())),
        as_num: config.as_of(host).0,
        ipv4: me.ipv4.map(IpAddr::V4),
        ipv6: me.ipv6.map(IpAddr::V6),
        blocks_v4,
        blocks_v6,
        pools_v4,
        pools_v6,
        peers: peers(config, host, me),
    };
    let mut env = minijinja::Environment::new();
    env.set_keep_trailing_newline(true);
    env.add_template("bird.conf", TEMPLATE)
        .map_err(|e| RenderError::Template(e.to_string()))?;
    env.get_template("bird.conf")
        .and_then(|t| t.render(&context))
        .map_err(|e| RenderError::Template(e.to_string()))
}

/// The sessions `host` has, in a stable order: mesh or route reflection first, then this host's
/// own peers, then global ones; an address already peered with is not peered again.
pub fn peers(config: &BgpConfig, host: &str, me: &Node) -> Vec<Peer> {
    let mut peers: Vec<Peer> = Vec::new();
    let add = |peer: Peer, peers: &mut Vec<Peer>| {
        let mine = [me.ipv4.map(IpAddr::V4), me.ipv6.map(IpAddr::V6)];
        if !mine.contains(&Some(peer.ip)) && !peers.iter().any(|p| p.ip == peer.ip) {
            peers.push(peer);
        }
    };
    let others = config
        .nodes
        .iter()
        .filter(|(name, node)| name.as_str() != host && node.is_registered());
    for (name, node) in others {
        let (kind, rr_cluster_id, why) = if config.mesh_enabled() {
            (PeerKind::Mesh, None, format!("mesh: host {name}"))
        } else {
            match (me.rr_cluster_id, node.rr_cluster_id) {
                (Some(_), Some(_)) => (PeerKind::Rr, None, format!("route reflector {name}")),
                (Some(id), None) => (
                    PeerKind::Rr,
                    Some(id),
                    format!("route reflector client {name}"),
                ),
                (None, Some(_)) => (PeerKind::Rr, None, format!("route reflector {name}")),
                (None, None) => continue,
            }
        };
        for ip in [node.ipv4.map(IpAddr::V4), node.ipv6.map(IpAddr::V6)]
            .into_iter()
            .flatten()
        {
            if !has_family(me, ip) {
                continue;
            }
            add(
                peer(
                    kind,
                    ip,
                    config.as_of(name),
                    true,
                    rr_cluster_id,
                    why.clone(),
                ),
                &mut peers,
            );
        }
    }
    for (kind, list) in [
        (PeerKind::Node, config.peers(Some(host))),
        (PeerKind::Global, config.peers(None)),
    ] {
        for p in list.values().filter(|p| has_family(me, p.ip)) {
            let why = match kind {
                PeerKind::Node => format!("peer of host {host}"),
                _ => "global peer".to_owned(),
            };
            add(peer(kind, p.ip, p.as_num, false, None, why), &mut peers);
        }
    }
    peers
}

fn peer(
    kind: PeerKind,
    ip: IpAddr,
    as_num: AsNumber,
    multihop: bool,
    rr_cluster_id: Option<Ipv4Addr>,
    comment: String,
) -> Peer {
    let digits: String = ip
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Peer {
        name: format!("{}_{digits}", kind.prefix()),
        kind,
        ip,
        as_num: as_num.0,
        family: if ip.is_ipv4() { "v4" } else { "v6" },
        multihop,
        rr_cluster_id,
        comment,
    }
}

/// Whether the host has an address of `ip`'s family to peer from.
fn has_family(me: &Node, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => me.ipv4.is_some(),
        IpAddr::V6(_) => me.ipv6.is_some(),
    }
}

fn split<'a>(nets: impl Iterator<Item = &'a IpNet>) -> (Vec<String>, Vec<String>) {
    let (v4, v6): (Vec<&IpNet>, Vec<&IpNet>) = nets.partition(|n| matches!(n, IpNet::V4(_)));
    let text = |nets: Vec<&IpNet>| nets.into_iter().map(IpNet::to_string).collect();
    (text(v4), text(v6))
}

/// BIRD's log statement for a Calico BGP log level (default `info`).
fn log_statement(level: Option<&str>) -> String {
    let classes = match level.unwrap_or("info") {
        "none" => return "# logging off (loglevel none)".to_owned(),
        "debug" => return "log stderr all;\ndebug protocols { states, events };".to_owned(),
        "warning" => "warning, error, fatal, bug",
        "error" => "error, fatal, bug",
        _ => "info, remote, warning, error, auth, fatal, bug",
    };
    format!("log stderr {{ {classes} }};")
}

/// A router id for a host without an IPv4 address: stable, from its name.
fn router_id_from_name(host: &str) -> Ipv4Addr {
    let hash = host.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    Ipv4Addr::from(hash | 0x0100_0000)
}
