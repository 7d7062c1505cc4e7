//! `calico-neutron`: keeps etcd's OpenStack endpoints and profiles equal to Neutron.

use std::process::ExitCode;

use calico_daemon::Daemon;
use calico_datastore::connect_retrying;
use calico_openstack::Args;
use calico_openstack::notify::Listener;
use calico_openstack::run::{self, ChangeSource};
use calico_openstack::syncer::Syncer;
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    Daemon::new("calico-neutron")
        .log("--log (CALICO_NEUTRON_LOG)", &log)
        .run(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let poll = args.poll().map_err(anyhow::Error::msg)?;
    // Keystone first: a refused setting ends the program before etcd is touched.
    let neutron = calico_neutron::neutron_client(&args.neutron_url, &args.auth).await?;
    tracing::info!(
        neutron = args.neutron_url,
        etcd = args.etcd.etcd_endpoints,
        change_source = ?args.change_source,
        notify_socket = %args.notify_socket.display(),
        poll_interval = ?poll,
        resync_interval = ?args.resync_interval,
        "starting"
    );
    // Bound before etcd is waited for: notifications sent meanwhile are queued.
    let listener = match args.change_source {
        ChangeSource::Notifications => {
            Some(Listener::bind(&args.notify_socket).map_err(anyhow::Error::msg)?)
        }
        ChangeSource::Polling => None,
    };
    // A daemon: wait for etcd as long as it takes (one warning per attempt).
    let store = connect_retrying(&args.etcd.config(), "calico-neutron", None).await?;
    let syncer = Syncer::new(neutron, Box::new(store));
    let shutdown = calico_daemon::shutdown();
    match (listener, poll) {
        (Some(listener), _) => {
            run::notified(syncer, listener, args.resync_interval, shutdown).await
        }
        (None, poll) => {
            let poll = poll.unwrap_or(std::time::Duration::from_millis(500));
            run::polling(syncer, poll, args.resync_interval, shutdown).await;
        }
    }
    tracing::info!("stopped");
    Ok(())
}
