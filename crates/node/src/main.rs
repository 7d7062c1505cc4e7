//! `calico-node`: registers this host, runs Felix and BIRD, keeps BIRD configured from etcd.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use calico_datastore::{EtcdConfig, EtcdDatastore};
use calico_node::agent::{FelixProcess, Node};
use calico_node::bird::Bird;
use calico_node::register::{self, Registration};
use clap::Parser;

/// The Calico node agent: registers the host's BGP address and AS number, runs calico-felix,
/// renders BIRD 2's configuration from etcd (checked with `bird -p` before `birdc configure`)
/// and runs BIRD, restarting Felix or BIRD when they exit.
#[derive(Debug, Parser)]
#[command(name = "calico-node", version)]
struct Args {
    /// This host's name in the datastore (default: the kernel's hostname)
    #[arg(long, env = "NODENAME")]
    hostname: Option<String>,
    /// The IPv4 address BGP runs on: an address, `auto` (the interface with the default route)
    /// or `none`
    #[arg(long, env = "IP", default_value = "auto")]
    ip: String,
    /// The IPv6 address BGP runs on: an address, `auto` or `none`
    #[arg(long, env = "IP6", default_value = "none")]
    ip6: String,
    /// This host's AS number (default: the cluster's, /calico/bgp/v1/global/as_num, else 64512)
    #[arg(long = "as", env = "AS")]
    as_num: Option<calico_model::bgp::AsNumber>,
    /// Comma-separated etcd endpoints
    #[arg(long, env = "ETCD_ENDPOINTS", default_value = "http://127.0.0.1:2379")]
    etcd_endpoints: String,
    #[arg(long, env = "ETCD_CA_CERT_FILE")]
    etcd_ca_cert_file: Option<PathBuf>,
    #[arg(long, env = "ETCD_CERT_FILE")]
    etcd_cert_file: Option<PathBuf>,
    #[arg(long, env = "ETCD_KEY_FILE")]
    etcd_key_file: Option<PathBuf>,
    /// Where BIRD's configuration (bird.conf) and control socket (bird.ctl) live
    #[arg(long, env = "CALICO_RUN_DIR", default_value = "/var/run/calico")]
    run_dir: PathBuf,
    /// The calico-felix binary (default: beside calico-node, else on PATH); `none` to run
    /// without Felix
    #[arg(long, env = "CALICO_FELIX")]
    felix: Option<String>,
    /// The BIRD binary
    #[arg(long, default_value = "bird")]
    bird: PathBuf,
    /// The BIRD client
    #[arg(long, default_value = "birdc")]
    birdc: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = std::env::var("CALICO_NODE_LOG").unwrap_or_else(|_| "info".to_owned());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let hostname = args.hostname.clone().unwrap_or_else(calico_linux::hostname);
    let endpoints: Vec<String> = args
        .etcd_endpoints
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    let etcd = EtcdConfig {
        endpoints: endpoints.clone(),
        ca_file: args.etcd_ca_cert_file.clone(),
        cert_file: args.etcd_cert_file.clone(),
        key_file: args.etcd_key_file.clone(),
        ..EtcdConfig::default()
    };
    let store = Arc::new(EtcdDatastore::connect(etcd).await?);
    let registration = Registration {
        hostname: hostname.clone(),
        ipv4: register::pick_ipv4(&args.ip)?,
        ipv6: register::pick_ipv6(&args.ip6)?,
        as_num: args.as_num,
    };
    register::register(store.as_ref(), &registration).await?;
    std::fs::create_dir_all(&args.run_dir)
        .with_context(|| format!("cannot create {}", args.run_dir.display()))?;
    let felix = felix_process(&args, &hostname, &endpoints)?;
    let node = Node {
        ipv4: registration.ipv4,
        hostname,
        store,
        bird: Bird::in_dir(&args.run_dir, args.bird.clone(), args.birdc.clone()),
        felix,
    };
    node.run().await
}

/// Felix with the same datastore and host name, unless `--felix none`.
fn felix_process(
    args: &Args,
    hostname: &str,
    endpoints: &[String],
) -> anyhow::Result<Option<FelixProcess>> {
    let binary = match args.felix.as_deref() {
        Some("none") => return Ok(None),
        Some(path) => PathBuf::from(path),
        None => {
            let beside = std::env::current_exe()?.with_file_name("calico-felix");
            if beside.is_file() {
                beside
            } else {
                PathBuf::from("calico-felix")
            }
        }
    };
    let mut env = vec![
        ("FELIX_ETCDENDPOINTS".to_owned(), endpoints.join(",")),
        ("FELIX_FELIXHOSTNAME".to_owned(), hostname.to_owned()),
    ];
    for (name, file) in [
        ("FELIX_ETCDCAFILE", &args.etcd_ca_cert_file),
        ("FELIX_ETCDCERTFILE", &args.etcd_cert_file),
        ("FELIX_ETCDKEYFILE", &args.etcd_key_file),
    ] {
        if let Some(file) = file {
            env.push((name.to_owned(), file.display().to_string()));
        }
    }
    Ok(Some(FelixProcess { binary, env }))
}
