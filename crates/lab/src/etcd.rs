//! The lab's etcd as a datastore: connecting to it through the relay, and what `up` writes
//! before any host starts (Ready, BGP settings, the IP pools).

use std::time::Duration;

use anyhow::{Context, bail};
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};

use crate::cluster::UpOptions;
use crate::cni;
use crate::state::Lab;

/// The route reflector cluster id the lab gives its reflectors.
pub const RR_CLUSTER_ID: &str = "1.0.0.1";

/// Writes the cluster-wide settings `up` starts with: Ready, the BGP mesh setting, the route
/// reflectors' cluster ids and the lab's IP pools.
pub async fn seed(store: &EtcdDatastore, options: &UpOptions) -> anyhow::Result<()> {
    store.put("/calico/v1/Ready", "true").await?;
    if options.no_mesh {
        store
            .put("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#)
            .await?;
    }
    for reflector in &options.route_reflectors {
        let known = (1..=options.hosts).any(|n| format!("host{n}") == *reflector);
        if !known {
            bail!(
                "--route-reflector {reflector}: the lab's hosts are host1 to host{}",
                options.hosts
            );
        }
        let key = format!("/calico/bgp/v1/host/{reflector}/rr_cluster_id");
        store.put(&key, RR_CLUSTER_ID).await?;
    }
    for pool in cni::POOLS {
        let cidr: ipnet::IpNet = pool.parse().expect("valid pool");
        let key = calico_model::Key::Pool { cidr }.to_string();
        store
            .put(&key, &serde_json::json!({ "cidr": pool }).to_string())
            .await?;
    }
    Ok(())
}

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
