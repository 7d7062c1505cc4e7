//! The fixtures the IPAM tests share: a real etcd with pools, requests, and reading the keys.
#![allow(dead_code)] // each test binary uses a different part of the fixtures

use std::net::IpAddr;
use std::sync::Arc;

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_ipam::{AssignRequest, Ipam};
use calico_model::ipam::{AllocationBlock, AllocationHandle};
use calico_model::{Key, from_json};
use calico_testkit::EtcdServer;
use ipnet::IpNet;

pub struct Cluster {
    _server: EtcdServer,
    pub store: Arc<EtcdDatastore>,
    pub ipam: Ipam,
}

pub async fn cluster(pools: &[&str]) -> Cluster {
    let server = EtcdServer::start();
    let config = EtcdConfig {
        endpoints: vec![server.endpoint()],
        ..EtcdConfig::default()
    };
    let store = Arc::new(EtcdDatastore::connect(config).await.expect("etcd connects"));
    for pool in pools {
        add_pool(store.as_ref(), pool, false).await;
    }
    let ipam = Ipam::new(store.clone());
    Cluster {
        _server: server,
        store,
        ipam,
    }
}

pub async fn add_pool(store: &dyn Datastore, cidr: &str, disabled: bool) {
    let cidr: IpNet = cidr.parse().unwrap();
    let key = Key::Pool { cidr }.to_string();
    let value = serde_json::json!({"cidr": cidr, "disabled": disabled}).to_string();
    store.put(&key, &value).await.unwrap();
}

pub fn request(host: &str, handle: &str, ipv4: usize, ipv6: usize) -> AssignRequest {
    AssignRequest {
        host: host.to_owned(),
        handle: handle.to_owned(),
        attributes: [("container".to_owned(), handle.to_owned())].into(),
        ipv4,
        ipv6,
        ..AssignRequest::default()
    }
}

impl Cluster {
    pub async fn block(&self, cidr: &str) -> Option<AllocationBlock> {
        let key = Key::Block {
            cidr: cidr.parse().unwrap(),
        };
        let pair = self.store.get(&key.to_string()).await.unwrap()?;
        Some(from_json(&pair.value).unwrap())
    }

    pub async fn handle(&self, id: &str) -> Option<AllocationHandle> {
        let key = Key::Handle { handle: id.into() };
        let pair = self.store.get(&key.to_string()).await.unwrap()?;
        Some(from_json(&pair.value).unwrap())
    }

    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let pairs = self.store.list(prefix).await.unwrap();
        pairs.into_iter().map(|p| p.key).collect()
    }
}

pub fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

impl Cluster {
    /// The stored JSON at `key`, parsed (none when absent).
    pub async fn json(&self, key: &str) -> Option<serde_json::Value> {
        let pair = self.store.get(key).await.unwrap()?;
        Some(serde_json::from_str(&pair.value).expect("stored JSON"))
    }

    /// Writes the fixture `name` (under tests/fixtures/) at `key`, as etcdctl would.
    pub async fn put_fixture(&self, key: &str, name: &str) {
        self.store.put(key, &fixture(name)).await.unwrap();
    }

    pub async fn set_config(&self, json: &str) {
        self.store
            .put("/calico/ipam/v2/config", json)
            .await
            .unwrap();
    }
}

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compares a stored value with the golden file `name`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn assert_golden(actual: &serde_json::Value, name: &str) {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
    }
    let expected: serde_json::Value = serde_json::from_str(&fixture(name)).unwrap();
    assert_eq!(
        actual, &expected,
        "{name} differs (UPDATE_GOLDEN=1 rewrites it; review the diff)"
    );
}

pub fn block_key(cidr: &str) -> String {
    Key::Block {
        cidr: cidr.parse().unwrap(),
    }
    .to_string()
}

pub fn affinity_key(host: &str, cidr: &str) -> String {
    Key::BlockAffinity {
        hostname: host.to_owned(),
        cidr: cidr.parse().unwrap(),
    }
    .to_string()
}
