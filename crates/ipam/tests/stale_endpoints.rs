//! `Ipam::check` against a real etcd sees an endpoint whose workload is gone: its addresses
//! are assigned and listed by its endpoint (so no leak), but its host's Felix reports it down
//! (the interface is missing, down or has no carrier). Felix's `up`, an inactive endpoint and
//! an endpoint no Felix has reported are not judged stale.

mod common;

use calico_datastore::Datastore;
use calico_model::status::EndpointOperState;
use common::{cluster, request};

const ENDPOINT: &str = "/calico/v1/host/node1/workload/docker/e4da01fbfec8/endpoint/d594538e6c7";
const STATUS: &str =
    "/calico/felix/v1/host/node1/workload/docker/e4da01fbfec8/endpoint/d594538e6c7";

fn endpoint(state: &str, ip: std::net::IpAddr) -> String {
    format!(
        r#"{{"state": "{state}", "name": "calid594538e6c7", "profile_ids": ["net1"], "ipv4_nets": ["{ip}/32"]}}"#
    )
}

#[tokio::test]
async fn an_endpoint_its_felix_reports_down_is_stale_and_check_is_not_clean() {
    let c = cluster(&["10.21.0.0/24"]).await;
    let assigned = c
        .ipam
        .auto_assign(&request("node1", "libnetwork.node1.1-0", 1, 0))
        .await
        .unwrap();
    let ip = assigned.ipv4[0];
    c.store
        .put(ENDPOINT, &endpoint("active", ip))
        .await
        .unwrap();

    // No Felix has reported it: not judged.
    assert!(c.ipam.check().await.unwrap().is_clean());

    c.store.put(STATUS, r#"{"status": "up"}"#).await.unwrap();
    assert!(c.ipam.check().await.unwrap().is_clean());

    c.store.put(STATUS, r#"{"status": "down"}"#).await.unwrap();
    let report = c.ipam.check().await.unwrap();
    assert!(!report.is_clean());
    assert!(report.leaks.is_empty(), "{report:?}");
    let stale = &report.stale_endpoints;
    assert_eq!(stale.len(), 1, "{report:?}");
    assert_eq!(
        (stale[0].key.as_str(), stale[0].host.as_str()),
        (ENDPOINT, "node1")
    );
    assert_eq!(stale[0].addresses, [ip]);
    assert_eq!(stale[0].status, EndpointOperState::Down);

    // An inactive endpoint is down by design.
    c.store
        .put(ENDPOINT, &endpoint("inactive", ip))
        .await
        .unwrap();
    assert!(c.ipam.check().await.unwrap().is_clean());

    // The endpoint deleted (as its orchestrator would): its address is now a leak, which
    // `fix` releases.
    c.store
        .put(ENDPOINT, &endpoint("active", ip))
        .await
        .unwrap();
    c.store.delete(ENDPOINT).await.unwrap();
    let report = c.ipam.check().await.unwrap();
    assert!(report.stale_endpoints.is_empty(), "{report:?}");
    assert_eq!(report.leaks.len(), 1, "{report:?}");
    c.ipam.fix(&report).await.unwrap();
    assert!(c.ipam.check().await.unwrap().is_clean());
}
