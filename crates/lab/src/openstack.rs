//! `up --openstack`: the lab as an OpenStack cloud. MariaDB and a noauth neutron-server with
//! Calico's ML2 driver run in the fabric namespace beside etcd (neutron-server on the fabric's
//! address, port 9696, so that every host reaches it; a relay lets the caller reach it), one
//! `calico-neutron` in the fabric, and a `calico-dhcp-agent` in each host, both under
//! `calico-lab supervise --restart always` (as the systemd units of docs/openstack.md run them);
//! Felix takes `cali` and `tap` interfaces. `up` then makes a dual-stack network (an IPv4 subnet
//! and a DHCPv6-stateful IPv6 subnet, both outside the lab's pools) and a security group through
//! Neutron's API, for VMs to use. [`restart_server`] restarts neutron-server as `up` started it.
//!
//! ```text
//!  caller ── relay ──▶ fabric: neutron-server :9696 ◀── calico-neutron ──▶ etcd
//!                        │ (unix socket)     ▲
//!                      mariadbd              └── hostN: calico-dhcp-agent (dnsmasq) ──▶ etcd
//! ```
//!
//! Everything lives in the lab's namespaces or is a relay: `down` stops it with the rest.
//! VMs on the lab's hosts: [`vm`].

pub mod vm;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use calico_openstack::client::Client;
use calico_openstack::server::{self, Server};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::logs::{log_hint, with_log_tail};
use crate::processes;
use crate::ready::poll;
use crate::state::{FABRIC_IP, Host, Lab};

/// The project every object of the lab belongs to (noauth: named in each request body).
pub const PROJECT: &str = "c411c0000000000000000000000000ab";
/// The lab's VM network, its subnets (outside the lab's IP pools) and their gateways.
pub const NETWORK: &str = "lab-net";
pub const SUBNET_CIDR: &str = "10.28.0.0/24";
pub const GATEWAY: &str = "10.28.0.1";
/// The network's IPv6 subnet: addresses by DHCPv6, router advertisements from each host's
/// dnsmasq (`dhcpv6-stateful`, the mode Calico's docs ask for).
pub const SUBNET6_NAME: &str = "lab-net-v6";
pub const SUBNET6_CIDR: &str = "fd00:28::/64";
pub const GATEWAY6: &str = "fd00:28::1";
/// The security group VMs are given: everything from its members, everything out.
pub const SECURITY_GROUP: &str = "lab-default";
/// Felix's interface prefixes on an OpenStack lab's hosts: containers and VMs.
pub const INTERFACE_PREFIX: &str = "cali,tap";
/// What each host's DHCP agent runs.
const DNSMASQ: &str = "/usr/sbin/dnsmasq";
/// How long neutron-server may take to answer after it started.
const SERVER_LIMIT: Duration = Duration::from_secs(120);

/// What `up --openstack` made, kept in the lab's state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpenStack {
    /// neutron-server as hosts reach it: `http://10.99.0.1:9696`.
    pub neutron_url: String,
    /// neutron-server as the caller reaches it (its relay): `http://127.0.0.1:<port>`.
    pub client_url: String,
    pub project: String,
    pub network: String,
    pub subnet: String,
    /// The IPv6 subnet (labs brought up before it existed have none).
    #[serde(default)]
    pub subnet6: String,
    pub security_group: String,
    /// neutron-server's pid (it runs in the fabric), to notice an early exit.
    pub server_pid: Option<i32>,
    /// The VMs `vm boot` made.
    #[serde(default)]
    pub vms: Vec<vm::Vm>,
}

/// Fails in one line when something `--openstack` runs is missing.
pub fn require_installed() -> anyhow::Result<()> {
    server::check_installed().map_err(anyhow::Error::msg)?;
    for (path, package) in [(DNSMASQ, "dnsmasq-base"), (vm::DHCLIENT, "isc-dhcp-client")] {
        if !Path::new(path).is_file() {
            bail!(
                "{path} is missing: {package} is not installed; run scripts/setup-neutron.sh as root"
            );
        }
    }
    for name in ["calico-neutron", "calico-dhcp-agent"] {
        processes::sibling_binary(name, "calico-openstack")?;
    }
    Ok(())
}

/// The lab's neutron-server: its state in `<lab dir>/neutron`, on the fabric's address.
fn server(lab: &Lab) -> Server {
    Server::new(
        &lab.dir.join("neutron"),
        IpAddr::V4(FABRIC_IP),
        server::PORT,
    )
}

/// Starts MariaDB in the fabric, makes the schema and starts neutron-server (without waiting
/// for it: [`configure`] does); records its relay.
pub async fn start_server(lab: &mut Lab) -> anyhow::Result<()> {
    let server = server(lab);
    let fabric = Lab::fabric_netns(&lab.name);
    let dir = server.dir();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    run(&mut server.install_db(), "mariadb-install-db")?;
    processes::spawn_command(Some(&fabric), &server.mariadbd(), &lab.log_path("mariadb"))?;
    let create = || Ok(server.create_db().output()?.status.success().then_some(()));
    poll(
        "mariadbd to accept connections",
        Duration::from_secs(30),
        create,
    )
    .await
    .with_context(|| log_hint(lab, "mariadb"))?;
    server.write_config()?;
    run(&mut server.migrate(), "neutron-db-manage upgrade heads")?;
    let log = lab.log_path("neutron-server");
    let pid = processes::spawn_command(Some(&fabric), &server.neutron_server(), &log)?;
    let to = format!("{FABRIC_IP}:{}", server::PORT);
    let relay = processes::start_relay_to(lab, &to, "relay-neutron").await?;
    lab.pids.push(relay.pid);
    lab.openstack = Some(OpenStack {
        neutron_url: server.url(),
        client_url: format!("http://127.0.0.1:{}", relay.port),
        project: PROJECT.to_owned(),
        server_pid: Some(pid),
        ..OpenStack::default()
    });
    lab.save()
}

/// Waits for neutron-server, starts calico-neutron and the hosts' DHCP agents, and makes the
/// network, subnet and security group.
pub async fn configure(lab: &mut Lab) -> anyhow::Result<()> {
    let mut openstack = lab
        .openstack
        .clone()
        .context("neutron-server was not started")?;
    let client = Client::new(&openstack.client_url)?;
    let waited = wait_for_server(&client, openstack.server_pid).await;
    with_log_tail(waited, lab, "neutron-server")?;
    start_calico_neutron(lab, &openstack)?;
    for host in &lab.hosts {
        start_agent(lab, host, &openstack)?;
    }
    openstack.network = create(&client, "networks", json!({ "name": NETWORK })).await?;
    let subnet = json!({
        "name": NETWORK, "network_id": openstack.network, "ip_version": 4,
        "cidr": SUBNET_CIDR, "gateway_ip": GATEWAY, "enable_dhcp": true,
    });
    openstack.subnet = create(&client, "subnets", subnet).await?;
    let subnet6 = json!({
        "name": SUBNET6_NAME, "network_id": openstack.network, "ip_version": 6,
        "cidr": SUBNET6_CIDR, "gateway_ip": GATEWAY6, "enable_dhcp": true,
        "ipv6_address_mode": "dhcpv6-stateful", "ipv6_ra_mode": "dhcpv6-stateful",
    });
    openstack.subnet6 = create(&client, "subnets", subnet6).await?;
    openstack.security_group = security_group(&client).await?;
    lab.openstack = Some(openstack);
    lab.save()
}

async fn wait_for_server(client: &Client, pid: Option<i32>) -> anyhow::Result<()> {
    let deadline = Instant::now() + SERVER_LIMIT;
    loop {
        let error = match client.call("GET", "/v2.0/networks", None).await {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        if pid.is_some_and(|pid| !processes::pid_alive(pid)) {
            bail!("neutron-server exited while starting (see also neutron/neutron-server.log)");
        }
        if Instant::now() >= deadline {
            bail!("neutron-server did not answer within {SERVER_LIMIT:?}: {error}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The group VMs get: Neutron adds egress to anywhere; ingress from the group's members.
async fn security_group(client: &Client) -> anyhow::Result<String> {
    let group = create(client, "security-groups", json!({ "name": SECURITY_GROUP })).await?;
    for ethertype in ["IPv4", "IPv6"] {
        let rule = json!({
            "security_group_id": group, "direction": "ingress",
            "ethertype": ethertype, "remote_group_id": group,
        });
        create(client, "security-group-rules", rule).await?;
    }
    Ok(group)
}

/// Creates an object in `collection` of the lab's project; its id.
async fn create(client: &Client, collection: &str, fields: Value) -> anyhow::Result<String> {
    let singular = collection.trim_end_matches('s').replace('-', "_");
    let mut fields = fields;
    fields["project_id"] = json!(PROJECT);
    let body = json!({ singular.clone(): fields });
    let path = format!("/v2.0/{collection}");
    let answer = client
        .call("POST", &path, Some(&body))
        .await
        .with_context(|| format!("cannot create the lab's {singular} through Neutron"))?;
    answer[&singular]["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("Neutron's answer to POST {path} has no id: {answer}"))
}

/// calico-neutron in the fabric, under `calico-lab supervise`.
fn start_calico_neutron(lab: &Lab, openstack: &OpenStack) -> anyhow::Result<i32> {
    let binary = processes::sibling_binary("calico-neutron", "calico-openstack")?;
    let args = [
        "--neutron-url".to_owned(),
        openstack.neutron_url.clone(),
        "--etcd-endpoints".to_owned(),
        lab.etcd_endpoints(),
    ];
    let fabric = Lab::fabric_netns(&lab.name);
    supervised(lab, &fabric, &binary, &args, "calico-neutron")
}

/// A host's DHCP agent (its dnsmasq's files in `<lab dir>/<host>/dhcp`), under `supervise`.
fn start_agent(lab: &Lab, host: &Host, openstack: &OpenStack) -> anyhow::Result<i32> {
    let binary = processes::sibling_binary("calico-dhcp-agent", "calico-openstack")?;
    let state = lab.dir.join(&host.name).join("dhcp");
    std::fs::create_dir_all(&state)
        .with_context(|| format!("cannot create {}", state.display()))?;
    let args = [
        "--host".to_owned(),
        host.name.clone(),
        "--neutron-url".to_owned(),
        openstack.neutron_url.clone(),
        "--etcd-endpoints".to_owned(),
        lab.etcd_endpoints(),
        "--state-dir".to_owned(),
        utf8(&state)?,
        "--neutron-poll-interval".to_owned(),
        "2s".to_owned(),
        "--dnsmasq".to_owned(),
        DNSMASQ.to_owned(),
    ];
    let name = format!("dhcp-agent-{}", host.name);
    supervised(lab, &host.netns, &binary, &args, &name)
}

fn supervised(
    lab: &Lab,
    netns: &str,
    binary: &Path,
    args: &[String],
    name: &str,
) -> anyhow::Result<i32> {
    let me = std::env::current_exe().context("cannot find calico-lab itself")?;
    let binary = utf8(binary)?;
    let mut all = vec!["supervise", "--restart", "always", "--", binary.as_str()];
    all.extend(args.iter().map(String::as_str));
    processes::spawn(Some(netns), &me, &all, &[], &lab.log_path(name))
}

fn utf8(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// Runs a setup command to completion; fails with what it printed.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Stops the lab's neutron-server (SIGTERM to its process group, SIGKILL after
/// [`SERVER_STOP_GRACE`]) and starts it again as `up` did: the same configuration, Calico's ML2
/// driver on `PYTHONPATH` (a copy of its command line without it cannot load the driver
/// `calico_rs` its configuration names, and exits while starting); returns its pid once it
/// answers.
pub async fn restart_server(lab: &mut Lab) -> anyhow::Result<i32> {
    let mut openstack = vm::openstack_of(lab)?.clone();
    if let Some(pid) = openstack.server_pid {
        stop_group(pid, SERVER_STOP_GRACE).await;
    }
    let server = server(lab);
    let fabric = Lab::fabric_netns(&lab.name);
    let log = lab.log_path("neutron-server");
    let pid = processes::spawn_command(Some(&fabric), &server.neutron_server(), &log)?;
    openstack.server_pid = Some(pid);
    lab.openstack = Some(openstack.clone());
    lab.save()?;
    let client = Client::new(&openstack.client_url)?;
    with_log_tail(
        wait_for_server(&client, Some(pid)).await,
        lab,
        "neutron-server",
    )?;
    Ok(pid)
}

/// How long neutron-server may take to exit after SIGTERM.
const SERVER_STOP_GRACE: Duration = Duration::from_secs(10);

/// SIGTERM to the process group `pgid` leads, SIGKILL to what is left after `grace`; returns
/// when none of it runs (its port is free again).
async fn stop_group(pgid: i32, grace: Duration) {
    let group = nix::unistd::Pid::from_raw(pgid);
    // ESRCH: nothing of the group is left.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while group_runs(pgid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    while group_runs(pgid) && Instant::now() < deadline + Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether a process of group `pgid` runs (zombies, which hold no port, do not count).
fn group_runs(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let pgid = pgid.to_string();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .any(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            // After the command name: state, ppid, pgrp.
            let fields: Vec<&str> = rest.split_whitespace().take(3).collect();
            matches!(fields.as_slice(), [state, _, group] if *state != "Z" && *group == pgid)
        })
}

/// neutron-server's own log (beside its stdout, `neutron-server.log` in the lab's directory).
pub fn server_log(lab: &Lab) -> PathBuf {
    server(lab).path("neutron-server.log")
}
