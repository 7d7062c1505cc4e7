//! Following the main routing table over netlink (what the soak's route monitor reads instead
//! of running `ip monitor route`), on a real kernel in a namespace made for the test.

use std::time::Duration;

use calico_linux::{MainRoute, Netlink, Netns, RouteEvent, RouteEvents};
use calico_testkit::{NetNs, require_tool};

/// The next event about `destination`, within 10 s.
async fn next_about(events: &mut RouteEvents, destination: &str) -> RouteEvent {
    let destination = destination.parse().unwrap();
    let wait = async {
        loop {
            let event = events.next().await.expect("events keep coming");
            let about = match event {
                RouteEvent::Added(route) => route.destination,
                RouteEvent::Deleted { destination } => destination,
            };
            if about == destination {
                return event;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no event about {destination}"))
}

#[tokio::test]
async fn the_main_table_is_read_then_followed() {
    require_tool("ip");
    let ns = NetNs::new("route-events");
    let veth = [
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
    ];
    ns.run_ok("ip", &veth, "");
    ns.run_ok("ip", &["link", "set", "eth0", "up"], "");
    ns.run_ok("ip", &["link", "set", "eth0p", "up"], "");
    ns.run_ok("ip", &["addr", "add", "10.99.0.1/24", "dev", "eth0"], "");
    ns.run_ok(
        "ip",
        &["route", "add", "10.65.1.0/26", "via", "10.99.0.13"],
        "",
    );
    let netns = Netns::named(ns.name());
    let netlink = Netlink::connect(&netns).unwrap();
    let table = netlink.main_routes().await.unwrap();
    let via = MainRoute {
        destination: "10.65.1.0/26".parse().unwrap(),
        gateway: Some("10.99.0.13".parse().unwrap()),
    };
    assert!(table.contains(&via), "{table:?}");
    assert!(
        table.iter().all(|r| !r.destination.addr().is_loopback()),
        "the local table is not the main one: {table:?}"
    );

    let mut events = RouteEvents::subscribe(&netns).unwrap();
    ns.run_ok("ip", &["route", "add", "blackhole", "10.65.2.0/26"], "");
    let hole = MainRoute {
        destination: "10.65.2.0/26".parse().unwrap(),
        gateway: None,
    };
    assert_eq!(
        next_about(&mut events, "10.65.2.0/26").await,
        RouteEvent::Added(hole)
    );
    ns.run_ok("ip", &["route", "del", "10.65.1.0/26"], "");
    assert_eq!(
        next_about(&mut events, "10.65.1.0/26").await,
        RouteEvent::Deleted {
            destination: "10.65.1.0/26".parse().unwrap()
        }
    );
    // Another table's route is not announced as the main table's.
    ns.run_ok(
        "ip",
        &[
            "route",
            "add",
            "10.65.3.0/26",
            "dev",
            "eth0",
            "table",
            "100",
        ],
        "",
    );
    ns.run_ok(
        "ip",
        &["route", "replace", "10.65.2.0/26", "via", "10.99.0.12"],
        "",
    );
    assert_eq!(
        next_about(&mut events, "10.65.2.0/26").await,
        RouteEvent::Added(MainRoute {
            destination: "10.65.2.0/26".parse().unwrap(),
            gateway: Some("10.99.0.12".parse().unwrap()),
        })
    );
}
