//! [`Ipam`]: assigning and releasing addresses in the datastore.
//!
//! Every change is one etcd transaction that compares the revisions of everything it read (the
//! block, the handle) and writes the block, the handle record and, when it claims a block, the
//! host's affinity together. A transaction that loses a race changes nothing; the operation
//! reads again and retries, a bounded number of times. So concurrent allocators on any number of
//! hosts never hand out one address twice, and a handle's counts always equal the blocks.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use calico_datastore::Datastore;
use calico_model::IpVersion;
use calico_model::ipam::{AllocationAttribute, AllocationBlock, IpamConfig};
use calico_model::key::Key;
use calico_model::pool::IpPool;
use ipnet::IpNet;

use crate::block::{self, Taken, attribute};
use crate::config::IpamSettings;
use crate::error::IpamError;
use crate::hint::Hints;
use crate::lane::{AssignJob, Lanes};
use crate::plan::{Rest, Seen, Short, Source, Step, plan};
pub use crate::store::InvalidBlock;
use crate::store::{BlockWrite, Store, Txn, handle_change, handle_write};
use crate::stored::StoredBlock;

/// How often an operation re-reads and retries after losing a race.
pub const DEFAULT_ATTEMPTS: u32 = 100;

/// What to assign automatically.
#[derive(Debug, Clone, Default)]
pub struct AssignRequest {
    /// The host whose blocks are used first (and which claims new blocks).
    pub host: String,
    /// The handle the addresses are assigned under (released together by handle).
    pub handle: String,
    /// Free-form attributes stored with the allocation (container id, pod, ...).
    pub attributes: BTreeMap<String, String>,
    pub ipv4: usize,
    pub ipv6: usize,
    /// Only these pools (empty: every enabled pool of the version).
    pub ipv4_pools: Vec<IpNet>,
    pub ipv6_pools: Vec<IpNet>,
}

/// The addresses an automatic assignment handed out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assigned {
    pub ipv4: Vec<IpAddr>,
    pub ipv6: Vec<IpAddr>,
}

/// Where one address is: its block and the block's host, and what it is assigned with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpAssignment {
    pub block: IpNet,
    /// The host the block is affine to.
    pub host: Option<String>,
    pub strict_affinity: bool,
    /// The handle and details of the address; none when it is free.
    pub attribute: Option<AllocationAttribute>,
}

/// IPAM over a datastore. Its clones share one lane per host (see `batch`): assignments and
/// releases that allocators of one host make at once through them are written together.
#[derive(Clone)]
pub struct Ipam {
    /// The IPAM keys, and the hints the clones share.
    pub(crate) keys: Store,
    attempts: u32,
    pub(crate) lanes: Arc<Lanes>,
}

impl std::fmt::Debug for Ipam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipam")
            .field("attempts", &self.attempts)
            .finish()
    }
}

/// The next step of an automatic assignment, one transaction.
enum Next {
    /// Assign from an existing block (the host's own, or borrowed), as read.
    Existing(Step, Box<StoredBlock>),
    /// Claim a new block for the host.
    Claim(Step),
    /// Nothing is free; the reason says why.
    Exhausted(String),
}

impl Ipam {
    pub fn new(store: Arc<dyn Datastore>) -> Ipam {
        Ipam {
            keys: Store::new(store),
            attempts: DEFAULT_ATTEMPTS,
            lanes: Arc::default(),
        }
    }

    /// What this process last saw of blocks and affinities (what to read, never the answer).
    pub(crate) fn hints(&self) -> std::sync::MutexGuard<'_, Hints> {
        self.keys.hints()
    }

    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The datastore this IPAM writes to.
    pub fn store(&self) -> &dyn Datastore {
        self.keys.datastore()
    }

    /// The pools of one version, as stored (invalid ones are skipped with a warning).
    pub async fn pools(&self, version: IpVersion) -> Result<Vec<IpPool>, IpamError> {
        self.keys.pools(version).await
    }

    /// The cluster's IPAM config as stored (defaults when unset).
    pub async fn config(&self) -> Result<IpamConfig, IpamError> {
        self.keys.config().await
    }

    /// The blocks of one version affine to `host`.
    pub async fn affine_blocks(
        &self,
        host: &str,
        version: IpVersion,
    ) -> Result<Vec<IpNet>, IpamError> {
        self.keys.affine_blocks(host, version).await
    }

    /// Every block that reads, of both versions.
    pub async fn all_blocks(&self) -> Result<Vec<AllocationBlock>, IpamError> {
        self.keys.all_blocks().await
    }

    /// Every block key whose value cannot be read.
    pub async fn invalid_blocks(&self) -> Result<Vec<InvalidBlock>, IpamError> {
        self.keys.invalid_blocks().await
    }

    /// The cluster's IPAM settings (defaults when unset); an invalid config is an error naming
    /// the key and field.
    pub async fn settings(&self) -> Result<IpamSettings, IpamError> {
        self.keys.settings().await
    }

    /// Writes the settings in Calico 1.4's JSON. Callers [`IpamSettings::check`] them first;
    /// settings that fail the check are refused here too, naming the key and field.
    pub async fn set_settings(&self, settings: &IpamSettings) -> Result<(), IpamError> {
        self.keys.set_settings(settings).await
    }

    /// Assigns `ipv4` IPv4 and `ipv6` IPv6 addresses to the request's handle: from the host's
    /// blocks first, then from a newly claimed block (unless `auto_allocate_blocks` is false),
    /// and only when no block can be claimed from another host's block (never with strict
    /// affinity). Either every address asked for is assigned, or none is, the blocks this
    /// request claimed are given up again, and the error says how many were free and why.
    pub async fn auto_assign(&self, request: &AssignRequest) -> Result<Assigned, IpamError> {
        check_handle(&request.handle)?;
        let mut claimed = Vec::new();
        let result = self.assign_families(request, &mut claimed).await;
        if result.is_err() {
            self.release_claimed(&request.host, &claimed).await?;
        }
        result
    }

    async fn assign_families(
        &self,
        request: &AssignRequest,
        claimed: &mut Vec<IpNet>,
    ) -> Result<Assigned, IpamError> {
        let v4 = (IpVersion::V4, request.ipv4, request.ipv4_pools.as_slice());
        let ipv4 = self.assign_family(request, v4, claimed).await?;
        let v6 = (IpVersion::V6, request.ipv6, request.ipv6_pools.as_slice());
        let ipv6 = match self.assign_family(request, v6, claimed).await {
            Ok(ipv6) => ipv6,
            Err(e) => {
                self.release_ips(&ipv4).await?;
                return Err(e);
            }
        };
        Ok(Assigned { ipv4, ipv6 })
    }

    async fn assign_family(
        &self,
        request: &AssignRequest,
        (version, wanted, requested): (IpVersion, usize, &[IpNet]),
        claimed: &mut Vec<IpNet>,
    ) -> Result<Vec<IpAddr>, IpamError> {
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let job = AssignJob {
            host: request.host.clone(),
            handle: request.handle.clone(),
            attribute: attribute(&request.handle, &request.attributes),
            version,
            wanted,
            pools: requested.to_vec(),
        };
        let (result, new_blocks) = self.assign_in_lane(job).await;
        claimed.extend(new_blocks);
        result
    }

    /// Assigns one family on its own: the step the host's blocks, a new block or borrowing
    /// allow, one transaction per step (for a batch's jobs that could not be served together).
    pub(crate) async fn assign_family_direct(
        &self,
        request: &AssignJob,
        claimed: &mut Vec<IpNet>,
    ) -> Result<Vec<IpAddr>, IpamError> {
        let (version, wanted) = (request.version, request.wanted);
        let (pools, settings) = tokio::try_join!(
            self.keys.usable_pools(version, &request.pools),
            self.settings()
        )?;
        let mut got = Vec::new();
        let mut conflicts = 0;
        while got.len() < wanted {
            let need = wanted - got.len();
            // The handle record is read while the step is found: one round trip fewer.
            let (next, record) = tokio::try_join!(
                self.next_step(request, &pools, settings, need),
                self.keys.read_handle(&request.handle)
            )?;
            let handle = (request.handle.as_str(), record);
            let written = match next {
                Next::Existing(step, stored) => {
                    let write = BlockWrite::update(&step.block, &stored);
                    let count = to_i64(step.ips.len());
                    let cidr = step.block.cidr;
                    let done = self.keys.write_block(write, handle, &cidr, count, None);
                    done.await?.then_some(step.ips)
                }
                Next::Claim(step) => {
                    let cidr = step.block.cidr;
                    let affinity = Key::BlockAffinity {
                        hostname: request.host.clone(),
                        cidr,
                    };
                    let write = BlockWrite::create(&step.block);
                    let count = to_i64(step.ips.len());
                    let done = self
                        .keys
                        .write_block(write, handle, &cidr, count, Some(affinity))
                        .await?;
                    if done {
                        claimed.push(cidr);
                    }
                    done.then_some(step.ips)
                }
                Next::Exhausted(why) => {
                    self.release_ips_direct(&got).await?;
                    return Err(IpamError::Exhausted {
                        version,
                        handle: request.handle.clone(),
                        wanted,
                        found: got.len(),
                        pools: describe_pools(&pools),
                        why,
                    });
                }
            };
            match written {
                Some(ips) => got.extend(ips),
                None => {
                    conflicts += 1;
                    if conflicts >= self.attempts {
                        self.release_ips_direct(&got).await?;
                        return Err(IpamError::Contention {
                            operation: "auto-assign",
                            attempts: conflicts,
                            key: format!("the blocks of host {}", request.host),
                        });
                    }
                    backoff(conflicts).await;
                }
            }
        }
        tracing::debug!(handle = %request.handle, ?got, "assigned");
        Ok(got)
    }

    /// Where the next addresses come from, as [`plan`] decides: the host's blocks (the planner
    /// says when they are not enough), and only then every block of the version (for a new
    /// block or borrowing).
    async fn next_step(
        &self,
        request: &AssignJob,
        pools: &[IpPool],
        settings: IpamSettings,
        need: usize,
    ) -> Result<Next, IpamError> {
        let (host, version) = (request.host.as_str(), request.version);
        let affine = self.affine_blocks(host, version).await?;
        let in_pools: Vec<IpNet> = (affine.iter())
            .filter(|cidr| pools.iter().any(|p| p.cidr.contains(*cidr)))
            .copied()
            .collect();
        // An unreadable block of the host is skipped (`check` reports it), so the host still
        // assigns from its other blocks.
        let read = self.read_blocks(&in_pools).await?;
        let values: Vec<&AllocationBlock> = read.iter().map(|b| &b.value).collect();
        let seen = Seen {
            host,
            pools,
            affine: &affine,
            blocks: &values,
            rest: None,
        };
        if let Some(next) = first_step(&seen, &read, need, &request.attribute) {
            return Ok(next);
        }
        let all = self.keys.blocks(version).await?;
        let unreadable: Vec<IpNet> = all.invalid.iter().map(|b| b.cidr).collect();
        let values: Vec<&AllocationBlock> = all.valid.iter().map(|b| &b.value).collect();
        let seen = Seen {
            blocks: &values,
            rest: Some(Rest {
                settings,
                unreadable: &unreadable,
            }),
            ..seen
        };
        // With every block read the plan either has a step or says why nothing is free.
        Ok(
            first_step(&seen, &all.valid, need, &request.attribute).unwrap_or_else(|| {
                Next::Exhausted(": no block with room was found among those read".to_owned())
            }),
        )
    }

    /// Assigns one given address to `handle`. The address must lie in an enabled pool; its block
    /// is claimed for `host` if nobody has claimed it yet.
    pub async fn assign_ip(
        &self,
        ip: IpAddr,
        handle: &str,
        attributes: &BTreeMap<String, String>,
        host: &str,
    ) -> Result<(), IpamError> {
        check_handle(handle)?;
        let pools = self.pools(IpVersion::of_addr(&ip)).await?;
        let pool = pools
            .iter()
            .find(|p| p.cidr.contains(&ip))
            .ok_or(IpamError::NotInPool { ip })?;
        if !pool.assigns_addresses() {
            return Err(IpamError::DisabledPool {
                field: "ip",
                cidr: pool.cidr,
            });
        }
        let strict = self.settings().await?.strict_affinity;
        let attribute = attribute(handle, attributes);
        for attempt in 1..=self.attempts {
            let cidr = match self.keys.block_holding(ip, &pools).await? {
                Some(stored) => stored.value.cidr,
                None => block::block_of(&pool.cidr, ip),
            };
            let (block, record) =
                tokio::try_join!(self.keys.read_block(&cidr), self.keys.read_handle(handle))?;
            let record = (handle, record);
            let written = match block {
                Some(stored) => {
                    let mut block = stored.value.clone();
                    block::assign_address(&mut block, ip, &attribute).map_err(|taken| {
                        let handle = match taken {
                            Taken::By(handle) => handle,
                            Taken::Outside => None,
                        };
                        IpamError::InUse {
                            ip,
                            handle,
                            refused: None,
                        }
                    })?;
                    if let Some(why) = block::strict_refusal(&block, host, strict) {
                        return Err(IpamError::InUse {
                            ip,
                            handle: None,
                            refused: Some(why),
                        });
                    }
                    let write = BlockWrite::update(&block, &stored);
                    self.keys.write_block(write, record, &cidr, 1, None).await?
                }
                None => {
                    let mut block = block::empty_block(cidr, Some(host), strict);
                    block::assign_address(&mut block, ip, &attribute)
                        .expect("a fresh block of the address is free");
                    let affinity = Key::BlockAffinity {
                        hostname: host.to_owned(),
                        cidr,
                    };
                    let write = BlockWrite::create(&block);
                    self.keys
                        .write_block(write, record, &cidr, 1, Some(affinity))
                        .await?
                }
            };
            if written {
                return Ok(());
            }
            backoff(attempt).await;
        }
        Err(self.contention("assign", ip))
    }

    /// Releases the given addresses; returns those that were assigned, with their handles.
    /// Addresses that were free are ignored.
    pub async fn release_ips(
        &self,
        ips: &[IpAddr],
    ) -> Result<Vec<(IpAddr, Option<String>)>, IpamError> {
        // Addresses of blocks this process has seen go to the lane of the block's host; the
        // lane reads the block again, so a stale hint only costs the direct path below.
        let mut lanes: BTreeMap<IpNet, (String, Vec<IpAddr>)> = BTreeMap::new();
        let mut rest = Vec::new();
        {
            let hints = self.hints();
            for &ip in ips {
                match hints.block_of(ip).and_then(|b| Some((b.cidr, b.host()?))) {
                    Some((cidr, host)) => {
                        let lane = lanes
                            .entry(cidr)
                            .or_insert_with(|| (host.to_owned(), vec![]));
                        lane.1.push(ip);
                    }
                    None => rest.push(ip),
                }
            }
        }
        let answers =
            futures::future::join_all((lanes.into_iter()).map(|(cidr, (host, ips))| async move {
                self.release_in_lane(&host, cidr, ips).await
            }));
        let mut freed = Vec::new();
        for answer in answers.await {
            freed.extend(answer?);
        }
        freed.extend(self.release_ips_direct(&rest).await?);
        Ok(freed)
    }

    /// Releases addresses without a lane: each block read, changed and written on its own.
    pub(crate) async fn release_ips_direct(
        &self,
        ips: &[IpAddr],
    ) -> Result<Vec<(IpAddr, Option<String>)>, IpamError> {
        // Each block as found (its first attempt needs no read of its own) and its addresses.
        let mut by_block: BTreeMap<IpNet, (StoredBlock, Vec<IpAddr>)> = BTreeMap::new();
        let mut pools: BTreeMap<IpVersion, Vec<IpPool>> = BTreeMap::new();
        for &ip in ips {
            if let Some((_, (_, ips))) = by_block.iter_mut().find(|(cidr, _)| cidr.contains(&ip)) {
                ips.push(ip);
                continue;
            }
            let version = IpVersion::of_addr(&ip);
            if let std::collections::btree_map::Entry::Vacant(slot) = pools.entry(version) {
                slot.insert(self.pools(version).await?);
            }
            if let Some(stored) = self.keys.block_holding(ip, &pools[&version]).await? {
                by_block.insert(stored.value.cidr, (stored, vec![ip]));
            }
        }
        let mut freed = Vec::new();
        for (cidr, (stored, ips)) in by_block {
            freed.extend(self.release_in_block(&cidr, Some(stored), &ips).await?);
        }
        Ok(freed)
    }

    /// Releases `ips` of the block `cidr`, starting from the block as `read` (when it was
    /// just read) and reading it again after a lost race.
    async fn release_in_block(
        &self,
        cidr: &IpNet,
        mut read: Option<StoredBlock>,
        ips: &[IpAddr],
    ) -> Result<Vec<(IpAddr, Option<String>)>, IpamError> {
        for attempt in 1..=self.attempts {
            let stored = match read.take() {
                Some(stored) => Some(stored),
                None => self.keys.read_block(cidr).await?,
            };
            let Some(stored) = stored else {
                return Ok(Vec::new());
            };
            let mut block = stored.value.clone();
            let freed = block::release(&mut block, ips);
            if freed.is_empty() {
                return Ok(freed);
            }
            let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
            for (_, handle) in &freed {
                if let Some(handle) = handle {
                    *counts.entry(handle).or_default() -= 1;
                }
            }
            let mut txn = Txn::default();
            BlockWrite::update(&block, &stored).add_to(&mut txn);
            let records = futures::future::try_join_all(
                counts.keys().map(|handle| self.keys.read_handle(handle)),
            )
            .await?;
            for ((handle, delta), record) in counts.into_iter().zip(records) {
                handle_change(&mut txn, (handle, record), cidr, delta);
            }
            if txn.commit(self.store()).await? {
                return Ok(freed);
            }
            backoff(attempt).await;
        }
        Err(self.contention("release", cidr))
    }

    /// Releases every address of `handle`; returns them. A handle that does not exist has
    /// nothing to release.
    pub async fn release_by_handle(&self, handle: &str) -> Result<Vec<IpAddr>, IpamError> {
        check_handle(handle)?;
        let mut freed = Vec::new();
        let mut conflicts = 0;
        while conflicts < self.attempts {
            let Some(stored) = self.keys.read_handle(handle).await? else {
                return Ok(freed);
            };
            let Some(cidr) = stored.value.block.keys().next().copied() else {
                let key = Key::Handle {
                    handle: handle.to_owned(),
                };
                self.store()
                    .compare_and_delete(&key.to_string(), stored.revision)
                    .await?;
                continue;
            };
            let mut txn = Txn::default();
            let mut released = Vec::new();
            if let Some(read) = self.keys.read_block(&cidr).await? {
                let mut block = read.value.clone();
                released = block::release_handle(&mut block, handle);
                BlockWrite::update(&block, &read).add_to(&mut txn);
            }
            // The handle's record loses this block whatever the block held.
            let mut record = stored.value;
            record.block.remove(&cidr);
            handle_write(&mut txn, handle, Some(stored.revision), &record);
            if txn.commit(self.store()).await? {
                freed.extend(released);
                if record.block.is_empty() {
                    // The transaction deleted the record (as read): nothing is left to read.
                    self.hints().record(handle, None);
                    return Ok(freed);
                }
            } else {
                conflicts += 1;
                backoff(conflicts).await;
            }
        }
        Err(self.contention("release-by-handle", handle))
    }

    /// Every address assigned to `handle`, in block order.
    pub async fn addresses_of(&self, handle: &str) -> Result<Vec<IpAddr>, IpamError> {
        check_handle(handle)?;
        let Some(stored) = self.keys.read_handle(handle).await? else {
            return Ok(Vec::new());
        };
        let mut addresses = Vec::new();
        for cidr in stored.value.block.keys() {
            if let Some(block) = self.keys.read_block(cidr).await? {
                addresses.extend(
                    block::allocated(&block.value)
                        .into_iter()
                        .filter(|(_, a)| a.primary.as_deref() == Some(handle))
                        .map(|(ip, _)| ip),
                );
            }
        }
        Ok(addresses)
    }

    /// The attribute (handle and details) an address is assigned with, if it is assigned.
    pub async fn ip_info(&self, ip: IpAddr) -> Result<Option<AllocationAttribute>, IpamError> {
        Ok(self.ip_assignment(ip).await?.and_then(|a| a.attribute))
    }

    /// The block holding an address, its host and (when assigned) the address's attribute;
    /// none when no block holds it.
    pub async fn ip_assignment(&self, ip: IpAddr) -> Result<Option<IpAssignment>, IpamError> {
        let pools = self.pools(IpVersion::of_addr(&ip)).await?;
        let Some(stored) = self.keys.block_holding(ip, &pools).await? else {
            return Ok(None);
        };
        let block = stored.value;
        let attribute = block::ordinal_of(&block.cidr, ip)
            .and_then(|ordinal| block.allocations[ordinal])
            .and_then(|index| block.attributes.get(index).cloned());
        Ok(Some(IpAssignment {
            block: block.cidr,
            host: block.host().map(str::to_owned),
            strict_affinity: block.strict_affinity,
            attribute,
        }))
    }

    pub(crate) fn contention(
        &self,
        operation: &'static str,
        what: impl std::fmt::Display,
    ) -> IpamError {
        IpamError::Contention {
            operation,
            attempts: self.attempts,
            key: what.to_string(),
        }
    }
}

fn check_handle(handle: &str) -> Result<(), IpamError> {
    calico_model::names::validate_handle_id(handle).map_err(|e| IpamError::InvalidHandle {
        handle: handle.to_owned(),
        reason: e.reason,
    })
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn describe_pools(pools: &[IpPool]) -> String {
    let cidrs: Vec<String> = pools.iter().map(|p| p.cidr.to_string()).collect();
    cidrs.join(", ")
}

/// The first step of the plan for `need` addresses, with the block as `read` that it changes;
/// none when the plan needs blocks that were not read.
fn first_step(
    seen: &Seen<'_>,
    read: &[StoredBlock],
    need: usize,
    attribute: &AllocationAttribute,
) -> Option<Next> {
    let planned = plan(seen, need, attribute);
    let Some(step) = planned.steps.into_iter().next() else {
        return match planned.short {
            Some(Short::Exhausted(why)) => Some(Next::Exhausted(why)),
            Some(Short::Unread) | None => None,
        };
    };
    if step.source == Source::Claim {
        return Some(Next::Claim(step));
    }
    let stored = read.iter().find(|b| b.value.cidr == step.block.cidr)?;
    Some(Next::Existing(step, Box::new(stored.clone())))
}

/// Waits a little before retrying after a lost race, longer after repeated losses (with jitter
/// so that racing writers spread out).
pub(crate) async fn backoff(attempt: u32) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let ceiling = 2u64.saturating_pow(attempt.min(6)); // 2..64 ms
    let millis = u64::from(nanos) % ceiling;
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
