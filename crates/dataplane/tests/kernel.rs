//! The rendered text is what the real kernel tools accept: ipset restore and iptables-restore
//! (IPv4 and IPv6) load it inside a network namespace made for the test.

use calico_calc::Calculator;
use calico_dataplane::{
    DropAction, IpVersion, RenderConfig, render_filter, render_ipsets, render_nat,
    render_pool_ipsets, render_raw,
};
use calico_testkit::NetNs;

fn calculator() -> Calculator {
    let mut calc = Calculator::new("h1");
    let updates = [
        (
            "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
            r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"], "ipv6_nets": ["fd00::1/128"], "ipv4_nat": [{"int_ip": "10.0.0.1", "ext_ip": "10.1.0.1"}], "ipv6_nat": [{"int_ip": "fd00::1", "ext_ip": "fd00::101"}], "labels": {"role": "web"}}"#,
        ),
        (
            "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0",
            r#"{"state": "active", "name": "calidb", "profile_ids": ["db", "missing"], "ipv4_nets": ["10.0.0.2/32", "10.0.0.3/32"]}"#,
        ),
        (
            "/calico/v1/host/h1/endpoint/eth0",
            r#"{"name": "eth0", "expected_ipv4_addrs": ["192.0.2.1"], "profile_ids": ["web"]}"#,
        ),
        (
            "/calico/v1/policy/profile/web/rules",
            r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80, "8000:8100"], "src_tag": "web", "action": "allow"}, {"protocol": "icmpv6", "icmp_type": 128, "action": "allow"}, {"protocol": "icmp", "!icmp_type": 3, "!icmp_code": 1}], "outbound_rules": [{"dst_selector": "role == 'web'", "log_prefix": "to web", "action": "allow"}]}"#,
        ),
        ("/calico/v1/policy/profile/web/tags", r#"["web"]"#),
        (
            "/calico/v1/policy/profile/db/rules",
            r#"{"inbound_rules": [{"!src_selector": "has(role)", "!dst_ports": [22], "protocol": "udp", "action": "deny"}, {"action": "log"}]}"#,
        ),
        ("/calico/v1/policy/tier/t1/metadata", r#"{"order": 1}"#),
        (
            "/calico/v1/ipam/v4/pool/10.0.0.0-16",
            r#"{"cidr": "10.0.0.0/16", "masquerade": true}"#,
        ),
        (
            "/calico/v1/ipam/v4/pool/10.1.0.0-16",
            r#"{"cidr": "10.1.0.0/16"}"#,
        ),
        (
            "/calico/v1/ipam/v6/pool/fd00::-64",
            r#"{"cidr": "fd00::/64", "masquerade": true}"#,
        ),
        (
            "/calico/v1/policy/tier/t1/policy/p1",
            r#"{"selector": "all()", "inbound_rules": [{"!src_net": "10.0.0.0/8", "action": "next-tier"}], "outbound_rules": [{"action": "next-tier"}]}"#,
        ),
        ("/calico/v1/policy/tier/t2/metadata", r#"{"order": 2}"#),
        (
            "/calico/v1/policy/tier/t2/policy/raw",
            r#"{"selector": "all()", "untracked": true, "inbound_rules": [{"protocol": "tcp", "src_net": "192.0.2.0/24", "dst_ports": [179], "action": "allow"}, {"src_net": "198.51.100.0/24", "action": "deny"}], "outbound_rules": [{"protocol": "tcp", "dst_ports": [179], "action": "allow"}]}"#,
        ),
        (
            "/calico/v1/policy/tier/t2/policy/p2",
            r#"{"selector": "role == 'web'", "inbound_rules": [{"protocol": 132, "action": "deny"}]}"#,
        ),
    ];
    for (key, value) in updates {
        calc.apply(key, Some(value));
    }
    calc
}

#[test]
fn iptables_restore_and_ipset_restore_accept_the_rendered_text() {
    let calc = calculator();
    let ns = NetNs::new("calico-render");
    let config = RenderConfig {
        drop_action: DropAction::LogAndDrop,
        ..RenderConfig::default()
    };
    for (version, restore, save) in [
        (IpVersion::V4, "iptables-restore", "iptables-save"),
        (IpVersion::V6, "ip6tables-restore", "ip6tables-save"),
    ] {
        ns.run_ok("ipset", &["restore"], &render_ipsets(calc.state(), version));
        ns.run_ok(
            "ipset",
            &["restore"],
            &render_pool_ipsets(calc.state(), version),
        );
        ns.run_ok(
            restore,
            &["--noflush"],
            &render_nat(calc.state(), &config, version),
        );
        ns.run_ok(
            restore,
            &["--noflush"],
            &render_raw(calc.state(), &config, version),
        );
        let raw = ns.run_ok(save, &["-t", "raw"], "");
        assert!(
            raw.contains("-A cali-ui-eth0") && raw.contains("-j NOTRACK"),
            "{raw}"
        );
        let nat = ns.run_ok(save, &["-t", "nat"], "");
        assert!(nat.contains("-j MASQUERADE"), "{nat}");
        assert!(nat.contains(":cali-PREROUTING"), "{nat}");
        // The metadata DNAT (IPv4 only), as the kernel reports it back.
        assert_eq!(
            nat.contains(
                "-A cali-PREROUTING -d 169.254.169.254/32 -i cali+ -p tcp -m tcp --dport 80 \
                 -m comment --comment metadata -j DNAT --to-destination 127.0.0.1:8775"
            ),
            version == IpVersion::V4,
            "{nat}"
        );
        // The NAT mapping, as the kernel reports it back.
        let (int, ext, len) = match version {
            IpVersion::V4 => ("10.0.0.1", "10.1.0.1", 32),
            IpVersion::V6 => ("fd00::1", "fd00::101", 128),
        };
        for rule in [
            format!("-A cali-fip-dnat -d {ext}/{len} -j DNAT --to-destination {int}"),
            format!("-A cali-fip-snat -s {int}/{len} -d {int}/{len} -j SNAT --to-source {ext}"),
            "-A cali-PREROUTING -j cali-fip-dnat".to_owned(),
            "-A cali-OUTPUT -j cali-fip-dnat".to_owned(),
            "-A cali-POSTROUTING -j cali-fip-snat".to_owned(),
        ] {
            assert!(nat.contains(&rule), "{rule} in {nat}");
        }
        let filter = render_filter(calc.state(), &config, version);
        ns.run_ok(restore, &["--noflush"], &filter);
        // Loading it again (what a resync does) works too, and leaves the same rules.
        let first = ns.run_ok(save, &["-t", "filter"], "");
        ns.run_ok(restore, &["--noflush"], &filter);
        let second = ns.run_ok(save, &["-t", "filter"], "");
        assert_eq!(rules_only(&first), rules_only(&second));
        let rules = rules_only(&first);
        let expected = filter.lines().filter(|l| l.starts_with("-A ")).count();
        assert_eq!(
            rules.len(),
            expected,
            "{version:?}: every rendered rule is in the kernel"
        );
        if version == IpVersion::V4 {
            // db has two IPv4 addresses: its anti-spoofing check is a chain of its own.
            assert!(
                rules
                    .iter()
                    .any(|r| r.contains("-A cali-we-calidb -j cali-sp-calidb"))
            );
        }
    }
    let sets = ns.run_ok("ipset", &["list", "-n"], "");
    let masq = ns.run_ok("ipset", &["list", "cali4-masq-pools"], "");
    assert!(
        masq.contains("10.0.0.0/16") && !masq.contains("10.1.0.0/16"),
        "{masq}"
    );
    assert!(sets.lines().any(|s| s.starts_with("cali4-t")), "{sets}");
    assert!(sets.lines().any(|s| s.starts_with("cali6-s")), "{sets}");
}

/// The `-A` lines of iptables-save output.
fn rules_only(save: &str) -> Vec<String> {
    save.lines()
        .filter(|l| l.starts_with("-A "))
        .map(str::to_owned)
        .collect()
}
