//! The mapping table of `translate`, case by case, on the JSON Felix reads.

use super::*;
use crate::neutron::{FixedIp, SecurityGroupRule};
use calico_model::Key;

const PORT_ID: &str = "3b561211-dd0f-4f3e-9d7a-111111111111";

fn subnet(id: &str, version: u8, gateway: Option<&str>) -> Subnet {
    Subnet {
        id: id.to_owned(),
        network_id: "net".into(),
        ip_version: version,
        cidr: String::new(),
        gateway_ip: gateway.map(str::to_owned),
        enable_dhcp: true,
        revision_number: 1,
        ..Default::default()
    }
}

fn vm_port() -> Port {
    Port {
        id: PORT_ID.into(),
        network_id: "net".into(),
        device_id: "vm-1".into(),
        device_owner: "compute:nova".into(),
        mac_address: "FA:16:3E:00:00:01".into(),
        fixed_ips: vec![
            FixedIp {
                subnet_id: "s4".into(),
                ip_address: "10.65.0.24".into(),
            },
            FixedIp {
                subnet_id: "s6".into(),
                ip_address: "2001:db8:a41:2::12".into(),
            },
        ],
        security_groups: vec!["sg-a".into(), "sg-b".into()],
        admin_state_up: true,
        port_security_enabled: Some(true),
        host_id: "host1".into(),
        vif_type: "tap".into(),
        status: "ACTIVE".into(),
        revision_number: 3,
    }
}

fn translate_port(port: &Port) -> Result<Endpoint, TranslateError> {
    let subnets = [
        subnet("s4", 4, Some("10.65.0.1")),
        subnet("s6", 6, Some("2001:db8:a41:2::1")),
    ];
    let by_id = subnets.iter().map(|s| (s.id.as_str(), s)).collect();
    endpoint(port, &by_id)
}

#[test]
fn a_vm_port_is_the_endpoint_nova_plugs() {
    let endpoint = translate_port(&vm_port()).unwrap();
    assert_eq!(
        Key::WorkloadEndpoint(endpoint.id).to_string(),
        format!("/calico/v1/host/host1/workload/openstack/vm-1/endpoint/{PORT_ID}")
    );
    assert_eq!(
        serde_json::to_value(&endpoint.endpoint).unwrap(),
        serde_json::json!({
            "state": "active",
            "name": "tap3b561211-dd",
            "mac": "fa:16:3e:00:00:01",
            "profile_ids": ["openstack-sg-sg-a", "openstack-sg-sg-b"],
            "ipv4_nets": ["10.65.0.24/32"],
            "ipv6_nets": ["2001:db8:a41:2::12/128"],
            "ipv4_gateway": "10.65.0.1",
            "ipv6_gateway": "2001:db8:a41:2::1",
        })
    );
}

#[test]
fn admin_state_and_port_security_are_honoured() {
    let mut port = vm_port();
    port.admin_state_up = false;
    port.port_security_enabled = Some(false);
    port.security_groups.clear();
    let endpoint = translate_port(&port).unwrap().endpoint;
    assert_eq!(endpoint.state, EndpointState::Inactive);
    assert_eq!(endpoint.profile_ids, [OPEN_PROFILE]);
}

#[test]
fn only_ports_calico_bound_for_a_vm_are_endpoints() {
    assert!(is_vm_port(&vm_port()));
    for change in [
        |p: &mut Port| p.host_id.clear(),
        |p: &mut Port| p.device_owner = "network:dhcp".into(),
        |p: &mut Port| p.vif_type = "binding_failed".into(),
        |p: &mut Port| p.vif_type = "ovs".into(),
    ] {
        let mut port = vm_port();
        change(&mut port);
        assert!(!is_vm_port(&port), "{port:?}");
    }
}

#[test]
fn ports_calico_cannot_express_name_the_port_and_the_field() {
    let mut port = vm_port();
    port.fixed_ips[0].subnet_id = "gone".into();
    assert_eq!(
        translate_port(&port).unwrap_err().to_string(),
        format!("port {PORT_ID}: fixed_ips[0].subnet_id \"gone\": no such subnet")
    );
    let mut port = vm_port();
    port.device_id = "a/b".into();
    let err = translate_port(&port).unwrap_err().to_string();
    assert!(err.contains("invalid workload id \"a/b\""), "{err}");
    let mut port = vm_port();
    port.id = "short".into();
    let err = translate_port(&port).unwrap_err().to_string();
    assert!(err.contains("shorter than the 11 characters"), "{err}");
    let mut port = vm_port();
    port.mac_address = "zz".into();
    let err = translate_port(&port).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("port {PORT_ID}: mac_address: invalid MAC")),
        "{err}"
    );
}

fn neutron_rule(direction: &str, ethertype: &str) -> SecurityGroupRule {
    SecurityGroupRule {
        id: "rule-1".into(),
        security_group_id: "sg-a".into(),
        direction: direction.into(),
        ethertype: ethertype.into(),
        ..SecurityGroupRule::default()
    }
}

#[test]
fn a_group_is_a_profile_tagged_with_its_id_without_the_rules_left_out() {
    let mut allowed = neutron_rule("egress", "IPv4");
    allowed.id = "ok".into();
    let mut dccp = neutron_rule("ingress", "IPv4");
    dccp.id = "bad".into();
    dccp.protocol = Some("dccp".into());
    dccp.port_range_min = Some(1);
    dccp.port_range_max = Some(2);
    let group = SecurityGroup {
        id: "sg-a".into(),
        name: "web".into(),
        stateful: Some(true),
        security_group_rules: vec![allowed.clone(), dccp, allowed],
        revision_number: 1,
    };
    let (profile, left_out) = profile(&group).unwrap();
    assert_eq!(profile.id, "openstack-sg-sg-a");
    assert_eq!(profile.tags.0, ["sg-a"]);
    assert_eq!(
        serde_json::to_string(&profile.rules).unwrap(),
        r#"{"inbound_rules":[],"outbound_rules":[{"ip_version":4,"action":"allow"}]}"#
    );
    assert_eq!(left_out.len(), 1);
    assert!(
        left_out[0]
            .to_string()
            .starts_with("security group rule bad:")
    );
    let stateless = SecurityGroup {
        stateful: Some(false),
        ..group
    };
    let err = super::profile(&stateless).unwrap_err().to_string();
    assert!(
        err.starts_with("security group sg-a: stateful: false"),
        "{err}"
    );
}
