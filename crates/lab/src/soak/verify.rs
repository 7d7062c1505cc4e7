//! The soak's end checks, once everything is back and settled: every host's kernel against
//! the datastore (Felix's routes to local workloads; real packets on sampled flows against
//! `calicoctl policy explain`), IPAM's audit, and nothing left behind (namespaces, processes,
//! partition rules).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::process::Output;
use std::time::Duration;

use anyhow::Context;
use calico_datastore::{Datastore, EtcdDatastore};
use calico_model::key::Prefix;

use crate::check::probe_from;
use crate::probe::Target;
use crate::processes::{self, sibling_binary};
use crate::rng::Rng;
use crate::sh;
use crate::state::{Lab, SERVED_PORTS};
use crate::topology::{lab_namespaces, netns_pids};

/// The comment on the soak's partition rules (so that none is left behind).
pub const PARTITION_COMMENT: &str = "calico-lab-soak-partition";

/// `calicoctl` with `args`, run in the fabric next to etcd.
fn calicoctl(lab: &Lab, args: &[&str]) -> anyhow::Result<Output> {
    let calicoctl = sibling_binary("calicoctl", "calico-ctl")?;
    sh::command_in(&Lab::fabric_netns(&lab.name), calicoctl)
        .env("ETCD_ENDPOINTS", lab.etcd_endpoints())
        .args(args)
        .output()
        .context("cannot run calicoctl")
}

/// Each host's workload endpoints in the datastore: host → (endpoint key → addresses).
async fn endpoints(
    store: &EtcdDatastore,
) -> anyhow::Result<BTreeMap<String, BTreeMap<String, Vec<IpAddr>>>> {
    let mut found: BTreeMap<String, BTreeMap<String, Vec<IpAddr>>> = BTreeMap::new();
    for pair in store.list(&Prefix::Hosts.to_string()).await? {
        let parts: Vec<&str> = pair.key.split('/').collect();
        // /calico/v1/host/<host>/workload/<orchestrator>/<workload>/endpoint/<id>
        if parts.len() != 10 || parts[5] != "workload" || parts[8] != "endpoint" {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&pair.value)
            .with_context(|| format!("the endpoint at {} is not JSON", pair.key))?;
        let mut ips = Vec::new();
        for field in ["ipv4_nets", "ipv6_nets"] {
            for net in value[field].as_array().into_iter().flatten() {
                let net: ipnet::IpNet = net.as_str().unwrap_or_default().parse()?;
                ips.push(net.addr());
            }
        }
        found
            .entry(parts[4].to_owned())
            .or_default()
            .insert(pair.key.clone(), ips);
    }
    Ok(found)
}

/// Felix's routes to local workloads (protocol 80) in a host's namespace.
fn felix_routes(netns: &str) -> anyhow::Result<BTreeSet<IpAddr>> {
    let mut routes = BTreeSet::new();
    for family in ["-4", "-6"] {
        let out = sh::ip(&["-n", netns, family, "-j", "route", "show", "proto", "80"])?;
        let list: serde_json::Value = serde_json::from_str(&out)?;
        for route in list.as_array().into_iter().flatten() {
            let dst = route["dst"].as_str().unwrap_or_default();
            let dst = dst.split('/').next().unwrap_or_default();
            routes.insert(dst.parse().with_context(|| format!("route to {dst:?}"))?);
        }
    }
    Ok(routes)
}

/// Endpoints against the lab's workloads, and each host's routes to local workloads against
/// its endpoints; every difference, in words.
pub async fn routes(lab: &Lab, store: &EtcdDatastore) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let found = endpoints(store).await?;
    let keys: BTreeSet<&String> = found.values().flat_map(BTreeMap::keys).collect();
    let wanted: BTreeSet<&String> = lab.workloads.iter().map(|w| &w.key).collect();
    for key in keys.difference(&wanted) {
        problems.push(format!("endpoint {key} has no workload (left behind)"));
    }
    for key in wanted.difference(&keys) {
        problems.push(format!("workload endpoint {key} is missing from etcd"));
    }
    for host in &lab.hosts {
        let expected: BTreeSet<IpAddr> = found
            .get(&host.name)
            .into_iter()
            .flat_map(BTreeMap::values)
            .flatten()
            .copied()
            .collect();
        let programmed = felix_routes(&host.netns)?;
        for ip in expected.difference(&programmed) {
            problems.push(format!("{} has no route to its workload {ip}", host.name));
        }
        for ip in programmed.difference(&expected) {
            problems.push(format!(
                "{} still routes {ip} to a workload no endpoint has",
                host.name
            ));
        }
    }
    Ok(problems)
}

/// What `calicoctl policy explain` says of a TCP flow from `src` to `dst`:`port`: allowed at
/// both ends.
fn explain(lab: &Lab, src: (&str, IpAddr), dst: (&str, IpAddr), port: u16) -> anyhow::Result<bool> {
    let port = port.to_string();
    let (src_ip, dst_ip) = (src.1.to_string(), dst.1.to_string());
    for (key, direction) in [(src.0, "outbound"), (dst.0, "inbound")] {
        let args = [
            "policy",
            "explain",
            "--endpoint",
            key,
            "--direction",
            direction,
            "--src",
            &src_ip,
            "--dst",
            &dst_ip,
            "--protocol",
            "tcp",
            "--dst-port",
            &port,
        ];
        let out = calicoctl(lab, &args)?;
        anyhow::ensure!(
            out.status.success(),
            "calicoctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let text = String::from_utf8_lossy(&out.stdout);
        if !text.lines().last().unwrap_or("").starts_with("allow") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `samples` TCP flows between random workloads (drawn from `seed`): whether the SYN got
/// through must be what `policy explain` says. A flow that was dropped but should have got
/// through is tried again with a longer wait before it counts. Returns the number explained
/// and every mismatch.
pub async fn sampled_flows(
    lab: &Lab,
    seed: u64,
    samples: usize,
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut rng = Rng::derive(seed, 5);
    let mut next = |n: usize| rng.below(n);
    let mut mismatches = Vec::new();
    let count = lab.workloads.len();
    if count < 2 {
        return Ok((0, mismatches));
    }
    for _ in 0..samples {
        let i = next(count);
        let (from, to) = (
            &lab.workloads[i],
            &lab.workloads[(i + 1 + next(count - 1)) % count],
        );
        let port = SERVED_PORTS[next(SERVED_PORTS.len())];
        let (Some(src), Some(dst)) = (
            from.ips.iter().find(|ip| ip.is_ipv4()),
            to.ips.iter().find(|ip| ip.is_ipv4()),
        ) else {
            continue;
        };
        let expected = explain(lab, (&from.key, *src), (&to.key, *dst), port)?;
        let target: Target = format!("tcp:{dst}:{port}").parse()?;
        let mut arrived = false;
        for wait in [1000, 4000] {
            let outcome =
                probe_from(lab, &from.name, &[target], Duration::from_millis(wait)).await?;
            arrived = outcome[0].arrived();
            if arrived || !expected {
                break;
            }
        }
        if arrived != expected {
            mismatches.push(format!(
                "{} -> {} tcp {dst}:{port}: the kernel {} it, explain says {}",
                from.name,
                to.name,
                if arrived { "let through" } else { "dropped" },
                if expected { "allow" } else { "deny" }
            ));
        }
    }
    Ok((samples, mismatches))
}

/// `calicoctl ipam check`: whether it is clean, and what it printed.
pub fn ipam(lab: &Lab) -> anyhow::Result<(bool, String)> {
    let out = calicoctl(lab, &["ipam", "check"])?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text.trim().to_owned()))
}

/// The name a process runs as (its `comm`).
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// What the lab should have and does not, or has and should not: namespaces, each host's
/// processes (one Felix, one calico-node, one BIRD; no CNI plugin still running), each
/// workload's (its echo server only), partition rules.
pub fn leaks(lab: &Lab) -> anyhow::Result<Vec<String>> {
    let mut leaks = Vec::new();
    let mut expected: BTreeSet<String> = [Lab::fabric_netns(&lab.name)].into();
    expected.extend(lab.hosts.iter().map(|h| h.netns.clone()));
    expected.extend(lab.etcd.iter().map(|m| m.netns.clone()));
    expected.extend(lab.workloads.iter().map(|w| w.netns.clone()));
    let present: BTreeSet<String> = lab_namespaces(&lab.name)?.into_iter().collect();
    for ns in present.difference(&expected) {
        leaks.push(format!("namespace {ns} belongs to nothing"));
    }
    for ns in expected.difference(&present) {
        leaks.push(format!("namespace {ns} is missing"));
    }
    for host in &lab.hosts {
        let names: Vec<String> = netns_pids(&host.netns).into_iter().map(comm).collect();
        for (name, wanted) in [("calico-felix", 1), ("calico-node", 1), ("bird", 1)] {
            let running = names.iter().filter(|n| *n == name).count();
            if running != wanted {
                leaks.push(format!(
                    "{} runs {running} {name} (not {wanted})",
                    host.name
                ));
            }
        }
        for name in ["calico", "calico-ipam"] {
            if names.iter().any(|n| n == name) {
                leaks.push(format!("{} still runs a CNI plugin ({name})", host.name));
            }
        }
    }
    for w in &lab.workloads {
        let pids = netns_pids(&w.netns);
        if pids.len() != 1 {
            let names: Vec<String> = pids.into_iter().map(comm).collect();
            leaks.push(format!(
                "workload {} runs {} processes, not its echo server alone: {}",
                w.name,
                names.len(),
                names.join(", ")
            ));
        }
    }
    for member in &lab.etcd {
        let rules = sh::in_ns(&member.netns, "iptables", &["-w", "-S", "INPUT"])?;
        if rules.contains(PARTITION_COMMENT) {
            leaks.push(format!("a partition rule is left in {}", member.netns));
        }
        if !member.pid.is_some_and(processes::pid_alive) {
            leaks.push(format!("etcd member {} is not running", member.name));
        }
    }
    Ok(leaks)
}
