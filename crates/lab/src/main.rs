use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use calico_lab::{
    Lab, Target, UpOptions, WorkloadSpec, check, cluster, probe, ready, relay, supervise,
};
use clap::{Parser, Subcommand};

/// A Calico cluster on one machine, in network namespaces: a fabric with etcd, hosts running
/// calico-felix, and workloads plugged in as the CNI plugin would. Needs root.
#[derive(Debug, Parser)]
#[command(name = "calico-lab", version)]
struct Cli {
    /// Which lab (several can run side by side); namespaces are named `<lab>.<host>[.<workload>]`.
    #[arg(long, global = true, env = "CALICO_LAB", default_value = "calico-lab")]
    lab: String,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Brings a lab up: fabric bridge and etcd, N hosts each running calico-felix and
    /// calico-node, Ready set; returns when every Felix is in sync and has programmed everything,
    /// and every BGP session is established (with --subnets: every session within a subnet).
    Up {
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
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=cluster::MAX_SUBNETS as i64))]
        subnets: u32,
    },
    /// Prints `export` lines so calicoctl and etcdctl reach the lab's etcd.
    Env,
    /// Adds or removes workloads.
    Workload {
        #[command(subcommand)]
        command: WorkloadCmd,
    },
    /// Runs a command inside a workload's namespace.
    Exec {
        workload: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Prints a connectivity matrix (ping and TCP) between all workloads.
    Check {
        #[arg(long, default_value_t = 80)]
        port: u16,
        /// How long to wait for an answer, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        timeout_ms: u64,
    },
    /// Waits until every Felix has programmed everything written to etcd so far.
    Wait {
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
    },
    /// Kills a host's Felix with SIGKILL and starts it again.
    RestartFelix {
        host: String,
        #[arg(long = "felix-config", value_name = "NAME=VALUE")]
        felix_config: Vec<String>,
    },
    /// Removes every namespace, process and file of the lab (also after a crash).
    Down,
    /// Brings up a two-host cluster and walks through the seed examples, showing the matrix.
    Demo,
    /// Probes from inside a workload (run through `exec`): prints `<target> ok|refused|blocked`.
    Probe {
        #[arg(long, default_value_t = 1000)]
        timeout_ms: u64,
        /// tcp:IP:PORT, udp:IP:PORT or icmp:IP.
        targets: Vec<String>,
    },
    /// Keeps a TCP connection to an echo server busy (run through `exec`); prints
    /// `sent N echoed M max_gap_ms G` and fails if an echo did not come back.
    Flow {
        to: SocketAddr,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 50)]
        every_ms: u64,
        /// How long one echo may take before the flow counts as cut.
        #[arg(long, default_value_t = 3000)]
        patience_ms: u64,
    },
    /// Run inside a workload: connects to IP:PORT again and again until it works, then prints
    /// the time (ns since the Unix epoch); used to measure how fast policy is enforced.
    WaitOpen {
        to: SocketAddr,
        #[arg(long, default_value_t = 5)]
        attempt_ms: u64,
        #[arg(long, default_value_t = 30_000)]
        deadline_ms: u64,
    },
    /// The echo server every workload runs (TCP and UDP).
    #[command(hide = true)]
    Serve {
        #[arg(long, value_delimiter = ',')]
        ports: Vec<u16>,
    },
    /// Runs a host's Felix, starting it again when it exits cleanly (a restart it asked for).
    #[command(hide = true)]
    Supervise {
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Forwards 127.0.0.1 here to etcd on the fabric.
    #[command(hide = true)]
    Relay {
        #[arg(long)]
        netns: String,
        #[arg(long)]
        to: SocketAddr,
        #[arg(long)]
        port_file: PathBuf,
    },
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

fn main() {
    let cli = Cli::parse();
    // The relay must bind before it enters the fabric, on a runtime of its own.
    if let Cmd::Relay {
        netns,
        to,
        port_file,
    } = &cli.command
    {
        exit_on_error(relay::run(netns, *to, port_file));
        return;
    }
    if let Cmd::Supervise { command } = &cli.command {
        match supervise::run(command) {
            Ok(code) => std::process::exit(code),
            Err(error) => exit_on_error(Err(error)),
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    exit_on_error(runtime.block_on(run(cli)));
}

fn exit_on_error(result: anyhow::Result<()>) {
    if let Err(error) = result {
        eprintln!("calico-lab: {error:#}");
        std::process::exit(1);
    }
}

fn pairs(items: &[String], what: &str) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => bail!("{what} {item:?} must be NAME=VALUE"),
        })
        .collect()
}

fn felix_env(items: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(pairs(items, "--felix-config")?
        .into_iter()
        .map(|(k, v)| (format!("FELIX_{}", k.to_ascii_uppercase()), v))
        .collect())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let name = cli.lab.as_str();
    match cli.command {
        Cmd::Up {
            hosts,
            felix_config,
            felix,
            no_mesh,
            route_reflectors,
            timeout_secs,
            subnets,
        } => {
            let options = UpOptions {
                hosts,
                felix_env: felix_env(&felix_config)?,
                felix,
                no_mesh,
                route_reflectors,
                timeout: Duration::from_secs(timeout_secs),
                subnets,
            };
            let lab = cluster::up(name, &options).await?;
            println!(
                "lab {name:?} is up: {} hosts, etcd at {}",
                lab.hosts.len(),
                lab.client_endpoint
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
            println!(
                "  calico-lab --lab {name} workload add --host host1 --name w1 --ip 10.65.0.2"
            );
            println!("  calico-lab --lab {name} down");
        }
        Cmd::Env => {
            let lab = Lab::load(name)?;
            println!("export ETCD_ENDPOINTS={}", lab.client_endpoint);
            println!("export ETCDCTL_API=3");
            println!("export ETCDCTL_ENDPOINTS={}", lab.client_endpoint);
        }
        Cmd::Workload {
            command:
                WorkloadCmd::Add {
                    host,
                    name: wname,
                    ips,
                    ip6s,
                    profiles,
                    labels,
                    timeout_secs,
                },
        } => {
            let mut lab = Lab::load(name)?;
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
            let w = cluster::add_workload(&mut lab, &spec, limit).await?;
            println!(
                "workload {} on {} ({}), endpoint {}",
                w.name, w.host, w.interface, w.key
            );
        }
        Cmd::Workload {
            command: WorkloadCmd::Del { name: wname },
        } => {
            let mut lab = Lab::load(name)?;
            cluster::delete_workload(&mut lab, &wname).await?;
            println!("workload {wname} removed");
        }
        Cmd::Exec { workload, command } => {
            let lab = Lab::load(name)?;
            let w = lab.workload(&workload)?;
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", &w.netns])
                .args(&command)
                .status()
                .context("cannot run ip netns exec")?;
            std::process::exit(status.code().unwrap_or(1));
        }
        Cmd::Check { port, timeout_ms } => {
            let lab = Lab::load(name)?;
            let matrix = check::matrix(&lab, port, Duration::from_millis(timeout_ms)).await?;
            print!("{}", check::render(&lab, &matrix, port));
        }
        Cmd::Wait { timeout_secs } => {
            let lab = Lab::load(name)?;
            let revision = ready::wait_programmed(&lab, Duration::from_secs(timeout_secs)).await?;
            println!("every Felix has programmed revision {revision}");
        }
        Cmd::RestartFelix { host, felix_config } => {
            let mut lab = Lab::load(name)?;
            let pid = cluster::restart_felix(&mut lab, &host, &felix_env(&felix_config)?)?;
            println!("Felix on {host} restarted (pid {pid})");
        }
        Cmd::Down => {
            let removed = cluster::down(name)?;
            println!(
                "lab {name:?} is down ({} namespaces removed)",
                removed.len()
            );
        }
        Cmd::Demo => calico_lab::demo::run(name).await?,
        Cmd::Probe {
            timeout_ms,
            targets,
        } => {
            let targets: Vec<Target> = targets
                .iter()
                .map(|t| t.parse())
                .collect::<Result<_, _>>()?;
            let outcomes = probe::probe_all(&targets, Duration::from_millis(timeout_ms)).await;
            for (target, outcome) in targets.iter().zip(outcomes) {
                println!("{target} {outcome}");
            }
        }
        Cmd::Flow {
            to,
            seconds,
            every_ms,
            patience_ms,
        } => {
            let ms = Duration::from_millis;
            let report = probe::flow(
                to,
                Duration::from_secs(seconds),
                ms(every_ms),
                ms(patience_ms),
            )
            .await?;
            println!(
                "sent {} echoed {} max_gap_ms {}",
                report.sent, report.echoed, report.max_gap_ms
            );
            if report.echoed < report.sent {
                bail!("the flow to {to} was cut after {} echoes", report.echoed);
            }
        }
        Cmd::WaitOpen {
            to,
            attempt_ms,
            deadline_ms,
        } => {
            let ms = Duration::from_millis;
            println!(
                "{}",
                probe::first_open(to, ms(attempt_ms), ms(deadline_ms)).await?
            );
        }
        Cmd::Serve { ports } => probe::serve(&ports).await?,
        Cmd::Relay { .. } | Cmd::Supervise { .. } => {
            unreachable!("handled before the runtime starts")
        }
    }
    Ok(())
}
