//! Connecting to etcd from the `--etcd-*` flags (or their `ETCD_*` environment variables): once,
//! failing with one line that names the endpoints and the cause (calicoctl is a one-shot tool).

use anyhow::Context;
use calico_datastore::{Datastore, EtcdDatastore};

use crate::cli::EtcdArgs;

/// Connects, failing with the endpoint and the cause when etcd cannot be reached.
pub async fn connect(args: &EtcdArgs) -> anyhow::Result<Box<dyn Datastore>> {
    let store = EtcdDatastore::connect(args.config())
        .await
        .context("cannot connect to the datastore")?;
    Ok(Box::new(store))
}
