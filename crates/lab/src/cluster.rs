//! Bringing a lab up and down, and plugging workloads in and out.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cni;
use crate::ready::{self, Deadline};
use crate::sh::{self, ip, ipl};
use crate::state::{
    ETCD_PORT, FABRIC_IP, Host, Lab, SERVED_PORTS, Workload, check_name, subnet_gateway,
    subnet_gateway6,
};

/// What `up` needs beyond the lab's name.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub hosts: u32,
    /// Extra `FELIX_*` settings for every Felix.
    pub felix_env: Vec<(String, String)>,
    /// The `calico-felix` binary; by default the one next to `calico-lab`, else from `PATH`.
    pub felix: Option<PathBuf>,
    /// BGP without the node-to-node mesh.
    pub no_mesh: bool,
    /// Hosts that are BGP route reflectors (cluster id 1.0.0.1).
    pub route_reflectors: Vec<String>,
    /// How long to wait for every Felix to be in sync and every BGP session to be established.
    pub timeout: Duration,
    /// Host subnets (1 to [`MAX_SUBNETS`]): with more than one, the fabric routes between
    /// them and host N is on subnet `(N - 1) % subnets + 1`.
    pub subnets: u32,
}

impl Default for UpOptions {
    fn default() -> UpOptions {
        UpOptions {
            hosts: 0,
            felix_env: Vec::new(),
            felix: None,
            no_mesh: false,
            route_reflectors: Vec::new(),
            timeout: ready::UP_LIMIT,
            subnets: 1,
        }
    }
}

/// The most host subnets `up --subnets` makes.
pub const MAX_SUBNETS: u32 = 8;

/// The subnet (from 1) of host `n` (from 1): hosts alternate between the subnets.
pub fn subnet_of(n: u32, subnets: u32) -> u32 {
    (n - 1) % subnets.max(1) + 1
}

/// The route reflector cluster id the lab gives its reflectors.
pub const RR_CLUSTER_ID: &str = "1.0.0.1";

/// A workload to plug in.
#[derive(Debug, Clone, Default)]
pub struct WorkloadSpec {
    pub host: String,
    pub name: String,
    pub ips: Vec<IpAddr>,
    pub profiles: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

/// Brings a lab up: fabric, etcd, relay, hosts with Felix and calico-node; returns when every
/// Felix has programmed everything written so far and every BGP session is established.
pub async fn up(name: &str, options: &UpOptions) -> anyhow::Result<Lab> {
    check_name("lab name", name)?;
    if !(1..=50).contains(&options.hosts) {
        bail!("--hosts must be between 1 and 50, not {}", options.hosts);
    }
    if !(1..=MAX_SUBNETS).contains(&options.subnets) {
        bail!(
            "--subnets must be between 1 and {MAX_SUBNETS}, not {}",
            options.subnets
        );
    }
    sh::require(&[
        "ip", "etcd", "sysctl", "ping", "iptables", "ipset", "bird", "birdc",
    ])?;
    let felix = felix_binary(options.felix.as_deref())?;
    let dir = Lab::dir_of(name);
    if dir.join("state.json").exists() {
        bail!("lab {name:?} is already up; `calico-lab --lab {name} down` removes it");
    }
    let leftovers = lab_namespaces(name)?;
    if !leftovers.is_empty() {
        bail!(
            "namespaces of an earlier lab {name:?} are still there ({}); run `calico-lab --lab {name} down` first",
            leftovers.join(", ")
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut lab = Lab {
        name: name.to_owned(),
        dir,
        client_endpoint: String::new(),
        hosts: Vec::new(),
        workloads: Vec::new(),
        pids: Vec::new(),
        felix_env: options.felix_env.clone(),
        subnets: options.subnets,
    };
    lab.save()?;
    match build(&mut lab, options, &felix).await {
        Ok(()) => Ok(lab),
        Err(error) => {
            let _ = down(name);
            Err(error.context(format!(
                "bringing lab {name:?} up failed; it was removed again"
            )))
        }
    }
}

async fn build(lab: &mut Lab, options: &UpOptions, felix: &Path) -> anyhow::Result<()> {
    let fabric = Lab::fabric_netns(&lab.name);
    add_netns(&fabric)?;
    // One bridge per subnet: br0 (10.99.0.1/24) for subnet 1, br1 (10.99.1.1/24) for 2, ...
    for subnet in 1..=options.subnets {
        let bridge = format!("br{}", subnet - 1);
        let (gateway, gateway6) = (subnet_gateway(subnet), subnet_gateway6(subnet));
        // No multicast snooping: IPv6 neighbour discovery must not wait for MLD reports.
        ipl(&format!(
            "-n {fabric} link add {bridge} type bridge mcast_snooping 0"
        ))?;
        ipl(&format!("-n {fabric} addr add {gateway}/24 dev {bridge}"))?;
        ipl(&format!(
            "-n {fabric} addr add {gateway6}/64 dev {bridge} nodad"
        ))?;
        ipl(&format!("-n {fabric} link set {bridge} up"))?;
    }
    if options.subnets > 1 {
        // The fabric is the router between the subnets: it routes the hosts' networks and
        // nothing else (no route to any pool: unencapsulated workload traffic between
        // subnets ends here).
        sh::sysctl(&fabric, "net.ipv4.ip_forward=1")?;
        sh::sysctl(&fabric, "net.ipv6.conf.all.forwarding=1")?;
    }

    let etcd_url = Lab::fabric_endpoint();
    let peer = "http://127.0.0.1:2380";
    let data = lab.dir.join("etcd");
    let data = data.to_str().context("state dir is not UTF-8")?;
    let etcd_args = [
        "--name",
        "lab",
        "--data-dir",
        data,
        "--listen-client-urls",
        &etcd_url,
        "--advertise-client-urls",
        &etcd_url,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        &format!("lab={peer}"),
    ];
    spawn(
        Some(&fabric),
        Path::new("etcd"),
        &etcd_args,
        &[],
        &lab.log_path("etcd"),
    )?;

    let port_file = lab.dir.join("relay.port");
    let me = std::env::current_exe().context("cannot find the calico-lab binary")?;
    let to = format!("{FABRIC_IP}:{ETCD_PORT}");
    let relay_args = ["relay", "--netns", &fabric, "--to", &to, "--port-file"];
    let mut args: Vec<&str> = relay_args.to_vec();
    args.push(port_file.to_str().context("state dir is not UTF-8")?);
    let relay = spawn(None, &me, &args, &[], &lab.log_path("relay"))?;
    lab.pids.push(relay);
    let port = poll("the relay to listen", Duration::from_secs(10), || {
        Ok(std::fs::read_to_string(&port_file)
            .ok()
            .filter(|p| !p.is_empty()))
    })
    .await
    .with_context(|| log_hint(lab, "relay"))?;
    lab.client_endpoint = format!("http://127.0.0.1:{port}");
    lab.save()?;

    let store = connect(lab).await.with_context(|| log_hint(lab, "etcd"))?;
    store.put("/calico/v1/Ready", "true").await?;
    if options.no_mesh {
        store
            .put("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#)
            .await?;
    }
    for reflector in &options.route_reflectors {
        let known = (1..=options.hosts).any(|n| format!("host{n}") == *reflector);
        if !known {
            bail!(
                "--route-reflector {reflector}: the lab's hosts are host1 to host{}",
                options.hosts
            );
        }
        let key = format!("/calico/bgp/v1/host/{reflector}/rr_cluster_id");
        store.put(&key, RR_CLUSTER_ID).await?;
    }
    for pool in cni::POOLS {
        let cidr: ipnet::IpNet = pool.parse().expect("valid pool");
        let key = calico_model::Key::Pool { cidr }.to_string();
        store
            .put(&key, &serde_json::json!({ "cidr": pool }).to_string())
            .await?;
    }

    for n in 1..=options.hosts {
        let host = add_host(lab, n, subnet_of(n, options.subnets))?;
        lab.hosts.push(host);
        lab.save()?;
    }
    static_fabric_neighbours(&lab.hosts)?;
    let node = sibling_binary("calico-node", "calico-node")?;
    for index in 0..lab.hosts.len() {
        let pid = start_felix(lab, &lab.hosts[index], &[], felix)?;
        lab.hosts[index].felix_pid = Some(pid);
        let pid = start_node(lab, &lab.hosts[index], &node)?;
        lab.hosts[index].node_pid = Some(pid);
    }
    lab.save()?;
    settle(lab, options, &store).await
}

/// Waits until every Felix is in sync and has programmed everything written so far, and every
/// host's BGP sessions are established, so that workloads added next are reachable at once.
async fn settle(lab: &Lab, options: &UpOptions, store: &EtcdDatastore) -> anyhow::Result<()> {
    let deadline = Deadline::after(options.timeout);
    let revision = ready::mark(store).await?;
    for host in &lab.hosts {
        let applied = ready::felix_applied_on(lab, host, revision, deadline).await;
        with_log_tail(applied, lab, &format!("felix-{}", host.name))?;
    }
    // Every session, also across subnets (multi-hop, through the fabric's router).
    for (host, peers) in lab.hosts.iter().zip(bgp_peers(&lab.hosts, options)) {
        let established = ready::bgp_established(lab, host, &peers, deadline).await;
        with_log_tail(established, lab, &format!("node-{}", host.name))?;
    }
    Ok(())
}

/// The hosts each host has BGP sessions with (as calico-node configures them): every other
/// host in the mesh; without it, a route reflector peers with every other host and a client
/// with the reflectors.
fn bgp_peers<'a>(hosts: &'a [Host], options: &UpOptions) -> Vec<Vec<&'a Host>> {
    let reflector = |host: &Host| options.route_reflectors.contains(&host.name);
    hosts
        .iter()
        .map(|host| {
            hosts
                .iter()
                .filter(|other| other.name != host.name)
                .filter(|other| !options.no_mesh || reflector(host) || reflector(other))
                .collect()
        })
        .collect()
}

/// Host `n` on subnet `subnet` (from 1): eth0 `10.99.<subnet - 1>.<10 + n>/24` and
/// `fd00:99:<subnet - 1>::<10 + n>/64` on the fabric's bridge `br<subnet - 1>`, default routes
/// through the fabric's address on that bridge.
fn add_host(lab: &Lab, n: u32, subnet: u32) -> anyhow::Result<Host> {
    let name = format!("host{n}");
    let netns = format!("{}.{name}", lab.name);
    let fabric = Lab::fabric_netns(&lab.name);
    let third = (subnet - 1) as u8;
    let host_ip = std::net::Ipv4Addr::new(10, 99, third, 10 + n as u8);
    let host_ip6 =
        std::net::Ipv6Addr::new(0xfd00, 0x99, u16::from(third), 0, 0, 0, 0, 0x10 + n as u16);
    let (gateway, gateway6) = (subnet_gateway(subnet), subnet_gateway6(subnet));
    add_netns(&netns)?;
    let port = format!("h{n}");
    ipl(&format!(
        "-n {netns} link add eth0 type veth peer name {port} netns {fabric}"
    ))?;
    ipl(&format!("-n {fabric} link set {port} master br{third} up"))?;
    ipl(&format!("-n {netns} addr add {host_ip}/24 dev eth0"))?;
    ipl(&format!("-n {netns} addr add {host_ip6}/64 dev eth0 nodad"))?;
    ipl(&format!("-n {netns} link set eth0 up"))?;
    ip(&[
        "-n",
        &netns,
        "route",
        "add",
        "default",
        "via",
        &gateway.to_string(),
    ])?;
    ip(&[
        "-n",
        &netns,
        "-6",
        "route",
        "add",
        "default",
        "via",
        &gateway6.to_string(),
    ])?;
    sh::sysctl(&netns, "net.ipv4.ip_forward=1")?;
    sh::sysctl(&netns, "net.ipv6.conf.all.forwarding=1")?;
    Ok(Host {
        name,
        netns,
        ip: host_ip,
        ip6: host_ip6,
        felix_pid: None,
        node_pid: None,
        subnet,
    })
}

/// Hosts know each other's fabric MACs up front, so that the first packets between fresh
/// namespaces do not depend on neighbour discovery over the bridge (observed here: the first
/// IPv6 solicitation between new namespaces can go unanswered for over a second). Only hosts
/// on the same subnet are neighbours; the others are reached through the fabric's router.
fn static_fabric_neighbours(hosts: &[Host]) -> anyhow::Result<()> {
    let mut macs = Vec::new();
    for host in hosts {
        let out = ip(&["-n", &host.netns, "-j", "link", "show", "eth0"])?;
        let parsed: serde_json::Value = serde_json::from_str(&out)?;
        macs.push(
            parsed[0]["address"]
                .as_str()
                .context("no MAC on eth0")?
                .to_owned(),
        );
    }
    for host in hosts {
        let neighbours = hosts
            .iter()
            .zip(&macs)
            .filter(|(o, _)| o.name != host.name && o.subnet == host.subnet);
        for (other, mac) in neighbours {
            for address in [other.ip.to_string(), other.ip6.to_string()] {
                let args = [
                    "-n",
                    &host.netns,
                    "neigh",
                    "replace",
                    &address,
                    "lladdr",
                    mac,
                ];
                let mut args = args.to_vec();
                args.extend(["dev", "eth0", "nud", "permanent"]);
                ip(&args)?;
            }
        }
    }
    Ok(())
}

fn start_felix(
    lab: &Lab,
    host: &Host,
    extra: &[(String, String)],
    felix: &Path,
) -> anyhow::Result<i32> {
    let mut env = vec![
        ("FELIX_ETCDENDPOINTS".to_owned(), Lab::fabric_endpoint()),
        ("FELIX_FELIXHOSTNAME".to_owned(), host.name.clone()),
        (
            "FELIX_PROMETHEUSMETRICSENABLED".to_owned(),
            "true".to_owned(),
        ),
        ("FELIX_LOGFILEPATH".to_owned(), "none".to_owned()),
    ];
    env.extend(lab.felix_env.iter().cloned());
    env.extend(extra.iter().cloned());
    // Under `calico-lab supervise`, which starts Felix again when it exits to restart.
    let me = std::env::current_exe().context("cannot find calico-lab itself")?;
    let felix = felix
        .to_str()
        .context("the calico-felix path is not UTF-8")?;
    spawn(
        Some(&host.netns),
        &me,
        &["supervise", "--", felix],
        &env,
        &lab.log_path(&format!("felix-{}", host.name)),
    )
}

/// calico-node for BGP (the lab runs Felix itself, so that tests can kill and restart it):
/// it registers the host's fabric addresses and runs BIRD with the configuration it renders.
fn start_node(lab: &Lab, host: &Host, node: &Path) -> anyhow::Result<i32> {
    let run_dir = lab.dir.join(&host.name);
    let run_dir = run_dir.to_str().context("state dir is not UTF-8")?;
    let (ip, ip6) = (host.ip.to_string(), host.ip6.to_string());
    let endpoint = Lab::fabric_endpoint();
    let args = [
        "--hostname",
        &host.name,
        "--ip",
        &ip,
        "--ip6",
        &ip6,
        "--felix",
        "none",
        "--etcd-endpoints",
        &endpoint,
        "--run-dir",
        run_dir,
    ];
    spawn(
        Some(&host.netns),
        node,
        &args,
        &[],
        &lab.log_path(&format!("node-{}", host.name)),
    )
}

/// A binary beside calico-lab, else on PATH.
fn sibling_binary(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe()?.with_file_name(name);
    if beside.is_file() {
        return Ok(beside);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} not found beside calico-lab or on PATH; build it with `cargo build -p {package}`"))
}

/// Kills a host's Felix (SIGKILL) and starts it again, with the lab's settings plus `extra`.
pub fn restart_felix(lab: &mut Lab, host: &str, extra: &[(String, String)]) -> anyhow::Result<i32> {
    let felix = felix_binary(None)?;
    lab.host(host)?;
    let index = lab
        .hosts
        .iter()
        .position(|h| h.name == host)
        .expect("checked");
    if let Some(pid) = lab.hosts[index].felix_pid.take() {
        // The supervisor and Felix: their process group.
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
        stop_pids(&[pid]);
    }
    let pid = start_felix(lab, &lab.hosts[index], extra, &felix)?;
    lab.hosts[index].felix_pid = Some(pid);
    lab.save()?;
    Ok(pid)
}

/// Whether a process runs (a zombie does not).
pub(crate) fn pid_alive(pid: i32) -> bool {
    // A zombie is dead too.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn felix_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    if let Some(path) = std::env::var_os("CALICO_FELIX") {
        return Ok(PathBuf::from(path));
    }
    sibling_binary("calico-felix", "calico-felix")
}

/// Removes everything of a lab: processes in its namespaces, the namespaces, its state.
/// Works from the namespace names alone, so also after a crash.
pub fn down(name: &str) -> anyhow::Result<Vec<String>> {
    let lab = Lab::load(name).ok();
    let namespaces = lab_namespaces(name)?;
    let mut pids: Vec<i32> = lab.iter().flat_map(|l| l.pids.iter().copied()).collect();
    // The relay lives in the caller's namespace: found by its command line too, so that it
    // goes even when the state file is lost.
    pids.extend(relay_pids(&Lab::fabric_netns(name)));
    for ns in &namespaces {
        if let Ok(out) = ip(&["netns", "pids", ns]) {
            pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    stop_pids(&pids);
    for ns in &namespaces {
        ip(&["netns", "del", ns]).with_context(|| format!("cannot delete namespace {ns}"))?;
    }
    let dir = Lab::dir_of(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(namespaces)
}

/// The relays serving the lab whose fabric namespace is `fabric`.
fn relay_pids(fabric: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.iter().any(|a| *a == b"relay")
                && args
                    .windows(2)
                    .any(|w| w[0] == b"--netns" && w[1] == fabric.as_bytes())
        })
        .collect()
}

/// SIGKILLs the processes and waits (briefly) until they are gone.
fn stop_pids(pids: &[i32]) {
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The namespaces named `<lab>.…` (lab names cannot contain dots, so no other lab's).
fn lab_namespaces(name: &str) -> anyhow::Result<Vec<String>> {
    let prefix = format!("{name}.");
    let mut list: Vec<String> = sh::namespaces()?
        .into_iter()
        .filter(|ns| ns.starts_with(&prefix))
        .collect();
    // Workloads before hosts before the fabric: veths go with the namespace that holds them.
    list.sort_by_key(|ns| (ns.ends_with(".fabric"), ns.matches('.').count() == 1));
    Ok(list)
}

/// Plugs a workload in with the `calico` CNI plugin: a namespace, CNI ADD (veth, addresses,
/// routes, endpoint), then the endpoint's labels and profiles as an orchestrator would set
/// them, and an echo server inside. Without addresses, IPAM picks an IPv4 and an IPv6 one.
/// Returns when it is reachable: every Felix has programmed it, every other host routes to it
/// (over BGP) and its echo server listens. If anything fails (or `limit` passes), it is
/// unplugged again.
pub async fn add_workload(
    lab: &mut Lab,
    spec: &WorkloadSpec,
    limit: Duration,
) -> anyhow::Result<Workload> {
    check_name("workload name", &spec.name)?;
    let host = lab.host(&spec.host)?.clone();
    if lab.workloads.iter().any(|w| w.name == spec.name) {
        bail!(
            "workload {:?} already exists in lab {:?}",
            spec.name,
            lab.name
        );
    }
    for address in &spec.ips {
        if let Some(w) = lab.workloads.iter().find(|w| w.ips.contains(address)) {
            bail!("address {address} is already used by workload {:?}", w.name);
        }
    }
    let netns = format!("{}.{}.{}", lab.name, host.name, spec.name);
    add_netns(&netns)?;
    let mut workload = Workload {
        name: spec.name.clone(),
        host: host.name.clone(),
        netns,
        interface: String::new(),
        ips: spec.ips.clone(),
        key: format!(
            "/calico/v1/host/{}/workload/cni/{}/endpoint/eth0",
            host.name, spec.name
        ),
    };
    let deadline = Deadline::after(limit);
    let plugged = async {
        let result = cni::call(lab, &host, "ADD", &spec.name, &workload.netns, &spec.ips)?;
        workload.ips = cni::addresses(&result)?;
        workload.interface = result["interfaces"][0]["name"]
            .as_str()
            .context("the CNI result names no host interface")?
            .to_owned();
        let store = connect(lab).await?;
        label(&store, &workload, spec).await?;
        let server = serve(lab, &workload)?;
        let revision = ready::mark(&store).await?;
        ready::felix_applied(lab, revision, deadline).await?;
        ready::routed_to(lab, &workload, deadline).await?;
        ready::serving(server, &lab.log_path(&workload.name), deadline).await
    };
    if let Err(error) = plugged.await {
        let _ = unplug(lab, &workload);
        return Err(error);
    }
    lab.workloads.push(workload.clone());
    lab.save()?;
    Ok(workload)
}

/// Writes the profiles and labels given, as an orchestrator would: given profiles replace the
/// network's profile the CNI plugin gave the endpoint, given labels are set; what was not given
/// stays as the plugin wrote it.
async fn label(
    store: &EtcdDatastore,
    workload: &Workload,
    spec: &WorkloadSpec,
) -> anyhow::Result<()> {
    if spec.profiles.is_empty() && spec.labels.is_empty() {
        return Ok(());
    }
    let pair = store
        .get(&workload.key)
        .await?
        .with_context(|| format!("CNI ADD wrote no endpoint at {}", workload.key))?;
    let mut endpoint: serde_json::Value = serde_json::from_str(&pair.value)
        .with_context(|| format!("the endpoint at {} is not JSON", workload.key))?;
    with_profiles_and_labels(&mut endpoint, spec);
    store.put(&workload.key, &endpoint.to_string()).await?;
    Ok(())
}

fn with_profiles_and_labels(endpoint: &mut serde_json::Value, spec: &WorkloadSpec) {
    if !spec.profiles.is_empty() {
        endpoint["profile_ids"] = serde_json::json!(spec.profiles);
    }
    if spec.labels.is_empty() {
        return;
    }
    if !endpoint["labels"].is_object() {
        endpoint["labels"] = serde_json::json!({});
    }
    for (key, value) in &spec.labels {
        endpoint["labels"][key] = serde_json::json!(value);
    }
}

/// Starts the workload's echo server; its pid.
fn serve(lab: &Lab, w: &Workload) -> anyhow::Result<i32> {
    let me = std::env::current_exe()?;
    let ports: Vec<String> = SERVED_PORTS.iter().map(u16::to_string).collect();
    let ports = ports.join(",");
    spawn(
        Some(&w.netns),
        &me,
        &["serve", "--ports", &ports],
        &[],
        &lab.log_path(&w.name),
    )
}

/// Unplugs a workload with CNI DEL (endpoint, veth, addresses), then its processes and its
/// namespace.
pub async fn delete_workload(lab: &mut Lab, name: &str) -> anyhow::Result<()> {
    let workload = lab.workload(name)?.clone();
    unplug(lab, &workload)?;
    lab.workloads.retain(|w| w.name != name);
    lab.save()
}

fn unplug(lab: &Lab, w: &Workload) -> anyhow::Result<()> {
    let host = lab.host(&w.host)?;
    let deleted = cni::call(lab, host, "DEL", &w.name, &w.netns, &[]);
    if sh::namespaces()?.contains(&w.netns) {
        if let Ok(out) = ip(&["netns", "pids", &w.netns]) {
            let pids: Vec<i32> = out
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            stop_pids(&pids);
        }
        ip(&["netns", "del", &w.netns])?;
    }
    deleted.map(drop)
}

/// A datastore client for the lab's etcd, as the caller reaches it.
pub async fn connect(lab: &Lab) -> anyhow::Result<EtcdDatastore> {
    let config = EtcdConfig {
        endpoints: vec![lab.client_endpoint.clone()],
        ..EtcdConfig::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let attempt = async {
            let store = EtcdDatastore::connect(config.clone()).await?;
            store.get("/calico/v1/Ready").await?;
            Ok::<_, calico_datastore::DatastoreError>(store)
        };
        match attempt.await {
            Ok(store) => return Ok(store),
            Err(error) if Instant::now() >= deadline => {
                return Err(error)
                    .context(format!("etcd at {} does not answer", lab.client_endpoint));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Polls `check` until it yields a value or `limit` passes.
pub async fn poll<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check()? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Adds the last lines of a process's log to an error (a failed `up` removes the logs).
fn with_log_tail<T>(result: anyhow::Result<T>, lab: &Lab, process: &str) -> anyhow::Result<T> {
    result.map_err(|error| {
        let path = lab.log_path(process);
        anyhow::anyhow!(
            "{error:#}\nlast lines of {}:\n{}",
            path.display(),
            log_tail(&path)
        )
    })
}

fn log_hint(lab: &Lab, process: &str) -> String {
    let path = lab.log_path(process);
    format!("see {}:\n{}", path.display(), log_tail(&path))
}

/// The last 15 lines of a log, without terminal colours.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    without_colours(&lines[lines.len().saturating_sub(15)..].join("\n"))
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Skip up to and including the sequence's final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn add_netns(name: &str) -> anyhow::Result<()> {
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "lo", "up"]).map(drop)
}

/// Starts a process that outlives the lab command: in its own process group, output to `log`.
fn spawn(
    netns: Option<&str>,
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    log: &Path,
) -> anyhow::Result<i32> {
    let out =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    };
    let child = command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    Ok(child.id() as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cni_endpoint() -> serde_json::Value {
        serde_json::json!({"state": "active", "name": "cali0", "profile_ids": ["lab"]})
    }

    #[test]
    fn without_profiles_the_endpoint_keeps_the_network_profile() {
        let mut endpoint = cni_endpoint();
        with_profiles_and_labels(&mut endpoint, &WorkloadSpec::default());
        assert_eq!(endpoint, cni_endpoint());
    }

    #[test]
    fn given_profiles_replace_it_and_given_labels_are_set() {
        let mut endpoint = cni_endpoint();
        let spec = WorkloadSpec {
            profiles: vec!["a".into(), "b".into()],
            labels: [("role".to_owned(), "web".to_owned())].into(),
            ..WorkloadSpec::default()
        };
        with_profiles_and_labels(&mut endpoint, &spec);
        assert_eq!(endpoint["profile_ids"], serde_json::json!(["a", "b"]));
        assert_eq!(endpoint["labels"], serde_json::json!({"role": "web"}));
    }

    #[test]
    fn log_tails_lose_their_colours() {
        let line = "\x1b[2m2026-11-23\x1b[0m \x1b[32m INFO\x1b[0m started";
        assert_eq!(without_colours(line), "2026-11-23  INFO started");
    }

    fn host(n: u8) -> Host {
        Host {
            name: format!("host{n}"),
            netns: String::new(),
            ip: std::net::Ipv4Addr::new(10, 99, 0, 10 + n),
            ip6: std::net::Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 0x10 + u16::from(n)),
            felix_pid: None,
            node_pid: None,
            subnet: 1,
        }
    }

    fn peer_names(hosts: &[Host], options: &UpOptions) -> Vec<Vec<String>> {
        bgp_peers(hosts, options)
            .into_iter()
            .map(|peers| peers.into_iter().map(|h| h.name.clone()).collect())
            .collect()
    }

    #[test]
    fn bgp_peers_follow_the_mesh_or_the_reflectors() {
        let hosts = [host(1), host(2), host(3)];
        let mesh = peer_names(&hosts, &UpOptions::default());
        assert_eq!(mesh[0], ["host2", "host3"]);
        assert_eq!(mesh[2], ["host1", "host2"]);
        let reflected = UpOptions {
            no_mesh: true,
            route_reflectors: vec!["host1".into()],
            ..UpOptions::default()
        };
        let reflected = peer_names(&hosts, &reflected);
        assert_eq!(reflected[0], ["host2", "host3"], "the reflector: everyone");
        assert_eq!(reflected[1], ["host1"], "a client: the reflector");
        let no_bgp = UpOptions {
            no_mesh: true,
            ..UpOptions::default()
        };
        assert!(peer_names(&hosts, &no_bgp).iter().all(Vec::is_empty));
    }
}
