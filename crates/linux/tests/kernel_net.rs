//! Routes, neighbours, link events and sysctls on a real kernel, inside a namespace made for
//! each test, checked both through the API and with `ip` / `sysctl`.

use std::time::Duration;

use calico_linux::{
    LinkEvent, LinkEvents, Neighbour, Netlink, Netns, Route, flush_conntrack, get_sysctl,
    set_sysctl,
};
use calico_testkit::{NetNs, require_tool};

fn veth(ns: &NetNs, name: &str) -> u32 {
    ns.run_ok(
        "ip",
        &[
            "link",
            "add",
            name,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{name}p"),
        ],
        "",
    );
    ns.run_ok("ip", &["link", "set", name, "up"], "");
    ns.run_ok("ip", &["link", "set", &format!("{name}p"), "up"], "");
    let out = ns.run_ok("cat", &[&format!("/sys/class/net/{name}/ifindex")], "");
    out.trim().parse().unwrap()
}

#[tokio::test]
async fn routes_are_added_listed_and_deleted_by_protocol() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-route");
    let index = veth(&ns, "cali0a");
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let v4 = Route {
        destination: "10.65.0.2/32".parse().unwrap(),
        ifindex: index,
    };
    let v6 = Route {
        destination: "fd00::2/128".parse().unwrap(),
        ifindex: index,
    };
    netlink.replace_route(&v4).await.unwrap();
    netlink.replace_route(&v6).await.unwrap();
    netlink.replace_route(&v4).await.unwrap(); // replace is idempotent
    // Someone else's route on the same interface is not ours.
    ns.run_ok("ip", &["route", "add", "10.65.0.9/32", "dev", "cali0a"], "");
    let mut routes = netlink.calico_routes().await.unwrap();
    routes.sort();
    assert_eq!(routes, vec![v4, v6]);
    let shown = ns.run_ok("ip", &["route", "show", "proto", "80"], "");
    assert!(shown.contains("10.65.0.2 dev cali0a scope link"), "{shown}");
    let shown6 = ns.run_ok("ip", &["-6", "route", "show", "proto", "80"], "");
    assert!(shown6.contains("fd00::2 dev cali0a"), "{shown6}");

    netlink.delete_route(&v4).await.unwrap();
    netlink.delete_route(&v4).await.unwrap(); // already gone is fine
    assert_eq!(netlink.calico_routes().await.unwrap(), vec![v6]);
    assert!(!ns.run_ok("ip", &["route"], "").contains("10.65.0.2"));
}

#[tokio::test]
async fn static_neighbours_for_ipv4_and_ipv6() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-neigh");
    let index = veth(&ns, "cali0b");
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let mac = [0xee, 0xee, 0xee, 0x00, 0x00, 0x02];
    let v4 = Neighbour {
        ip: "10.65.0.2".parse().unwrap(),
        mac,
        ifindex: index,
    };
    let v6 = Neighbour {
        ip: "fd00::2".parse().unwrap(),
        mac,
        ifindex: index,
    };
    netlink.replace_neighbour(&v4).await.unwrap();
    netlink.replace_neighbour(&v6).await.unwrap();
    let shown = ns.run_ok("ip", &["neigh", "show", "dev", "cali0b"], "");
    assert!(
        shown.contains("10.65.0.2 lladdr ee:ee:ee:00:00:02 PERMANENT"),
        "{shown}"
    );
    let shown6 = ns.run_ok("ip", &["-6", "neigh", "show", "dev", "cali0b"], "");
    assert!(
        shown6.contains("fd00::2 lladdr ee:ee:ee:00:00:02 PERMANENT"),
        "{shown6}"
    );
    let mut listed = netlink.permanent_neighbours().await.unwrap();
    listed.sort();
    assert_eq!(listed, vec![v4, v6]);
    netlink.delete_neighbour(&v4).await.unwrap();
    netlink.delete_neighbour(&v4).await.unwrap();
    assert_eq!(netlink.permanent_neighbours().await.unwrap(), vec![v6]);
}

#[tokio::test]
async fn links_are_found_by_name_with_their_mac() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-link");
    let index = veth(&ns, "cali0c");
    ns.run_ok(
        "ip",
        &["link", "set", "cali0c", "address", "ee:ee:ee:ee:ee:ee"],
        "",
    );
    let netlink = Netlink::connect(&Netns::named(ns.name())).unwrap();
    let link = netlink
        .link_by_name("cali0c")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(
        (link.index, link.mac, link.up),
        (index, Some([0xee; 6]), true)
    );
    assert_eq!(netlink.link_by_name("nope0").await.unwrap(), None);
    let names: Vec<String> = netlink
        .links()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert!(
        names.contains(&"lo".to_owned()) && names.contains(&"cali0cp".to_owned()),
        "{names:?}"
    );
}

async fn next_about(events: &mut LinkEvents, name: &str, added: bool) {
    let wait = async {
        loop {
            match events.next().await.expect("events keep coming") {
                LinkEvent::Changed(link) if added && link.name == name => return,
                LinkEvent::Removed { name: n, .. } if !added && n == name => return,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no {} event for {name}",
                if added { "add" } else { "remove" }
            )
        });
}

#[tokio::test]
async fn link_events_report_interfaces_coming_and_going() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-events");
    let mut events = LinkEvents::subscribe(&Netns::named(ns.name())).unwrap();
    veth(&ns, "cali0d");
    next_about(&mut events, "cali0d", true).await;
    ns.run_ok("ip", &["link", "del", "cali0d"], "");
    next_about(&mut events, "cali0d", false).await;
}

#[test]
fn sysctls_are_set_in_the_namespace_only() {
    require_tool("ip");
    let ns = NetNs::new("rtnl-sysctl");
    let netns = Netns::named(ns.name());
    let here = get_sysctl(&Netns::current(), "net/ipv4/ip_forward").unwrap();
    let target = if get_sysctl(&netns, "net/ipv4/ip_forward").unwrap() == "1" {
        "0"
    } else {
        "1"
    };
    assert!(set_sysctl(&netns, "net/ipv4/ip_forward", target).unwrap());
    assert!(
        !set_sysctl(&netns, "net/ipv4/ip_forward", target).unwrap(),
        "second write is a no-op"
    );
    assert_eq!(
        ns.run_ok("sysctl", &["-n", "net.ipv4.ip_forward"], "")
            .trim(),
        target
    );
    assert_eq!(
        get_sysctl(&Netns::current(), "net/ipv4/ip_forward").unwrap(),
        here
    );
    let err = set_sysctl(&netns, "net/ipv4/conf/nope0/proxy_arp", "1").unwrap_err();
    assert!(
        err.to_string().contains("net/ipv4/conf/nope0/proxy_arp"),
        "{err}"
    );
}

/// Per-interface settings (what the dataplane sets on each workload interface) land on the
/// namespace's interface.
#[test]
fn interface_sysctls_are_set_on_the_namespace_interface() {
    require_tool("ip");
    let ns = NetNs::new("nl-ifsysctl");
    ns.run_ok(
        "ip",
        &[
            "link", "add", "cali0e", "type", "veth", "peer", "name", "cali0ep",
        ],
        "",
    );
    let netns = Netns::named(ns.name());
    let path = "net/ipv4/conf/cali0e/proxy_arp";

    // The interface only exists inside the namespace, so reaching it proves we are in there.
    assert_eq!(get_sysctl(&netns, path).unwrap(), "0");
    assert!(
        get_sysctl(&Netns::current(), path).is_err(),
        "cali0e is not in the current namespace"
    );

    assert!(set_sysctl(&netns, path, "1").unwrap());
    assert!(
        !set_sysctl(&netns, path, "1").unwrap(),
        "second write is a no-op"
    );
    assert_eq!(get_sysctl(&netns, path).unwrap(), "1");
    assert_eq!(
        ns.run_ok("sysctl", &["-n", "net.ipv4.conf.cali0e.proxy_arp"], "")
            .trim(),
        "1"
    );

    // IPv6 settings of the same interface work the same way.
    let ndp = "net/ipv6/conf/cali0e/proxy_ndp";
    if get_sysctl(&netns, ndp).is_ok() {
        set_sysctl(&netns, ndp, "1").unwrap();
        assert_eq!(
            ns.run_ok("sysctl", &["-n", "net.ipv6.conf.cali0e.proxy_ndp"], "")
                .trim(),
            "1"
        );
    }

    // Once the interface is gone its settings are too, and the error names the path.
    ns.run_ok("ip", &["link", "del", "cali0e"], "");
    let err = set_sysctl(&netns, path, "1").unwrap_err();
    assert!(err.to_string().contains(path), "{err}");
}

/// Connections are forgotten by address over ctnetlink: original or reply end, NAT'd or not,
/// in a zone or not, both families; connections of other addresses stay.
#[tokio::test]
async fn conntrack_entries_of_removed_addresses_go_and_others_stay() {
    require_tool("conntrack");
    let ns = NetNs::new("calico-ct");
    let insert = |args: &str| {
        let mut all = vec!["-I", "-t", "120"];
        all.extend(args.split_whitespace());
        ns.run_ok("conntrack", &all, "");
    };
    let tcp = "-p tcp --state ESTABLISHED -u SEEN_REPLY --dport 80";
    // To the workload that goes, by its own address.
    insert(&format!("{tcp} -s 10.0.0.1 -d 10.0.0.2 --sport 1000"));
    // To a service, DNAT'd to it: only the reply tuple names it.
    insert(&format!(
        "{tcp} -s 10.0.0.5 -d 10.96.0.1 -r 10.0.0.2 -q 10.0.0.5 --sport 1001 \
         --reply-port-src 80 --reply-port-dst 1001"
    ));
    // From it, in a conntrack zone.
    insert(&format!("{tcp} -s 10.0.0.2 -d 10.0.0.7 --sport 1002 -w 7"));
    // IPv6, and connections between others.
    insert("-p udp -s fd00::1 -d fd00::2 --sport 1000 --dport 53");
    insert(&format!("{tcp} -s 10.0.0.3 -d 10.0.0.4 --sport 1003"));
    insert("-p udp -s fd00::3 -d fd00::4 --sport 1000 --dport 53");
    let listed = |family: &str| ns.run_ok("conntrack", &["-L", "-f", family], "");

    let netns = Netns::named(ns.name());
    let gone = ["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()];
    assert_eq!(flush_conntrack(&netns, &gone).await.unwrap(), 4);
    let (v4, v6) = (listed("ipv4"), listed("ipv6"));
    assert!(
        !v4.contains("10.0.0.2") && !v6.contains("fd00::2"),
        "{v4}{v6}"
    );
    assert!(
        v4.contains("src=10.0.0.3") && v6.contains("src=fd00::3"),
        "{v4}{v6}"
    );
    assert_eq!(
        flush_conntrack(&netns, &gone).await.unwrap(),
        0,
        "nothing left to delete is fine"
    );
}
