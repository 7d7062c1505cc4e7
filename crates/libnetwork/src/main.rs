//! `calico-libnetwork`: serves Docker's network and IPAM driver calls on a unix socket.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use calico_daemon::{Daemon, Task, shutdown};
use calico_datastore::connect_retrying;
use calico_libnetwork::docker::DockerApi;
use calico_libnetwork::{Args, Driver, logging, reconcile, server};
use calico_linux::{Netlink, Netns};
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = logging::filter(std::env::var(logging::VARIABLE).ok().as_deref());
    Daemon::new("calico-libnetwork")
        .log_filter(filter)
        .run(run(args))
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
    let _reconcile = Task::spawn(reconcile::run(driver.clone(), interval));
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
