//! `calico-fanout`: holds one etcd watch per prefix and serves it to many agents (Felix with
//! `FanoutAddr`), so that etcd has one watcher however many hosts there are (docs/scale.md).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use calico_daemon::Daemon;
use calico_datastore::{Datastore, EtcdArgs, connect_retrying};
use calico_fanout::{Feed, Served, serve};
use clap::Parser;

/// One etcd watch per prefix, served to many agents over TCP.
///
/// Felix reads its watches from here when `FanoutAddr` (FELIX_FANOUTADDR) names this address;
/// it still writes its status to etcd itself.
#[derive(Debug, Parser)]
#[command(name = "calico-fanout", version)]
struct Args {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// The address agents connect to
    #[arg(long, env = "CALICO_FANOUT_LISTEN", default_value = "0.0.0.0:5473")]
    listen: SocketAddr,
    /// A prefix to watch and serve (repeatable); the default is what Felix watches
    #[arg(long = "prefix", default_values = ["/calico/v1/", "/calico/bgp/v1/host/"])]
    prefixes: Vec<String>,
    /// Changes kept in memory per prefix, for agents that reconnect without a snapshot
    #[arg(long, default_value_t = 100_000)]
    keep: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    Daemon::new("calico-fanout")
        .log_variable("CALICO_FANOUT_LOG")
        .run(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    for prefix in &args.prefixes {
        anyhow::ensure!(
            prefix.starts_with("/calico/") && prefix.ends_with('/'),
            "--prefix {prefix:?}: expected a key prefix under /calico/ ending in /"
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}: cannot listen", args.listen))?;
    // A daemon: wait for etcd as long as it takes.
    let store = connect_retrying(&args.etcd.config(), "calico-fanout", None).await?;
    let mut feeds = Vec::new();
    for prefix in &args.prefixes {
        let feed = Feed::new(prefix, args.keep);
        let upstream = store.watch(prefix).await?;
        tokio::spawn(feed.clone().follow(upstream));
        feeds.push(feed);
    }
    // The address bound, not the one asked for: with port 0 the kernel picks the port.
    let bound = listener
        .local_addr()
        .context("the listener's local address")?;
    tracing::info!(listen = %bound, prefixes = ?args.prefixes, "serving");
    let served = Arc::new(Mutex::new(Served::default()));
    tokio::spawn(report(feeds.clone(), served.clone()));
    serve(listener, feeds, served).await;
    Ok(())
}

/// Once a minute: what each feed holds and what was served.
async fn report(feeds: Vec<Arc<Feed>>, served: Arc<Mutex<Served>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.tick().await;
    loop {
        tick.tick().await;
        let served = *served.lock().unwrap_or_else(|p| p.into_inner());
        for feed in &feeds {
            let (keys, revision, in_sync) = feed.summary();
            tracing::info!(prefix = feed.prefix(), keys, revision, in_sync, "feed");
        }
        tracing::info!(
            snapshots = served.snapshots,
            encodings = served.encodings,
            streams = served.streams,
            "served"
        );
    }
}
