//! IPIP on a real kernel, in a namespace made for the test. This machine's kernel has no `ipip`
//! module: the sync reports the missing device and programs nothing. The routes are then
//! checked through a stand-in link of the same name (a veth called `tunl0`).

use std::collections::BTreeMap;

use calico_dataplane::ipip::{Ipip, IpipPlan};
use calico_linux::{Netlink, Netns};
use calico_testkit::{NetNs, require_tool};

fn plan(routes: &[(&str, &str)]) -> IpipPlan {
    IpipPlan {
        device: Some("tunl0".to_owned()),
        pools: vec!["10.65.0.0/16".parse().unwrap()],
        routes: routes
            .iter()
            .map(|(d, g)| (d.parse().unwrap(), g.parse().unwrap()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[tokio::test]
async fn a_missing_tunnel_device_is_reported_and_routes_follow_the_plan() {
    require_tool("ip");
    let ns = NetNs::new("ipip");
    let ipip = Ipip::new(Netlink::connect(&Netns::named(ns.name())).unwrap());
    let full = plan(&[
        ("10.65.2.1/32", "10.99.1.12"),
        ("10.65.3.1/32", "10.99.1.13"),
    ]);
    if !std::path::Path::new("/sys/module/ipip").exists() {
        let changes = ipip.sync(&full).await.unwrap();
        assert_eq!(changes.missing_device.as_deref(), Some("tunl0"));
        assert!(changes.routes_added.is_empty());
        assert_eq!(
            ns.run_ok("ip", &["route", "show", "proto", "81"], "")
                .trim(),
            ""
        );
    }

    // A stand-in for the module's device.
    ns.run_ok(
        "ip",
        &[
            "link", "add", "tunl0", "type", "veth", "peer", "name", "tunl0p",
        ],
        "",
    );
    let changes = ipip.sync(&full).await.unwrap();
    assert_eq!(changes.missing_device, None);
    assert_eq!(changes.routes_added.len(), 2);
    let link = ns.run_ok("ip", &["link", "show", "tunl0"], "");
    assert!(link.contains(",UP"), "the device is brought up: {link}");
    let routes = ns.run_ok("ip", &["route", "show", "proto", "81"], "");
    assert!(
        routes.contains("10.65.2.1 via 10.99.1.12 dev tunl0 onlink"),
        "{routes}"
    );
    assert!(
        ipip.sync(&full).await.unwrap().routes_added.is_empty(),
        "stateless"
    );

    let smaller = plan(&[("10.65.2.1/32", "10.99.1.12")]);
    assert_eq!(
        ipip.sync(&smaller).await.unwrap().routes_removed,
        ["10.65.3.1/32".parse().unwrap()]
    );
    // IPIP off: its routes go.
    ipip.sync(&IpipPlan::default()).await.unwrap();
    assert_eq!(
        ns.run_ok("ip", &["route", "show", "proto", "81"], "")
            .trim(),
        ""
    );
}
