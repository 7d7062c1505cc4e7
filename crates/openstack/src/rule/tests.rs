//! Security group rules → Calico rules, case by case, on the JSON Felix reads.

use calico_model::IpVersion;

use super::*;

fn neutron_rule(direction: &str, ethertype: &str) -> SecurityGroupRule {
    SecurityGroupRule {
        id: "rule-1".into(),
        security_group_id: "sg-a".into(),
        direction: direction.into(),
        ethertype: ethertype.into(),
        ..SecurityGroupRule::default()
    }
}

fn json(rule: &SecurityGroupRule) -> String {
    let (_, out) = super::rule(rule).unwrap();
    serde_json::to_string(&out).unwrap()
}

fn refused(rule: &SecurityGroupRule) -> String {
    super::rule(rule).unwrap_err().to_string()
}

#[test]
fn neutrons_default_rules() {
    let mut egress4 = neutron_rule("egress", "IPv4");
    assert_eq!(json(&egress4), r#"{"ip_version":4,"action":"allow"}"#);
    egress4.ethertype = "IPv6".into();
    assert_eq!(json(&egress4), r#"{"ip_version":6,"action":"allow"}"#);
    let mut from_group = neutron_rule("ingress", "IPv4");
    from_group.remote_group_id = Some("sg-a".into());
    assert_eq!(
        json(&from_group),
        r#"{"ip_version":4,"src_tag":"sg-a","action":"allow"}"#
    );
    let (direction, _) = rule(&from_group).unwrap();
    assert_eq!(direction, Direction::Inbound);
}

#[test]
fn protocols_ports_and_prefixes() {
    let mut tcp = neutron_rule("ingress", "IPv4");
    tcp.protocol = Some("tcp".into());
    tcp.port_range_min = Some(80);
    tcp.port_range_max = Some(81);
    tcp.remote_ip_prefix = Some("10.1.2.3/8".into());
    assert_eq!(
        json(&tcp),
        r#"{"ip_version":4,"protocol":"tcp","src_net":"10.0.0.0/8","dst_ports":["80:81"],"action":"allow"}"#
    );
    let mut udp = neutron_rule("egress", "IPv6");
    udp.protocol = Some("17".into());
    udp.port_range_min = Some(53);
    udp.port_range_max = Some(53);
    udp.remote_group_id = Some("sg-b".into());
    assert_eq!(
        json(&udp),
        r#"{"ip_version":6,"protocol":"udp","dst_tag":"sg-b","dst_ports":[53],"action":"allow"}"#
    );
    let mut gre = neutron_rule("ingress", "IPv4");
    gre.protocol = Some("gre".into());
    assert_eq!(
        json(&gre),
        r#"{"ip_version":4,"protocol":47,"action":"allow"}"#
    );
}

#[test]
fn icmp_type_and_code_come_from_the_port_range() {
    let mut ping = neutron_rule("ingress", "IPv4");
    ping.protocol = Some("icmp".into());
    ping.port_range_min = Some(8);
    ping.port_range_max = Some(0);
    assert_eq!(
        json(&ping),
        r#"{"ip_version":4,"protocol":"icmp","icmp_type":8,"icmp_code":0,"action":"allow"}"#
    );
    for (name, ethertype) in [("icmp", "IPv6"), ("ipv6-icmp", "IPv6"), ("1", "IPv6")] {
        let mut rule = neutron_rule("ingress", ethertype);
        rule.protocol = Some(name.into());
        assert_eq!(
            json(&rule),
            r#"{"ip_version":6,"protocol":"icmpv6","action":"allow"}"#,
            "{name}"
        );
    }
}

#[test]
fn rules_calico_cannot_express_name_the_rule_and_the_reason() {
    let mut dccp = neutron_rule("ingress", "IPv4");
    dccp.protocol = Some("dccp".into());
    dccp.port_range_min = Some(5000);
    dccp.port_range_max = Some(5001);
    assert_eq!(
        refused(&dccp),
        "security group rule rule-1: a port range with protocol \"dccp\" (33): Calico matches \
         ports of tcp, udp, sctp and udplite only"
    );
    let mut zero = neutron_rule("ingress", "IPv4");
    zero.protocol = Some("hopopt".into());
    assert!(refused(&zero).contains("Calico cannot match protocol 0"));
    let mut any_type = neutron_rule("ingress", "IPv4");
    any_type.protocol = Some("icmp".into());
    any_type.port_range_min = Some(255);
    assert!(
        refused(&any_type).contains("icmp_type"),
        "{}",
        refused(&any_type)
    );
    let mut v6_prefix = neutron_rule("ingress", "IPv4");
    v6_prefix.remote_ip_prefix = Some("2001:db8::/32".into());
    assert!(refused(&v6_prefix).contains("not an IPv4 prefix"));
    let mut address_group = neutron_rule("ingress", "IPv4");
    address_group.remote_address_group_id = Some("ag".into());
    assert!(refused(&address_group).contains("address groups are not supported"));
    let mut unknown = neutron_rule("ingress", "IPv4");
    unknown.protocol = Some("quic".into());
    assert!(refused(&unknown).contains("protocol \"quic\""));
    assert!(refused(&neutron_rule("sideways", "IPv4")).contains("direction \"sideways\""));
}

/// Every rule carries its ethertype's `ip_version`, whatever else it has, and is pinned to that
/// version only: no net, protocol or prefix of the other version can end up in it.
#[test]
fn the_ethertype_is_the_rules_ip_version() {
    for (ethertype, version, prefix, other_prefix) in [
        ("IPv4", IpVersion::V4, "10.1.0.0/16", "2001:db8::/32"),
        ("IPv6", IpVersion::V6, "2001:db8::/32", "10.1.0.0/16"),
    ] {
        let number = version.number();
        for direction in ["ingress", "egress"] {
            let mut variants = vec![neutron_rule(direction, ethertype)];
            let mut with_prefix = neutron_rule(direction, ethertype);
            with_prefix.remote_ip_prefix = Some(prefix.into());
            variants.push(with_prefix);
            let mut from_group = neutron_rule(direction, ethertype);
            from_group.remote_group_id = Some("sg-b".into());
            variants.push(from_group);
            for protocol in ["tcp", "icmp", "ipv6-icmp", "132"] {
                let mut with_protocol = neutron_rule(direction, ethertype);
                with_protocol.protocol = Some(protocol.into());
                variants.push(with_protocol);
            }
            for neutron in &variants {
                let Ok((_, out)) = rule(neutron) else {
                    // Only ICMPv6 in an IPv4 rule is refused among these.
                    assert_eq!(
                        (ethertype, neutron.protocol.as_deref()),
                        ("IPv4", Some("ipv6-icmp"))
                    );
                    continue;
                };
                let json = serde_json::to_string(&out).unwrap();
                assert!(
                    json.starts_with(&format!(r#"{{"ip_version":{number},"#)),
                    "{json}"
                );
                assert_eq!(out.ip_version(), Some(version), "{json}");
                assert!(
                    out.nets().all(|(_, net)| IpVersion::of_net(net) == version),
                    "{json}"
                );
                assert!(
                    out.protocol
                        .and_then(|p| p.ip_version())
                        .is_none_or(|v| v == version),
                    "{json}"
                );
            }
            let mut mixed = neutron_rule(direction, ethertype);
            mixed.remote_ip_prefix = Some(other_prefix.into());
            assert!(
                refused(&mixed).contains(&format!("not an {version} prefix")),
                "{}",
                refused(&mixed)
            );
        }
    }
}
