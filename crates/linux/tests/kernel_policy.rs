//! Routes with a metric in any table, source rules and a link's MAC on a real kernel, inside a
//! namespace made for each test, checked both through the API and with `ip`.

use calico_linux::{Family, Netlink, Netns, PolicyRule, TableRoute};
use calico_testkit::{NetNs, require_tool};

/// A veth pair `name`/`<name>p`, both up; returns the index of `name`.
fn veth(ns: &NetNs, name: &str) -> u32 {
    let peer = format!("{name}p");
    ns.run_ok(
        "ip",
        &["link", "add", name, "type", "veth", "peer", "name", &peer],
        "",
    );
    ns.run_ok("ip", &["link", "set", name, "up"], "");
    ns.run_ok("ip", &["link", "set", &peer, "up"], "");
    let out = ns.run_ok("cat", &[&format!("/sys/class/net/{name}/ifindex")], "");
    out.trim().parse().unwrap()
}

fn route(destination: &str, gateway: Option<&str>, ifindex: u32, metric: u32) -> TableRoute {
    TableRoute {
        destination: destination.parse().unwrap(),
        gateway: gateway.map(|g| g.parse().unwrap()),
        ifindex,
        metric,
        table: 254,
    }
}

#[tokio::test]
async fn routes_keep_their_metric_and_table_and_are_never_replaced() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-metric");
    let index = veth(&ns, "eth1");
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let gateway = route("169.254.1.1/32", None, index, 1025);
    let default = route("0.0.0.0/0", Some("169.254.1.1"), index, 1025);
    let standby = TableRoute {
        table: 1025,
        ..default
    };
    for r in [&gateway, &default, &standby] {
        netlink.add_table_route(r).await.unwrap();
    }
    let again = netlink.add_table_route(&default).await.unwrap_err();
    assert!(again.to_string().contains("File exists"), "{again}");
    let v6 = route("::/0", Some("fe80::1"), index, 1025);
    netlink.add_table_route(&v6).await.unwrap();

    let listed = netlink.table_routes(Family::V4).await.unwrap();
    for r in [&gateway, &default, &standby] {
        assert!(listed.contains(r), "{r} not in {listed:?}");
    }
    // The local table holds local and broadcast routes, not unicast ones.
    assert!(listed.iter().all(|r| r.table != 255), "{listed:?}");
    assert!(
        netlink
            .table_routes(Family::V6)
            .await
            .unwrap()
            .contains(&v6)
    );
    let shown = ns.run_ok("ip", &["route", "show", "table", "all"], "");
    assert!(
        shown.contains("default via 169.254.1.1 dev eth1 table 1025 metric 1025"),
        "{shown}"
    );
    assert!(
        shown.contains("169.254.1.1 dev eth1 scope link metric 1025"),
        "{shown}"
    );

    netlink.delete_table_route(&standby).await.unwrap();
    netlink.delete_table_route(&standby).await.unwrap(); // already gone is fine
    let listed = netlink.table_routes(Family::V4).await.unwrap();
    assert!(!listed.contains(&standby) && listed.contains(&default));
}

#[tokio::test]
async fn source_rules_are_added_listed_and_deleted() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-rule");
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let v4 = PolicyRule {
        from: "10.0.0.6/32".parse().unwrap(),
        table: 1025,
        priority: 1000,
    };
    let v6 = PolicyRule {
        from: "fd00::6/128".parse().unwrap(),
        table: 100,
        priority: 1000,
    };
    netlink.add_policy_rule(&v4).await.unwrap();
    netlink.add_policy_rule(&v6).await.unwrap();
    let again = netlink.add_policy_rule(&v4).await.unwrap_err();
    assert!(again.to_string().contains("File exists"), "{again}");
    // A rule that also selects an input interface is not a source rule.
    ns.run_ok(
        "ip",
        &[
            "rule", "add", "from", "10.0.0.7", "iif", "lo", "lookup", "7", "priority", "900",
        ],
        "",
    );

    let shown = ns.run_ok("ip", &["rule"], "");
    assert!(
        shown.contains("1000:\tfrom 10.0.0.6 lookup 1025"),
        "{shown}"
    );
    let shown6 = ns.run_ok("ip", &["-6", "rule"], "");
    assert!(
        shown6.contains("1000:\tfrom fd00::6 lookup 100"),
        "{shown6}"
    );
    let rules = netlink.policy_rules(Family::V4).await.unwrap();
    let main: PolicyRule = PolicyRule {
        from: "0.0.0.0/0".parse().unwrap(),
        table: 254,
        priority: 32766,
    };
    assert!(rules.contains(&v4) && rules.contains(&main), "{rules:?}");
    assert!(rules.iter().all(|r| r.table != 7), "{rules:?}");
    assert!(
        netlink
            .policy_rules(Family::V6)
            .await
            .unwrap()
            .contains(&v6)
    );

    netlink.delete_policy_rule(&v4).await.unwrap();
    netlink.delete_policy_rule(&v4).await.unwrap(); // already gone is fine
    assert!(
        !netlink
            .policy_rules(Family::V4)
            .await
            .unwrap()
            .contains(&v4)
    );
    assert!(!ns.run_ok("ip", &["rule"], "").contains("lookup 1025"));
}

#[tokio::test]
async fn a_link_takes_the_mac_it_is_given() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-mac");
    let index = veth(&ns, "eth2");
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let mac = [0xc2, 0x00, 0x00, 0x00, 0x00, 0x42];
    netlink.set_mac(index, mac).await.unwrap();
    let link = netlink.link_by_name("eth2").await.unwrap().unwrap();
    assert_eq!(link.mac, Some(mac));
    let shown = ns.run_ok("ip", &["link", "show", "eth2"], "");
    assert!(shown.contains("c2:00:00:00:00:42"), "{shown}");
}
