//! `calico-libnetwork`: serves Docker's network and IPAM driver calls on a unix socket.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use calico_datastore::connect_retrying;
use calico_libnetwork::docker::DockerApi;
use calico_libnetwork::{Args, Driver, logging, reconcile, server};
use calico_linux::{Netlink, Netns};
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = match logging::filter(std::env::var(logging::VARIABLE).ok().as_deref()) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("calico-libnetwork: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
    let sockets = server::Sockets {
        network: args.socket(),
        ipam: args.ipam_socket(),
    };
    let hostname = args.hostname();
    tracing::info!(
        socket = %sockets.network.display(),
        ipam_socket = %sockets.ipam.display(),
        hostname,
        etcd = args.etcd.etcd_endpoints,
        docker = %args.docker_socket.display(),
        reconcile_interval = ?args.reconcile_interval,
        "starting"
    );
    // A daemon: wait for etcd as long as it takes (one warning per attempt); the socket appears
    // once the driver can answer.
    let store = connect_retrying(&args.etcd.config(), "calico-libnetwork", None).await?;
    let netlink = Netlink::connect(&Netns::current()).context("cannot open netlink")?;
    let docker = DockerApi::new(args.docker_socket.clone());
    let driver = Arc::new(Driver::new(hostname, Arc::new(store), netlink, docker));
    for socket in [&sockets.network, &sockets.ipam] {
        if let Some(dir) = socket.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        // A socket left by a driver that died is ours to replace.
        let _ = std::fs::remove_file(socket);
    }
    // Leftovers of an earlier driver or dockerd, now and every interval; aborted on return.
    let interval = args.reconcile_interval;
    let _reconcile = AbortOnDrop(tokio::spawn(reconcile::run(driver.clone(), interval)));
    server::serve(driver, &sockets, shutdown())
        .await
        .with_context(|| {
            format!(
                "cannot serve on {} and {}",
                sockets.network.display(),
                sockets.ipam.display()
            )
        })?;
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
