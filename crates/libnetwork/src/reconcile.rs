//! What a crash leaves behind, collected at start and then every [`INTERVAL`]:
//!
//! | left behind | when | collected |
//! | --- | --- | --- |
//! | an endpoint key whose host-side veth is gone | the container died while the driver (or dockerd) was down, so `Leave` never came | the key is deleted (`Join` creates the veth before the key and `Leave` deletes the key first, so a key without its veth is never a live endpoint) |
//! | a pending record | `Join` never came | its lease expires after `PENDING_TTL` |
//! | an address under one of this host's handles, used by no endpoint and no pending record | dockerd died between `RequestAddress` and `CreateEndpoint`, or a pending record expired | released once the handle is older than [`GRACE`] (dockerd calls `CreateEndpoint` right after `RequestAddress`) |
//!
//! ```text
//! main ── spawn ──► every INTERVAL: Driver::reconcile (etcd, IPAM, netlink)
//! ```

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use calico_model::endpoint::WorkloadEndpoint;
use calico_model::{Key, from_json};

use crate::driver::Driver;
use crate::error::DriverError;
use crate::names;
use crate::pending::{self, Pending};

/// How often the driver looks for leftovers.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// How old an unused address must be before it counts as leaked.
pub const GRACE: Duration = Duration::from_secs(60);

/// What one pass collected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    pub endpoint_keys: Vec<String>,
    pub addresses: Vec<IpAddr>,
}

impl Driver {
    /// One pass: stale endpoint keys first (their addresses are then unused), then addresses.
    pub async fn reconcile(&self) -> Result<Collected, DriverError> {
        let endpoint_keys = self.stale_endpoint_keys().await?;
        for key in &endpoint_keys {
            self.store().delete(key).await?;
        }
        let addresses = self.leaked_addresses(SystemTime::now()).await?;
        if !addresses.is_empty() {
            self.ipam.release_ips(&addresses).await?;
        }
        Ok(Collected {
            endpoint_keys,
            addresses,
        })
    }

    /// This host's Docker endpoint keys whose host-side veth does not exist.
    async fn stale_endpoint_keys(&self) -> Result<Vec<String>, DriverError> {
        let prefix = names::host_endpoints_prefix(&self.hostname);
        let mut stale = Vec::new();
        for pair in self.store().list(&prefix).await? {
            if !matches!(Key::parse(&pair.key), Ok(Key::WorkloadEndpoint(_))) {
                continue;
            }
            let Ok(endpoint) = from_json::<WorkloadEndpoint>(&pair.value) else {
                continue;
            };
            if self.netlink.link_by_name(&endpoint.name).await?.is_none() {
                stale.push(pair.key);
            }
        }
        Ok(stale)
    }

    /// Addresses of this host's handles older than [`GRACE`] at `now` that no endpoint (IPAM's
    /// audit) and no pending record uses.
    async fn leaked_addresses(&self, now: SystemTime) -> Result<Vec<IpAddr>, DriverError> {
        let mut waiting = BTreeSet::new();
        let prefix = pending::host_prefix(&self.hostname);
        for pair in self.store().list(&prefix).await? {
            match Pending::parse(&pair.key, &pair.value) {
                Ok(record) => waiting.extend(record.addresses),
                // Unreadable: its addresses cannot be told apart, so none is released.
                Err(e) => return Err(e),
            }
        }
        let report = self.ipam.check().await?;
        Ok(report
            .leaks
            .iter()
            .filter(|leak| !waiting.contains(&leak.ip))
            .filter(|leak| {
                let made = leak
                    .handle
                    .as_deref()
                    .and_then(|h| names::handle_time(&self.hostname, h));
                made.is_some_and(|t| now.duration_since(t).unwrap_or_default() >= GRACE)
            })
            .map(|leak| leak.ip)
            .collect())
    }
}

/// Runs [`Driver::reconcile`] now and every [`INTERVAL`]; a failed pass is logged and retried
/// at the next tick.
pub async fn run(driver: Arc<Driver>) {
    let mut tick = tokio::time::interval(INTERVAL);
    loop {
        tick.tick().await;
        match driver.reconcile().await {
            Ok(c) if c == Collected::default() => {}
            Ok(c) => tracing::info!(
                endpoint_keys = ?c.endpoint_keys,
                addresses = ?c.addresses,
                "collected what an earlier driver or dockerd left behind"
            ),
            Err(e) => e.log("reconcile"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use calico_datastore::{Datastore, MemoryDatastore};
    use calico_linux::{Netlink, Netns};
    use calico_model::IpVersion;

    use crate::docker::DockerApi;
    use crate::driver::Driver;
    use crate::endpoint::EndpointSpec;
    use crate::pending::{self, Pending};
    use crate::pool::{AddressWanted, PoolId};

    async fn driver() -> Driver {
        let store = Arc::new(MemoryDatastore::new());
        store
            .put(
                "/calico/v1/ipam/v4/pool/10.65.0.0-16",
                r#"{"cidr": "10.65.0.0/16"}"#,
            )
            .await
            .unwrap();
        let netlink = Netlink::connect(&Netns::current()).unwrap();
        let docker = DockerApi::new("/nonexistent/docker.sock".into());
        Driver::new("h1".to_owned(), store, netlink, docker)
    }

    async fn address(driver: &Driver) -> std::net::IpAddr {
        let any = AddressWanted::Any(PoolId::Any(IpVersion::V4));
        let text = driver.request_address(any).await.unwrap();
        text.parse::<ipnet::IpNet>().unwrap().addr()
    }

    /// Of two unused addresses, the one a pending record holds stays; the other is released
    /// once older than the grace period, and not before.
    #[tokio::test]
    async fn unused_addresses_go_after_the_grace_period_unless_pending() {
        let driver = driver().await;
        let (waiting, leaked) = (address(&driver).await, address(&driver).await);
        let spec = EndpointSpec {
            addresses: vec![waiting],
            mac: None,
        };
        let record = Pending::new("42dd", "net1", &spec).to_json();
        let key = pending::key("h1", "d594538e6c7555095dd6");
        driver.store().put(&key, &record).await.unwrap();

        let now = SystemTime::now();
        assert!(driver.leaked_addresses(now).await.unwrap().is_empty());
        let later = now + super::GRACE + Duration::from_secs(1);
        assert_eq!(driver.leaked_addresses(later).await.unwrap(), [leaked]);
        assert_eq!(
            driver.reconcile().await.unwrap(),
            super::Collected::default()
        );
    }

    /// An endpoint key whose veth does not exist goes (its container died while nobody was
    /// listening); the address it held is then unused, and goes after the grace period.
    #[tokio::test]
    async fn endpoint_keys_without_their_veth_go() {
        let driver = driver().await;
        let ip = address(&driver).await;
        let key = "/calico/v1/host/h1/workload/docker/e4da01fbfec8/endpoint/d594538e6c7555095dd6";
        let value =
            crate::endpoint::endpoint_json("calid594538e6c7", [0xee, 0, 0, 0, 0, 1], "net1", &[ip]);
        driver.store().put(key, &value).await.unwrap();
        let collected = driver.reconcile().await.unwrap();
        assert_eq!(collected.endpoint_keys, [key]);
        assert!(driver.store().get(key).await.unwrap().is_none());
        let later = SystemTime::now() + super::GRACE;
        assert_eq!(driver.leaked_addresses(later).await.unwrap(), [ip]);
    }
}
