//! `calico-neutron`: keeps etcd's OpenStack endpoints and profiles equal to Neutron.

use std::process::ExitCode;

use anyhow::Context;
use calico_datastore::connect_retrying;
use calico_openstack::Args;
use calico_openstack::client::Client;
use calico_openstack::sync::{self, Syncer};
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    calico_openstack::daemon::main_of("calico-neutron", &log, run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let neutron = Client::new(&args.neutron_url).context("--neutron-url")?;
    tracing::info!(
        neutron = args.neutron_url,
        etcd = args.etcd.etcd_endpoints,
        poll_interval = ?args.poll_interval,
        resync_interval = ?args.resync_interval,
        "starting"
    );
    // A daemon: wait for etcd as long as it takes (one warning per attempt).
    let store = connect_retrying(&args.etcd.config(), "calico-neutron", None).await?;
    let syncer = Syncer::new(neutron, Box::new(store));
    sync::run(
        syncer,
        args.poll_interval,
        args.resync_interval,
        calico_openstack::daemon::shutdown(),
    )
    .await;
    tracing::info!("stopped");
    Ok(())
}
