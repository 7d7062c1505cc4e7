//! What the agent needs before its loop: etcd, the configuration in it, the HTTP servers.

use std::collections::BTreeMap;

use anyhow::Context;
use calico_datastore::{Datastore, DatastoreError, EtcdConfig, EtcdDatastore};
use calico_model::key::Prefix;
use tokio::net::TcpListener;

use crate::config::{Bootstrap, Config, Inputs};
use crate::core::ConfigValues;
use crate::metrics::{Health, Metrics, health_routes, metrics_routes, serve};

/// How to reach etcd, from the bootstrap parameters.
pub fn etcd_config(bootstrap: &Bootstrap) -> EtcdConfig {
    EtcdConfig {
        endpoints: bootstrap.etcd_endpoints.clone(),
        ca_file: bootstrap.etcd_ca_file.clone(),
        cert_file: bootstrap.etcd_cert_file.clone(),
        key_file: bootstrap.etcd_key_file.clone(),
        ..EtcdConfig::default()
    }
}

/// Connects to etcd, retrying with the shared bounded backoff (one warning per attempt) until it
/// answers. Only a settings error (a TLS file missing) ends the wait.
pub async fn connect(bootstrap: &Bootstrap) -> Result<EtcdDatastore, DatastoreError> {
    calico_datastore::connect_retrying(&etcd_config(bootstrap), "calico-felix", None).await
}

/// The global and this host's configuration values in etcd.
pub async fn read_config_values(
    store: &dyn Datastore,
    hostname: &str,
) -> Result<ConfigValues, DatastoreError> {
    Ok(ConfigValues {
        global: config_values(store, &Prefix::GlobalConfig.to_string()).await?,
        host: config_values(
            store,
            &Prefix::HostConfig {
                hostname: hostname.to_owned(),
            }
            .to_string(),
        )
        .await?,
    })
}

/// Reads the config from etcd into `inputs` and loads the whole configuration.
pub async fn load_config(
    store: &dyn Datastore,
    inputs: &mut Inputs,
    hostname: &str,
    bootstrap: &Bootstrap,
) -> anyhow::Result<Config> {
    let values = read_config_values(store, &bootstrap.hostname).await?;
    inputs.etcd_global = values.global;
    inputs.etcd_host = values.host;
    Ok(Config::load(inputs, hostname)?)
}

/// The values under `prefix`, by the name that follows it (deeper keys are not config).
async fn config_values(
    store: &dyn Datastore,
    prefix: &str,
) -> Result<BTreeMap<String, String>, DatastoreError> {
    let pairs = store.list(prefix).await?;
    Ok(pairs
        .into_iter()
        .filter_map(|p| {
            let name = p.key.strip_prefix(prefix)?;
            (!name.contains('/')).then(|| (name.to_owned(), p.value))
        })
        .collect())
}

/// Serves health and metrics, as configured, until the process ends.
pub(super) async fn start_servers(
    config: &Config,
    metrics: &Metrics,
    health: &Health,
) -> anyhow::Result<()> {
    let mut servers = Vec::new();
    if config.health_enabled {
        servers.push(("health", config.health_port, health_routes(health.clone())));
    }
    if config.metrics_enabled {
        servers.push((
            "metrics",
            config.metrics_port,
            metrics_routes(metrics.clone()),
        ));
    }
    for (what, port, routes) in servers {
        let listener = TcpListener::bind(("0.0.0.0", port))
            .await
            .with_context(|| format!("cannot serve {what} on port {port}"))?;
        tracing::info!("serving {what} on port {port}");
        tokio::spawn(serve(listener, routes));
    }
    Ok(())
}
