//! Endpoint statuses in etcd (`/calico/felix/v1/host/<host>/workload/…/endpoint/<id>` and
//! `…/endpoint/<id>` for host endpoints): `up` for an endpoint that is programmed with its
//! interface up, `down` otherwise. Which status each endpoint has is a pure function
//! ([`desired_statuses`]); the [`StatusReporter`] writes only what changed since its last
//! report, deletes the statuses of endpoints that went away, and at start-up also those an
//! earlier run left behind.

use std::collections::BTreeMap;

use calico_calc::{DesiredState, EndpointKey};
use calico_datastore::Datastore;
use calico_model::Key;
use calico_model::key::Prefix;
use calico_model::status::{EndpointOperState, EndpointStatus};

/// Each local endpoint's status: `up` when its interface is up (and, for a workload, it is
/// active); `down` when inactive, when the interface is down or missing, and for a host endpoint
/// given by addresses that no interface holds; `error` for a workload endpoint Felix refused
/// because it is in a private address space (nothing is programmed for it).
pub fn desired_statuses(
    state: &DesiredState,
    interface_up: impl Fn(&str) -> bool,
) -> BTreeMap<EndpointKey, EndpointOperState> {
    let refused = (state.refused.keys()).map(|key| (key.clone(), EndpointOperState::Error));
    let programmed = state.endpoints.iter().map(|(key, program)| {
        let up = match (&program.interface, key) {
            (Some(iface), EndpointKey::Workload(_)) => program.active && interface_up(iface),
            (Some(iface), EndpointKey::Host(_)) => interface_up(iface),
            (None, _) => false,
        };
        let state = if up {
            EndpointOperState::Up
        } else {
            EndpointOperState::Down
        };
        (key.clone(), state)
    });
    refused.chain(programmed).collect()
}

/// Where Felix reports an endpoint's status.
pub fn status_key(endpoint: &EndpointKey) -> String {
    match endpoint {
        EndpointKey::Workload(id) => Key::WorkloadEndpointStatus(id.clone()).to_string(),
        EndpointKey::Host(id) => Key::HostEndpointStatus(id.clone()).to_string(),
    }
}

/// What this Felix has written.
#[derive(Debug)]
pub struct StatusReporter {
    hostname: String,
    /// Statuses as last written.
    reported: BTreeMap<EndpointKey, EndpointOperState>,
    /// Statuses left from before a restart have been cleaned up.
    leftovers_removed: bool,
}

impl StatusReporter {
    pub fn new(hostname: &str) -> StatusReporter {
        StatusReporter {
            hostname: hostname.to_owned(),
            reported: BTreeMap::new(),
            leftovers_removed: false,
        }
    }

    /// Makes etcd hold `desired`: writes the statuses that changed, deletes those of endpoints
    /// that went away. Returns whether every write succeeded (otherwise the next report tries
    /// again; nothing that failed is remembered as written).
    pub async fn report(
        &mut self,
        store: &dyn Datastore,
        desired: BTreeMap<EndpointKey, EndpointOperState>,
    ) -> bool {
        let mut ok = true;
        if !self.leftovers_removed {
            ok &= self.remove_leftovers(store, &desired).await;
        }
        let gone: Vec<EndpointKey> = self
            .reported
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            match store.delete(&status_key(&key)).await {
                Ok(_) => {
                    self.reported.remove(&key);
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot delete endpoint status");
                    ok = false;
                }
            }
        }
        for (key, state) in desired {
            if self.reported.get(&key) == Some(&state) {
                continue;
            }
            let value = serde_json::to_string(&EndpointStatus { status: state })
                .expect("a status serializes");
            match store.put(&status_key(&key), &value).await {
                Ok(_) => {
                    self.reported.insert(key, state);
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot write endpoint status");
                    ok = false;
                }
            }
        }
        ok
    }

    /// Deletes the statuses under this host that no endpoint of `desired` has (left by an
    /// earlier run) and remembers the others as written; other keys under the host (Felix's own
    /// status) stay.
    async fn remove_leftovers(
        &mut self,
        store: &dyn Datastore,
        desired: &BTreeMap<EndpointKey, EndpointOperState>,
    ) -> bool {
        let prefix = Prefix::Status {
            hostname: self.hostname.clone(),
        }
        .to_string();
        let pairs = match store.list(&prefix).await {
            Ok(pairs) => pairs,
            Err(error) => {
                tracing::warn!(%error, "cannot list endpoint statuses");
                return false;
            }
        };
        let mut ok = true;
        for pair in pairs {
            let endpoint = match Key::parse(&pair.key) {
                Ok(Key::WorkloadEndpointStatus(id)) => EndpointKey::Workload(id),
                Ok(Key::HostEndpointStatus(id)) => EndpointKey::Host(id),
                _ => continue,
            };
            if desired.contains_key(&endpoint) {
                // A restarted Felix rewrites only the statuses that differ.
                if let Ok(found) = serde_json::from_str::<EndpointStatus>(&pair.value) {
                    self.reported.insert(endpoint, found.status);
                }
                continue;
            }
            if let Err(error) = store.delete(&pair.key).await {
                tracing::warn!(%error, key = pair.key, "cannot delete a stale endpoint status");
                ok = false;
            }
        }
        self.leftovers_removed = ok;
        ok
    }
}

#[cfg(test)]
mod tests {
    use calico_calc::Calculator;
    use calico_datastore::MemoryDatastore;

    use super::*;

    const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
    const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";
    const WEB_STATUS: &str = "/calico/felix/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
    const DB_STATUS: &str = "/calico/felix/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";

    fn calculator() -> Calculator {
        let mut calc = Calculator::new("h1");
        let endpoint = |state: &str, iface: &str, ip: &str| {
            format!(
                r#"{{"state": "{state}", "name": "{iface}", "profile_ids": [], "ipv4_nets": ["{ip}/32"]}}"#
            )
        };
        calc.apply(WEB, Some(&endpoint("active", "caliweb", "10.0.0.1")));
        calc.apply(DB, Some(&endpoint("inactive", "calidb", "10.0.0.2")));
        calc.apply(
            "/calico/v1/host/h1/endpoint/by-address",
            Some(r#"{"expected_ipv4_addrs": ["192.0.2.1"]}"#),
        );
        calc
    }

    async fn status(store: &MemoryDatastore, key: &str) -> Option<String> {
        store.get(key).await.unwrap().map(|pair| pair.value)
    }

    #[test]
    fn up_needs_an_active_endpoint_on_an_up_interface() {
        let calc = calculator();
        let all_up = desired_statuses(calc.state(), |_| true);
        let states: Vec<(String, EndpointOperState)> = all_up
            .iter()
            .map(|(key, state)| (status_key(key), *state))
            .collect();
        assert_eq!(
            states,
            [
                (DB_STATUS.to_owned(), EndpointOperState::Down),
                (WEB_STATUS.to_owned(), EndpointOperState::Up),
                (
                    "/calico/felix/v1/host/h1/endpoint/by-address".to_owned(),
                    EndpointOperState::Down
                ),
            ],
            "inactive: down; a host endpoint no interface holds: down"
        );
        let web_down = desired_statuses(calc.state(), |iface| iface != "caliweb");
        assert_eq!(
            web_down
                .values()
                .filter(|s| **s == EndpointOperState::Up)
                .count(),
            0
        );
    }

    #[tokio::test]
    async fn only_changes_are_written_and_leftovers_go() {
        let store = MemoryDatastore::new();
        let leftover = "/calico/felix/v1/host/h1/workload/k8s/ns.old/endpoint/eth0";
        store.put(leftover, r#"{"status": "up"}"#).await.unwrap();
        store
            .put("/calico/felix/v1/host/h1/status", "{}")
            .await
            .unwrap();
        store
            .put(WEB_STATUS, r#"{"status": "down"}"#)
            .await
            .unwrap();

        let mut calc = calculator();
        let mut reporter = StatusReporter::new("h1");
        let desired = desired_statuses(calc.state(), |_| true);
        assert!(reporter.report(&store, desired.clone()).await);
        assert_eq!(
            status(&store, leftover).await,
            None,
            "left by an earlier run"
        );
        assert!(
            status(&store, "/calico/felix/v1/host/h1/status")
                .await
                .is_some()
        );
        assert_eq!(
            status(&store, WEB_STATUS).await.as_deref(),
            Some(r#"{"status":"up"}"#)
        );
        assert_eq!(
            status(&store, DB_STATUS).await.as_deref(),
            Some(r#"{"status":"down"}"#)
        );

        let revision = store.revision();
        assert!(reporter.report(&store, desired.clone()).await);
        assert_eq!(
            store.revision(),
            revision,
            "nothing changed: nothing written"
        );

        let mut restarted = StatusReporter::new("h1");
        assert!(restarted.report(&store, desired.clone()).await);
        assert_eq!(
            store.revision(),
            revision,
            "a restarted Felix finds the statuses as it would write them"
        );

        calc.apply(DB, None);
        let desired = desired_statuses(calc.state(), |_| true);
        assert!(reporter.report(&store, desired).await);
        assert_eq!(status(&store, DB_STATUS).await, None, "the endpoint went");
        assert_eq!(store.revision(), revision + 1, "one delete, no rewrite");
    }

    #[tokio::test]
    async fn a_failed_write_is_retried_by_the_next_report() {
        let store = MemoryDatastore::new();
        let calc = calculator();
        let mut reporter = StatusReporter::new("h1");
        let desired = desired_statuses(calc.state(), |_| true);
        store.set_reachable(false);
        assert!(!reporter.report(&store, desired.clone()).await);
        store.set_reachable(true);
        assert_eq!(status(&store, WEB_STATUS).await, None);
        assert!(reporter.report(&store, desired).await);
        assert_eq!(
            status(&store, WEB_STATUS).await.as_deref(),
            Some(r#"{"status":"up"}"#)
        );
    }

    #[tokio::test]
    async fn a_private_space_endpoint_is_refused_not_programmed_and_reported_error() {
        const TENANT: &str = "/calico/v1/host/h1/workload/k8s/ns.tenant/endpoint/eth0";
        const TENANT_STATUS: &str = "/calico/felix/v1/host/h1/workload/k8s/ns.tenant/endpoint/eth0";
        let wep = |space: &str| {
            format!(
                r#"{{"state": "active", "name": "calitenant", "profile_ids": [], "ipv4_nets": ["10.0.0.9/32"]{space}}}"#
            )
        };
        let mut calc = calculator();
        let applied = calc.apply(TENANT, Some(&wep(r#", "address_space": "tenant-a""#)));
        let calico_calc::Applied::Invalid { reason } = applied else {
            panic!("a private-space endpoint must be refused, got {applied:?}");
        };
        for part in ["calitenant", "\"tenant-a\"", "not yet enforced by Felix"] {
            assert!(reason.contains(part), "{part} missing: {reason}");
        }
        let key = EndpointKey::Workload(match Key::parse(TENANT).unwrap() {
            Key::WorkloadEndpoint(id) => id,
            other => panic!("{other:?}"),
        });
        let state = calc.state();
        assert!(!state.endpoints.contains_key(&key), "no dispatch entry");
        assert!(
            !state.routes().values().any(|iface| *iface == "calitenant"),
            "no route: {:?}",
            state.routes()
        );
        let desired = desired_statuses(state, |_| true);
        assert_eq!(desired.get(&key), Some(&EndpointOperState::Error));
        let store = MemoryDatastore::new();
        let mut reporter = StatusReporter::new("h1");
        assert!(reporter.report(&store, desired).await);
        assert_eq!(
            status(&store, TENANT_STATUS).await.as_deref(),
            Some(r#"{"status":"error"}"#)
        );

        // Back in the shared space (`"shared"` is the shared space too): programmed, up.
        calc.take_changes();
        let applied = calc.apply(TENANT, Some(&wep(r#", "address_space": "shared""#)));
        assert_eq!(applied, calico_calc::Applied::Changed);
        assert!(calc.take_changes().endpoints.contains(&key));
        assert!(calc.state().refused.is_empty());
        assert!(calc.state().endpoints.contains_key(&key));
        let desired = desired_statuses(calc.state(), |_| true);
        assert_eq!(desired.get(&key), Some(&EndpointOperState::Up));

        // Refused again, then deleted: no status left.
        calc.apply(TENANT, Some(&wep(r#", "address_space": "tenant-a""#)));
        assert!(!calc.state().endpoints.contains_key(&key));
        calc.apply(TENANT, None);
        assert!(calc.state().refused.is_empty());
        assert!(!desired_statuses(calc.state(), |_| true).contains_key(&key));
    }
}
