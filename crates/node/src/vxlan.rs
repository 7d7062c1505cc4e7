//! The host's VXLAN tunnel endpoint: `/calico/v1/host/<host>/vxlan_tunnel`, written when some
//! pool has VXLAN, removed (and its address released) when none has any more. See docs/bgp.md,
//! "VXLAN tunnel endpoint".

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use anyhow::Context;
use calico_datastore::Datastore;
use calico_ipam::{AssignRequest, Ipam};
use calico_linux::Netns;
use calico_model::pool::IpPool;
use calico_model::tunnel::VxlanTunnel;
use calico_model::{IpVersion, Key, from_json};
use ipnet::{IpNet, Ipv4Net};
use serde_json::Value;

/// How long after a failure calico-node waits before trying again on its own (a pool change
/// tries again at once).
pub const RETRY_AFTER: Duration = Duration::from_secs(10);

/// How long one attempt may take before it counts as failed (etcd unreachable).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);

/// The IPAM handle the host's tunnel address is assigned under.
pub fn handle_of(hostname: &str) -> String {
    format!("vxlan-tunnel-addr-{hostname}")
}

/// The network (address with its prefix length) of the local interface that holds `ip`, from
/// `ip -j -4 addr show`; `None` when no interface holds it.
pub fn ipv4_network(ip: Ipv4Addr) -> anyhow::Result<Option<Ipv4Net>> {
    let out = Netns::current().run("ip", &["-j", "-4", "addr", "show"], "")?;
    let links: Value = serde_json::from_str(&out).context("ip -j addr printed no JSON")?;
    Ok(find_network(&links, ip))
}

fn find_network(links: &Value, ip: Ipv4Addr) -> Option<Ipv4Net> {
    links
        .as_array()?
        .iter()
        .filter_map(|link| link["addr_info"].as_array())
        .flatten()
        .filter(|a| a["local"].as_str().and_then(|l| l.parse().ok()) == Some(ip))
        .find_map(|a| Ipv4Net::new(ip, u8::try_from(a["prefixlen"].as_u64()?).ok()?).ok())
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No pool has VXLAN and there is no record.
    NotWanted,
    /// The record was already right.
    UpToDate(VxlanTunnel),
    /// The record was written.
    Written(VxlanTunnel),
    /// The record was removed and its address released (no pool has VXLAN any more).
    Removed,
    /// Nothing can be done until the configuration changes (the reason is logged).
    Impossible,
}

/// Keeps the host's record in step with the pools: called on every pool change, and on the
/// loop's tick (which only retries after a failure, at most every [`RETRY_AFTER`]).
#[derive(Debug)]
pub struct TunnelKeeper {
    hostname: String,
    ipv4: Option<Ipv4Addr>,
    ipam: Ipam,
    /// After a failure: when to try again.
    retry_at: Option<Instant>,
}

impl TunnelKeeper {
    pub fn new(hostname: String, ipv4: Option<Ipv4Addr>, ipam: Ipam) -> TunnelKeeper {
        TunnelKeeper {
            hostname,
            ipv4,
            ipam,
            retry_at: None,
        }
    }

    /// Whether a failed pass is due to be retried.
    pub fn retry_due(&self) -> bool {
        self.retry_at.is_some_and(|at| Instant::now() >= at)
    }

    /// One pass with the current pools; errors are logged (with what to do) and retried later.
    pub async fn update(&mut self, pools: &BTreeMap<IpNet, IpPool>) -> Option<Outcome> {
        let pass = tokio::time::timeout(ATTEMPT_TIMEOUT, self.ensure(pools)).await;
        let result = pass.unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "no answer from etcd within {ATTEMPT_TIMEOUT:?}"
            ))
        });
        match result {
            Ok(outcome) => {
                self.retry_at = None;
                match &outcome {
                    Outcome::Written(tunnel) => tracing::info!(
                        host = %self.hostname, address = %tunnel.address, mac = %tunnel.mac,
                        parent = %tunnel.parent_address, "wrote the VXLAN tunnel endpoint"
                    ),
                    Outcome::UpToDate(tunnel) => tracing::info!(
                        host = %self.hostname, address = %tunnel.address,
                        "the VXLAN tunnel endpoint is up to date"
                    ),
                    Outcome::Removed => tracing::info!(
                        host = %self.hostname,
                        "no pool has VXLAN any more: removed the VXLAN tunnel endpoint and \
                         released its address"
                    ),
                    Outcome::NotWanted => tracing::debug!("no pool has VXLAN"),
                    Outcome::Impossible => {}
                }
                Some(outcome)
            }
            Err(e) => {
                tracing::error!(
                    host = %self.hostname,
                    "cannot set up the VXLAN tunnel endpoint: {e:#}; check that etcd is \
                     reachable and that the VXLAN pools have free addresses (calicoctl ipam \
                     show); retrying in {RETRY_AFTER:?} or on the next pool change"
                );
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                None
            }
        }
    }

    async fn ensure(&self, pools: &BTreeMap<IpNet, IpPool>) -> anyhow::Result<Outcome> {
        let store = self.ipam.store();
        let key = Key::VxlanTunnel {
            hostname: self.hostname.clone(),
        }
        .to_string();
        let handle = handle_of(&self.hostname);
        let vxlan: Vec<&IpPool> = pools
            .values()
            .filter(|p| !p.vxlan_mode.is_never() && p.version() == IpVersion::V4)
            .collect();
        let in_vxlan_pool = |ip: IpAddr| vxlan.iter().any(|p| p.cidr.contains(&ip));
        let current = read_record(store, &key).await?;
        if vxlan.is_empty() {
            if current.is_none() && self.ipam.addresses_of(&handle).await?.is_empty() {
                return Ok(Outcome::NotWanted);
            }
            store.delete(&key).await?;
            self.ipam.release_by_handle(&handle).await?;
            return Ok(Outcome::Removed);
        }
        let Some(ipv4) = self.ipv4 else {
            tracing::error!(
                host = %self.hostname,
                "some pool has VXLAN, but host {} has no IPv4 address (--ip none, or none was \
                 found on the interface with the default route), so it gets no VXLAN tunnel \
                 endpoint and its workloads cannot be reached over VXLAN; restart calico-node \
                 with --ip <address>",
                self.hostname
            );
            return Ok(Outcome::Impossible);
        };
        let parent_address = ipv4_network(ipv4)?.with_context(|| {
            format!(
                "host {}'s address {ipv4} is on no local interface, so the VXLAN tunnel \
                 endpoint's parent address (with its prefix length) is unknown",
                self.hostname
            )
        })?;
        let mac = VxlanTunnel::mac_for(&self.hostname);
        // The handle's address inside a VXLAN pool, else a new one (after releasing any outside).
        let held: Vec<IpAddr> = self.ipam.addresses_of(&handle).await?;
        let kept = held.iter().copied().find(|ip| in_vxlan_pool(*ip));
        let address = match kept {
            Some(IpAddr::V4(ip)) => ip,
            _ => {
                if !held.is_empty() {
                    self.ipam.release_by_handle(&handle).await?;
                }
                match current.as_ref().map(|r| r.address) {
                    // A record IPAM lost track of: claim its address again if it is free.
                    Some(ip) if in_vxlan_pool(IpAddr::V4(ip)) => {
                        match self.reclaim(ip, &handle).await {
                            Ok(()) => ip,
                            Err(e) => {
                                tracing::warn!(
                                    host = %self.hostname, address = %ip,
                                    "the VXLAN tunnel record's address is not held by handle \
                                     {handle} and cannot be claimed ({e}); assigning another"
                                );
                                self.assign(&handle, &vxlan).await?
                            }
                        }
                    }
                    _ => self.assign(&handle, &vxlan).await?,
                }
            }
        };
        let wanted = VxlanTunnel {
            address,
            mac,
            parent_address,
        };
        if current.as_ref() == Some(&wanted) {
            return Ok(Outcome::UpToDate(wanted));
        }
        store.put(&key, &serde_json::to_string(&wanted)?).await?;
        Ok(Outcome::Written(wanted))
    }

    /// Assigns the given address to the handle.
    async fn reclaim(&self, ip: Ipv4Addr, handle: &str) -> Result<(), calico_ipam::IpamError> {
        let attributes = self.attributes();
        self.ipam
            .assign_ip(IpAddr::V4(ip), handle, &attributes, &self.hostname)
            .await
    }

    fn attributes(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("type".to_owned(), "vxlanTunnelAddress".to_owned()),
            ("node".to_owned(), self.hostname.clone()),
        ])
    }

    /// One address from the VXLAN pools that give out addresses.
    async fn assign(&self, handle: &str, vxlan: &[&IpPool]) -> anyhow::Result<Ipv4Addr> {
        let ipv4_pools: Vec<IpNet> = vxlan
            .iter()
            .filter(|p| p.assigns_addresses())
            .map(|p| p.cidr)
            .collect();
        if ipv4_pools.is_empty() {
            anyhow::bail!(
                "every VXLAN pool is disabled or has \"ipam\": false, so no tunnel address can \
                 be assigned; enable one"
            );
        }
        let request = AssignRequest {
            host: self.hostname.clone(),
            handle: handle.to_owned(),
            attributes: self.attributes(),
            ipv4: 1,
            ipv4_pools,
            ..AssignRequest::default()
        };
        let assigned = self.ipam.auto_assign(&request).await?;
        match assigned.ipv4.first() {
            Some(IpAddr::V4(ip)) => {
                tracing::info!(host = %self.hostname, address = %ip, "assigned a VXLAN tunnel address");
                Ok(*ip)
            }
            _ => anyhow::bail!("IPAM assigned no IPv4 address for handle {handle}"),
        }
    }
}

/// The host's record; an invalid one counts as missing (it is overwritten).
async fn read_record(store: &dyn Datastore, key: &str) -> anyhow::Result<Option<VxlanTunnel>> {
    let Some(pair) = store.get(key).await? else {
        return Ok(None);
    };
    match from_json::<VxlanTunnel>(&pair.value) {
        Ok(tunnel) => Ok(Some(tunnel)),
        Err(e) => {
            tracing::warn!(%key, "replacing an invalid VXLAN tunnel record: {e}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeper(ipv4: Option<Ipv4Addr>) -> TunnelKeeper {
        let store = std::sync::Arc::new(calico_datastore::MemoryDatastore::new());
        TunnelKeeper::new("h1".to_owned(), ipv4, Ipam::new(store))
    }

    fn vxlan_pools() -> BTreeMap<IpNet, IpPool> {
        let mut pool = IpPool::new("10.65.0.0/16".parse().unwrap());
        pool.vxlan_mode = calico_model::pool::VxlanMode::Always;
        BTreeMap::from([(pool.cidr, pool)])
    }

    #[tokio::test]
    async fn a_host_without_ipv4_gets_no_record_and_no_retry() {
        let mut keeper = keeper(None);
        let outcome = keeper.update(&vxlan_pools()).await;
        assert_eq!(outcome, Some(Outcome::Impossible));
        assert!(!keeper.retry_due());
        let key = Key::VxlanTunnel {
            hostname: "h1".to_owned(),
        };
        let store = keeper.ipam.store();
        assert!(store.get(&key.to_string()).await.unwrap().is_none());
        assert!(
            keeper
                .ipam
                .addresses_of("vxlan-tunnel-addr-h1")
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_failure_is_retried_after_a_while_not_at_once() {
        // An address on no interface here: the parent network cannot be found.
        let mut keeper = keeper(Some(Ipv4Addr::new(192, 0, 2, 77)));
        assert_eq!(keeper.update(&vxlan_pools()).await, None);
        let retry_at = keeper.retry_at.expect("a retry is scheduled");
        assert!(!keeper.retry_due());
        assert!(retry_at >= Instant::now() + RETRY_AFTER - Duration::from_secs(2));
        // Without VXLAN pools there is nothing to do, and the retry is cancelled.
        assert_eq!(
            keeper.update(&BTreeMap::new()).await,
            Some(Outcome::NotWanted)
        );
        assert!(keeper.retry_at.is_none());
    }

    #[test]
    fn the_network_is_that_of_the_interface_holding_the_address() {
        let links: Value = serde_json::from_str(
            r#"[{"ifname": "lo", "addr_info": [{"local": "127.0.0.1", "prefixlen": 8}]},
                {"ifname": "eth0", "addr_info": [{"local": "10.98.0.5", "prefixlen": 24},
                                                 {"local": "10.97.0.5", "prefixlen": 16}]}]"#,
        )
        .unwrap();
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            find_network(&links, ip("10.97.0.5")),
            Some("10.97.0.5/16".parse().unwrap())
        );
        assert_eq!(
            find_network(&links, ip("10.98.0.5")),
            Some("10.98.0.5/24".parse().unwrap())
        );
        assert_eq!(find_network(&links, ip("10.98.0.6")), None);
    }
}
