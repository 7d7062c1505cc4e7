//! The lab's etcd as a datastore: connecting to it through the relay, and writing a value
//! the data model has checked for its key.

use std::time::Duration;

use anyhow::Context;
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_model::Key;

use crate::state::Lab;

/// A datastore client for the lab's etcd, as the caller reaches it.
pub async fn connect(lab: &Lab) -> anyhow::Result<EtcdDatastore> {
    let config = EtcdConfig {
        endpoints: lab.client_endpoints(),
        ..EtcdConfig::default()
    };
    // The lab starts etcd itself: wait for it, but not forever.
    calico_datastore::connect_retrying(&config, "calico-lab", Some(Duration::from_secs(30)))
        .await
        .with_context(|| format!("etcd at {} does not answer", lab.client_endpoint))
}

/// Writes `value` at `key` once the data model has read it as that key's value (what
/// `calicoctl put` checks): the lab never writes what Felix would refuse, and a mistake names
/// the key and the field.
pub async fn put(store: &EtcdDatastore, key: &Key, value: &str) -> anyhow::Result<()> {
    calico_model::parse_value(key, value).with_context(|| format!("{key}: {value}"))?;
    store.put(&key.to_string(), value).await?;
    Ok(())
}
