//! Connecting to etcd from the `--etcd-*` flags (or their `ETCD_*` environment variables).

use anyhow::Context;
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};

use crate::cli::EtcdArgs;

/// The connection settings the flags describe.
pub fn config(args: &EtcdArgs) -> EtcdConfig {
    let endpoints = args
        .etcd_endpoints
        .split(',')
        .map(str::trim)
        .filter(|endpoint| !endpoint.is_empty())
        .map(str::to_owned)
        .collect();
    EtcdConfig {
        endpoints,
        ca_file: args.etcd_ca_cert_file.clone(),
        cert_file: args.etcd_cert_file.clone(),
        key_file: args.etcd_key_file.clone(),
        ..EtcdConfig::default()
    }
}

/// Connects, failing with the endpoint and the cause when etcd cannot be reached.
pub async fn connect(args: &EtcdArgs) -> anyhow::Result<Box<dyn Datastore>> {
    let store = EtcdDatastore::connect(config(args))
        .await
        .context("cannot connect to the datastore")?;
    Ok(Box::new(store))
}
