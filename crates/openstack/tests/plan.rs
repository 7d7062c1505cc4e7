//! The answer must not depend on the path: whatever etcd held before (stale owned keys, keys
//! changed behind the sync's back) and whatever sequence of Neutron states came, executing the
//! plans leaves etcd's owned keys equal to the last desired state, and every key the sync does
//! not own as it was. The incremental path (planning against what it wrote) and the resync path
//! (planning against etcd) agree.

use std::collections::BTreeMap;

use calico_datastore::{Datastore, MemoryDatastore};
use calico_openstack::sync::{execute, plan, read_owned};
use proptest::prelude::*;

/// Keys the sync owns and keys it must never touch.
const OWNED: [&str; 6] = [
    "/calico/v1/host/h1/workload/openstack/vm1/endpoint/p1",
    "/calico/v1/host/h2/workload/openstack/vm2/endpoint/p2",
    "/calico/v1/host/h2/workload/openstack/vm2/endpoint/p3",
    "/calico/v1/policy/profile/openstack-sg-a/rules",
    "/calico/v1/policy/profile/openstack-sg-a/tags",
    "/calico/v1/policy/profile/openstack-port-security-disabled/rules",
];
const FOREIGN: [&str; 3] = [
    "/calico/v1/host/h1/workload/k8s/ns.pod/endpoint/eth0",
    "/calico/v1/policy/profile/k8s_ns.default/rules",
    "/calico/v1/policy/profile/sg-a/tags",
];

/// A state of the owned keys: each present or not, with one of a few values.
fn state() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::vec(proptest::option::of(0u8..3), OWNED.len()).prop_map(|values| {
        OWNED
            .iter()
            .zip(values)
            .filter_map(|(key, value)| value.map(|v| ((*key).to_owned(), format!("{{\"v\":{v}}}"))))
            .collect()
    })
}

proptest! {
    #[test]
    fn plans_converge_to_the_last_desired_state(
        before in state(),
        steps in proptest::collection::vec((state(), any::<bool>()), 1..6),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = MemoryDatastore::new();
            for key in FOREIGN {
                store.put(key, "\"theirs\"").await.unwrap();
            }
            for (key, value) in &before {
                store.put(key, value).await.unwrap();
            }
            let mut written: Option<BTreeMap<String, String>> = None;
            for (desired, resync) in &steps {
                let known = match (&written, resync) {
                    (Some(written), false) => written.clone(),
                    _ => read_owned(&store).await.unwrap(),
                };
                execute(&store, &plan(desired, &known)).await.unwrap();
                written = Some(desired.clone());
                prop_assert_eq!(&read_owned(&store).await.unwrap(), desired);
            }
            for key in FOREIGN {
                let value = store.get(key).await.unwrap().map(|pair| pair.value);
                prop_assert_eq!(value.as_deref(), Some("\"theirs\""), "{} was touched", key);
            }
            Ok(())
        })?;
    }
}
