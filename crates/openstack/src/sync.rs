//! Keeps etcd equal to Neutron: a poll loop, a [`Plan`] of puts and deletes, one executor.
//!
//! ```text
//!            every poll interval                         every resync interval
//! Neutron ── revisions (ids + revision_number) ──┐      ┌── etcd: the owned keys
//!            changed? → snapshot → desired::desired ─► plan(desired, known) ─► execute ─► etcd
//!                                                  (known: what the last pass wrote, or etcd)
//! ```
//!
//! Ownership: the sync owns exactly the workload endpoints of orchestrator `openstack` and the
//! profiles whose id starts with `openstack-` ([`is_owned`]); it reads, writes and deletes
//! nothing else, so Kubernetes', Docker's or an operator's keys are never touched. Between
//! resyncs it compares against what it last wrote (cheap); a resync (the first pass, every
//! resync interval, and after any failed write) compares against etcd itself and so repairs
//! drift both ways: keys changed or deleted behind its back are rewritten, owned keys Neutron
//! no longer has are deleted.
//!
//! Failures: Neutron unreachable or answering badly → nothing is written, the pass is retried
//! with [`Backoff`]; an etcd failure → the same, and the next pass reads etcd again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use calico_datastore::{Backoff, Datastore, TxnOp};
use calico_model::Key;
use tokio::time::Instant;

use crate::client::Client;
use crate::desired::desired;
use crate::error::{SyncError, TranslateError};
use crate::neutron::Revisions;
use crate::translate::{ORCHESTRATOR, OWNED_PROFILE_PREFIX};

/// Where the owned keys live.
const HOST_PREFIX: &str = "/calico/v1/host/";
const PROFILE_PREFIX: &str = "/calico/v1/policy/profile/";

/// Writes per etcd transaction: below etcd's default limit of 128 operations.
const OPS_PER_TXN: usize = 100;

/// Whether `key` is one the sync owns.
pub fn is_owned(key: &str) -> bool {
    match Key::parse(key) {
        Ok(Key::WorkloadEndpoint(id)) => id.orchestrator == ORCHESTRATOR,
        Ok(
            Key::ProfileRules { profile }
            | Key::ProfileTags { profile }
            | Key::ProfileLabels { profile },
        ) => profile.starts_with(OWNED_PROFILE_PREFIX),
        _ => false,
    }
}

/// What one pass writes, in dependency order: profiles before the endpoints that use them,
/// endpoints deleted before the profiles they used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub ops: Vec<TxnOp>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn count(&self) -> (usize, usize) {
        let puts = self
            .ops
            .iter()
            .filter(|op| matches!(op, TxnOp::Put { .. }))
            .count();
        (puts, self.ops.len() - puts)
    }
}

/// The writes that turn `known` into `desired`. Values equal as JSON are not rewritten.
pub fn plan(desired: &BTreeMap<String, String>, known: &BTreeMap<String, String>) -> Plan {
    let is_endpoint = |key: &str| key.starts_with(HOST_PREFIX);
    let mut puts: Vec<_> = desired
        .iter()
        .filter(|(key, value)| !known.get(*key).is_some_and(|old| same_json(old, value)))
        .collect();
    puts.sort_by_key(|(key, _)| (is_endpoint(key), *key));
    let mut deletes: Vec<_> = known.keys().filter(|k| !desired.contains_key(*k)).collect();
    deletes.sort_by_key(|key| (!is_endpoint(key), *key));
    let puts = puts.into_iter().map(|(key, value)| TxnOp::Put {
        key: key.clone(),
        value: value.clone(),
    });
    let deletes = deletes
        .into_iter()
        .map(|key| TxnOp::Delete { key: key.clone() });
    Plan {
        ops: puts.chain(deletes).collect(),
    }
}

fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The owned keys in etcd now.
pub async fn read_owned(store: &dyn Datastore) -> Result<BTreeMap<String, String>, SyncError> {
    let mut owned = BTreeMap::new();
    for prefix in [HOST_PREFIX, PROFILE_PREFIX] {
        for pair in store.list(prefix).await? {
            if is_owned(&pair.key) {
                owned.insert(pair.key, pair.value);
            }
        }
    }
    Ok(owned)
}

/// Applies `plan`, in order, [`OPS_PER_TXN`] writes per transaction.
pub async fn execute(store: &dyn Datastore, plan: &Plan) -> Result<(), SyncError> {
    for chunk in plan.ops.chunks(OPS_PER_TXN) {
        // No compares: the sync is the only writer of its keys.
        store.transaction(&[], chunk).await?;
    }
    Ok(())
}

/// The sync's state between passes.
pub struct Syncer {
    neutron: Client,
    store: Box<dyn Datastore>,
    /// Neutron's revisions when the last successful pass read it.
    revisions: Option<Revisions>,
    /// What etcd holds of the owned keys after the last successful pass; `None`: read etcd.
    written: Option<BTreeMap<String, String>>,
    /// What was left out last time, so each problem is logged when it appears, not every pass.
    reported: BTreeSet<String>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer")
            .field("neutron", &self.neutron)
            .field("keys", &self.written.as_ref().map(BTreeMap::len))
            .finish()
    }
}

impl Syncer {
    pub fn new(neutron: Client, store: Box<dyn Datastore>) -> Syncer {
        Syncer {
            neutron,
            store,
            revisions: None,
            written: None,
            reported: BTreeSet::new(),
        }
    }

    /// One pass: when Neutron changed (or `resync`), translate it and write the difference.
    /// Returns the plan it executed, if it looked.
    pub async fn pass(&mut self, resync: bool) -> Result<Option<Plan>, SyncError> {
        let revisions = self.neutron.revisions().await?;
        let resync = resync || self.written.is_none();
        if !resync && self.revisions.as_ref() == Some(&revisions) {
            return Ok(None);
        }
        let snapshot = self.neutron.snapshot().await?;
        let desired = desired(&snapshot);
        self.report(&desired.left_out, &desired.caveats, resync);
        let known = match self.written.take() {
            Some(written) if !resync => written,
            _ => read_owned(self.store.as_ref()).await?,
        };
        let plan = plan(&desired.keys, &known);
        execute(self.store.as_ref(), &plan).await?;
        if !plan.is_empty() {
            let (puts, deletes) = plan.count();
            tracing::info!(puts, deletes, resync, "etcd updated from neutron");
            for op in &plan.ops {
                tracing::debug!(?op, "written");
            }
        }
        self.written = Some(desired.keys);
        self.revisions = Some(revisions);
        Ok(Some(plan))
    }

    /// Logs what was left out and what was written with a caveat: new ones always, all of
    /// them again on a resync.
    fn report(&mut self, left_out: &[TranslateError], caveats: &[TranslateError], resync: bool) {
        let mut now = BTreeSet::new();
        let all = left_out.iter().map(|e| (e, false));
        for (error, caveat) in all.chain(caveats.iter().map(|e| (e, true))) {
            let line = format!("{caveat} {error}");
            if resync || !self.reported.contains(&line) {
                match caveat {
                    true => error.log_caveat(),
                    false => error.log(),
                }
            }
            now.insert(line);
        }
        self.reported = now;
    }
}

/// Runs passes until `shutdown` resolves: one every `poll`, a resync every `resync`, and
/// after a failure the next attempt after a backoff.
pub async fn run(
    mut syncer: Syncer,
    poll: Duration,
    resync: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Backoff::default();
    let mut next_resync = Instant::now();
    loop {
        let full = Instant::now() >= next_resync;
        let delay = match syncer.pass(full).await {
            Ok(_) => {
                if backoff.failures() > 0 {
                    tracing::info!("neutron and etcd reachable again");
                }
                backoff.reset();
                if full {
                    next_resync = Instant::now() + resync;
                }
                poll
            }
            Err(error) => {
                let delay = backoff.next_delay();
                error.log(delay);
                delay
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const EP_A: &str = "/calico/v1/host/h1/workload/openstack/vm/endpoint/a";
    const EP_B: &str = "/calico/v1/host/h1/workload/openstack/vm/endpoint/b";
    const SG1: &str = "/calico/v1/policy/profile/openstack-sg-1/rules";
    const SG2: &str = "/calico/v1/policy/profile/openstack-sg-2/rules";

    #[test]
    fn ownership_is_the_orchestrator_and_the_profile_prefix() {
        assert!(is_owned(EP_A));
        assert!(is_owned("/calico/v1/policy/profile/openstack-sg-x/labels"));
        assert!(!is_owned(
            "/calico/v1/host/h1/workload/k8s/ns.pod/endpoint/eth0"
        ));
        assert!(!is_owned("/calico/v1/policy/profile/k8s_ns.default/rules"));
        assert!(!is_owned("/calico/v1/host/h1/config/LogSeverityScreen"));
        assert!(!is_owned("/calico/v1/policy/profile/bad key/rules"));
    }

    #[test]
    fn plans_write_profiles_first_and_delete_them_last() {
        let known = map(&[(EP_A, "{}"), (SG1, "{\"a\": 1}")]);
        let desired = map(&[(EP_B, "{}"), (SG2, "{}")]);
        let keys: Vec<String> = plan(&desired, &known)
            .ops
            .iter()
            .map(|op| match op {
                TxnOp::Put { key, .. } => format!("put {key}"),
                TxnOp::Delete { key } => format!("delete {key}"),
            })
            .collect();
        assert_eq!(
            keys,
            [
                format!("put {SG2}"),
                format!("put {EP_B}"),
                format!("delete {EP_A}"),
                format!("delete {SG1}"),
            ]
        );
    }

    #[test]
    fn equal_json_is_not_rewritten() {
        let known = map(&[(SG1, "{\"a\": 1, \"b\": 2}")]);
        let desired = map(&[(SG1, "{\"b\":2,\"a\":1}")]);
        assert!(plan(&desired, &known).is_empty());
        let changed = map(&[(SG1, "{\"a\":2}")]);
        assert_eq!(plan(&changed, &known).ops.len(), 1);
    }

    #[tokio::test]
    async fn execute_then_read_gives_the_desired_state_and_leaves_others() {
        let store = calico_datastore::MemoryDatastore::new();
        let foreign = "/calico/v1/host/h1/workload/k8s/ns.pod/endpoint/eth0";
        store.put(foreign, "{}").await.unwrap();
        store.put(EP_A, "{\"stale\": true}").await.unwrap();
        let desired: BTreeMap<String, String> = (0..250)
            .map(|i| {
                (
                    format!("/calico/v1/policy/profile/openstack-sg-{i}/tags"),
                    "[]".into(),
                )
            })
            .collect();
        let known = read_owned(&store).await.unwrap();
        execute(&store, &plan(&desired, &known)).await.unwrap();
        assert_eq!(read_owned(&store).await.unwrap(), desired);
        assert!(store.get(foreign).await.unwrap().is_some());
    }
}
