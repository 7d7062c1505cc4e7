//! `calico-lab workload add|del`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use calico_lab::{Lab, WorkloadSpec, ready, workloads};
use clap::Subcommand;

use super::pairs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: WorkloadCmd,
}

#[derive(Debug, Subcommand)]
enum WorkloadCmd {
    /// Creates the workload's namespace and veth, writes its endpoint, starts its echo server;
    /// returns when every Felix has programmed it and every other host routes to it.
    Add {
        #[arg(long)]
        host: String,
        #[arg(long)]
        name: String,
        /// IPv4 address (repeatable; must lie in a lab pool: 10.65.0.0/16, 10.66.0.0/16).
        /// Without --ip and --ip6, Calico IPAM assigns one IPv4 and one IPv6 address.
        #[arg(long = "ip")]
        ips: Vec<std::net::Ipv4Addr>,
        /// IPv6 address (repeatable; in the lab pool fd00:65::/64).
        #[arg(long = "ip6")]
        ip6s: Vec<std::net::Ipv6Addr>,
        /// Profile id (repeatable, in order); replaces the network's profile `lab` that the
        /// CNI plugin gives the endpoint. Without it, the endpoint keeps that profile.
        #[arg(long = "profile")]
        profiles: Vec<String>,
        /// Label as KEY=VALUE (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// How long to wait until the workload is programmed and routed before giving up (it
        /// is removed again then).
        #[arg(long, default_value_t = ready::ADD_LIMIT.as_secs())]
        timeout_secs: u64,
    },
    /// Removes a workload: its endpoint, routes, namespace and processes.
    Del { name: String },
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    match args.command {
        WorkloadCmd::Add {
            host,
            name: wname,
            ips,
            ip6s,
            profiles,
            labels,
            timeout_secs,
        } => {
            let mut addresses: Vec<IpAddr> = ips.into_iter().map(IpAddr::V4).collect();
            addresses.extend(ip6s.into_iter().map(IpAddr::V6));
            let labels: BTreeMap<String, String> = pairs(&labels, "--label")?.into_iter().collect();
            let spec = WorkloadSpec {
                host,
                name: wname,
                ips: addresses,
                profiles,
                labels,
            };
            let limit = Duration::from_secs(timeout_secs);
            let w = workloads::add_workload(&mut lab, &spec, limit).await?;
            println!(
                "workload {} on {} ({}), endpoint {}",
                w.name, w.host, w.interface, w.key
            );
        }
        WorkloadCmd::Del { name: wname } => {
            workloads::delete_workload(&mut lab, &wname).await?;
            println!("workload {wname} removed");
        }
    }
    Ok(())
}
