use std::collections::BTreeMap;

use super::*;
use crate::dhcp::plan::plan;
use crate::dhcp::subnet::{DhcpSubnet, HostRoute};

fn subnets() -> Vec<DhcpSubnet> {
    vec![
        DhcpSubnet {
            id: "sub4".into(),
            ip_version: 4,
            cidr: "10.65.0.0/24".into(),
            gateway_ip: Some("10.65.0.1".into()),
            enable_dhcp: true,
            dns_nameservers: vec!["192.0.2.53".into(), "192.0.2.54".into()],
            host_routes: vec![HostRoute {
                destination: "192.168.0.0/16".into(),
                nexthop: "10.65.0.254".into(),
            }],
            ipv6_address_mode: None,
            ipv6_ra_mode: None,
            ..Default::default()
        },
        DhcpSubnet {
            id: "sub6".into(),
            ip_version: 6,
            cidr: "2001:db8:a41:2::/64".into(),
            gateway_ip: Some("2001:db8:a41:2::1".into()),
            enable_dhcp: true,
            dns_nameservers: vec!["2001:db8::53".into()],
            host_routes: Vec::new(),
            ipv6_address_mode: Some("dhcpv6-stateful".into()),
            ipv6_ra_mode: Some("dhcpv6-stateful".into()),
            ..Default::default()
        },
    ]
}

fn rendered() -> Rendered {
    let mut endpoints = BTreeMap::new();
    for (n, port) in [(11, "port-b"), (12, "port-a")] {
        endpoints.insert(
            format!("/calico/v1/host/h/workload/openstack/vm/endpoint/{port}"),
            serde_json::json!({"state": "active", "name": format!("tap{port}"), "profile_ids": [],
                "mac": format!("fa:16:3e:00:00:{n}"),
                "ipv4_nets": [format!("10.65.0.{n}/32")],
                "ipv6_nets": [format!("2001:db8:a41:2::{n}/128")]})
            .to_string(),
        );
    }
    let setting = Setting {
        interface: "ns-calico",
        tap_prefix: "tap",
        state_dir: Path::new("/var/lib/calico/dhcp"),
        lease_time: Duration::from_secs(86400),
        dns_port: 53,
    };
    render(&plan(&endpoints, &subnets()), &setting)
}

#[test]
fn dnsmasq_serves_from_the_bridge_for_every_tap_with_one_static_range_per_subnet() {
    assert_eq!(
        rendered().args,
        [
            "--keep-in-foreground",
            "--conf-file=",
            "--no-hosts",
            "--no-resolv",
            "--port=53",
            "--log-facility=-",
            "--dhcp-hostsfile=/var/lib/calico/dhcp/hosts",
            "--dhcp-optsfile=/var/lib/calico/dhcp/opts",
            "--addn-hosts=/var/lib/calico/dhcp/names",
            "--dhcp-leasefile=/var/lib/calico/dhcp/leases",
            "--pid-file=/var/lib/calico/dhcp/dnsmasq.pid",
            "--interface=ns-calico0",
            "--interface=tap*",
            "--except-interface=lo",
            "--bridge-interface=ns-calico0,tapport-a,tapport-b",
            "--bind-dynamic",
            "--dhcp-range=set:subnet-sub4,10.65.0.0,static,255.255.255.0,86400s",
            "--dhcp-range=set:subnet-sub6,2001:db8:a41:2::,static,off-link,64,86400s",
            "--enable-ra",
        ]
    );
}

#[test]
fn hosts_are_by_mac_sorted_by_port() {
    assert_eq!(
        rendered().hosts,
        "fa:16:3e:00:00:12,10.65.0.12,[2001:db8:a41:2::12]\n\
         fa:16:3e:00:00:11,10.65.0.11,[2001:db8:a41:2::11]\n"
    );
}

#[test]
fn options_give_router_dns_and_routes_with_the_default_route() {
    assert_eq!(
        rendered().opts,
        "tag:subnet-sub4,option:router,10.65.0.1\n\
         tag:subnet-sub4,option:dns-server,192.0.2.53,192.0.2.54\n\
         tag:subnet-sub4,option:classless-static-route,192.168.0.0/16,10.65.0.254,0.0.0.0/0,10.65.0.1\n\
         tag:subnet-sub6,option6:dns-server,[2001:db8::53]\n"
    );
}

#[test]
fn the_interface_holds_each_gateway_with_its_subnets_prefix() {
    let interfaces = rendered().interfaces;
    let addresses: Vec<String> = interfaces["ns-calico0"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(addresses, ["10.65.0.1/24", "2001:db8:a41:2::1/64"]);
    assert_eq!(interfaces.len(), 1);
}

#[test]
fn each_network_has_its_interface_and_each_tap_is_an_alias_of_its_own_network_s_only() {
    let mut subnets = subnets();
    subnets[0].network_id = "net-b".into();
    subnets[1].network_id = "net-a".into();
    subnets[1].ipv6_address_mode = Some("slaac".into());
    subnets[1].ipv6_ra_mode = Some("slaac".into());
    let mut endpoints = BTreeMap::new();
    let endpoint = |port: &str, net: &str| {
        (
            format!("/calico/v1/host/h/workload/openstack/vm/endpoint/{port}"),
            serde_json::json!({"state": "active", "name": format!("tap{port}"),
                "profile_ids": [], "mac": "fa:16:3e:00:00:01", "ipv4_nets": [],
                "ipv6_nets": [], format!("ipv{}_nets", if net.contains(':') { 6 } else { 4 }): [net]})
            .to_string(),
        )
    };
    endpoints.extend([
        endpoint("v4", "10.65.0.11/32"),
        endpoint("v6", "2001:db8:a41:2::11/128"),
    ]);
    let setting = Setting {
        interface: "ns-calico",
        tap_prefix: "tap",
        state_dir: Path::new("/s"),
        lease_time: Duration::from_secs(86400),
        dns_port: 0,
    };
    let rendered = render(&plan(&endpoints, &subnets), &setting);
    let interfaces: Vec<(String, Vec<String>)> = rendered
        .interfaces
        .iter()
        .map(|(name, a)| (name.clone(), a.iter().map(|a| a.to_string()).collect()))
        .collect();
    // net-a sorts first: ns-calico0.
    assert_eq!(
        interfaces,
        [
            (
                "ns-calico0".to_owned(),
                vec!["2001:db8:a41:2::1/64".to_owned()]
            ),
            ("ns-calico1".to_owned(), vec!["10.65.0.1/24".to_owned()]),
        ]
    );
    let bridges: Vec<&String> = rendered
        .args
        .iter()
        .filter(|a| a.starts_with("--bridge-interface") || a.starts_with("--interface"))
        .collect();
    assert_eq!(
        bridges,
        [
            "--interface=ns-calico0",
            "--interface=ns-calico1",
            "--interface=tap*",
            "--bridge-interface=ns-calico0,tapv6",
            "--bridge-interface=ns-calico1,tapv4",
        ]
    );
}

#[test]
fn stateless_and_slaac_subnets_get_their_range_kinds() {
    let mut subnets = subnets();
    subnets[1].ipv6_address_mode = Some("dhcpv6-stateless".into());
    subnets[1].ipv6_ra_mode = Some("dhcpv6-stateless".into());
    let served = crate::dhcp::subnet::served(&subnets[1]).unwrap().0;
    assert_eq!(
        range(&served, 3600),
        "--dhcp-range=set:subnet-sub6,2001:db8:a41:2::,ra-stateless,off-link,64,3600s"
    );
    subnets[1].ipv6_address_mode = Some("slaac".into());
    subnets[1].ipv6_ra_mode = Some("slaac".into());
    let served = crate::dhcp::subnet::served(&subnets[1]).unwrap().0;
    assert_eq!(
        range(&served, 3600),
        "--dhcp-range=set:subnet-sub6,2001:db8:a41:2::,ra-only,off-link,64,3600s"
    );
}

#[test]
fn named_ports_get_their_host_name_domain_and_address_records() {
    use crate::dhcp::names::Assignment;
    use crate::dhcp::plan::plan_with_names;
    let mut endpoints = BTreeMap::new();
    endpoints.insert(
        "/calico/v1/host/h/workload/openstack/vm/endpoint/port-a".to_owned(),
        serde_json::json!({"state": "active", "name": "tap", "profile_ids": [],
            "mac": "fa:16:3e:00:00:0a", "ipv4_nets": ["10.65.0.12/32"],
            "ipv6_nets": ["2001:db8:a41:2::12/128"]})
        .to_string(),
    );
    let assignment = |ip: &str| Assignment {
        hostname: "web-1".into(),
        ip_address: ip.into(),
        fqdn: "web-1.cloud.example.".into(),
    };
    let names = [(
        "port-a".to_owned(),
        vec![assignment("10.65.0.12"), assignment("2001:db8:a41:2::12")],
    )]
    .into_iter()
    .collect();
    let plan = plan_with_names(&endpoints, &subnets(), &names);
    let setting = Setting {
        interface: "ns-calico",
        tap_prefix: "tap",
        state_dir: Path::new("/var/lib/calico/dhcp"),
        lease_time: Duration::from_secs(86400),
        dns_port: 0,
    };
    let rendered = render(&plan, &setting);
    assert_eq!(
        rendered.hosts,
        "fa:16:3e:00:00:0a,set:port-port-a,10.65.0.12,[2001:db8:a41:2::12],web-1\n"
    );
    assert!(
        rendered
            .opts
            .ends_with("tag:port-port-a,option:domain-name,cloud.example\ntag:port-port-a,option6:domain-search,cloud.example\n"),
        "{}",
        rendered.opts
    );
    assert_eq!(
        rendered.names,
        "10.65.0.12 web-1.cloud.example web-1\n2001:db8:a41:2::12 web-1.cloud.example web-1\n"
    );
    // DNS off: no port, no binding of port 53.
    assert!(rendered.args.contains(&"--port=0".to_owned()));
    assert!(!rendered.args.contains(&"--bind-dynamic".to_owned()));
}
