//! What a crash, or a container removed while the driver was down, leaves behind: collected at
//! start and then every `--reconcile-interval` (60 s by default):
//!
//! | left behind | when | collected |
//! | --- | --- | --- |
//! | an endpoint key whose host-side veth is gone | the container's namespace went with the veth while the driver (or dockerd) was down, so `Leave` never came | the key is deleted and its addresses released (`Join` creates the veth before the key and `Leave` deletes the key first, so a key without its veth is never a live endpoint) |
//! | an endpoint whose veth is back in this namespace whole (`tmp<id>@cali<id>`) | `docker rm -f` or `stop` while the driver was down: dockerd moved the container end out of the sandbox it tore down, then gave up on `Leave`, `DeleteEndpoint` and `ReleaseAddress` | once seen so for [`SETTLE`] (a `Join` leaves it so only until dockerd moves the end in, milliseconds later): the key, the veth and its addresses |
//! | a pending record | `Join` never came | its lease expires after `PENDING_TTL` |
//! | an address under one of this host's handles, used by no endpoint and no pending record | dockerd died between `RequestAddress` and `CreateEndpoint`, or a pending record expired | released once the handle is older than [`GRACE`] (dockerd calls `CreateEndpoint` right after `RequestAddress`) |
//!
//! ```text
//! main ── spawn ──► every interval: Driver::reconcile (etcd, IPAM, netlink)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use calico_model::endpoint::WorkloadEndpoint;
use calico_model::{Key, from_json};

use crate::driver::Driver;
use crate::error::DriverError;
use crate::names::{self, VethNames};
use crate::pending::{self, Pending};

/// How often the driver looks for leftovers unless `--reconcile-interval` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// How old an unused address must be before it counts as leaked.
pub const GRACE: Duration = Duration::from_secs(60);

/// How long a veth must have been back in this namespace before its endpoint counts as gone.
pub const SETTLE: Duration = Duration::from_secs(5);

/// What one pass collected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    pub endpoint_keys: Vec<String>,
    /// Host sides of veths whose container end was back in this namespace.
    pub veths: Vec<String>,
    pub addresses: Vec<IpAddr>,
}

/// Whether an endpoint's container is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    /// The host side is there and its peer is not in this namespace (it is in the sandbox).
    Live,
    /// The host side is gone.
    Gone,
    /// Both ends are in this namespace: nothing holds the container end.
    Back,
}

/// An endpoint of this host as etcd has it.
struct Stored {
    key: String,
    veth: VethNames,
    endpoint: WorkloadEndpoint,
}

impl Driver {
    /// One pass now.
    pub async fn reconcile(&self) -> Result<Collected, DriverError> {
        self.reconcile_at(Instant::now(), SystemTime::now()).await
    }

    /// One pass at `now` (`wall`: for the handles' age): gone endpoints first (their
    /// addresses are released with them), then addresses nobody uses.
    async fn reconcile_at(&self, now: Instant, wall: SystemTime) -> Result<Collected, DriverError> {
        let mut collected = Collected::default();
        let earlier = std::mem::take(&mut *self.suspects.0.lock().expect("suspects lock"));
        let mut suspects = BTreeMap::new();
        for stored in self.stored_endpoints().await? {
            let back = match self.liveness(&stored).await? {
                Liveness::Live => continue,
                Liveness::Gone => false,
                Liveness::Back => {
                    let since = earlier.get(&stored.key).copied().unwrap_or(now);
                    if now.duration_since(since) < SETTLE {
                        suspects.insert(stored.key, since);
                        continue;
                    }
                    true
                }
            };
            self.collect(&stored, back, &mut collected).await?;
        }
        *self.suspects.0.lock().expect("suspects lock") = suspects;
        let addresses = self.leaked_addresses(wall).await?;
        if !addresses.is_empty() {
            self.ipam.release_ips(&addresses).await?;
            collected.addresses.extend(addresses);
        }
        Ok(collected)
    }

    /// This host's Docker endpoints that read.
    async fn stored_endpoints(&self) -> Result<Vec<Stored>, DriverError> {
        let prefix = names::host_endpoints_prefix(&self.hostname);
        let mut stored = Vec::new();
        for pair in self.store().list(&prefix).await? {
            let Ok(Key::WorkloadEndpoint(id)) = Key::parse(&pair.key) else {
                continue;
            };
            let (Ok(endpoint), Ok(veth)) = (
                from_json::<WorkloadEndpoint>(&pair.value),
                names::veth_names(&id.endpoint),
            ) else {
                continue;
            };
            stored.push(Stored {
                key: pair.key,
                veth,
                endpoint,
            });
        }
        Ok(stored)
    }

    async fn liveness(&self, stored: &Stored) -> Result<Liveness, DriverError> {
        if self
            .netlink
            .link_by_name(&stored.endpoint.name)
            .await?
            .is_none()
        {
            return Ok(Liveness::Gone);
        }
        match self.netlink.link_by_name(&stored.veth.temp).await? {
            Some(_) => Ok(Liveness::Back),
            None => Ok(Liveness::Live),
        }
    }

    /// Removes a gone endpoint as `Leave`, `DeleteEndpoint` and `ReleaseAddress` would have:
    /// the key (Felix stops routing to it), the veth if it is back here, the addresses this
    /// driver assigned.
    async fn collect(
        &self,
        stored: &Stored,
        back: bool,
        collected: &mut Collected,
    ) -> Result<(), DriverError> {
        self.store().delete(&stored.key).await?;
        collected.endpoint_keys.push(stored.key.clone());
        if back {
            crate::plumb::delete(&self.netlink, &stored.veth).await?;
            collected.veths.push(stored.veth.host.clone());
        }
        let endpoint = &stored.endpoint;
        let ips: Vec<IpAddr> = endpoint
            .ipv4_nets
            .iter()
            .chain(&endpoint.ipv6_nets)
            .map(|net| net.addr())
            .collect();
        collected.addresses.extend(self.release_ours(&ips).await?);
        Ok(())
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

/// Runs [`Driver::reconcile`] now and every `interval`; a failed pass is logged and retried
/// at the next tick.
pub async fn run(driver: Arc<Driver>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        match driver.reconcile().await {
            Ok(c) if c == Collected::default() => {}
            Ok(c) => tracing::info!(
                endpoint_keys = ?c.endpoint_keys,
                veths = ?c.veths,
                addresses = ?c.addresses,
                "collected what an earlier driver, dockerd or a container removed meanwhile left behind"
            ),
            Err(e) => e.log("reconcile"),
        }
    }
}

#[cfg(test)]
mod tests;
