//! Bringing a lab up and down: the order of things (network, etcd, relay, hosts, Felix and
//! calico-node) and the wait until everything has settled. The pieces live in [`crate::topology`],
//! [`crate::processes`], [`crate::etcd`] and [`crate::ready`]; workloads in [`crate::workloads`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use calico_datastore::EtcdDatastore;
use calico_model::Key;
use calico_model::pool::IpPool;

use crate::cni;
use crate::etcd;
use crate::flows;
use crate::logs::{log_hint, with_log_tail};
use crate::members::{self, MAX_MEMBERS};
use crate::openstack;
use crate::processes;
use crate::ready::{self, Deadline};
use crate::state::{Host, Lab, check_name};
use crate::supervise;
use crate::topology::{self, MAX_SUBNETS, subnet_of};

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
    /// etcd members (1 to [`MAX_MEMBERS`]): one lives in the fabric; more form a cluster,
    /// each in its own namespace on the fabric.
    pub etcd_members: u32,
    /// Also MariaDB, neutron-server, calico-neutron and a DHCP agent per host, Felix taking
    /// `tap` interfaces too, and a network for VMs ([`crate::openstack`]).
    pub openstack: bool,
    /// The flow aggregator (calico-flows) in the fabric and every Felix sending it its flow
    /// logs ([`crate::flows`]). `calico-lab up` turns it on unless `--no-flows`; off by default
    /// here, so that a test's lab is what it asks for.
    pub flows: bool,
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
            etcd_members: 1,
            openstack: false,
            flows: false,
        }
    }
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
    if !(1..=MAX_MEMBERS).contains(&options.etcd_members) {
        bail!(
            "--etcd-members must be between 1 and {MAX_MEMBERS}, not {}",
            options.etcd_members
        );
    }
    crate::sh::require(&[
        "ip", "etcd", "sysctl", "ping", "iptables", "ipset", "bird", "birdc",
    ])?;
    if options.openstack {
        openstack::require_installed()?;
    }
    let felix = processes::felix_binary(options.felix.as_deref())?;
    let dir = Lab::dir_of(name);
    if dir.join("state.json").exists() {
        bail!("lab {name:?} is already up; `calico-lab --lab {name} down` removes it");
    }
    let leftovers = topology::lab_namespaces(name)?;
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
        etcd: Vec::new(),
        hosts: Vec::new(),
        workloads: Vec::new(),
        pids: Vec::new(),
        felix_env: felix_env(options),
        subnets: options.subnets,
        openstack: None,
        flows_url: None,
        felix: Some(felix.clone()),
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
    topology::add_fabric(lab, options.subnets)?;
    start_etcd(lab, options.etcd_members).await?;
    let first = lab.etcd[0].name.clone();
    let store = etcd::connect(lab)
        .await
        .with_context(|| log_hint(lab, &first))?;
    seed(&store, options).await?;
    if options.flows {
        lab.flows_url = Some(flows::start(lab).await?);
        lab.save()?;
    }
    if options.openstack {
        // Started early: the schema and neutron-server take a while, the hosts meanwhile.
        openstack::start_server(lab).await?;
    }

    for n in 1..=options.hosts {
        let host = topology::add_host(lab, n, subnet_of(n, options.subnets))?;
        lab.hosts.push(host);
        lab.save()?;
    }
    topology::static_fabric_neighbours(&lab.hosts)?;
    let node = processes::node_binary()?;
    for index in 0..lab.hosts.len() {
        let pid = processes::start_felix(lab, &lab.hosts[index], &[], felix)?;
        lab.hosts[index].felix_pid = Some(pid);
        let pid = processes::start_node(lab, &lab.hosts[index], &node)?;
        lab.hosts[index].node_pid = Some(pid);
    }
    lab.save()?;
    settle(lab, options, &store).await?;
    if options.openstack {
        openstack::configure(lab).await?;
    }
    Ok(())
}

/// Every Felix's settings: the options', on an OpenStack lab `InterfacePrefix=cali,tap`
/// unless the options name a prefix, and with the aggregator its flow-log settings unless the
/// options name them.
fn felix_env(options: &UpOptions) -> Vec<(String, String)> {
    let mut env = options.felix_env.clone();
    let named = |env: &[(String, String)], key: &str| env.iter().any(|(k, _)| k == key);
    if options.openstack && !named(&env, "FELIX_INTERFACEPREFIX") {
        let prefix = openstack::INTERFACE_PREFIX.to_owned();
        env.push(("FELIX_INTERFACEPREFIX".to_owned(), prefix));
    }
    if options.flows {
        let own: Vec<_> = flows::felix_env()
            .into_iter()
            .filter(|(key, _)| !named(&env, key))
            .collect();
        env.extend(own);
    }
    env
}

/// The etcd members, each started with the whole cluster as its initial configuration, and a
/// relay to each for the caller. Does not wait: the first request waits for a quorum.
async fn start_etcd(lab: &mut Lab, count: u32) -> anyhow::Result<()> {
    lab.etcd = members::plan(&lab.name, count);
    lab.save()?;
    for (index, member) in lab.etcd.iter().enumerate() {
        if member.netns != Lab::fabric_netns(&lab.name) {
            topology::add_member(lab, member, index as u32 + 1)?;
        }
    }
    for index in 0..lab.etcd.len() {
        lab.etcd[index].pid = Some(members::start(lab, &lab.etcd[index])?);
        let relay = processes::start_relay(lab, &lab.etcd[index]).await?;
        lab.pids.push(relay.pid);
        lab.etcd[index].client = format!("http://127.0.0.1:{}", relay.port);
        lab.save()?;
    }
    let clients: Vec<&str> = lab.etcd.iter().map(|m| m.client.as_str()).collect();
    lab.client_endpoint = clients.join(",");
    lab.save()
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

/// Removes everything of a lab: processes in its namespaces, the namespaces, its state.
/// Works from the namespace names alone, so also after a crash.
pub fn down(name: &str) -> anyhow::Result<Vec<String>> {
    let lab = Lab::load(name).ok();
    let namespaces = topology::lab_namespaces(name)?;
    let mut pids: Vec<i32> = lab.iter().flat_map(|l| l.pids.iter().copied()).collect();
    // The relay lives in the caller's namespace: found by its command line too, so that it
    // goes even when the state file is lost.
    pids.extend(processes::relay_pids(&Lab::fabric_netns(name)));
    for ns in &namespaces {
        pids.extend(topology::netns_pids(ns));
    }
    // Supervisors first, with SIGTERM: each stops its child and restarts nothing.
    supervise::stop_all(&pids);
    processes::stop_pids(&pids);
    for ns in &namespaces {
        topology::delete_netns(ns)?;
    }
    let dir = Lab::dir_of(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(namespaces)
}

/// The route reflector cluster id the lab gives its reflectors.
pub const RR_CLUSTER_ID: &str = "1.0.0.1";

/// Writes the cluster-wide settings `up` starts with: Ready, the BGP mesh setting, the route
/// reflectors' cluster ids and the lab's IP pools.
pub async fn seed(store: &EtcdDatastore, options: &UpOptions) -> anyhow::Result<()> {
    etcd::put(store, &Key::Ready, "true").await?;
    if options.no_mesh {
        let mesh = Key::NodeMesh { legacy: false };
        etcd::put(store, &mesh, r#"{"enabled": false}"#).await?;
    }
    for reflector in &options.route_reflectors {
        let known = (1..=options.hosts).any(|n| format!("host{n}") == *reflector);
        if !known {
            bail!(
                "--route-reflector {reflector}: the lab's hosts are host1 to host{}",
                options.hosts
            );
        }
        let key = Key::RrClusterId {
            hostname: reflector.clone(),
        };
        etcd::put(store, &key, RR_CLUSTER_ID).await?;
    }
    for pool in cni::POOLS {
        let cidr: ipnet::IpNet = pool.parse().expect("valid pool");
        let value = IpPool::new(cidr);
        let value = calico_model::to_json(&value).context("the lab's pools")?;
        etcd::put(store, &Key::Pool { cidr }, &value).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn openstack_hosts_take_tap_interfaces_too() {
        let plain = UpOptions {
            felix_env: vec![("FELIX_A".into(), "1".into())],
            ..UpOptions::default()
        };
        assert_eq!(
            felix_env(&plain),
            plain.felix_env,
            "unchanged without --openstack"
        );
        let openstack = UpOptions {
            openstack: true,
            ..plain.clone()
        };
        let env = felix_env(&openstack);
        assert!(env.contains(&("FELIX_INTERFACEPREFIX".into(), "cali,tap".into())));
        let named = UpOptions {
            felix_env: vec![("FELIX_INTERFACEPREFIX".into(), "tap".into())],
            ..openstack
        };
        assert_eq!(
            felix_env(&named),
            named.felix_env,
            "the options' prefix wins"
        );
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
