//! `calico-lab up`: brings a lab up and prints how to reach it.

use std::path::PathBuf;
use std::time::Duration;

use calico_lab::state::OpenStack;
use calico_lab::{Lab, UpOptions, cluster, members, openstack, ready, topology};

use super::felix_env;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 2)]
    hosts: u32,
    /// Extra Felix setting for every host, as NAME=VALUE (e.g. IptablesRefreshInterval=5).
    #[arg(long = "felix-config", value_name = "NAME=VALUE")]
    felix_config: Vec<String>,
    /// The calico-felix binary (default: beside calico-lab, then PATH).
    #[arg(long, env = "CALICO_FELIX")]
    felix: Option<PathBuf>,
    /// Turn the BGP node-to-node mesh off (then hosts peer only with route reflectors).
    #[arg(long)]
    no_mesh: bool,
    /// Make this host a BGP route reflector (repeatable).
    #[arg(long = "route-reflector", value_name = "HOST")]
    route_reflectors: Vec<String>,
    /// How long to wait for Felix and BGP on every host before giving up.
    #[arg(long, default_value_t = ready::UP_LIMIT.as_secs())]
    timeout_secs: u64,
    /// Host subnets, joined by the fabric as a router that knows only the hosts' networks
    /// (no pool): host N is on subnet (N-1) % SUBNETS + 1, subnet S is 10.99.(S-1).0/24
    /// and fd00:99:(S-1)::/64 on the fabric's bridge br(S-1). Workload traffic between
    /// subnets then needs encapsulation (a pool's `vxlan_mode`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=topology::MAX_SUBNETS as i64))]
    subnets: u32,
    /// etcd members: 1 runs in the fabric; 3 (or 2 to 7) form a real cluster, each member in
    /// its own namespace on the fabric (10.99.0.2, .3, ...), and every component is given
    /// every member's endpoint.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=members::MAX_MEMBERS as i64))]
    etcd_members: u32,
    /// Also an OpenStack cloud: MariaDB, Keystone (uWSGI) and neutron-server (behind
    /// Keystone, with Calico's ML2 driver) in the fabric, calico-neutron and a
    /// calico-dhcp-agent per host (Keystone user `calico`), Felix taking `cali` and `tap`
    /// interfaces, and a network, subnets and security group for VMs in the admin's project.
    /// Returns once Keystone issues tokens and Neutron answers an authenticated request;
    /// writes `<lab dir>/openrc` (the admin's credentials for the `openstack` CLI). Needs
    /// scripts/setup-neutron.sh.
    #[arg(long)]
    openstack: bool,
    /// No flow aggregator: by default calico-flows runs in the fabric (its console and API on
    /// the address `calico-lab env` exports as CALICO_FLOWS_URL) and every Felix sends it its
    /// flow logs every 5 s (FlowLogsEnabled; see docs/observability.md).
    #[arg(long)]
    no_flows: bool,
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let options = UpOptions {
        hosts: args.hosts,
        felix_env: felix_env(&args.felix_config)?,
        felix: args.felix,
        no_mesh: args.no_mesh,
        route_reflectors: args.route_reflectors,
        timeout: Duration::from_secs(args.timeout_secs),
        subnets: args.subnets,
        etcd_members: args.etcd_members,
        openstack: args.openstack,
        flows: !args.no_flows,
    };
    let lab = cluster::up(name, &options).await?;
    println!(
        "lab {name:?} is up: {} hosts, etcd at {} ({} on the fabric)",
        lab.hosts.len(),
        lab.client_endpoint,
        lab.etcd_endpoints()
    );
    if lab.subnets > 1 {
        for host in &lab.hosts {
            println!(
                "  {} on subnet {} ({}, gateway {})",
                host.name,
                host.subnet,
                host.ip,
                host.gateway()
            );
        }
    }
    if let Some(openstack) = &lab.openstack {
        print_openstack(&lab, openstack);
    }
    if let Some(url) = &lab.flows_url {
        println!("  flows: {url} (the console; `calicoctl flows` after the eval below)");
    }
    println!("  eval \"$(calico-lab --lab {name} env)\"   # then calicoctl / etcdctl work");
    println!("  calico-lab --lab {name} workload add --host host1 --name w1 --ip 10.65.0.2");
    println!("  calico-lab --lab {name} down");
    Ok(())
}

fn print_openstack(lab: &Lab, openstack: &OpenStack) {
    println!(
        "  neutron at {} ({} on the fabric), keystone at {} ({} on the fabric), project {}",
        openstack.client_url,
        openstack.neutron_url,
        openstack.keystone_client_url,
        openstack.keystone_url,
        openstack.project
    );
    println!(
        "  source {}   # the admin's credentials: then `openstack network list` works",
        openstack::openrc(lab).display()
    );
    println!(
        "  network {} {}, subnets {} {} (gateway {}) and {} {} (gateway {}, DHCPv6), security group {} {}",
        openstack::NETWORK,
        openstack.network,
        openstack.subnet,
        openstack::SUBNET_CIDR,
        openstack::GATEWAY,
        openstack.subnet6,
        openstack::SUBNET6_CIDR,
        openstack::GATEWAY6,
        openstack::SECURITY_GROUP,
        openstack.security_group
    );
    println!(
        "  logs: {} (mariadb, keystone, neutron-server, calico-neutron, dhcp-agent-HOST), {}",
        lab.dir.display(),
        openstack::server_log(lab).display()
    );
}
