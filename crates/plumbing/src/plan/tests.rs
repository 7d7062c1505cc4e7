use std::net::Ipv6Addr;

use super::*;
use crate::routes::Placement;
use crate::routes::SourceRule;
use calico_model::MacAddr;

const HOST: &str = "cali0123456789a";

fn netns() -> Netns {
    Netns::at_path("/run/netns/ctr")
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|ip| ip.parse().unwrap()).collect()
}

/// The first attachment of a container (`eth0`, metric 1024) with these addresses.
fn attachment(addresses: &[&str]) -> Attachment {
    Attachment {
        host: HOST.into(),
        container: "eth0".into(),
        netns: netns(),
        addresses: ips(addresses),
        mtu: None,
        mac: None,
        routes: RoutePlacement::FIRST,
    }
}

fn steps(plan: &PlumbPlan) -> Vec<Step> {
    plan.steps.iter().map(|p| p.step.clone()).collect()
}

fn host_sysctls(families: &[Family]) -> Vec<Step> {
    families
        .iter()
        .flat_map(|f| workload_interface_sysctls(HOST, *f))
        .map(|(path, value)| Step::SetSysctl {
            side: Side::Host,
            path,
            value: value.to_owned(),
        })
        .collect()
}

fn head(families: &[Family]) -> Vec<Step> {
    let mut steps = vec![
        Step::RemoveStaleVeth { host: HOST.into() },
        Step::CreateVeth {
            host: HOST.into(),
            container: "eth0".into(),
            netns: netns(),
        },
    ];
    steps.extend(host_sysctls(families));
    steps.push(Step::SetUp { side: Side::Host });
    steps
}

fn container_ipv6_sysctls() -> Vec<Step> {
    ["disable_ipv6", "accept_dad"]
        .into_iter()
        .map(|name| Step::SetSysctl {
            side: Side::Container,
            path: format!("net/ipv6/conf/eth0/{name}"),
            value: "0".into(),
        })
        .collect()
}

fn route(destination: &str, gateway: Gateway, metric: u32, table: u32) -> PlannedRoute {
    PlannedRoute {
        destination: destination.parse().unwrap(),
        gateway,
        metric,
        table,
    }
}

fn ipv4_gateway_routes(metric: u32, table: u32) -> Vec<PlannedRoute> {
    vec![
        route("169.254.1.1/32", Gateway::OnLink, metric, table),
        route(
            "0.0.0.0/0",
            Gateway::Via("169.254.1.1".parse().unwrap()),
            metric,
            table,
        ),
    ]
}

/// The first attachment's IPv4 routes: main table, metric 1024, no rules.
fn ipv4_routes() -> Step {
    Step::AddRoutes {
        family: Family::V4,
        routes: ipv4_gateway_routes(1024, MAIN_TABLE),
        rules: vec![],
    }
}

fn ipv6_route() -> Step {
    Step::AddRoutes {
        family: Family::V6,
        routes: vec![route("::/0", Gateway::HostLinkLocal, 1024, MAIN_TABLE)],
        rules: vec![],
    }
}

#[test]
fn an_ipv4_workload_gets_a_veth_its_address_and_routes_through_169_254_1_1() {
    let plan = plan(&attachment(&["10.65.0.2"]));
    let mut expected = head(&[Family::V4]);
    expected.push(Step::SetUp {
        side: Side::Container,
    });
    expected.push(Step::AddAddress {
        address: "10.65.0.2/32".parse().unwrap(),
    });
    expected.push(ipv4_routes());
    assert_eq!(steps(&plan), expected);
    assert!(
        !steps(&plan)
            .iter()
            .any(|s| matches!(s, Step::SetMtu { .. }))
    );
}

#[test]
fn an_ipv6_workload_routes_through_the_host_side_link_local_address() {
    let plan = plan(&attachment(&["fd00::2"]));
    // The IPv4 host settings always apply, the IPv6 ones because of the address.
    let mut expected = head(&[Family::V4, Family::V6]);
    expected.extend(container_ipv6_sysctls());
    expected.push(Step::SetUp {
        side: Side::Container,
    });
    expected.push(Step::AddAddress {
        address: "fd00::2/128".parse().unwrap(),
    });
    expected.push(ipv6_route());
    assert_eq!(steps(&plan), expected);
}

#[test]
fn a_dual_stack_workload_gets_both_gateways() {
    let plan = plan(&attachment(&["10.65.0.2", "fd00::2"]));
    let mut expected = head(&[Family::V4, Family::V6]);
    expected.extend(container_ipv6_sysctls());
    expected.push(Step::SetUp {
        side: Side::Container,
    });
    expected.push(Step::AddAddress {
        address: "10.65.0.2/32".parse().unwrap(),
    });
    expected.push(Step::AddAddress {
        address: "fd00::2/128".parse().unwrap(),
    });
    expected.push(ipv4_routes());
    expected.push(ipv6_route());
    assert_eq!(steps(&plan), expected);
}

#[test]
fn a_custom_mtu_is_set_on_both_ends_once_the_host_side_is_up() {
    let plan = plan(&Attachment {
        container: "eth1".into(),
        mtu: Some(1400),
        ..attachment(&["10.65.0.2"])
    });
    let steps = steps(&plan);
    let up = steps
        .iter()
        .position(|s| *s == Step::SetUp { side: Side::Host })
        .unwrap();
    assert_eq!(steps[up + 1], Step::SetMtu { mtu: 1400 });
    assert_eq!(
        steps[up + 2],
        Step::SetUp {
            side: Side::Container
        }
    );
    assert_eq!(
        steps
            .iter()
            .filter(|s| matches!(s, Step::SetMtu { .. }))
            .count(),
        1
    );
    assert!(matches!(
        &steps[1],
        Step::CreateVeth { container, .. } if container == "eth1"
    ));
}

#[test]
fn only_the_veth_is_undone_and_the_undo_list_runs_backwards() {
    let plan = plan(&Attachment {
        mtu: Some(1400),
        ..attachment(&["10.65.0.2", "fd00::2"])
    });
    let with_undo: Vec<_> = plan.steps.iter().filter(|p| p.undo.is_some()).collect();
    assert_eq!(with_undo.len(), 1);
    assert!(matches!(with_undo[0].step, Step::CreateVeth { .. }));
    assert_eq!(
        plan.undo_list(),
        vec![Undo::DeleteLink { host: HOST.into() }]
    );

    // Reverse order, over a plan with several undoable steps.
    let mut two = plan.clone();
    two.steps.push(Planned {
        step: Step::CreateVeth {
            host: "cali2".into(),
            container: "eth1".into(),
            netns: netns(),
        },
        undo: Some(Undo::DeleteLink {
            host: "cali2".into(),
        }),
    });
    assert_eq!(
        two.undo_list(),
        vec![
            Undo::DeleteLink {
                host: "cali2".into()
            },
            Undo::DeleteLink { host: HOST.into() },
        ]
    );
}

#[test]
fn the_ipv6_gateway_is_derived_from_the_mac_as_the_kernel_does() {
    let ll = MacAddr([0xee, 0xee, 0xee, 0xee, 0xee, 0xee]).eui64_link_local();
    assert_eq!(ll, "fe80::ecee:eeff:feee:eeee".parse::<Ipv6Addr>().unwrap());
}

#[test]
fn a_requested_mac_is_set_before_the_container_side_comes_up() {
    let mac = MacAddr([0xc2, 0x11, 0x22, 0x33, 0x44, 0x55]);
    let steps = steps(&plan(&Attachment {
        mac: Some(mac),
        ..attachment(&["10.65.0.2"])
    }));
    let set = steps
        .iter()
        .position(|s| *s == Step::SetMac { mac })
        .unwrap();
    assert_eq!(
        steps[set + 1],
        Step::SetUp {
            side: Side::Container
        }
    );
    assert_eq!(
        steps
            .iter()
            .filter(|s| matches!(s, Step::SetMac { .. }))
            .count(),
        1
    );
}

#[test]
fn a_standby_attachment_adds_its_routes_in_main_and_its_own_table_and_source_rules() {
    let standby = |metric| Placement {
        metric,
        standby: true,
    };
    let plan = plan(&Attachment {
        container: "eth1".into(),
        routes: RoutePlacement {
            v4: standby(1025),
            v6: standby(1026),
        },
        ..attachment(&["10.65.0.3", "fd00::3"])
    });
    let rule = |from: &str, table| SourceRule {
        from: from.parse().unwrap(),
        table,
    };
    let added: Vec<Step> = steps(&plan)
        .into_iter()
        .filter(|s| matches!(s, Step::AddRoutes { .. }))
        .collect();
    let mut v4 = ipv4_gateway_routes(1025, MAIN_TABLE);
    v4.extend(ipv4_gateway_routes(1025, 1025));
    let v6 = vec![
        route("::/0", Gateway::HostLinkLocal, 1026, MAIN_TABLE),
        route("::/0", Gateway::HostLinkLocal, 1026, 1026),
    ];
    assert_eq!(
        added,
        [
            Step::AddRoutes {
                family: Family::V4,
                routes: v4,
                rules: vec![rule("10.65.0.3", 1025)],
            },
            Step::AddRoutes {
                family: Family::V6,
                routes: v6,
                rules: vec![rule("fd00::3", 1026)],
            },
        ]
    );
    // The rules are undone (they stay when the link goes), before the veth.
    let undo = plan.undo_list();
    assert_eq!(
        undo,
        [
            Undo::DeleteSourceRules {
                netns: netns(),
                rules: vec![rule("fd00::3", 1026)],
            },
            Undo::DeleteSourceRules {
                netns: netns(),
                rules: vec![rule("10.65.0.3", 1025)],
            },
            Undo::DeleteLink { host: HOST.into() },
        ]
    );
}

#[test]
fn the_first_attachment_gets_no_table_and_no_rules() {
    let plan = plan(&attachment(&["10.65.0.2", "fd00::2"]));
    let added: Vec<Step> = steps(&plan)
        .into_iter()
        .filter(|s| matches!(s, Step::AddRoutes { .. }))
        .collect();
    assert_eq!(added, [ipv4_routes(), ipv6_route()]);
    assert_eq!(plan.undo_list(), [Undo::DeleteLink { host: HOST.into() }]);
}

/// Docker's `Join` makes the pair with both ends in the driver's namespace, sets the host side
/// up and the container end's MAC, and leaves everything inside the sandbox to dockerd.
#[test]
fn a_docker_join_makes_the_veth_and_leaves_the_container_side_to_dockerd() {
    let mac = MacAddr([0xee, 0, 0, 0, 0, 1]);
    let joining = Attachment {
        container: "tmp0123456789a".into(),
        netns: Netns::current(),
        mac: Some(mac),
        ..attachment(&["10.65.0.2", "fd00::2"])
    };
    let plan = veth_plan(&joining);
    let mut expected = vec![
        Step::RemoveStaleVeth { host: HOST.into() },
        Step::CreateVeth {
            host: HOST.into(),
            container: "tmp0123456789a".into(),
            netns: Netns::current(),
        },
    ];
    expected.extend(host_sysctls(&[Family::V4, Family::V6]));
    expected.push(Step::SetUp { side: Side::Host });
    expected.push(Step::SetMac { mac });
    assert_eq!(steps(&plan), expected);
    assert_eq!(plan.undo_list(), [Undo::DeleteLink { host: HOST.into() }]);
    assert!(
        veth_plan(&attachment(&["10.65.0.2"]))
            .steps
            .iter()
            .all(|p| !matches!(p.step, Step::SetMac { .. }))
    );
}

/// A second Docker network's attachment, once dockerd has moved it in as `eth1`: the same
/// routes and rules as CNI's standby, after any rule left from its address; the rules are
/// undone, the link is not (it is dockerd's until `Leave`).
#[test]
fn a_second_docker_network_gets_the_standby_routes_of_cni_inside_the_sandbox() {
    let moved = Attachment {
        container: "eth1".into(),
        routes: RoutePlacement {
            v4: Placement {
                metric: 1024,
                standby: true,
            },
            v6: Placement::FIRST,
        },
        ..attachment(&["10.65.0.3", "fd00::3"])
    };
    let plan = routes_plan(&moved, &[Family::V4]);
    let rule = SourceRule {
        from: "10.65.0.3".parse().unwrap(),
        table: 1024,
    };
    let mut routes = ipv4_gateway_routes(1024, MAIN_TABLE);
    routes.extend(ipv4_gateway_routes(1024, 1024));
    assert_eq!(
        steps(&plan),
        [
            Step::RemoveSourceRules {
                addresses: vec!["10.65.0.3".parse().unwrap()]
            },
            Step::AddRoutes {
                family: Family::V4,
                routes,
                rules: vec![rule],
            },
        ]
    );
    assert_eq!(
        plan.undo_list(),
        [Undo::DeleteSourceRules {
            netns: netns(),
            rules: vec![rule],
        }]
    );
    // The plan for CNI's standby is the same routes and rules.
    let cni = plan_of_cni_standby(&moved);
    assert!(cni.contains(&steps(&plan)[1]), "{cni:?}");
    assert!(routes_plan(&moved, &[]).steps.is_empty());
}

fn plan_of_cni_standby(attachment: &Attachment) -> Vec<Step> {
    steps(&plan(attachment))
}

#[test]
fn gateway_routes_are_169_254_1_1_and_the_host_side_link_local_address() {
    assert_eq!(
        gateway_routes(Family::V4),
        [
            ("169.254.1.1/32".parse().unwrap(), Gateway::OnLink),
            (
                "0.0.0.0/0".parse().unwrap(),
                Gateway::Via("169.254.1.1".parse().unwrap())
            ),
        ]
    );
    assert_eq!(
        gateway_routes(Family::V6),
        [("::/0".parse().unwrap(), Gateway::HostLinkLocal)]
    );
}
