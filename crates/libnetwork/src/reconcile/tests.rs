use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use calico_datastore::{Datastore, MemoryDatastore};
use calico_linux::{Netlink, Netns};
use calico_model::IpVersion;
use calico_testkit::NetNs;

use super::{Collected, GRACE, SETTLE};
use crate::docker::DockerApi;
use crate::driver::Driver;
use crate::endpoint::EndpointSpec;
use crate::pending::{self, Pending};
use crate::pool::{AddressWanted, PoolId};

const EP: &str = "d594538e6c7555095dd637dff4235631d8f2f4370e020b727f5f899696519a93";
const KEY: &str = "/calico/v1/host/h1/workload/docker/e4da01fbfec8/endpoint/\
    d594538e6c7555095dd637dff4235631d8f2f4370e020b727f5f899696519a93";

/// A driver of host `h1` on an in-memory datastore with a pool, its netlink in `netns`.
async fn driver(netns: &Netns) -> Driver {
    let store = Arc::new(MemoryDatastore::new());
    store
        .put(
            "/calico/v1/ipam/v4/pool/10.65.0.0-16",
            r#"{"cidr": "10.65.0.0/16"}"#,
        )
        .await
        .unwrap();
    let netlink = Netlink::connect(netns).unwrap();
    let docker = DockerApi::new("/nonexistent/docker.sock".into());
    Driver::new("h1".to_owned(), store, netlink, docker)
}

async fn address(driver: &Driver) -> IpAddr {
    let any = AddressWanted::Any(PoolId::Any(IpVersion::V4));
    let text = driver.request_address(any).await.unwrap();
    text.parse::<ipnet::IpNet>().unwrap().addr()
}

/// The endpoint `EP` of sandbox `e4da01fbfec8` with `ip`, as `Join` writes it.
async fn endpoint(driver: &Driver, ip: IpAddr) {
    let mac = calico_model::MacAddr([0xee, 0, 0, 0, 0, 1]);
    let endpoint = crate::endpoint::endpoint("calid594538e6c7", mac, "net1", &[ip]);
    let value = crate::error::DriverError::value_of(KEY, &endpoint).unwrap();
    driver.store().put(KEY, &value).await.unwrap();
}

async fn assigned(driver: &Driver, ip: IpAddr) -> bool {
    driver.ipam.ip_info(ip).await.unwrap().is_some()
}

/// Of two unused addresses, the one a pending record holds stays; the other is released
/// once older than the grace period, and not before.
#[tokio::test]
async fn unused_addresses_go_after_the_grace_period_unless_pending() {
    let driver = driver(&Netns::current()).await;
    let (waiting, leaked) = (address(&driver).await, address(&driver).await);
    let spec = EndpointSpec {
        addresses: vec![waiting],
        mac: None,
    };
    let record = Pending::new("42dd", "net1", &spec).to_json();
    let key = pending::key("h1", "d594538e6c7555095dd6");
    driver.store().put(&key, &record).await.unwrap();

    let now = SystemTime::now();
    assert!(driver.leaked_addresses(now).await.unwrap().is_empty());
    let later = now + GRACE + Duration::from_secs(1);
    assert_eq!(driver.leaked_addresses(later).await.unwrap(), [leaked]);
    assert_eq!(driver.reconcile().await.unwrap(), Collected::default());
}

/// An endpoint key whose veth does not exist goes (its container died while nobody was
/// listening), and the address it held with it.
#[tokio::test]
async fn endpoint_keys_without_their_veth_go_with_their_addresses() {
    let driver = driver(&Netns::current()).await;
    let ip = address(&driver).await;
    endpoint(&driver, ip).await;
    let collected = driver.reconcile().await.unwrap();
    let expected = Collected {
        endpoint_keys: vec![KEY.to_owned()],
        veths: vec![],
        addresses: vec![ip],
    };
    assert_eq!(collected, expected);
    assert!(driver.store().get(KEY).await.unwrap().is_none());
    assert!(!assigned(&driver, ip).await, "{ip} still assigned");
}

/// A veth whose container end is back in the driver's namespace (dockerd tore the sandbox
/// down while the driver was away) is a gone endpoint once it has stayed so for the settling
/// time: the pair, the key and the address go. One whose end is in another namespace (the
/// sandbox) is live and stays.
#[tokio::test]
async fn a_veth_whose_peer_came_back_goes_once_settled_and_a_live_one_stays() {
    let host = NetNs::new("lnw-rec");
    let sandbox = NetNs::new("lnw-sbx");
    let driver = driver(&Netns::named(host.name())).await;
    let ip = address(&driver).await;
    endpoint(&driver, ip).await;
    host.run_ok(
        "ip",
        &[
            "link",
            "add",
            "calid594538e6c7",
            "type",
            "veth",
            "peer",
            "name",
            "tmpd594538e6c7",
        ],
        "",
    );

    let now = Instant::now();
    let wall = SystemTime::now();
    let first = driver.reconcile_at(now, wall).await.unwrap();
    assert_eq!(first, Collected::default(), "collected before it settled");
    assert!(driver.store().get(KEY).await.unwrap().is_some());

    // In the sandbox, the same pair is a live endpoint, whatever the time.
    host.run_ok(
        "ip",
        &["link", "set", "tmpd594538e6c7", "netns", sandbox.name()],
        "",
    );
    let later = now + SETTLE + Duration::from_secs(1);
    let live = driver.reconcile_at(later, wall).await.unwrap();
    assert_eq!(live, Collected::default(), "collected a live endpoint");

    // Back in the driver's namespace, as dockerd leaves it: collected once settled.
    sandbox.run_ok(
        "ip",
        &["link", "set", "tmpd594538e6c7", "netns", host.name()],
        "",
    );
    assert_eq!(
        driver.reconcile_at(later, wall).await.unwrap(),
        Collected::default()
    );
    let settled = later + SETTLE;
    let collected = driver.reconcile_at(settled, wall).await.unwrap();
    let expected = Collected {
        endpoint_keys: vec![KEY.to_owned()],
        veths: vec!["calid594538e6c7".to_owned()],
        addresses: vec![ip],
    };
    assert_eq!(collected, expected);
    let links = host.run_ok("ip", &["-o", "link"], "");
    assert!(!links.contains("calid594538e6c7"), "{links}");
    assert!(driver.store().get(KEY).await.unwrap().is_none());
    assert!(!assigned(&driver, ip).await, "{ip} still assigned");
    let _ = EP;
}
