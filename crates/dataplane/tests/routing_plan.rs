//! The routing plan as a value: what a sync would do, computed from the desired state and a
//! description of the kernel, without root.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_calc::{DesiredState, EndpointKey, EndpointProgram};
use calico_dataplane::routing::plan;
use calico_dataplane::{KernelLink, KernelRoutingState, RoutingPlan};
use calico_linux::{Family, Neighbour, Route, workload_interface_sysctls};
use calico_model::key::{HostEndpointId, WorkloadEndpointId};
use ipnet::IpNet;

const MAC: [u8; 6] = [0xee, 0xee, 0xee, 0xee, 0xee, 0x01];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn host_route(addr: &str, ifindex: u32) -> Route {
    Route {
        destination: IpNet::from(ip(addr)),
        ifindex,
    }
}

fn neighbour(addr: &str, ifindex: u32) -> Neighbour {
    Neighbour {
        ip: ip(addr),
        mac: MAC,
        ifindex,
    }
}

fn workload(interface: &str, addresses: &[&str], active: bool) -> EndpointProgram {
    EndpointProgram {
        interface: Some(interface.to_owned()),
        active,
        tiers: Vec::new(),
        untracked_tiers: Vec::new(),
        profiles: Vec::new(),
        missing_profile: false,
        addresses: addresses.iter().map(|a| ip(a)).collect(),
        mac: Some(MAC),
        nat: Vec::new(),
    }
}

fn key(endpoint: &str) -> EndpointKey {
    EndpointKey::Workload(WorkloadEndpointId {
        hostname: "h1".to_owned(),
        orchestrator: "k8s".to_owned(),
        workload: format!("ns.{endpoint}"),
        endpoint: "eth0".to_owned(),
    })
}

fn desired(endpoints: Vec<(&str, EndpointProgram)>) -> DesiredState {
    DesiredState {
        endpoints: endpoints
            .into_iter()
            .map(|(name, program)| (key(name), program))
            .collect(),
        ..DesiredState::default()
    }
}

fn link(index: u32, name: &str, up: bool) -> KernelLink {
    KernelLink {
        index,
        name: name.to_owned(),
        up,
        ipv6: false,
    }
}

/// A kernel where forwarding is on and `configured` links were configured at their index.
fn kernel(links: Vec<KernelLink>, configured: &[&str]) -> KernelRoutingState {
    let configured = links
        .iter()
        .filter(|l| configured.contains(&l.name.as_str()))
        .map(|l| (l.name.clone(), l.index))
        .collect();
    KernelRoutingState {
        links,
        configured,
        forwarding_on: true,
        ..KernelRoutingState::default()
    }
}

fn addresses(list: &[&str]) -> BTreeSet<IpAddr> {
    list.iter().map(|a| ip(a)).collect()
}

#[test]
fn a_workload_with_its_interface_up_gets_its_route_neighbour_and_settings() {
    let state = desired(vec![("db", workload("calidb", &["10.65.0.2"], true))]);
    let kernel = kernel(vec![link(1, "lo", true), link(7, "calidb", true)], &[]);
    let plan = plan(&state, &kernel, &BTreeSet::new());
    assert_eq!(plan.routes_to_add, vec![host_route("10.65.0.2", 7)]);
    assert_eq!(plan.neighbours_to_add, vec![neighbour("10.65.0.2", 7)]);
    assert_eq!(plan.interfaces.len(), 1);
    assert_eq!(plan.interfaces[0].name, "calidb");
    assert_eq!(plan.interfaces[0].index, 7);
    assert_eq!(
        plan.interfaces[0].sysctls,
        workload_interface_sysctls("calidb", Family::V4)
    );
    assert!(plan.routes_to_remove.is_empty() && plan.neighbours_to_remove.is_empty());
    assert!(plan.conntrack_flush.is_empty() && plan.forwarding.is_empty());
    assert_eq!(plan.addresses, addresses(&["10.65.0.2"]));
    let lines = plan.lines(&kernel);
    assert!(lines.contains(&"route add 10.65.0.2/32 dev calidb".to_owned()));
    assert!(
        lines.contains(&"neighbour add 10.65.0.2 lladdr ee:ee:ee:ee:ee:01 dev calidb".to_owned())
    );
    assert!(lines.contains(&"sysctl net/ipv4/conf/calidb/proxy_arp=1".to_owned()));
}

#[test]
fn ipv6_settings_only_where_the_interface_has_ipv6_and_forwarding_once() {
    let state = desired(vec![("db", workload("calidb", &["10.65.0.2"], true))]);
    let mut kernel = kernel(
        vec![KernelLink {
            ipv6: true,
            ..link(7, "calidb", true)
        }],
        &[],
    );
    kernel.forwarding_on = false;
    kernel.ipv6 = true;
    let plan = plan(&state, &kernel, &BTreeSet::new());
    let mut expected = workload_interface_sysctls("calidb", Family::V4);
    expected.extend(workload_interface_sysctls("calidb", Family::V6));
    assert_eq!(plan.interfaces[0].sysctls, expected);
    assert_eq!(
        plan.forwarding,
        vec![
            ("net/ipv4/ip_forward".to_owned(), "1"),
            ("net/ipv6/conf/all/forwarding".to_owned(), "1"),
        ]
    );
}

#[test]
fn inactive_workloads_and_links_that_are_down_get_no_route_or_neighbour() {
    let state = desired(vec![
        ("db", workload("calidb", &["10.65.0.2"], false)),
        ("web", workload("caliweb", &["10.65.0.3"], true)),
        ("gone", workload("caligone", &["10.65.0.4"], true)),
    ]);
    let kernel = kernel(
        vec![link(7, "calidb", true), link(8, "caliweb", false)],
        &[],
    );
    let plan = plan(&state, &kernel, &BTreeSet::new());
    assert!(plan.routes_to_add.is_empty(), "{plan:?}");
    assert!(plan.neighbours_to_add.is_empty(), "{plan:?}");
    // Their interfaces are configured all the same (no link, nothing to configure).
    let names: Vec<&str> = plan.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["calidb", "caliweb"]);
    // Their addresses are still the host's: nothing to flush while they exist.
    assert_eq!(
        plan.addresses,
        addresses(&["10.65.0.2", "10.65.0.3", "10.65.0.4"])
    );
}

#[test]
fn stale_calico_routes_and_neighbours_are_removed() {
    let state = desired(vec![("db", workload("calidb", &["10.65.0.2"], true))]);
    let mut kernel = kernel(
        vec![link(7, "calidb", true), link(9, "caliold", true)],
        &["calidb", "caliold"],
    );
    kernel.routes = [host_route("10.65.0.2", 7), host_route("10.65.0.9", 9)].into();
    kernel.neighbours = [neighbour("10.65.0.2", 7), neighbour("10.65.0.9", 9)].into();
    let plan = plan(&state, &kernel, &addresses(&["10.65.0.2"]));
    assert_eq!(plan.routes_to_remove, vec![host_route("10.65.0.9", 9)]);
    assert_eq!(plan.neighbours_to_remove, vec![neighbour("10.65.0.9", 9)]);
    assert!(plan.routes_to_add.is_empty() && plan.neighbours_to_add.is_empty());
    let lines = plan.lines(&kernel);
    assert_eq!(
        lines,
        [
            "route del 10.65.0.9/32 dev caliold",
            "neighbour del 10.65.0.9 lladdr ee:ee:ee:ee:ee:01 dev caliold",
        ]
    );
}

#[test]
fn an_interface_recreated_with_a_new_index_is_configured_again() {
    let state = desired(vec![("db", workload("calidb", &["10.65.0.2"], true))]);
    let mut kernel = kernel(vec![link(12, "calidb", true)], &[]);
    kernel.configured = BTreeMap::from([("calidb".to_owned(), 7), ("caliold".to_owned(), 9)]);
    kernel.routes = [host_route("10.65.0.2", 7)].into();
    let plan = plan(&state, &kernel, &addresses(&["10.65.0.2"]));
    assert_eq!(plan.forget, ["calidb", "caliold"]);
    assert_eq!(plan.interfaces.len(), 1);
    assert_eq!(
        (plan.interfaces[0].name.as_str(), plan.interfaces[0].index),
        ("calidb", 12)
    );
    assert_eq!(plan.routes_to_remove, vec![host_route("10.65.0.2", 7)]);
    assert_eq!(plan.routes_to_add, vec![host_route("10.65.0.2", 12)]);
}

#[test]
fn an_interface_shared_by_two_endpoints_is_configured_once() {
    let state = desired(vec![
        ("a", workload("calishared", &["10.65.0.2"], true)),
        ("b", workload("calishared", &["10.65.0.3"], true)),
    ]);
    let kernel = kernel(vec![link(7, "calishared", true)], &[]);
    let plan = plan(&state, &kernel, &BTreeSet::new());
    assert_eq!(plan.interfaces.len(), 1);
    assert_eq!(plan.routes_to_add.len(), 2);
}

#[test]
fn addresses_that_went_away_have_their_connections_flushed() {
    let state = desired(vec![("db", workload("calidb", &["10.65.0.2"], true))]);
    let kernel = kernel(vec![link(7, "calidb", true)], &["calidb"]);
    let plan = plan(&state, &kernel, &addresses(&["10.65.0.2", "10.65.0.9"]));
    assert_eq!(plan.conntrack_flush, vec![ip("10.65.0.9")]);
    assert!(
        plan.lines(&kernel)
            .contains(&"conntrack flush 10.65.0.9".to_owned())
    );
    assert_eq!(plan.addresses, addresses(&["10.65.0.2"]));
}

#[test]
fn nat_ext_ips_are_routed_to_the_first_workload_unless_a_workload_owns_them() {
    let mut a = workload("calia", &["10.65.0.2"], true);
    a.nat = vec![
        (ip("10.65.0.2"), ip("172.16.0.1")),
        (ip("10.65.0.2"), ip("10.65.0.3")),
    ];
    let mut b = workload("calib", &["10.65.0.3"], true);
    b.nat = vec![(ip("10.65.0.3"), ip("172.16.0.1"))];
    let state = desired(vec![("a", a), ("b", b)]);
    let kernel = kernel(
        vec![link(7, "calia", true), link(8, "calib", true)],
        &["calia", "calib"],
    );
    let plan = plan(&state, &kernel, &BTreeSet::new());
    assert_eq!(
        plan.routes_to_add,
        vec![
            host_route("10.65.0.2", 7),
            host_route("10.65.0.3", 8),
            host_route("172.16.0.1", 7),
        ]
    );
    // The same routes the desired state names.
    let named: Vec<(IpNet, &str)> = state.routes().into_iter().collect();
    let planned: Vec<(IpNet, &str)> = plan
        .routes_to_add
        .iter()
        .map(|r| {
            (
                r.destination,
                if r.ifindex == 7 { "calia" } else { "calib" },
            )
        })
        .collect();
    assert_eq!(planned, named);
    // An ext_ip is an address of the host's workloads: its connections go with the mapping.
    assert!(plan.addresses.contains(&ip("172.16.0.1")));
}

#[test]
fn nothing_to_do_when_the_kernel_already_matches() {
    let mut db = workload("calidb", &["10.65.0.2"], true);
    db.nat = vec![(ip("10.65.0.2"), ip("172.16.0.1"))];
    let state = desired(vec![("db", db)]);
    let mut kernel = kernel(
        vec![link(1, "lo", true), link(7, "calidb", true)],
        &["calidb"],
    );
    kernel.routes = [host_route("10.65.0.2", 7), host_route("172.16.0.1", 7)].into();
    kernel.neighbours = [neighbour("10.65.0.2", 7)].into();
    let plan = plan(&state, &kernel, &addresses(&["10.65.0.2", "172.16.0.1"]));
    assert!(plan.is_empty(), "{plan:?}");
    assert!(plan.lines(&kernel).is_empty());
    assert_eq!(
        plan,
        RoutingPlan {
            addresses: addresses(&["10.65.0.2", "172.16.0.1"]),
            ..RoutingPlan::default()
        }
    );
}

#[test]
fn host_endpoints_get_no_routes() {
    let mut state = DesiredState::default();
    state.endpoints.insert(
        EndpointKey::Host(HostEndpointId {
            hostname: "h1".to_owned(),
            endpoint: "eth0".to_owned(),
        }),
        workload("eth0", &["192.168.0.1"], true),
    );
    let kernel = kernel(vec![link(2, "eth0", true)], &[]);
    let plan = plan(&state, &kernel, &BTreeSet::new());
    assert!(plan.is_empty() && plan.addresses.is_empty(), "{plan:?}");
}
