//! `calico-node`: registers this host, runs Felix and BIRD, keeps BIRD configured from etcd.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use calico_daemon::Daemon;
use calico_datastore::{EtcdArgs, connect_retrying};
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
    #[command(flatten)]
    etcd: EtcdArgs,
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
    Daemon::new("calico-node")
        .log_variable("CALICO_NODE_LOG")
        .worker_threads(2)
        .run(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let hostname = args.hostname.clone().unwrap_or_else(calico_linux::hostname);
    // A daemon: wait for etcd as long as it takes, saying so once per attempt.
    let store = Arc::new(connect_retrying(&args.etcd.config(), "calico-node", None).await?);
    let registration = Registration {
        hostname: hostname.clone(),
        ipv4: register::pick_ipv4(&args.ip)?,
        ipv6: register::pick_ipv6(&args.ip6)?,
        as_num: args.as_num,
    };
    register::register(store.as_ref(), &registration).await?;
    std::fs::create_dir_all(&args.run_dir)
        .with_context(|| format!("cannot create {}", args.run_dir.display()))?;
    let felix = felix_process(&args, &hostname)?;
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
fn felix_process(args: &Args, hostname: &str) -> anyhow::Result<Option<FelixProcess>> {
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
    let etcd = &args.etcd;
    let mut env = vec![
        (
            "FELIX_ETCDENDPOINTS".to_owned(),
            etcd.etcd_endpoints.clone(),
        ),
        ("FELIX_FELIXHOSTNAME".to_owned(), hostname.to_owned()),
    ];
    for (name, file) in [
        ("FELIX_ETCDCAFILE", &etcd.etcd_ca_cert_file),
        ("FELIX_ETCDCERTFILE", &etcd.etcd_cert_file),
        ("FELIX_ETCDKEYFILE", &etcd.etcd_key_file),
    ] {
        if let Some(file) = file {
            env.push((name.to_owned(), file.display().to_string()));
        }
    }
    Ok(Some(FelixProcess { binary, env }))
}
