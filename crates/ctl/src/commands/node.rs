//! `calicoctl node status|list`: BGP as an operator troubleshoots it.

use std::io::Write;
use std::process::{Command, ExitCode};

use calico_bgp::{
    BgpConfig, DEFAULT_AS, Session as BgpSession, datastore_prefixes, parse_protocols,
};
use calico_datastore::Datastore;
use calico_model::{Key, invalid_warning, parse_value};

use serde_json::{Value, json};

use super::print_report;
use crate::cli::{NodeStatusArgs, NodeStatusCmdArgs, Output};

/// This host's BGP sessions, from BIRD.
pub fn status(args: &NodeStatusCmdArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let sessions = bird_sessions(&args.bird)?;
    match args.output.output {
        Output::Table => write_sessions(&sessions, out)?,
        format => print_report(
            format,
            &json!({ "sessions": sessions_json(&sessions) }),
            out,
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `mesh`, `rr`, `global`, `node`, or `other` for a protocol calico-node did not make.
fn kind_name(s: &BgpSession) -> &'static str {
    s.kind.map_or("other", |k| match k {
        calico_bgp::PeerKind::Mesh => "mesh",
        calico_bgp::PeerKind::Rr => "rr",
        calico_bgp::PeerKind::Global => "global",
        calico_bgp::PeerKind::Node => "node",
    })
}

/// The sessions as `-o json|yaml` prints them.
pub fn sessions_json(sessions: &[BgpSession]) -> Value {
    sessions
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "peerAddress": s.neighbor.map(|ip| ip.to_string()),
                "type": kind_name(s),
                "state": s.state,
                "since": s.since,
                "imported": s.imported,
                "exported": s.exported,
                "info": s.info,
            })
        })
        .collect()
}

/// Asks BIRD for its protocols over calico-node's socket, failing with what BIRD said.
pub fn bird_sessions(args: &NodeStatusArgs) -> anyhow::Result<Vec<BgpSession>> {
    let output = Command::new(&args.birdc)
        .arg("-s")
        .arg(&args.bird_socket)
        .args(["show", "protocols", "all"])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", args.birdc.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || text.contains("Unable to connect") {
        let said = match text.trim() {
            "" => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            said => said.to_owned(),
        };
        anyhow::bail!(
            "BIRD is not answering on {} ({said}): is calico-node running on this host? \
             (--bird-socket names another socket)",
            args.bird_socket.display(),
        );
    }
    Ok(parse_protocols(&text))
}

/// The sessions as an aligned table.
pub fn write_sessions(
    sessions: &[BgpSession],
    out: &mut (impl Write + ?Sized),
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<26} {:<7} {:<6} {:<13} {:>8} {:>8}  INFO",
        "PEER ADDRESS", "TYPE", "STATE", "SINCE", "IMPORTED", "EXPORTED"
    )?;
    for s in sessions {
        let kind = kind_name(s);
        let peer = s
            .neighbor
            .map_or_else(|| s.name.clone(), |ip| ip.to_string());
        writeln!(
            out,
            "{peer:<26} {kind:<7} {:<6} {:<13} {:>8} {:>8}  {}",
            s.state, s.since, s.imported, s.exported, s.info
        )?;
    }
    if sessions.is_empty() {
        writeln!(out, "(no BGP sessions configured)")?;
    }
    Ok(())
}

/// The registered hosts.
pub async fn list(
    store: &dyn Datastore,
    format: Output,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    // Every prefix the configuration is made from, as calico-node watches them (1.x keys too).
    let mut config = BgpConfig::default();
    for prefix in datastore_prefixes(None) {
        for pair in store.list(&prefix).await? {
            let Ok(key) = Key::parse(&pair.key) else {
                continue;
            };
            if !BgpConfig::is_relevant(&key) {
                continue;
            }
            match parse_value(&key, &pair.value) {
                Ok(value) => config.apply(&key, Some(&value)),
                Err(reason) => eprintln!("warning: {}", invalid_warning(&pair.key, &reason)),
            }
        }
    }
    let global = config.global_as();
    let registered = config.nodes.iter().filter(|(_, n)| n.is_registered());
    if format != Output::Table {
        let nodes: Vec<Value> = registered
            .map(|(name, node)| {
                let (as_number, source) = match node.as_num {
                    Some(n) => (n, "node"),
                    None if global == DEFAULT_AS => (global, "default"),
                    None => (global, "global"),
                };
                json!({
                    "host": name,
                    "ipv4": node.ipv4.map(|a| a.to_string()),
                    "ipv6": node.ipv6.map(|a| a.to_string()),
                    "asNumber": as_number,
                    "asSource": source,
                    "routeReflectorClusterId": node.rr_cluster_id.map(|id| id.to_string()),
                })
            })
            .collect();
        let report = json!({ "nodes": nodes, "nodeToNodeMesh": config.mesh_enabled() });
        print_report(format, &report, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<24} {:<16} {:<28} {:<16}  ROUTE REFLECTOR",
        "HOST", "IPV4", "IPV6", "AS"
    )?;
    for (name, node) in registered {
        let as_text = match node.as_num {
            Some(n) => n.to_string(),
            None if global == DEFAULT_AS => format!("{global} (default)"),
            None => format!("{global} (global)"),
        };
        writeln!(
            out,
            "{name:<24} {:<16} {:<28} {as_text:<16}  {}",
            node.ipv4.map(|a| a.to_string()).unwrap_or_default(),
            node.ipv6.map(|a| a.to_string()).unwrap_or_default(),
            node.rr_cluster_id
                .map(|id| format!("cluster {id}"))
                .unwrap_or_default()
        )?;
    }
    writeln!(
        out,
        "node-to-node mesh: {}",
        if config.mesh_enabled() { "on" } else { "off" }
    )?;
    Ok(ExitCode::SUCCESS)
}
