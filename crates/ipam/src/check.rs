//! `calicoctl ipam check`: what the blocks, handles and affinities say against each other and
//! against the workload endpoints that use the addresses, and which of those endpoints their
//! host's Felix reports down (their workload may be gone while the endpoint still holds the
//! addresses). The audits are pure functions; the gathering and the repairs are in
//! [`Ipam::check`] and [`Ipam::fix`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_model::Key;
use calico_model::endpoint::{EndpointState, WorkloadEndpoint};
use calico_model::from_json;
use calico_model::ipam::{AllocationBlock, AllocationHandle};
use calico_model::key::{Prefix, WorkloadEndpointId};
use calico_model::status::{EndpointOperState, EndpointStatus};
use ipnet::IpNet;

use crate::allocator::Ipam;
use crate::block;
use crate::error::IpamError;
use crate::stored::InvalidBlock;

/// An assigned address no workload endpoint uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub ip: IpAddr,
    pub handle: Option<String>,
    pub block: IpNet,
}

/// A handle record whose counts differ from what the blocks hold for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleMismatch {
    pub handle: String,
    /// What `/calico/ipam/v2/handle/<id>` says (empty when the record is missing).
    pub recorded: BTreeMap<IpNet, u64>,
    /// What the blocks hold.
    pub actual: BTreeMap<IpNet, u64>,
}

/// A stored IPAM value that does not read: the key, the field and why, and how to repair it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub key: String,
    /// `field: reason`, as the reader refused it.
    pub reason: String,
    pub fix: &'static str,
}

/// An active workload endpoint holding addresses that its host's Felix reports `down` (its
/// interface is missing, down or has no carrier) or `error`: its workload is probably gone
/// (removed while its orchestrator's plugin was not running), and the addresses with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleEndpoint {
    pub key: String,
    pub host: String,
    pub addresses: Vec<IpAddr>,
    pub status: EndpointOperState,
}

/// Everything `check` found; empty when IPAM is consistent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Values no reader accepts (never fixed automatically: each needs a decision).
    pub invalid: Vec<Invalid>,
    pub leaks: Vec<Leak>,
    pub handle_mismatches: Vec<HandleMismatch>,
    /// Affinity keys whose block does not exist, or whose block names another host.
    pub stale_affinities: Vec<(String, IpNet)>,
    /// Endpoint addresses inside a block that the block does not have assigned (cannot be
    /// fixed automatically: assign them with `calicoctl ipam assign`).
    pub unassigned_in_use: Vec<(IpAddr, String)>,
    /// Endpoints holding addresses that their host's Felix reports down (never fixed
    /// automatically: removing an endpoint is its orchestrator's decision).
    pub stale_endpoints: Vec<StaleEndpoint>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.invalid.is_empty()
            && self.leaks.is_empty()
            && self.handle_mismatches.is_empty()
            && self.stale_affinities.is_empty()
            && self.unassigned_in_use.is_empty()
            && self.stale_endpoints.is_empty()
    }
}

/// The active endpoints with addresses whose status Felix reports as not `up`. An endpoint
/// Felix has not reported (yet, or its Felix is not running) is not judged.
pub fn stale_endpoints(
    endpoints: &[(WorkloadEndpointId, WorkloadEndpoint)],
    statuses: &BTreeMap<WorkloadEndpointId, EndpointOperState>,
) -> Vec<StaleEndpoint> {
    endpoints
        .iter()
        .filter(|(_, endpoint)| endpoint.state == EndpointState::Active)
        .filter_map(|(id, endpoint)| {
            let status = *statuses.get(id)?;
            let addresses: Vec<IpAddr> = endpoint
                .ipv4_nets
                .iter()
                .chain(&endpoint.ipv6_nets)
                .map(IpNet::addr)
                .collect();
            (status != EndpointOperState::Up && !addresses.is_empty()).then(|| StaleEndpoint {
                key: Key::WorkloadEndpoint(id.clone()).to_string(),
                host: id.hostname.clone(),
                addresses,
                status,
            })
        })
        .collect()
}

/// Compares blocks, handle records, affinities and the addresses endpoints use
/// (address → endpoint key).
pub fn audit(
    blocks: &[AllocationBlock],
    handles: &[AllocationHandle],
    affinities: &[(String, IpNet)],
    in_use: &BTreeMap<IpAddr, String>,
) -> Report {
    let mut report = Report::default();
    let mut actual: BTreeMap<String, BTreeMap<IpNet, u64>> = BTreeMap::new();
    for b in blocks {
        for (handle, count) in block::handle_counts(b) {
            actual.entry(handle).or_default().insert(b.cidr, count);
        }
        for (ip, attribute) in block::allocated(b) {
            if !in_use.contains_key(&ip) {
                report.leaks.push(Leak {
                    ip,
                    handle: attribute.primary.clone(),
                    block: b.cidr,
                });
            }
        }
    }
    for (ip, endpoint) in in_use {
        let holder = blocks.iter().find(|b| b.cidr.contains(ip));
        if let Some(b) = holder
            && let Some(ordinal) = block::ordinal_of(&b.cidr, *ip)
            && b.allocations[ordinal].is_none()
        {
            report.unassigned_in_use.push((*ip, endpoint.clone()));
        }
    }
    let recorded: BTreeMap<&str, &AllocationHandle> =
        handles.iter().map(|h| (h.id.as_str(), h)).collect();
    let ids: BTreeSet<&str> = recorded
        .keys()
        .copied()
        .chain(actual.keys().map(String::as_str))
        .collect();
    for id in ids {
        let recorded = recorded
            .get(id)
            .map(|h| h.block.clone())
            .unwrap_or_default();
        let actual = actual.get(id).cloned().unwrap_or_default();
        if recorded != actual {
            report.handle_mismatches.push(HandleMismatch {
                handle: id.to_owned(),
                recorded,
                actual,
            });
        }
    }
    for (host, cidr) in affinities {
        let owner = blocks.iter().find(|b| b.cidr == *cidr).map(|b| b.host());
        if owner != Some(Some(host.as_str())) {
            report.stale_affinities.push((host.clone(), *cidr));
        }
    }
    report
}

const INVALID_CONFIG_FIX: &str = "set it again with calicoctl ipam config \
     --strict-affinity true|false --auto-allocate-blocks true|false";
const INVALID_BLOCK_FIX: &str = "correct the field by hand (etcdctl get/put), or delete the \
     key if no workload uses its addresses; until then no address of the block is assigned or \
     released";
const INVALID_HANDLE_FIX: &str = "delete the key (etcdctl del); calicoctl ipam check --fix then \
     writes it again from the blocks";

/// What `fix` changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fixed {
    pub released: usize,
    pub handles_rewritten: usize,
    pub affinities_removed: usize,
}

impl Ipam {
    /// Reads blocks, handles, affinities and workload endpoints, and audits them.
    pub async fn check(&self) -> Result<Report, IpamError> {
        let blocks = self.all_blocks().await?;
        let unreadable = self.invalid_blocks().await?;
        let mut invalid = self.invalid_values(&unreadable).await?;
        // What the unreadable blocks hold is unknown: their affinities and the handles' counts
        // in them are left out of the audit (and so out of the repairs).
        let unreadable: BTreeSet<IpNet> = unreadable.iter().map(|b| b.cidr).collect();
        let store = self.store();
        let mut handles = Vec::new();
        for pair in store
            .list(&format!("{}/handle/", calico_model::key::IPAM_V2))
            .await?
        {
            match from_json::<AllocationHandle>(&pair.value) {
                Ok(mut handle) => {
                    handle.block.retain(|cidr, _| !unreadable.contains(cidr));
                    handles.push(handle);
                }
                Err(e) => invalid.push(Invalid {
                    key: pair.key.clone(),
                    reason: e.to_string(),
                    fix: INVALID_HANDLE_FIX,
                }),
            }
        }
        let mut affinities = Vec::new();
        for pair in store
            .list(&format!("{}/host/", calico_model::key::IPAM_V2))
            .await?
        {
            if let Ok(Key::BlockAffinity { hostname, cidr }) = Key::parse(&pair.key)
                && !unreadable.contains(&cidr)
            {
                affinities.push((hostname, cidr));
            }
        }
        let mut in_use = BTreeMap::new();
        let mut endpoints = Vec::new();
        for pair in store.list(&Prefix::Hosts.to_string()).await? {
            let Ok(Key::WorkloadEndpoint(id)) = Key::parse(&pair.key) else {
                continue;
            };
            let Ok(endpoint) = from_json::<WorkloadEndpoint>(&pair.value) else {
                continue;
            };
            for net in endpoint.ipv4_nets.iter().chain(&endpoint.ipv6_nets) {
                in_use.insert(net.addr(), pair.key.clone());
            }
            endpoints.push((id, endpoint));
        }
        let mut report = audit(&blocks, &handles, &affinities, &in_use);
        report.invalid = invalid;
        report.stale_endpoints = stale_endpoints(&endpoints, &self.endpoint_statuses().await?);
        Ok(report)
    }

    /// What each host's Felix reports of its workload endpoints
    /// (`/calico/felix/v1/host/<host>/workload/…/endpoint/<id>`); unreadable values are skipped.
    async fn endpoint_statuses(
        &self,
    ) -> Result<BTreeMap<WorkloadEndpointId, EndpointOperState>, IpamError> {
        let prefix = format!("{}/host/", calico_model::key::FELIX_V1);
        let mut statuses = BTreeMap::new();
        for pair in self.store().list(&prefix).await? {
            if let Ok(Key::WorkloadEndpointStatus(id)) = Key::parse(&pair.key)
                && let Ok(status) = from_json::<EndpointStatus>(&pair.value)
            {
                statuses.insert(id, status.status);
            }
        }
        Ok(statuses)
    }

    /// The IPAM config and the blocks that do not read.
    async fn invalid_values(&self, blocks: &[InvalidBlock]) -> Result<Vec<Invalid>, IpamError> {
        let mut invalid = Vec::new();
        match self.settings().await {
            Ok(_) => {}
            Err(IpamError::Corrupt { key, reason }) => invalid.push(Invalid {
                key,
                reason,
                fix: INVALID_CONFIG_FIX,
            }),
            Err(e) => return Err(e),
        }
        for block in blocks {
            invalid.push(Invalid {
                key: block.key.clone(),
                reason: block.reason.clone(),
                fix: INVALID_BLOCK_FIX,
            });
        }
        Ok(invalid)
    }

    /// Repairs what `report` found: releases leaked addresses, rewrites handle records from
    /// the blocks, removes stale affinities. Each repair is a compare-and-swap, so a change
    /// made since the check is not overwritten (run check again to see what is left).
    pub async fn fix(&self, report: &Report) -> Result<Fixed, IpamError> {
        let mut fixed = Fixed::default();
        let leaked: Vec<IpAddr> = report.leaks.iter().map(|l| l.ip).collect();
        fixed.released = self.release_ips(&leaked).await?.len();
        if !report.handle_mismatches.is_empty() {
            fixed.handles_rewritten = self.rewrite_handles(report).await?;
        }
        let store = self.store();
        for (hostname, cidr) in &report.stale_affinities {
            let key = Key::BlockAffinity {
                hostname: hostname.clone(),
                cidr: *cidr,
            };
            if store.delete(&key.to_string()).await? {
                fixed.affinities_removed += 1;
            }
        }
        Ok(fixed)
    }

    /// Sets each mismatched handle record to what the blocks hold now.
    async fn rewrite_handles(&self, report: &Report) -> Result<usize, IpamError> {
        let blocks = self.all_blocks().await?;
        let unreadable: BTreeSet<IpNet> = self
            .invalid_blocks()
            .await?
            .iter()
            .map(|b| b.cidr)
            .collect();
        let store = self.store();
        let mut rewritten = 0;
        for mismatch in &report.handle_mismatches {
            let mut actual: BTreeMap<IpNet, u64> = blocks
                .iter()
                .filter_map(|b| {
                    let count = *block::handle_counts(b).get(&mismatch.handle)?;
                    Some((b.cidr, count))
                })
                .collect();
            let key = Key::Handle {
                handle: mismatch.handle.clone(),
            }
            .to_string();
            let current = store.get(&key).await?;
            // Counts in unreadable blocks are kept as recorded.
            if let Some(record) = current
                .as_ref()
                .and_then(|p| from_json::<AllocationHandle>(&p.value).ok())
            {
                let kept = record
                    .block
                    .into_iter()
                    .filter(|(c, _)| unreadable.contains(c));
                actual.extend(kept);
            }
            let expect = current
                .as_ref()
                .map_or(calico_datastore::Expect::Absent, |p| {
                    calico_datastore::Expect::ModRevision(p.mod_revision)
                });
            let done = if actual.is_empty() {
                match current {
                    Some(pair) => store.compare_and_delete(&key, pair.mod_revision).await?,
                    None => false,
                }
            } else {
                let record = AllocationHandle {
                    id: mismatch.handle.clone(),
                    block: actual,
                };
                let value = serde_json::to_string(&record).expect("a handle serialises");
                store.compare_and_swap(&key, expect, &value).await?
            };
            rewritten += usize::from(done);
        }
        Ok(rewritten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use calico_model::ipam::AllocationAttribute;

    fn attribute(handle: &str) -> AllocationAttribute {
        crate::block::attribute(handle, &BTreeMap::new())
    }

    #[test]
    fn unused_addresses_wrong_counts_and_stale_affinities_are_reported() {
        let cidr: IpNet = "10.0.0.0/30".parse().unwrap();
        let mut b = block::empty_block(cidr, Some("h1"), false);
        let used = block::assign(&mut b, 1, &attribute("a"))[0];
        let leaked = block::assign(&mut b, 1, &attribute("b"))[0];
        let handles = vec![AllocationHandle {
            id: "a".into(),
            block: [(cidr, 2)].into(),
        }];
        let in_use = [
            (
                used,
                "/calico/v1/host/h1/workload/cni/x/endpoint/eth0".to_owned(),
            ),
            (
                "10.0.0.3".parse().unwrap(),
                "/calico/v1/host/h1/workload/cni/y/endpoint/eth0".to_owned(),
            ),
        ]
        .into();
        let affinities = [("h1".to_owned(), cidr), ("h2".to_owned(), cidr)];
        let report = audit(&[b], &handles, &affinities, &in_use);
        assert_eq!(
            report.leaks,
            [Leak {
                ip: leaked,
                handle: Some("b".into()),
                block: cidr
            }]
        );
        let mismatched: Vec<&str> = report
            .handle_mismatches
            .iter()
            .map(|m| m.handle.as_str())
            .collect();
        assert_eq!(mismatched, ["a", "b"]);
        assert_eq!(report.stale_affinities, [("h2".to_owned(), cidr)]);
        assert_eq!(report.unassigned_in_use.len(), 1);
        assert!(!report.is_clean());
    }

    #[test]
    fn active_endpoints_felix_reports_down_or_in_error_are_stale() {
        let id = |e: &str| WorkloadEndpointId {
            hostname: "h1".into(),
            orchestrator: "docker".into(),
            workload: "w".into(),
            endpoint: e.into(),
        };
        let endpoint = |state: &str, nets: &str| -> WorkloadEndpoint {
            from_json(&format!(
                r#"{{"state": "{state}", "name": "cali1", "profile_ids": [], "ipv4_nets": {nets}}}"#
            ))
            .unwrap()
        };
        let endpoints = [
            (id("up"), endpoint("active", r#"["10.0.0.1/32"]"#)),
            (id("down"), endpoint("active", r#"["10.0.0.2/32"]"#)),
            (id("error"), endpoint("active", r#"["10.0.0.3/32"]"#)),
            (id("inactive"), endpoint("inactive", r#"["10.0.0.4/32"]"#)),
            (id("no-address"), endpoint("active", "[]")),
            (id("unreported"), endpoint("active", r#"["10.0.0.6/32"]"#)),
        ];
        let statuses = [
            (id("up"), EndpointOperState::Up),
            (id("down"), EndpointOperState::Down),
            (id("error"), EndpointOperState::Error),
            (id("inactive"), EndpointOperState::Down),
            (id("no-address"), EndpointOperState::Down),
        ]
        .into();
        let stale = stale_endpoints(&endpoints, &statuses);
        let keys: Vec<&str> = stale.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "/calico/v1/host/h1/workload/docker/w/endpoint/down",
                "/calico/v1/host/h1/workload/docker/w/endpoint/error"
            ]
        );
        assert_eq!(stale[0].addresses, ["10.0.0.2".parse::<IpAddr>().unwrap()]);
    }
}
