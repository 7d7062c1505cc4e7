//! The VXLAN device, its neighbours, forwarding entries and routes on a real kernel, in a
//! namespace made for the test, checked with `ip` and `bridge`.

use std::collections::BTreeMap;

use calico_dataplane::vxlan::{self, Vxlan, VxlanPlan};
use calico_linux::{Netlink, Netns};
use calico_model::endpoint::MacAddr;
use calico_model::tunnel::VxlanTunnel;
use calico_testkit::{NetNs, require_tool};

fn tunnel(address: &str, mac: u8, parent: &str) -> VxlanTunnel {
    VxlanTunnel {
        address: address.parse().unwrap(),
        mac: MacAddr([0x66, 0, 0, 0, 0, mac]),
        parent_address: parent.parse().unwrap(),
    }
}

fn plan(peers: &[(&str, VxlanTunnel)], routes: &[(&str, &str)]) -> VxlanPlan {
    VxlanPlan {
        local: Some(tunnel("10.65.0.1", 1, "10.99.0.11/24")),
        peers: peers
            .iter()
            .map(|(h, t)| ((*h).to_owned(), t.clone()))
            .collect(),
        routes: routes
            .iter()
            .map(|(d, g)| (d.parse().unwrap(), g.parse().unwrap()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[tokio::test]
async fn the_device_peers_and_routes_follow_the_plan() {
    require_tool("ip");
    require_tool("bridge");
    let ns = NetNs::new("vxlan");
    ns.run_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
        ],
        "",
    );
    ns.run_ok("ip", &["link", "set", "eth0", "up"], "");
    ns.run_ok("ip", &["link", "set", "eth0p", "up"], "");
    ns.run_ok("ip", &["addr", "add", "10.99.0.11/24", "dev", "eth0"], "");
    let vxlan = Vxlan::new(Netlink::connect(&Netns::named(ns.name())).unwrap());
    let h2 = tunnel("10.65.0.2", 2, "10.99.0.12/24");
    let h3 = tunnel("10.65.0.3", 3, "10.99.1.13/24");
    let full = plan(
        &[("h2", h2.clone()), ("h3", h3.clone())],
        &[
            ("10.65.0.2/32", "10.65.0.2"),
            ("10.65.0.3/32", "10.65.0.3"),
            ("10.65.2.1/32", "10.65.0.2"),
            ("10.65.3.1/32", "10.65.0.3"),
        ],
    );
    let changes = vxlan.sync(&full).await.unwrap();
    assert!(changes.device_created, "{changes:?}");
    assert_eq!(changes.routes_added.len(), 4);

    let link = ns.run_ok("ip", &["-d", "link", "show", vxlan::DEVICE], "");
    for expected in [
        "mtu 1450",
        "link/ether 66:00:00:00:00:01",
        "vxlan id 4096 local 10.99.0.11 dev eth0",
        "dstport 4789",
        "nolearning",
    ] {
        assert!(link.contains(expected), "{expected:?} in\n{link}");
    }
    let address = ns.run_ok("ip", &["-4", "addr", "show", "dev", vxlan::DEVICE], "");
    assert!(address.contains("inet 10.65.0.1/32"), "{address}");
    let fdb = ns.run_ok("bridge", &["fdb", "show", "dev", vxlan::DEVICE], "");
    assert!(
        fdb.contains("66:00:00:00:00:02 dst 10.99.0.12 self permanent")
            && fdb.contains("66:00:00:00:00:03 dst 10.99.1.13 self permanent"),
        "{fdb}"
    );
    let neigh = ns.run_ok("ip", &["neigh", "show", "dev", vxlan::DEVICE], "");
    assert!(
        neigh.contains("10.65.0.2 lladdr 66:00:00:00:00:02 PERMANENT"),
        "{neigh}"
    );
    let routes = ns.run_ok("ip", &["route", "show", "proto", "81"], "");
    assert!(
        routes.contains("10.65.3.1 via 10.65.0.3 dev vxlan.calico onlink"),
        "{routes}"
    );

    // Stateless: the same plan again changes nothing.
    let again = vxlan.sync(&full).await.unwrap();
    assert!(again.is_empty(), "{again:?}");

    // h3 goes: its entries and routes go, h2's stay.
    let smaller = plan(
        &[("h2", h2)],
        &[("10.65.0.2/32", "10.65.0.2"), ("10.65.2.1/32", "10.65.0.2")],
    );
    let changes = vxlan.sync(&smaller).await.unwrap();
    assert!(!changes.device_created);
    assert_eq!(changes.routes_removed.len(), 2, "{changes:?}");
    let fdb = ns.run_ok("bridge", &["fdb", "show", "dev", vxlan::DEVICE], "");
    assert!(
        !fdb.contains("10.99.1.13") && fdb.contains("10.99.0.12"),
        "{fdb}"
    );
    let routes = ns.run_ok("ip", &["route", "show", "proto", "81"], "");
    assert!(
        !routes.contains("10.65.3.1") && routes.contains("10.65.2.1"),
        "{routes}"
    );

    // A new tunnel address re-creates the device.
    let mut moved = smaller.clone();
    moved.local = Some(tunnel("10.65.0.9", 1, "10.99.0.11/24"));
    assert!(vxlan.sync(&moved).await.unwrap().device_created);
    let address = ns.run_ok("ip", &["-4", "addr", "show", "dev", vxlan::DEVICE], "");
    assert!(
        address.contains("inet 10.65.0.9/32") && !address.contains("10.65.0.1/"),
        "{address}"
    );

    // No VXLAN any more: the device and every tunnel route go.
    let changes = vxlan.sync(&VxlanPlan::default()).await.unwrap();
    assert!(changes.device_removed, "{changes:?}");
    assert!(!ns.run_ok("ip", &["link"], "").contains(vxlan::DEVICE));
    assert_eq!(
        ns.run_ok("ip", &["route", "show", "proto", "81"], "")
            .trim(),
        ""
    );
}
