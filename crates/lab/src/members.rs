//! The lab's etcd members: where each lives, the flags that make them one cluster, starting,
//! stopping and restarting one, and which one leads.
//!
//! | members | namespace | client URL on the fabric | peers |
//! |---|---|---|---|
//! | 1 (default) | `<lab>.fabric` | `http://10.99.0.1:2379` | none (127.0.0.1:2380) |
//! | N (2 to 7) | `<lab>.etcdK`, eth0 on `br0` | `http://10.99.0.<1+K>:2379` | `http://10.99.0.<1+K>:2380` |
//!
//! Each member keeps its data in `<state dir>/<name>` and logs to `<name>.log`; a member
//! stopped and started again keeps its data dir, so it rejoins as the same member.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::poll::poll;
use crate::processes::{self, spawn};
use crate::sh;
use crate::state::{EtcdMember, FABRIC_IP, Lab};

/// The most members `up --etcd-members` runs (addresses 10.99.0.2 to .8, below the hosts').
pub const MAX_MEMBERS: u32 = 7;

/// The members of a lab with `count` members (not started; no relay yet).
pub fn plan(lab: &str, count: u32) -> Vec<EtcdMember> {
    if count == 1 {
        let fabric = Lab::fabric_netns(lab);
        return vec![member("etcd".to_owned(), fabric, FABRIC_IP)];
    }
    (1..=count)
        .map(|k| {
            let name = format!("etcd{k}");
            let netns = format!("{lab}.{name}");
            member(name, netns, Ipv4Addr::new(10, 99, 0, 1 + k as u8))
        })
        .collect()
}

fn member(name: String, netns: String, ip: Ipv4Addr) -> EtcdMember {
    EtcdMember {
        name,
        netns,
        ip,
        pid: None,
        client: String::new(),
    }
}

/// The peer URL of a member: a lone member talks to no peer.
fn peer_url(members: &[EtcdMember], member: &EtcdMember) -> String {
    match members.len() {
        1 => "http://127.0.0.1:2380".to_owned(),
        _ => format!("http://{}:2380", member.ip),
    }
}

/// etcd's flags for `member`: its own name, address and data dir, and the whole cluster as
/// `--initial-cluster` (ignored once the data dir holds a member, so a restart rejoins).
pub fn etcd_args(
    lab: &str,
    members: &[EtcdMember],
    member: &EtcdMember,
    data: &str,
) -> Vec<String> {
    let initial: Vec<String> = members
        .iter()
        .map(|m| format!("{}={}", m.name, peer_url(members, m)))
        .collect();
    let (url, peer) = (member.url(), peer_url(members, member));
    let flags = [
        ("--name", member.name.as_str()),
        ("--data-dir", data),
        ("--listen-client-urls", &url),
        ("--advertise-client-urls", &url),
        ("--listen-peer-urls", &peer),
        ("--initial-advertise-peer-urls", &peer),
        ("--initial-cluster", &initial.join(",")),
        ("--initial-cluster-token", lab),
        ("--initial-cluster-state", "new"),
    ];
    flags
        .iter()
        .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
        .collect()
}

/// Starts one member (its namespace exists); its pid.
pub fn start(lab: &Lab, member: &EtcdMember) -> anyhow::Result<i32> {
    let data = lab.dir.join(&member.name);
    let data = data.to_str().context("state dir is not UTF-8")?;
    let args = etcd_args(&lab.name, &lab.etcd, member, data);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn(
        Some(&member.netns),
        Path::new("etcd"),
        &args,
        &[],
        &lab.log_path(&member.name),
    )
}

/// SIGKILLs a member (its namespace and data stay: clients see their connections refused).
pub fn stop(lab: &mut Lab, name: &str) -> anyhow::Result<()> {
    lab.member(name)?;
    let member = lab
        .etcd
        .iter_mut()
        .find(|m| m.name == name)
        .expect("checked");
    if let Some(pid) = member.pid.take() {
        processes::stop_pids(&[pid]);
    }
    lab.save()
}

/// Starts a stopped member again, with its data: it rejoins the cluster.
pub fn restart(lab: &mut Lab, name: &str) -> anyhow::Result<i32> {
    let member = lab.member(name)?.clone();
    if member.pid.is_some_and(processes::pid_alive) {
        bail!("etcd member {name} is running; stop it first");
    }
    let pid = start(lab, &member)?;
    let slot = lab
        .etcd
        .iter_mut()
        .find(|m| m.name == name)
        .expect("checked");
    slot.pid = Some(pid);
    lab.save()?;
    Ok(pid)
}

/// One member's view, from `etcdctl endpoint status`: its id and the leader it knows of.
fn status(member: &EtcdMember) -> anyhow::Result<(u64, u64)> {
    // Asked inside the member's own namespace at its fabric address: this works from any
    // namespace the caller runs in (the relay's loopback address only from the root one).
    let endpoints = format!("--endpoints={}", member.url());
    let args = [
        "endpoint",
        "status",
        "-w",
        "json",
        &endpoints,
        "--command-timeout=1s",
    ];
    let out = sh::in_ns(&member.netns, "etcdctl", &args)?;
    let parsed: serde_json::Value = serde_json::from_str(&out)?;
    let status = &parsed[0]["Status"];
    let id = status["header"]["member_id"].as_u64();
    let leader = status["leader"].as_u64();
    id.zip(leader)
        .with_context(|| format!("no member id or leader in {out}"))
}

/// The member that leads now: asked of every running member; fails if none knows a leader
/// that answers.
pub fn leader(lab: &Lab) -> anyhow::Result<String> {
    let views: Vec<(String, u64, u64)> = lab
        .etcd
        .iter()
        .filter_map(|m| {
            status(m)
                .ok()
                .map(|(id, leader)| (m.name.clone(), id, leader))
        })
        .collect();
    let leads = |id: &u64| views.iter().any(|(_, _, leader)| leader == id);
    if let Some((name, _, _)) = views.iter().find(|(_, id, _)| leads(id)) {
        return Ok(name.clone());
    }
    bail!(
        "no etcd member leads (members answering: {})",
        views
            .iter()
            .map(|v| v.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Waits until a running member leads; its name.
pub async fn wait_for_leader(lab: &Lab, limit: Duration) -> anyhow::Result<String> {
    poll("an etcd leader", limit, || Ok(leader(lab).ok())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_member_lives_in_the_fabric() {
        let members = plan("l", 1);
        assert_eq!(members[0].netns, "l.fabric");
        assert_eq!(members[0].url(), "http://10.99.0.1:2379");
        let args = etcd_args("l", &members, &members[0], "/d");
        let cluster = args.iter().position(|a| a == "--initial-cluster").unwrap();
        assert_eq!(args[cluster + 1], "etcd=http://127.0.0.1:2380");
    }

    #[test]
    fn a_cluster_has_a_namespace_and_an_address_per_member() {
        let members = plan("l", 3);
        let names: Vec<&str> = members.iter().map(|m| m.netns.as_str()).collect();
        assert_eq!(names, ["l.etcd1", "l.etcd2", "l.etcd3"]);
        assert_eq!(members[2].url(), "http://10.99.0.4:2379");
        let args = etcd_args("l", &members, &members[1], "/d/etcd2");
        let value = |flag: &str| {
            let at = args.iter().position(|a| a == flag).unwrap();
            args[at + 1].clone()
        };
        assert_eq!(value("--name"), "etcd2");
        assert_eq!(value("--listen-peer-urls"), "http://10.99.0.3:2380");
        assert_eq!(
            value("--initial-cluster"),
            "etcd1=http://10.99.0.2:2380,etcd2=http://10.99.0.3:2380,etcd3=http://10.99.0.4:2380"
        );
    }
}
