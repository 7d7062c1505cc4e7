//! Per-host lanes: the assignments and releases that the allocators of one host ask this
//! process for at the same time are served together, one batch at a time per host, with one
//! round of reads and one transaction.
//!
//! ```text
//! auto_assign ─┐                          ┌─ together: pools, the host's affinities, its blocks
//! release_ips ─┴─> lane(host): pending ──>┤  and every handle read at once; one transaction
//!                  (one batch at a time)  └─ alone, as before, one job after the other: a job
//!                                            that needs a new block, borrows, or finds too few
//! ```
//!
//! Without lanes the allocators of one host read the same block, and all but one lose the
//! transaction and read again. A batch still compares every block and handle it writes, so
//! allocators in other processes stay as safe as before; they just do not share the lane.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use calico_datastore::{Compare, Expect};
use calico_model::ipam::{AllocationBlock, AllocationHandle};
use calico_model::pool::IpPool;
use calico_model::{IpVersion, Key};
use futures::future::try_join_all;
use ipnet::IpNet;
use tokio::sync::oneshot;

use crate::allocator::{Ipam, backoff};
use crate::block;
use crate::error::IpamError;
use crate::hint::Hints;
use crate::lane::{AssignJob, AssignOutcome, Job, ReleaseOutcome};
use crate::plan::{Seen, Step, plan};
use crate::store::{BlockWrite, Txn, handle_changes};
use crate::stored::{Stored, StoredBlock, StoredPool};

/// Transactions a batch tries before its jobs run alone (each with its own retries).
const TOGETHER_ATTEMPTS: u32 = 6;

/// What a batch attempt takes from the hints instead of reading. The first attempt trusts them
/// all; a lost race most likely lost on a block or handle (another process of the host), so
/// the second reads the handles again, and the third and later ones read everything.
#[derive(Debug, Clone, Copy)]
struct Trust {
    /// The pools, the config and the host's affinities.
    settings: bool,
    /// Handle records (revision or absence).
    handles: bool,
}

impl Trust {
    fn on_attempt(attempt: u32) -> Trust {
        Trust {
            settings: attempt < 3,
            handles: attempt < 2,
        }
    }
}

/// A job the batch served together with the others.
enum Served {
    Assigned(Vec<IpAddr>),
    Released(Vec<(IpAddr, Option<String>)>),
}

impl Ipam {
    /// Reads at once what an assignment for `host` needs before the host's blocks — the pools
    /// of each version, the host's affinities and the IPAM config — and remembers it, so that
    /// the next assignment starts by reading the blocks. A process that assigns once (a CNI
    /// plugin run) saves a round trip by running this alongside its other first reads. What it
    /// remembers is only trusted as far as a batch's transaction compares it (see `read_batch`).
    pub async fn prefetch(&self, host: &str, versions: &[IpVersion]) -> Result<(), IpamError> {
        let per_version = try_join_all(versions.iter().map(|&version| async move {
            tokio::try_join!(
                self.keys.stored_pools(version),
                self.affine_blocks(host, version)
            )
        }));
        tokio::try_join!(per_version, self.keys.stored_settings())?;
        Ok(())
    }

    /// Assigns in the lane of the job's host.
    pub(crate) async fn assign_in_lane(&self, job: AssignJob) -> AssignOutcome {
        let (reply, answer) = oneshot::channel();
        let host = job.host.clone();
        self.submit(&host, Job::Assign(job, reply), answer).await
    }

    /// Releases addresses of the block `cidr` in the lane of `host`, the block's host.
    pub(crate) async fn release_in_lane(
        &self,
        host: &str,
        cidr: IpNet,
        ips: Vec<IpAddr>,
    ) -> ReleaseOutcome {
        let (reply, answer) = oneshot::channel();
        self.submit(host, Job::Release { cidr, ips, reply }, answer)
            .await
    }

    async fn submit<T>(&self, host: &str, job: Job, mut answer: oneshot::Receiver<T>) -> T {
        let lane = self.lanes.lane(host);
        lock(&lane.pending).push(job);
        let busy = lane.busy.clone().lock_owned().await;
        // The batch before may have taken this job: it answered before letting go of `busy`.
        if let Ok(done) = answer.try_recv() {
            return done;
        }
        let jobs = std::mem::take(&mut *lock(&lane.pending));
        let ipam = self.clone();
        let host = host.to_owned();
        // In a task of its own: a caller that stops waiting must not abandon the others' jobs.
        tokio::spawn(async move {
            ipam.run_batch(&host, jobs).await;
            drop(busy);
        });
        answer.await.expect("a batch answers every job it takes")
    }

    async fn run_batch(&self, host: &str, jobs: Vec<Job>) {
        let served = match self.serve_together(host, &jobs).await {
            Ok(served) => served,
            Err(e) => {
                tracing::debug!(host, "a batch runs its jobs alone: {e}");
                jobs.iter().map(|_| None).collect()
            }
        };
        let mut alone = Vec::new();
        for (job, served) in jobs.into_iter().zip(served) {
            match (job, served) {
                (Job::Assign(job, reply), Some(Served::Assigned(ips))) => {
                    self.answer(&job.host, reply, (Ok(ips), Vec::new())).await;
                }
                (Job::Release { reply, .. }, Some(Served::Released(freed))) => {
                    // A release its caller stopped waiting for is done all the same.
                    let _ = reply.send(Ok(freed));
                }
                (job, _) => alone.push(job),
            }
        }
        for job in alone {
            match job {
                Job::Assign(job, reply) => {
                    let mut claimed = Vec::new();
                    let result = self.assign_family_direct(&job, &mut claimed).await;
                    self.answer(&job.host, reply, (result, claimed)).await;
                }
                Job::Release { ips, reply, .. } => {
                    let _ = reply.send(self.release_ips_direct(&ips).await);
                }
            }
        }
    }

    /// Answers an assignment; when its caller has stopped waiting, gives its addresses and the
    /// blocks it claimed back, so that nothing leaks.
    async fn answer(&self, host: &str, reply: oneshot::Sender<AssignOutcome>, done: AssignOutcome) {
        let Err((result, claimed)) = reply.send(done) else {
            return;
        };
        if let Ok(ips) = result
            && let Err(e) = self.release_ips_direct(&ips).await
        {
            tracing::warn!(
                ?ips,
                "cannot release the addresses of a cancelled assignment: {e}"
            );
        }
        if let Err(e) = self.release_claimed(host, &claimed).await {
            tracing::warn!(
                ?claimed,
                "cannot release the blocks of a cancelled assignment: {e}"
            );
        }
    }

    /// Serves what it can of `jobs` with one transaction: `None` for a job that must run alone.
    async fn serve_together(
        &self,
        host: &str,
        jobs: &[Job],
    ) -> Result<Vec<Option<Served>>, IpamError> {
        for attempt in 1..=TOGETHER_ATTEMPTS {
            let trust = Trust::on_attempt(attempt);
            let mut batch = self.read_batch(host, jobs, trust).await?;
            let served = batch.apply(host, jobs);
            let done = match self.batch_txn(&mut batch).await? {
                Some(txn) => txn.commit(self.store()).await?,
                None => true,
            };
            if done {
                batch.remember(&mut self.hints());
                return Ok(served);
            }
            backoff(attempt).await;
        }
        Ok(jobs.iter().map(|_| None).collect())
    }

    /// One round of reads: the blocks the jobs need and the handles, and (unless remembered)
    /// the pools and the host's affinities for each version assigned. Blocks of the host the
    /// hints did not know cost a second round.
    ///
    /// What is remembered is safe to trust: a block is used only when its own read says it is
    /// the host's, the transaction compares the pool of every block it assigns from, and a
    /// handle guessed absent is compared absent. A wrong guess loses the transaction, and the
    /// next attempts trust less (see [`Trust`]).
    async fn read_batch(&self, host: &str, jobs: &[Job], trust: Trust) -> Result<Batch, IpamError> {
        let plan = self.to_read(host, jobs, trust);
        let per_version = try_join_all(plan.versions.iter().map(|&version| async move {
            let (pools, affine) = tokio::try_join!(
                self.keys.stored_pools(version),
                self.affine_blocks(host, version)
            )?;
            Ok::<_, IpamError>((version, pools, affine))
        }));
        let config = async {
            match plan.known.config {
                None if plan.assigns => Ok(Some(self.keys.stored_settings().await?.1)),
                known => Ok(known),
            }
        };
        let (per_version, blocks, handles, config) = tokio::try_join!(
            per_version,
            self.read_blocks(&plan.cidrs),
            self.read_handles(&plan.handles),
            config
        )?;
        let mut batch = plan.known;
        batch.handles.extend(handles);
        batch.config = config;
        for (version, pools, affine) in per_version {
            batch.pools.insert(version, pools);
            batch.affine.insert(version, affine);
        }
        let missing: Vec<IpNet> = (batch.affine.values().flatten())
            .filter(|cidr| !plan.cidrs.contains(cidr))
            .copied()
            .collect();
        let more = self.read_blocks(&missing).await?;
        for stored in blocks.into_iter().chain(more) {
            let working = stored.value.clone();
            batch.blocks.insert(stored.value.cidr, (stored, working));
        }
        Ok(batch)
    }

    /// What a batch must read, and what the hints it trusts already tell.
    fn to_read(&self, host: &str, jobs: &[Job], trust: Trust) -> ReadPlan {
        let hints = self.hints();
        let mut known = Batch {
            config: hints.config_read().filter(|_| trust.settings),
            ..Batch::default()
        };
        let mut versions = BTreeSet::new();
        let mut cidrs = BTreeSet::new();
        let mut handles = BTreeSet::new();
        for job in jobs {
            match job {
                Job::Assign(job, _) => {
                    let v = job.version;
                    let pools = hints.pools_of(v).filter(|_| trust.settings);
                    match (pools, hints.affine_of(host, v).filter(|_| trust.settings)) {
                        (Some(pools), Some(affine)) => {
                            cidrs.extend(affine.iter().copied());
                            known.pools.insert(v, pools);
                            known.affine.insert(v, affine);
                        }
                        (_, affine) => {
                            cidrs.extend(affine.into_iter().flatten());
                            versions.insert(v);
                        }
                    }
                    match hints.record_of(&job.handle).filter(|_| trust.handles) {
                        Some(record) => {
                            known.handles.insert(job.handle.clone(), Some(record));
                        }
                        None if !trust.handles || hints.handle_exists(&job.handle) => {
                            handles.insert(job.handle.clone());
                        }
                        None => {
                            known.handles.insert(job.handle.clone(), None);
                        }
                    }
                }
                Job::Release { cidr, ips, .. } => {
                    cidrs.insert(*cidr);
                    for handle in ips.iter().filter_map(|ip| hints.handle_of(*ip)) {
                        match hints.record_of(&handle).filter(|_| trust.handles) {
                            Some(record) => {
                                known.handles.insert(handle, Some(record));
                            }
                            None => {
                                handles.insert(handle);
                            }
                        }
                    }
                }
            }
        }
        // A handle that one job reads is read for all; a version that one job reads, too.
        known.handles.retain(|handle, _| !handles.contains(handle));
        for version in &versions {
            known.pools.remove(version);
            known.affine.remove(version);
        }
        ReadPlan {
            assigns: jobs.iter().any(|job| matches!(job, Job::Assign(..))),
            versions: versions.into_iter().collect(),
            cidrs: cidrs.into_iter().collect(),
            handles: handles.into_iter().collect(),
            known,
        }
    }

    /// The readable blocks of `cidrs`, read at once. An unreadable block is left out: the jobs
    /// that need it run alone and report it.
    pub(crate) async fn read_blocks(&self, cidrs: &[IpNet]) -> Result<Vec<StoredBlock>, IpamError> {
        let reads = try_join_all(cidrs.iter().map(|cidr| async move {
            match self.keys.read_block(cidr).await {
                Err(IpamError::Corrupt { .. }) => Ok(None),
                read => read,
            }
        }));
        Ok(reads.await?.into_iter().flatten().collect())
    }

    async fn read_handles(&self, handles: &[String]) -> Result<Vec<HandleRead>, IpamError> {
        try_join_all(handles.iter().map(|handle| async move {
            Ok((handle.clone(), self.keys.read_handle(handle).await?))
        }))
        .await
    }

    /// The transaction writing what the batch changed (none when it changed nothing), after
    /// reading the handles of freed addresses that the hints did not name.
    async fn batch_txn(&self, batch: &mut Batch) -> Result<Option<Txn>, IpamError> {
        if batch.changed.is_empty() {
            return Ok(None);
        }
        let unread: Vec<String> = (batch.deltas.keys())
            .filter(|handle| !batch.handles.contains_key(*handle))
            .cloned()
            .collect();
        batch.handles.extend(self.read_handles(&unread).await?);
        let mut txn = Txn::default();
        for (key, revision) in &batch.pools_used {
            txn.compares.push(Compare {
                key: key.clone(),
                expect: Expect::ModRevision(*revision),
            });
        }
        if let Some(expect) = batch.config.filter(|_| !batch.pools_used.is_empty()) {
            let key = Key::IpamConfig.to_string();
            txn.compares.push(Compare { key, expect });
        }
        for cidr in &batch.changed {
            let (stored, working) = &batch.blocks[cidr];
            BlockWrite::update(working, stored).add_to(&mut txn);
        }
        for (handle, deltas) in &batch.deltas {
            let deltas: BTreeMap<IpNet, i64> = deltas
                .iter()
                .filter(|(_, delta)| **delta != 0)
                .map(|(cidr, delta)| (*cidr, *delta))
                .collect();
            if !deltas.is_empty() {
                let read = batch.handles.get(handle).cloned().flatten();
                let record = handle_changes(&mut txn, (handle, read), &deltas);
                batch.written.push((handle.clone(), record));
            }
        }
        Ok(Some(txn))
    }
}

type HandleRead = (String, Option<Stored<AllocationHandle>>);

/// What a batch reads, and what it takes from the hints instead.
struct ReadPlan {
    /// Whether some job assigns (and so needs the config).
    assigns: bool,
    versions: Vec<IpVersion>,
    cidrs: Vec<IpNet>,
    handles: Vec<String>,
    known: Batch,
}

/// What a batch read, and what it changed so far.
#[derive(Default)]
struct Batch {
    pools: BTreeMap<IpVersion, Vec<StoredPool>>,
    /// The pools (key and revision) of the blocks assigned from: compared by the transaction.
    pools_used: BTreeMap<String, i64>,
    /// The config key as read (when some job assigns): compared when the batch assigns, so
    /// that an assignment never goes through under a config it did not see.
    config: Option<Expect>,
    affine: BTreeMap<IpVersion, Vec<IpNet>>,
    /// Each readable block as read, and as the batch changed it.
    blocks: BTreeMap<IpNet, (StoredBlock, AllocationBlock)>,
    changed: BTreeSet<IpNet>,
    handles: BTreeMap<String, Option<Stored<AllocationHandle>>>,
    /// How each handle's count in each block moves.
    deltas: BTreeMap<String, BTreeMap<IpNet, i64>>,
    /// The handle records the transaction writes (none: deletes).
    written: Vec<(String, Option<AllocationHandle>)>,
}

impl Batch {
    fn apply(&mut self, host: &str, jobs: &[Job]) -> Vec<Option<Served>> {
        (jobs.iter())
            .map(|job| match job {
                Job::Assign(job, _) => self.assign(host, job).map(Served::Assigned),
                Job::Release { cidr, ips, .. } => self.release(cidr, ips).map(Served::Released),
            })
            .collect()
    }

    /// Serves an assignment from the host's blocks as [`plan`] plans it, when they have room
    /// for all of it; else changes nothing (the job runs alone: a new block or borrowing).
    fn assign(&mut self, host: &str, job: &AssignJob) -> Option<Vec<IpAddr>> {
        let pools = usable(self.pools.get(&job.version)?, &job.pools)?;
        let values: Vec<IpPool> = pools.iter().map(|p| p.value.clone()).collect();
        let affine = self.affine.get(&job.version)?;
        let blocks: Vec<&AllocationBlock> = (affine.iter())
            .filter_map(|cidr| Some(&self.blocks.get(cidr)?.1))
            .collect();
        let seen = Seen {
            host,
            pools: &values,
            affine,
            blocks: &blocks,
            rest: None,
        };
        let planned = plan(&seen, job.wanted, &job.attribute);
        if planned.short.is_some() {
            return None;
        }
        // Each step with its pool's key and revision (which the transaction compares).
        let steps: Vec<(Step, (String, i64))> = (planned.steps.into_iter())
            .map(|step| {
                let cidr = step.block.cidr;
                let pool = pools.iter().find(|p| p.value.cidr.contains(&cidr))?;
                Some((step, (pool.key.clone(), pool.revision)))
            })
            .collect::<Option<_>>()?;
        let mut got = Vec::new();
        for (step, (key, revision)) in steps {
            let cidr = step.block.cidr;
            self.pools_used.insert(key, revision);
            self.blocks.get_mut(&cidr)?.1 = step.block;
            let count = i64::try_from(step.ips.len()).unwrap_or(i64::MAX);
            self.change(&job.handle, cidr, count);
            got.extend(step.ips);
        }
        Some(got)
    }

    fn release(&mut self, cidr: &IpNet, ips: &[IpAddr]) -> Option<Vec<(IpAddr, Option<String>)>> {
        let working = &mut self.blocks.get_mut(cidr)?.1;
        let freed = block::release(working, ips);
        if !freed.is_empty() {
            self.changed.insert(*cidr);
        }
        for handle in freed.iter().filter_map(|(_, handle)| handle.as_deref()) {
            self.change(handle, *cidr, -1);
        }
        Some(freed)
    }

    /// Remembers what the batch wrote: the blocks as changed, which handles now have records.
    fn remember(self, hints: &mut Hints) {
        let blocks: Vec<&AllocationBlock> = (self.changed.iter())
            .filter_map(|cidr| Some(&self.blocks.get(cidr)?.1))
            .collect();
        hints.wrote(&blocks, Arc::new(self.written));
    }

    fn change(&mut self, handle: &str, cidr: IpNet, delta: i64) {
        self.changed.insert(cidr);
        let deltas = self.deltas.entry(handle.to_owned()).or_default();
        *deltas.entry(cidr).or_default() += delta;
    }
}

/// The pools an assignment may use, as [`Ipam::usable_pools`] decides; none when it would
/// refuse (the job then runs alone and reports why).
fn usable<'a>(pools: &'a [StoredPool], requested: &[IpNet]) -> Option<Vec<&'a StoredPool>> {
    let enabled = |p: &&StoredPool| p.value.assigns_addresses();
    let usable: Vec<&StoredPool> = if requested.is_empty() {
        pools.iter().filter(enabled).collect()
    } else {
        (requested.iter())
            .map(|cidr| pools.iter().filter(enabled).find(|p| p.value.cidr == *cidr))
            .collect::<Option<_>>()?
    };
    (!usable.is_empty()).then_some(usable)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
