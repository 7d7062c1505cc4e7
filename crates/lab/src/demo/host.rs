//! The demo's last steps, about the hosts themselves: a host endpoint on host1's fabric
//! interface with its failsafe ports, outgoing NAT for a pool (`masquerade`), and 1:1 NAT of a
//! workload (`ipv4_nat`). Shown with real connections to echo servers started in host1's and the
//! fabric's namespaces, and to the workloads.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};
use calico_datastore::{Datastore, EtcdDatastore};
use calico_model::endpoint::{NatMapping, WorkloadEndpoint};
use calico_model::key::HostEndpointId;
use calico_model::pool::IpPool;
use calico_model::{Key, from_json, to_json};

use super::narrate::say;
use crate::check::probe_from;
use crate::etcd::connect;
use crate::probe::{Outcome, Target};
use crate::processes;
use crate::ready::{self, Deadline, Progress, wait_programmed};
use crate::sh;
use crate::state::{ETCD_PORT, FABRIC_IP, Lab};

const DENY_ALL: &str =
    r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "deny"}]}"#;
const HEP_VALUE: &str = r#"{"expected_ipv4_addrs": ["10.99.0.11"], "profile_ids": ["host-deny"]}"#;
const POOL_PLAIN: &str = r#"{"cidr": "10.65.0.0/16"}"#;
const POOL_MASQUERADE: &str = r#"{"cidr": "10.65.0.0/16", "masquerade": true}"#;
const EXT_POOL_VALUE: &str = r#"{"cidr": "10.67.0.0/16", "disabled": true}"#;
const EXT_IP: &str = "10.67.0.30";
/// The port of the server on the fabric (etcd's 2379 is the only other listener there).
const FABRIC_PORT: u16 = 8080;

/// host1's host endpoint on its fabric interface.
fn hep() -> HostEndpointId {
    HostEndpointId {
        hostname: "host1".to_owned(),
        endpoint: "fabric".to_owned(),
    }
}

/// The profile that denies everything.
fn deny_profile() -> Key {
    Key::ProfileRules {
        profile: "host-deny".to_owned(),
    }
}

/// The pool of `cidr` (one of the lab's).
fn pool(cidr: &str) -> Key {
    Key::Pool {
        cidr: cidr.parse().expect("the demo's pools are CIDRs"),
    }
}

/// Where a probe starts: a host's namespace or a workload's.
#[derive(Clone, Copy)]
enum From {
    Host(&'static str),
    Workload(&'static str),
}

/// One connection to try, what it shows, and what should happen.
struct Probe {
    what: String,
    from: From,
    to: Target,
    expect: Outcome,
}

/// A deny-all host endpoint for host1's eth0, found by its address; the failsafe ports keep
/// SSH and etcd working; traffic forwarded to and from workloads is not host policy's. Removed
/// again at the end.
pub(super) async fn host_endpoint(lab: &Lab) -> anyhow::Result<()> {
    let store = connect(lab).await?;
    let (host1, host2) = (lab.host("host1")?.ip, lab.host("host2")?.ip);
    let etcd: SocketAddr = (FABRIC_IP, ETCD_PORT).into();
    say(
        "Host endpoints protect the hosts themselves. Echo servers in the hosts' namespaces (host1: ports 22 and 8080, host2: 8080); without a host endpoint everything connects:",
    );
    start_server(lab, "host1", &[22, 8080]).await?;
    start_server(lab, "host2", &[8080]).await?;
    // With the host endpoint, `denied` is what host-deny drops; without, all connect.
    let hosts = |denied: Outcome| {
        [
            Probe {
                what: format!("host2 -> host1 {host1}:8080"),
                from: From::Host("host2"),
                to: Target::Tcp((host1, 8080).into()),
                expect: denied,
            },
            Probe {
                what: format!("host2 -> host1 {host1}:22   (failsafe port in)"),
                from: From::Host("host2"),
                to: Target::Tcp((host1, 22).into()),
                expect: Outcome::Ok,
            },
            Probe {
                what: format!("host1 -> host2 {host2}:8080"),
                from: From::Host("host1"),
                to: Target::Tcp((host2, 8080).into()),
                expect: denied,
            },
            Probe {
                what: format!("host1 -> etcd  {etcd}  (failsafe port out)"),
                from: From::Host("host1"),
                to: Target::Tcp(etcd),
                expect: Outcome::Ok,
            },
        ]
    };
    show(lab, &hosts(Outcome::Ok)).await?;

    say(
        "A deny-all profile host-deny, and a host endpoint on host1 given only by the address it expects (10.99.0.11): Felix finds the interface holding it (eth0) and polices traffic to and from host1 there. Felix's failsafe ports stay open (FailsafeInboundHostPorts: 22 for SSH; FailsafeOutboundHostPorts: 2379 for etcd, which Felix itself needs), and traffic forwarded to and from workloads is not host endpoint policy's:",
    );
    put(&store, &deny_profile(), DENY_ALL).await?;
    put(&store, &Key::HostEndpoint(hep()), HEP_VALUE).await?;
    settle(lab).await?;
    let status = hep_status(lab, &store, "up").await?;
    let status_key = Key::HostEndpointStatus(hep());
    println!("  etcdctl get {status_key}   (written by Felix on host1)\n    {status}");
    let web: IpAddr = lab.workload("web")?.ips[0];
    let database: IpAddr = lab.workload("database")?.ips[0];
    let mut probes = Vec::from(hosts(Outcome::Blocked));
    probes.push(Probe {
        what: format!("client (host2) -> web (host1) {web}:80"),
        from: From::Workload("client"),
        to: Target::Tcp((web, 80).into()),
        expect: Outcome::Ok,
    });
    probes.push(Probe {
        what: format!("frontend (host1) -> database (host2) {database}:5432"),
        from: From::Workload("frontend"),
        to: Target::Tcp((database, 5432).into()),
        expect: Outcome::Ok,
    });
    show(lab, &probes).await?;

    say("The host endpoint and host-deny are removed again; host1 is open as before:");
    let (hep, deny) = (Key::HostEndpoint(hep()), deny_profile());
    println!("  etcdctl del {hep}\n  etcdctl del {deny}");
    store.delete(&hep.to_string()).await?;
    store.delete(&deny.to_string()).await?;
    settle(lab).await?;
    show(lab, &hosts(Outcome::Ok)).await
}

/// A workload reaching a server outside every pool (on the fabric, which has no route to the
/// pools): not answered until the pool masquerades, then answered with host1's address as the
/// source. Masquerade stays on.
pub(super) async fn masquerade(lab: &Lab) -> anyhow::Result<()> {
    let store = connect(lab).await?;
    let host1 = lab.host("host1")?.ip;
    let source = lab.workload("frontend")?.ips[0];
    let server: SocketAddr = (FABRIC_IP, FABRIC_PORT).into();
    say(&format!(
        "Pool masquerade (outgoing NAT). An echo server on the fabric ({server}), outside every pool. The fabric has no route to the pools, so without masquerade the server's answer to frontend ({source}) is lost:"
    ));
    let pool_key = pool("10.65.0.0/16");
    let stored = store
        .get(&pool_key.to_string())
        .await?
        .context("no pool 10.65.0.0/16")?;
    let stored: IpPool = from_json(&stored.value).context("pool 10.65.0.0/16")?;
    if stored.masquerade {
        println!("  (masquerade is still on from an earlier demo run: off first)");
        put(&store, &pool_key, POOL_PLAIN).await?;
        settle(lab).await?;
    }
    start_server(lab, "fabric", &[FABRIC_PORT]).await?;
    let to_fabric = |expect| Probe {
        what: format!("frontend (host1) -> fabric {server}"),
        from: From::Workload("frontend"),
        to: Target::Tcp(server),
        expect,
    };
    show(lab, &[to_fabric(Outcome::Blocked)]).await?;

    say(
        "masquerade on pool 10.65.0.0/16: traffic from the pool to destinations outside every pool leaves host1 with host1's own address (10.99.0.11) as its source, so the server can answer:",
    );
    put(&store, &pool_key, POOL_MASQUERADE).await?;
    settle(lab).await?;
    // The NAT rule is in place now; the first connection through it may still be racing it.
    let deadline = Deadline::after(Duration::from_secs(30));
    let log = lab.log_path("felix-host1");
    ready::until(deadline, "frontend to reach the fabric", &log, async || {
        Ok(
            match reach(lab, From::Workload("frontend"), Target::Tcp(server)).await? {
                Outcome::Ok => Progress::Done,
                other => Progress::Waiting(format!("the connection is {other}")),
            },
        )
    })
    .await?;
    show(lab, &[to_fabric(Outcome::Ok)]).await?;
    let port = FABRIC_PORT.to_string();
    let table = sh::in_ns(
        &lab.host("host1")?.netns,
        "conntrack",
        &["-L", "-p", "tcp", "--dport", &port],
    )?;
    let translated = format!("src={FABRIC_IP} dst={host1} ");
    let line = table
        .lines()
        .find(|l| l.contains(&format!("src={source} ")) && l.contains(&translated))
        .with_context(|| {
            format!("no masqueraded connection in host1's conntrack table:\n{table}")
        })?;
    println!(
        "  host1's conntrack entry (conntrack -L -p tcp --dport {port}): sent by src={source}, answered to dst={host1} (host1):\n    {}",
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    println!(
        "  Masquerade stays on (etcdctl put {} '{POOL_PLAIN}' turns it off), and so does the fabric's echo server.",
        pool("10.65.0.0/16")
    );
    Ok(())
}

/// 1:1 NAT: web (on host1) gets an external address from a disabled pool (so IPAM never hands
/// it out and BIRD exports its route); client, on host2, connects to it. The mapping stays.
pub(super) async fn one_to_one_nat(lab: &Lab) -> anyhow::Result<()> {
    let store = connect(lab).await?;
    let web = lab.workload("web")?;
    let (internal, external): (IpAddr, IpAddr) = (web.ips[0], EXT_IP.parse()?);
    say(&format!(
        "1:1 NAT (ipv4_nat). The external address {external} comes from a disabled pool (IPAM never hands it out; BIRD exports the route to it); web ({internal} on host1) gets it. Connections to {external} reach web; web's own connections keep their source:"
    ));
    put(&store, &pool("10.67.0.0/16"), EXT_POOL_VALUE).await?;
    let endpoint = store
        .get(&web.key)
        .await?
        .with_context(|| format!("no endpoint at {}", web.key))?;
    let mut mapped: WorkloadEndpoint = from_json(&endpoint.value).context("web's endpoint")?;
    mapped.ipv4_nat = vec![NatMapping {
        int_ip: internal,
        ext_ip: external,
    }];
    let key = Key::parse(&web.key)?;
    put(&store, &key, &to_json(&mapped)?).await?;
    settle(lab).await?;
    let host2 = lab.host("host2")?.netns.clone();
    let deadline = Deadline::after(Duration::from_secs(30));
    let log = lab.log_path("node-host2");
    let mut route = String::new();
    ready::until(
        deadline,
        "host2 to learn the route to the external address",
        &log,
        async || {
            route = sh::in_ns(&host2, "ip", &["route", "show", &external.to_string()])?;
            Ok(match route.contains("via") {
                true => Progress::Done,
                false => Progress::Waiting(format!("host2 has {route:?}")),
            })
        },
    )
    .await?;
    println!("  host2's route to it (learned over BGP): {}", route.trim());
    show(
        lab,
        &[Probe {
            what: format!("client (host2) -> web's external address {external}:80"),
            from: From::Workload("client"),
            to: Target::Tcp((external, 80).into()),
            expect: Outcome::Ok,
        }],
    )
    .await?;
    println!(
        "  The mapping stays (put web's endpoint back without \"ipv4_nat\" to remove it: its rules and routes go with it)."
    );
    Ok(())
}

/// Waits until every Felix has programmed everything written so far.
async fn settle(lab: &Lab) -> anyhow::Result<()> {
    wait_programmed(lab, Duration::from_secs(60))
        .await
        .map(drop)
}

pub(super) async fn put(store: &EtcdDatastore, key: &Key, value: &str) -> anyhow::Result<()> {
    println!("  etcdctl put {key} '{value}'");
    crate::etcd::put(store, key, value).await
}

/// Waits until Felix reports the host endpoint's status as `want`; the status as written.
async fn hep_status(lab: &Lab, store: &EtcdDatastore, want: &str) -> anyhow::Result<String> {
    let mut seen = String::new();
    let deadline = Deadline::after(Duration::from_secs(30));
    let log = lab.log_path("felix-host1");
    let what = format!("host1's host endpoint to be {want}");
    ready::until(deadline, &what, &log, async || {
        seen = match store
            .get(&Key::HostEndpointStatus(hep()).to_string())
            .await?
        {
            Some(pair) => pair.value,
            None => return Ok(Progress::Waiting("no status yet".to_owned())),
        };
        let status: serde_json::Value = serde_json::from_str(&seen)?;
        Ok(match status["status"].as_str() {
            Some(s) if s == want => Progress::Done,
            _ => Progress::Waiting(format!("the status is {seen}")),
        })
    })
    .await?;
    Ok(seen)
}

/// Starts an echo server in `<lab>.<node>` (a host or the fabric), unless one listens on every
/// port already (from an earlier demo run), and waits until it listens. It lives in the lab's
/// namespace, so `down` ends it.
async fn start_server(lab: &Lab, node: &str, ports: &[u16]) -> anyhow::Result<()> {
    let netns = match node {
        "fabric" => Lab::fabric_netns(&lab.name),
        host => lab.host(host)?.netns.clone(),
    };
    let netns = netns.as_str();
    let listening = |port: &u16| {
        sh::in_ns(netns, "ss", &["-Hltn", &format!("sport = :{port}")])
            .is_ok_and(|out| !out.trim().is_empty())
    };
    if ports.iter().all(listening) {
        return Ok(());
    }
    let log = lab.log_path(&format!("serve-{node}"));
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let me = std::env::current_exe()?;
    let pid = processes::spawn(
        Some(netns),
        &me,
        &["serve", "--ports", &ports.join(",")],
        &[],
        &log,
    )
    .context("cannot start the echo server")?;
    ready::serving(pid, &log, Deadline::after(Duration::from_secs(10))).await
}

/// Runs the probes, one line each: what, the outcome, and a warning if it is not the expected
/// one.
async fn show(lab: &Lab, probes: &[Probe]) -> anyhow::Result<()> {
    let width = probes.iter().map(|p| p.what.len()).max().unwrap_or(0);
    let results: Vec<_> = probes
        .iter()
        .map(|p| {
            let (lab, from, to) = (lab.clone(), p.from, p.to);
            tokio::spawn(async move { reach(&lab, from, to).await })
        })
        .collect();
    for (probe, result) in probes.iter().zip(results) {
        let outcome = result.await??;
        let word = match outcome {
            Outcome::Ok => "connects",
            Outcome::Blocked => "blocked (dropped)",
            Outcome::Refused => "refused (arrived; nothing listens)",
            Outcome::Unreachable => "unreachable",
        };
        let warning = if outcome == probe.expect {
            String::new()
        } else {
            format!("   <- UNEXPECTED (expected {})", probe.expect)
        };
        println!("  {:width$}  {word}{warning}", probe.what);
    }
    Ok(())
}

/// One connection attempt; a drop is tried once more with more patience (a first packet can
/// be lost while neighbours are resolved).
async fn reach(lab: &Lab, from: From, to: Target) -> anyhow::Result<Outcome> {
    let first = probe_once(lab, from, to, Duration::from_millis(1000)).await?;
    if first != Outcome::Blocked {
        return Ok(first);
    }
    probe_once(lab, from, to, Duration::from_millis(2000)).await
}

async fn probe_once(lab: &Lab, from: From, to: Target, wait: Duration) -> anyhow::Result<Outcome> {
    let netns = match from {
        From::Workload(w) => return Ok(probe_from(lab, w, &[to], wait).await?[0]),
        From::Host(h) => lab.host(h)?.netns.clone(),
    };
    let me = std::env::current_exe()?;
    let me = me
        .to_str()
        .context("calico-lab's path is not UTF-8")?
        .to_owned();
    let ms = wait.as_millis().to_string();
    let target = to.to_string();
    let out = tokio::task::spawn_blocking(move || {
        sh::in_ns(&netns, &me, &["probe", "--timeout-ms", &ms, &target])
    });
    let text = out.await??;
    match text.split_whitespace().last().and_then(Outcome::parse) {
        Some(outcome) => Ok(outcome),
        None => bail!("calico-lab probe printed {text:?}"),
    }
}
