//! `calico-felix`: the per-host agent. Reads its configuration (environment, config file, etcd),
//! then keeps this host's routes and firewall in line with the datastore once it is ready
//! (`/calico/v1/Ready`). See docs/configuration.md. With `--dry-run` it only prints what it
//! would program (docs/felix.md). It starts through `calico-daemon` like the other daemons:
//! its own log (`logging.rs`: the screen and `LogFilePath`, levels set once the configuration
//! is read; a dry run's log is standard error at WARN), two worker threads, an error logged
//! with its causes and exit 1. SIGTERM and SIGINT keep the kernel's default: Felix stops at
//! once and what it programmed stays (calico-node and the lab stop it so).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use calico_daemon::Daemon;
use calico_datastore::EtcdDatastore;
use calico_felix::config::{Bootstrap, Inputs};
use calico_felix::logging::Logging;
use calico_felix::{agent, dry_run};
use calico_linux::Netns;
use clap::Parser;

/// The Calico agent for this host.
#[derive(Debug, Parser)]
#[command(name = "calico-felix", version)]
struct Args {
    /// The configuration file (ini; section names ignored). A missing default file is fine; a
    /// missing file given here is an error.
    #[arg(short = 'c', long = "config-file")]
    config_file: Option<PathBuf>,
    /// Print what Felix would program on this host and exit, changing nothing: first the
    /// firewall backend NFTablesMode chooses and why, then what a full sync loads (iptables:
    /// the `ipset restore` and `iptables-restore` input; nftables: the `nft -f` script of the
    /// table `inet calico`, one transaction), and the routes, neighbours, interface settings
    /// and conntrack flushes it would apply. Reads etcd once (no waiting for Ready, no watch)
    /// and this host's kernel.
    #[arg(long)]
    dry_run: bool,
}

const DEFAULT_CONFIG_FILE: &str = "/etc/calico/felix.cfg";

/// The runtime's worker threads: the agent loop and the kernel's and etcd's tasks beside it.
const WORKER_THREADS: usize = 2;

fn main() -> ExitCode {
    let args = Args::parse();
    let daemon = Daemon::new("calico-felix").worker_threads(WORKER_THREADS);
    if args.dry_run {
        // A dry run prints its report on standard output: its log goes to standard error.
        return daemon.log("the dry run's log", "warn").run(dry_run(args));
    }
    let (logging, subscriber) = Logging::new();
    daemon.subscriber(subscriber).run(run(args, logging))
}

/// `--dry-run`: one read of etcd and of the kernel, the report on standard output.
async fn dry_run(args: Args) -> anyhow::Result<()> {
    let mut inputs = inputs(args.config_file)?;
    let hostname = calico_linux::hostname();
    let bootstrap = Bootstrap::load(&inputs, &hostname)?;
    let store = EtcdDatastore::connect(agent::etcd_config(&bootstrap))
        .await
        .context("connecting to etcd")?;
    let config = agent::load_config(&store, &mut inputs, &hostname, &bootstrap).await?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let report = dry_run::report(&store, &config, Netns::current()).await?;
    print!("{report}");
    Ok(())
}

async fn run(args: Args, logging: Logging) -> anyhow::Result<()> {
    let mut inputs = inputs(args.config_file)?;
    let hostname = calico_linux::hostname();
    let bootstrap = Bootstrap::load(&inputs, &hostname)?;
    tracing::info!(endpoints = ?bootstrap.etcd_endpoints, hostname = %bootstrap.hostname, "connecting to etcd");
    let store = agent::connect(&bootstrap)
        .await
        .context("connecting to etcd")?;
    let config = agent::load_config(&store, &mut inputs, &hostname, &bootstrap).await?;
    logging.configure(&config)?;
    for (name, value, source) in &config.report {
        tracing::info!("config {name} = {value:?} ({source})");
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    agent::run(&store, config, inputs, Netns::current()).await
}

/// The process environment and the config file.
fn inputs(config_file: Option<PathBuf>) -> anyhow::Result<Inputs> {
    Ok(Inputs {
        env: std::env::vars().collect(),
        file: read_config_file(config_file)?,
        ..Inputs::default()
    })
}

fn read_config_file(given: Option<PathBuf>) -> anyhow::Result<Option<(PathBuf, String)>> {
    let explicit = given.is_some();
    let path = given.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE));
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((path, text))),
        Err(err) if !explicit && err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("cannot read config file {}", path.display())),
    }
}
