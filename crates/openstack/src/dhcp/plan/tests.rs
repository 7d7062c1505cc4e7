use super::*;
use crate::dhcp::subnet::HostRoute;

const KEY: &str = "/calico/v1/host/compute1/workload/openstack/vm-1/endpoint/port-1";

fn subnet4() -> DhcpSubnet {
    DhcpSubnet {
        id: "sub4".into(),
        ip_version: 4,
        cidr: "10.65.0.0/24".into(),
        gateway_ip: Some("10.65.0.1".into()),
        enable_dhcp: true,
        dns_nameservers: vec!["192.0.2.53".into()],
        host_routes: vec![HostRoute {
            destination: "192.168.0.0/16".into(),
            nexthop: "10.65.0.254".into(),
        }],
        ipv6_address_mode: None,
        ipv6_ra_mode: None,
        ..Default::default()
    }
}

fn subnet6(mode: &str) -> DhcpSubnet {
    DhcpSubnet {
        id: "sub6".into(),
        ip_version: 6,
        cidr: "2001:db8:a41:2::/64".into(),
        gateway_ip: Some("2001:db8:a41:2::1".into()),
        enable_dhcp: true,
        dns_nameservers: Vec::new(),
        host_routes: Vec::new(),
        ipv6_address_mode: Some(mode.into()),
        ipv6_ra_mode: Some(mode.into()),
        ..Default::default()
    }
}

fn endpoints(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn endpoint(mac: &str, v4: &[&str], v6: &[&str]) -> String {
    serde_json::json!({"state": "active", "name": "tapport-1", "mac": mac,
        "profile_ids": [], "ipv4_nets": v4, "ipv6_nets": v6})
    .to_string()
}

#[test]
fn a_port_gets_its_addresses_in_the_subnets_that_hold_them() {
    let value = endpoint(
        "fa:16:3e:00:00:01",
        &["10.65.0.11/32"],
        &["2001:db8:a41:2::11/128"],
    );
    let plan = plan(
        &endpoints(&[(KEY, &value)]),
        &[subnet4(), subnet6("dhcpv6-stateful")],
    );
    assert_eq!(plan.left_out, []);
    assert!(!plan.unknown_subnet);
    assert_eq!(plan.subnets.keys().collect::<Vec<_>>(), ["sub4", "sub6"]);
    assert_eq!(
        plan.hosts,
        [HostEntry {
            port_id: "port-1".into(),
            mac: "fa:16:3e:00:00:01".into(),
            ipv4: Some("10.65.0.11".parse().unwrap()),
            ipv6: vec!["2001:db8:a41:2::11".parse().unwrap()],
            name: None,
        }]
    );
}

#[test]
fn a_named_port_gets_its_name_and_records_for_its_served_addresses_slaac_ones_too() {
    use crate::dhcp::names::Assignment;
    let value = endpoint("fa:16:3e:00:00:01", &[], &["2001:db8:a41:2::11/128"]);
    let assignment = |ip: &str| Assignment {
        hostname: "db-1".into(),
        ip_address: ip.into(),
        fqdn: "db-1.cloud.example.".into(),
    };
    let names = [(
        "port-1".to_owned(),
        vec![assignment("2001:db8:a41:2::11"), assignment("10.9.9.9")],
    )]
    .into_iter()
    .collect();
    let plan = plan_with_names(&endpoints(&[(KEY, &value)]), &[subnet6("slaac")], &names);
    assert_eq!(plan.left_out, []);
    let name = plan.hosts[0].name.as_ref().expect("a name");
    assert_eq!(name.hostname, "db-1");
    assert_eq!(name.domain.as_deref(), Some("cloud.example"));
    // Only the address the port has here: not one Neutron names but etcd does not hold.
    assert_eq!(
        name.records,
        [(
            "2001:db8:a41:2::11".parse().unwrap(),
            "db-1.cloud.example".to_owned()
        )]
    );
    assert!(
        plan.hosts[0].ipv6.is_empty(),
        "a SLAAC address is not leased"
    );
}

#[test]
fn slaac_addresses_are_not_in_the_hosts_file_but_the_subnet_is_served() {
    let value = endpoint("fa:16:3e:00:00:01", &[], &["2001:db8:a41:2::11/128"]);
    let plan = plan(&endpoints(&[(KEY, &value)]), &[subnet6("slaac")]);
    assert!(plan.subnets.contains_key("sub6"));
    assert_eq!(plan.hosts, []);
    assert_eq!(plan.left_out, []);
}

#[test]
fn only_subnets_of_this_hosts_ports_are_served() {
    let mut other = subnet4();
    other.id = "elsewhere".into();
    other.cidr = "10.66.0.0/24".into();
    other.gateway_ip = Some("10.66.0.1".into());
    let value = endpoint("fa:16:3e:00:00:01", &["10.65.0.11/32"], &[]);
    let plan = plan(&endpoints(&[(KEY, &value)]), &[subnet4(), other]);
    assert_eq!(plan.subnets.keys().collect::<Vec<_>>(), ["sub4"]);
}

#[test]
fn what_cannot_be_served_is_named_with_the_reason() {
    let mut off = subnet4();
    off.id = "off".into();
    off.cidr = "10.67.0.0/24".into();
    off.gateway_ip = Some("10.67.0.1".into());
    off.enable_dhcp = false;
    let mut twin = subnet4();
    twin.id = "twin".into();
    twin.cidr = "10.68.0.0/16".into();
    twin.gateway_ip = Some("10.68.0.1".into());
    let mut twin2 = twin.clone();
    twin2.id = "twin2".into();
    twin2.cidr = "10.68.1.0/24".into();
    let no_mac =
        r#"{"state":"active","name":"tapport-2","profile_ids":[],"ipv4_nets":["10.65.0.12/32"]}"#;
    let many = endpoint(
        "fa:16:3e:00:00:03",
        &[
            "10.65.0.13/32",
            "10.65.0.14/32",
            "10.99.0.1/32",
            "10.67.0.5/32",
            "10.68.1.5/32",
        ],
        &[],
    );
    let plan = plan(
        &endpoints(&[
            (
                "/calico/v1/host/compute1/workload/openstack/vm-2/endpoint/port-2",
                no_mac,
            ),
            (
                "/calico/v1/host/compute1/workload/openstack/vm-3/endpoint/port-3",
                &many,
            ),
            (
                "/calico/v1/host/compute1/workload/openstack/vm-4/endpoint/port-4",
                "{not json",
            ),
        ]),
        &[subnet4(), off, twin, twin2],
    );
    let reasons: Vec<String> = plan.left_out.iter().map(ToString::to_string).collect();
    assert_eq!(
        reasons,
        [
            "port port-2: no mac: DHCP serves by MAC",
            "port port-3: address 10.65.0.14: a DHCPv4 client takes one address; it has one already",
            "port port-3: address 10.99.0.1: in no Neutron subnet",
            "subnet off: enable_dhcp is false",
            "port port-3: address 10.67.0.5: subnet off is not served",
            "port port-3: address 10.68.1.5: in subnets twin and twin2 (overlapping cidrs): cannot tell which",
            "port port-4: endpoint value: key must be a string at line 1 column 2",
        ]
    );
    assert_eq!(plan.hosts.len(), 1, "port-3 is served its first address");
    assert_eq!(plan.hosts[0].ipv4, Some("10.65.0.13".parse().unwrap()));
    assert!(
        plan.unknown_subnet,
        "10.99.0.1 asks Neutron for its subnet again"
    );
}

#[test]
fn subnets_dnsmasq_cannot_serve_say_why() {
    let check = |subnet: DhcpSubnet| served(&subnet).unwrap_err().reason;
    let mut s = subnet4();
    s.gateway_ip = None;
    assert_eq!(
        check(s),
        "no gateway_ip: the agent serves a subnet from its gateway address"
    );
    let mut s = subnet4();
    s.gateway_ip = Some("10.70.0.1".into());
    assert_eq!(
        check(s),
        "gateway_ip 10.70.0.1 is outside cidr 10.65.0.0/24"
    );
    let mut s = subnet4();
    s.dns_nameservers = vec!["dns.example".into()];
    assert_eq!(
        check(s),
        "dns_nameservers[0] \"dns.example\": not an IP address"
    );
    let mut s = subnet4();
    s.host_routes[0].nexthop = "x".into();
    assert_eq!(check(s), "host_routes[0].nexthop \"x\": not an IP address");
    let mut s = subnet6("dhcpv6-stateful");
    s.ipv6_address_mode = None;
    s.ipv6_ra_mode = None;
    assert!(check(s).starts_with("ipv6_address_mode is not set"));
    let mut s = subnet6("slaac");
    s.ipv6_ra_mode = Some("dhcpv6-stateful".into());
    assert_eq!(
        check(s),
        "ipv6_ra_mode \"dhcpv6-stateful\" differs from ipv6_address_mode \"slaac\""
    );
    let mut s = subnet6("slaac");
    s.ipv6_ra_mode = None;
    assert!(check(s).starts_with("ipv6_address_mode slaac without ipv6_ra_mode"));
}

#[test]
fn ipv6_host_routes_are_named_as_not_served() {
    let mut s = subnet6("dhcpv6-stateful");
    s.host_routes = vec![HostRoute {
        destination: "2001:db8:ff::/48".into(),
        nexthop: "2001:db8:a41:2::fe".into(),
    }];
    let (served, partial) = served(&s).unwrap();
    assert_eq!(served.routes, []);
    assert_eq!(
        partial[0].to_string(),
        "subnet sub6: host_routes: DHCPv6 has no option for routes; they are not served"
    );
}

#[test]
fn the_plan_does_not_depend_on_the_order_of_subnets() {
    let value = endpoint(
        "fa:16:3e:00:00:01",
        &["10.65.0.11/32"],
        &["2001:db8:a41:2::11/128"],
    );
    let one = plan(
        &endpoints(&[(KEY, &value)]),
        &[subnet4(), subnet6("dhcpv6-stateful")],
    );
    let two = plan(
        &endpoints(&[(KEY, &value)]),
        &[subnet6("dhcpv6-stateful"), subnet4()],
    );
    assert_eq!(one, two);
}

#[test]
fn each_network_lists_its_ports_taps_and_a_name_that_is_no_interface_is_named() {
    let value = endpoint("fa:16:3e:00:00:01", &[], &["2001:db8:a41:2::11/128"]);
    let mut slaac = subnet6("slaac");
    slaac.network_id = "net-1".into();
    let served = plan(&endpoints(&[(KEY, &value)]), &[slaac.clone()]);
    // SLAAC only: no host entry, but the TAP hears its network's RAs.
    assert_eq!(served.hosts, []);
    let taps: Vec<(&String, Vec<&String>)> = served
        .taps
        .iter()
        .map(|(n, t)| (n, t.iter().collect()))
        .collect();
    assert_eq!(taps, [(&"net-1".to_owned(), vec![&"tapport-1".to_owned()])]);
    let bad = value.replace("tapport-1", "tap,x");
    let refused = plan(&endpoints(&[(KEY, &bad)]), &[slaac]);
    assert!(refused.taps.is_empty());
    assert_eq!(
        refused.left_out[0].to_string(),
        "port port-1: endpoint name \"tap,x\": not an interface name (its TAP); DHCP and RAs \
         are served on the VM's TAP"
    );
}
