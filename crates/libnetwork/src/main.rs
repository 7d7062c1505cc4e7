//! `calico-libnetwork`: serves Docker's network and IPAM driver calls on a unix socket.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use calico_datastore::connect_retrying;
use calico_libnetwork::docker::DockerApi;
use calico_libnetwork::{Args, Driver, reconcile, server};
use calico_linux::{Netlink, Netns};
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = std::env::var("CALICO_LIBNETWORK_LOG").unwrap_or_else(|_| "info".to_owned());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("calico-libnetwork: cannot start the runtime: {e}");
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
    let socket = args.socket();
    let hostname = args.hostname();
    tracing::info!(
        socket = %socket.display(),
        hostname,
        etcd = args.etcd.etcd_endpoints,
        docker = %args.docker_socket.display(),
        "starting"
    );
    // A daemon: wait for etcd as long as it takes (one warning per attempt); the socket appears
    // once the driver can answer.
    let store = connect_retrying(&args.etcd.config(), "calico-libnetwork", None).await?;
    let netlink = Netlink::connect(&Netns::current()).context("cannot open netlink")?;
    let docker = DockerApi::new(args.docker_socket.clone());
    let driver = Arc::new(Driver::new(hostname, Arc::new(store), netlink, docker));
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Leftovers of an earlier driver or dockerd, now and every minute; aborted on return.
    let _reconcile = AbortOnDrop(tokio::spawn(reconcile::run(driver.clone())));
    // A socket left by a driver that died is ours to replace.
    let _ = std::fs::remove_file(&socket);
    server::serve(driver, &socket, shutdown())
        .await
        .with_context(|| format!("cannot serve on {}", socket.display()))?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM or SIGINT.
async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
