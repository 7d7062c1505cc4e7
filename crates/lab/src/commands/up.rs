//! `calico-lab up`: brings a lab up and prints how to reach it.

use std::path::PathBuf;
use std::time::Duration;

use calico_lab::{UpOptions, cluster, members, ready, topology};

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
    println!("  eval \"$(calico-lab --lab {name} env)\"   # then calicoctl / etcdctl work");
    println!("  calico-lab --lab {name} workload add --host host1 --name w1 --ip 10.65.0.2");
    println!("  calico-lab --lab {name} down");
    Ok(())
}
