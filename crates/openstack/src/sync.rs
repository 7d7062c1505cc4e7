//! How etcd is kept equal to Neutron: which keys are owned, a [`Plan`] of puts and deletes,
//! one executor. The state between passes is `syncer::Syncer`, the loops are `run`.
//!
//! Ownership: the sync owns exactly the workload endpoints of orchestrator `openstack`, the
//! profiles whose id starts with `openstack-` and the left-out records of security groups
//! (`/calico/openstack/v1/left-out/<group>`) ([`is_owned`]); it reads, writes and deletes
//! nothing else, so Kubernetes', Docker's or an operator's keys are never touched. Between
//! resyncs it compares against what it last wrote (cheap); a resync (the first pass, every
//! resync interval, and after any failed write) compares against etcd itself and so repairs
//! drift both ways: keys changed or deleted behind its back are rewritten, owned keys Neutron
//! no longer has are deleted.
//!
//! Failures: Neutron unreachable or answering badly → nothing is written, the pass is retried
//! with [`Backoff`]; an etcd failure → the same, and the next pass reads etcd again.

use std::collections::BTreeMap;

use calico_datastore::{Datastore, TxnOp};
use calico_model::Key;
use calico_model::key::Prefix;

use crate::error::SyncError;
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
        Ok(Key::LeftOut { .. }) => true,
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

    /// Puts and deletes.
    pub fn count(&self) -> (usize, usize) {
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
    let left_out = Prefix::LeftOut.to_string();
    for prefix in [HOST_PREFIX, PROFILE_PREFIX, left_out.as_str()] {
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
        assert!(is_owned("/calico/openstack/v1/left-out/sg-1"));
        assert!(!is_owned("/calico/openstack/v1/left-out/sg 1"));
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
        // A left-out record of a group that is gone: owned, so the resync deletes it.
        let stale = "/calico/openstack/v1/left-out/sg-gone";
        store.put(stale, "{}").await.unwrap();
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
        assert!(store.get(stale).await.unwrap().is_none());
        assert!(store.get(foreign).await.unwrap().is_some());
    }
}
