//! Golden tests of the rendered iptables and ipset text for fixture clusters built from the
//! seed examples. Review a change with `INSTA_UPDATE=always cargo test -p calico-dataplane`
//! and `git diff crates/dataplane/tests/snapshots`.

use calico_calc::Calculator;
use calico_dataplane::{
    DropAction, InterfacePrefixes, IpVersion, RenderConfig, render_filter, render_ipsets,
};

/// The calculator for `host`, fed the bundles of `examples/` plus `extra` (key, value) pairs.
fn cluster(host: &str, extra: &[(&str, &str)]) -> Calculator {
    let mut calc = Calculator::new(host);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut bundles: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    bundles.sort();
    for path in bundles {
        let text = std::fs::read_to_string(&path).unwrap();
        let bundle: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).unwrap();
        for (key, value) in bundle {
            let raw = match value {
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            };
            calc.apply(&key, Some(&raw));
        }
    }
    for (key, value) in extra {
        calc.apply(key, Some(value));
    }
    calc
}

#[test]
fn seed_examples_ipv4_filter() {
    let calc = cluster("my-host", &[]);
    let text = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V4);
    insta::assert_snapshot!(text);
}

#[test]
fn seed_examples_ipv6_filter() {
    let calc = cluster("my-host", &[]);
    let text = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V6);
    insta::assert_snapshot!(text);
}

#[test]
fn seed_examples_ipsets() {
    let calc = cluster("my-host", &[]);
    insta::assert_snapshot!(render_ipsets(calc.state(), IpVersion::V4));
}

const MATCHES_PROFILE: &str = r#"{
  "inbound_rules": [
    {"protocol": "tcp", "dst_ports": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "20:30", 40], "action": "allow"},
    {"protocol": "udp", "!dst_ports": [53], "!src_net": "10.0.0.0/8", "log_prefix": "odd udp", "action": "deny"},
    {"protocol": "icmp", "!icmp_type": 3, "!icmp_code": 4, "action": "allow"},
    {"protocol": "icmpv6", "icmp_type": 128, "action": "allow"},
    {"!src_selector": "has(role)", "!dst_tag": "db-user", "action": "next-tier"},
    {"action": "log"}
  ],
  "outbound_rules": [{"dst_selector": "deployment == 'prod' && app in {'postgres', 'frontend'}", "action": "allow"}]
}"#;

#[test]
fn every_kind_of_match_with_drop_override() {
    let calc = cluster(
        "my-host",
        &[("/calico/v1/policy/profile/database/rules", MATCHES_PROFILE)],
    );
    let config = RenderConfig {
        drop_action: DropAction::LogAndDrop,
        ..RenderConfig::default()
    };
    let v4 = render_filter(calc.state(), &config, IpVersion::V4);
    let v6 = render_filter(calc.state(), &config, IpVersion::V6);
    let profile_v4: Vec<&str> = v4
        .lines()
        .filter(|l| l.contains("profile database"))
        .collect();
    let profile_v6: Vec<&str> = v6
        .lines()
        .filter(|l| l.contains("profile database"))
        .collect();
    insta::assert_snapshot!("matches_v4", profile_v4.join("\n"));
    insta::assert_snapshot!("matches_v6", profile_v6.join("\n"));
}

#[test]
fn a_host_with_no_endpoints_has_only_the_entry_and_dispatch_chains() {
    let calc = cluster("elsewhere", &[]);
    let text = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V4);
    insta::assert_snapshot!(text);
}

#[test]
fn seed_examples_nat_and_pool_sets() {
    let calc = cluster("my-host", &[]);
    let text = format!(
        "{}{}",
        calico_dataplane::render_pool_ipsets(calc.state(), IpVersion::V4),
        calico_dataplane::render_nat(calc.state(), &RenderConfig::default(), IpVersion::V4)
    );
    insta::assert_snapshot!(text);
}

/// The rules of one chain in restore input, without the `-A <chain> ` prefix.
fn chain_rules<'a>(text: &'a str, chain: &str) -> Vec<&'a str> {
    let prefix = format!("-A {chain} ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect()
}

/// `MetadataAddr=10.0.0.5`, `MetadataPort=9697`: workloads' TCP to 169.254.169.254:80 is
/// DNATed there (IPv4 only, only from workload interfaces), and the bootstrap whitelist of
/// `cali-INPUT` (DHCP, DNS, metadata; IPv6: DHCPv6, DNS, ND/MLD) comes before the workload's
/// outbound policy.
#[test]
fn metadata_path_and_bootstrap_whitelist_with_metadata_addr() {
    let calc = cluster("my-host", &[]);
    let config = RenderConfig {
        interface_prefixes: InterfacePrefixes::new(["tap"]).unwrap(),
        metadata: Some("10.0.0.5:9697".parse().unwrap()),
        ..RenderConfig::default()
    };
    let nat4 = calico_dataplane::render_nat(calc.state(), &config, IpVersion::V4);
    assert_eq!(
        chain_rules(&nat4, "cali-PREROUTING"),
        [
            "-i tap+ -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -m comment --comment metadata \
          -j DNAT --to-destination 10.0.0.5:9697",
            "-j cali-fip-dnat"
        ]
    );
    let nat6 = calico_dataplane::render_nat(calc.state(), &config, IpVersion::V6);
    assert!(nat6.contains(":cali-PREROUTING - [0:0]"), "{nat6}");
    assert_eq!(
        chain_rules(&nat6, "cali-PREROUTING"),
        ["-j cali-fip-dnat"],
        "{nat6}"
    );

    let input4 = render_filter(calc.state(), &config, IpVersion::V4);
    insta::assert_snapshot!(
        "metadata_input_v4",
        chain_rules(&input4, "cali-INPUT").join("\n")
    );
    let input6 = render_filter(calc.state(), &config, IpVersion::V6);
    insta::assert_snapshot!(
        "metadata_input_v6",
        chain_rules(&input6, "cali-INPUT").join("\n")
    );
    let rules4 = chain_rules(&input4, "cali-INPUT");
    let whitelist = rules4
        .iter()
        .position(|r| r.contains("-d 10.0.0.5/32 -p tcp -m tcp --dport 9697 -j ACCEPT"))
        .expect("the metadata rule");
    let policy = rules4
        .iter()
        .position(|r| r.contains("-j cali-wl-out"))
        .expect("the outbound policy");
    assert!(whitelist < policy, "{rules4:#?}");
    assert!(
        !input6.contains("9697"),
        "no metadata path in IPv6: {input6}"
    );
}

/// `InterfacePrefix=cali,tap`: every rule about workload interfaces is there for both, in the
/// same place as for one, and so is the metadata DNAT; nothing else is repeated.
#[test]
fn several_interface_prefixes_repeat_only_the_workload_interface_rules() {
    let calc = cluster("my-host", &[]);
    let one = RenderConfig::default();
    let both = RenderConfig {
        interface_prefixes: InterfacePrefixes::new(["cali", "tap"]).unwrap(),
        ..RenderConfig::default()
    };
    for version in [IpVersion::V4, IpVersion::V6] {
        let single = render_filter(calc.state(), &one, version);
        let double = render_filter(calc.state(), &both, version);
        for chain in ["cali-INPUT", "cali-FORWARD", "cali-OUTPUT"] {
            // Each `cali+` rule followed by its `tap+` twin: the one-prefix chain, expanded.
            let expected: Vec<String> = chain_rules(&single, chain)
                .into_iter()
                .flat_map(|rule| match rule.contains("cali+") {
                    true => vec![rule.to_owned(), rule.replace("cali+", "tap+")],
                    false => vec![rule.to_owned()],
                })
                .collect();
            assert_eq!(chain_rules(&double, chain), expected, "{chain} {version:?}");
        }
    }
    let nat = calico_dataplane::render_nat(calc.state(), &both, IpVersion::V4);
    let dnat: Vec<_> = chain_rules(&nat, "cali-PREROUTING")
        .into_iter()
        .filter(|r| r.contains("169.254.169.254"))
        .collect();
    assert_eq!(dnat.len(), 2, "{nat}");
    assert!(dnat[0].starts_with("-i cali+ ") && dnat[1].starts_with("-i tap+ "));
}

/// `MetadataAddr=None`: no DNAT and no metadata rule; DHCP and DNS stay.
#[test]
fn no_metadata_path_without_metadata_addr() {
    let calc = cluster("my-host", &[]);
    let config = RenderConfig {
        metadata: None,
        ..RenderConfig::default()
    };
    for version in [IpVersion::V4, IpVersion::V6] {
        let nat = calico_dataplane::render_nat(calc.state(), &config, version);
        assert!(nat.contains(":cali-PREROUTING - [0:0]"), "{nat}");
        assert_eq!(
            chain_rules(&nat, "cali-PREROUTING"),
            ["-j cali-fip-dnat"],
            "{nat}"
        );
        assert!(!nat.contains("169.254.169.254"), "{nat}");
        assert!(!nat.contains("8775"), "{nat}");
        assert_eq!(chain_rules(&nat, "cali-POSTROUTING").len(), 2, "{nat}");
    }
    let with = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V4);
    let without = render_filter(calc.state(), &config, IpVersion::V4);
    let removed: Vec<&str> = chain_rules(&with, "cali-INPUT")
        .into_iter()
        .filter(|r| !chain_rules(&without, "cali-INPUT").contains(r))
        .collect();
    assert_eq!(
        removed,
        ["-i cali+ -d 127.0.0.1/32 -p tcp -m tcp --dport 8775 -j ACCEPT"],
        "only the metadata rule goes"
    );
    assert!(
        without.contains("-A cali-INPUT -i cali+ -p udp -m udp --sport 68 --dport 67 -j ACCEPT")
    );
    assert!(without.contains("-A cali-INPUT -i cali+ -p udp -m udp --dport 53 -j ACCEPT"));
    assert!(without.contains("-A cali-INPUT -i cali+ -p tcp -m tcp --dport 53 -j ACCEPT"));
    // Everything but cali-INPUT is the same.
    let other = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("-A cali-INPUT "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(other(&with), other(&without));
    assert_eq!(
        render_filter(calc.state(), &RenderConfig::default(), IpVersion::V6),
        render_filter(calc.state(), &config, IpVersion::V6),
        "IPv6 has no metadata path either way"
    );
}

const NATTED: &str = "/calico/v1/host/my-host/workload/k8s/ns.natted/endpoint/eth0";

/// 1:1 NAT (`ipv4_nat` / `ipv6_nat`): each mapping of an active local workload is a DNAT of
/// its `ext_ip` (from `cali-PREROUTING` and the host's own `cali-OUTPUT`) and a hairpin SNAT
/// (from `cali-POSTROUTING`, before the masquerade rule), in each IP version's table; an
/// inactive endpoint's or another host's mappings are not rendered, and a removed mapping
/// leaves no rule.
#[test]
fn nat_mappings_in_the_nat_table() {
    let natted = r#"{"state": "active", "name": "calinat", "profile_ids": [], "ipv4_nets": ["10.65.9.1/32", "10.65.9.2/32"], "ipv4_nat": [{"int_ip": "10.65.9.1", "ext_ip": "10.67.0.1"}, {"int_ip": "10.65.9.2", "ext_ip": "10.67.0.2"}], "ipv6_nets": ["fd00:65::9/128"], "ipv6_nat": [{"int_ip": "fd00:65::9", "ext_ip": "fd00:67::9"}]}"#;
    let inactive = r#"{"state": "inactive", "name": "calioff", "profile_ids": [], "ipv4_nets": ["10.65.9.3/32"], "ipv4_nat": [{"int_ip": "10.65.9.3", "ext_ip": "10.67.0.3"}]}"#;
    let elsewhere = r#"{"state": "active", "name": "califar", "profile_ids": [], "ipv4_nets": ["10.65.9.4/32"], "ipv4_nat": [{"int_ip": "10.65.9.4", "ext_ip": "10.67.0.4"}]}"#;
    let mut calc = cluster(
        "my-host",
        &[
            (NATTED, natted),
            (
                "/calico/v1/host/my-host/workload/k8s/ns.off/endpoint/eth0",
                inactive,
            ),
            (
                "/calico/v1/host/other/workload/k8s/ns.far/endpoint/eth0",
                elsewhere,
            ),
        ],
    );
    let config = RenderConfig::default();
    let nat4 = calico_dataplane::render_nat(calc.state(), &config, IpVersion::V4);
    let nat6 = calico_dataplane::render_nat(calc.state(), &config, IpVersion::V6);
    insta::assert_snapshot!("nat_mappings_v4", nat4);
    insta::assert_snapshot!("nat_mappings_v6", nat6);
    for nat in [&nat4, &nat6] {
        assert_eq!(chain_rules(nat, "cali-OUTPUT"), ["-j cali-fip-dnat"]);
        assert_eq!(
            chain_rules(nat, "cali-POSTROUTING")[0],
            "-j cali-fip-snat",
            "the hairpin SNAT comes before the masquerade rule"
        );
        assert!(
            !nat.contains("10.67.0.3") && !nat.contains("10.67.0.4"),
            "{nat}"
        );
    }
    assert!(
        chain_rules(&nat4, "cali-fip-dnat")
            .contains(&"-d 10.67.0.1/32 -j DNAT --to-destination 10.65.9.1")
    );
    assert!(
        chain_rules(&nat4, "cali-fip-snat")
            .contains(&"-s 10.65.9.1/32 -d 10.65.9.1/32 -j SNAT --to-source 10.67.0.1")
    );
    assert!(!nat4.contains("fd00"), "{nat4}");
    assert_eq!(
        chain_rules(&nat6, "cali-fip-dnat"),
        ["-d fd00:67::9/128 -j DNAT --to-destination fd00:65::9"]
    );
    assert_eq!(
        chain_rules(&nat6, "cali-fip-snat"),
        ["-s fd00:65::9/128 -d fd00:65::9/128 -j SNAT --to-source fd00:67::9"]
    );

    // The mappings go: no rule mentions them, the chains stay (empty).
    calc.apply(
        NATTED,
        Some(r#"{"state": "active", "name": "calinat", "profile_ids": [], "ipv4_nets": ["10.65.9.1/32", "10.65.9.2/32"], "ipv6_nets": ["fd00:65::9/128"]}"#),
    );
    for version in [IpVersion::V4, IpVersion::V6] {
        let nat = calico_dataplane::render_nat(calc.state(), &config, version);
        assert!(!nat.contains("10.67.") && !nat.contains("fd00:67"), "{nat}");
        assert!(nat.contains(":cali-fip-dnat - [0:0]"), "{nat}");
    }
}

#[test]
fn untracked_policy_in_the_raw_table() {
    let calc = cluster(
        "my-host",
        &[(
            "/calico/v1/policy/tier/failsafe/policy/bgp",
            r#"{"selector": "role == 'webserver'", "untracked": true, "order": 1,
                "inbound_rules": [{"protocol": "tcp", "src_net": "192.0.2.0/24", "dst_ports": [179], "action": "allow"}],
                "outbound_rules": [{"protocol": "tcp", "dst_ports": [179], "action": "allow"}]}"#,
        )],
    );
    let config = RenderConfig::default();
    let raw = calico_dataplane::render_raw(calc.state(), &config, IpVersion::V4);
    insta::assert_snapshot!(raw);
    // The filter table does not render it, and accepts what it allowed.
    let filter = render_filter(calc.state(), &config, IpVersion::V4);
    assert!(!filter.contains("policy failsafe/bgp"), "{filter}");
    assert!(filter.contains("untracked policy allowed"), "{filter}");
}

/// A tier of several policies has a chain of its own that leaves as soon as one accepted or
/// passed; a tier of one is a plain jump. The last policy needs no test after it.
#[test]
fn a_tier_of_several_policies_has_its_own_chain() {
    let calc = cluster(
        "my-host",
        &[(
            "/calico/v1/policy/tier/failsafe/policy/zz-last",
            r#"{"selector": "all()", "order": 1000,
                "inbound_rules": [{"protocol": "tcp", "dst_ports": [8080], "action": "allow"}],
                "outbound_rules": [{"action": "next-tier"}]}"#,
        )],
    );
    let text = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V4);
    let endpoint = chain_rules(&text, "cali-wi-cali0ef24b1");
    assert_eq!(endpoint[1], "-j cali-ti0-cali0ef24b1", "{text}");
    let failsafe = calico_dataplane::policy_chain(true, "failsafe", "failsafe");
    let last = calico_dataplane::policy_chain(true, "failsafe", "zz-last");
    assert_eq!(
        chain_rules(&text, "cali-ti0-cali0ef24b1"),
        [
            format!("-j {failsafe}"),
            "-m mark ! --mark 0x0/0x3000000 -j RETURN".to_owned(),
            format!("-j {last}"),
        ]
    );
    let host = chain_rules(&text, "cali-hi-eth0");
    assert!(host.contains(&"-j cali-thi0-eth0"), "{text}");
    assert!(
        host.contains(
            &format!(
                "-j {}",
                calico_dataplane::policy_chain(true, "my-tier", "webserver")
            )
            .as_str()
        ),
        "a tier of one stays a jump: {text}"
    );
    // The policy's own chain: an allow as its last rule needs no RETURN after it.
    assert_eq!(chain_rules(&text, &last).len(), 1, "{text}");
}

/// The firewall model both backends encode, for the scenarios above: the semantics, before any
/// syntax (golden, so a change of meaning shows apart from a change of encoding).
fn model(calc: &Calculator, config: &RenderConfig) -> String {
    format!(
        "{:#?}",
        calico_dataplane::firewall::build::firewall(calc.state(), config)
    )
}

#[test]
fn model_seed_examples() {
    let calc = cluster("my-host", &[]);
    insta::assert_snapshot!(model(&calc, &RenderConfig::default()));
}

#[test]
fn model_seed_examples_with_flow_logs() {
    let calc = cluster("my-host", &[]);
    let config = RenderConfig {
        flow_logs: true,
        ..RenderConfig::default()
    };
    insta::assert_snapshot!(model(&calc, &config));
}

#[test]
fn model_every_kind_of_match() {
    let calc = cluster(
        "my-host",
        &[("/calico/v1/policy/profile/database/rules", MATCHES_PROFILE)],
    );
    let firewall =
        calico_dataplane::firewall::build::firewall(calc.state(), &RenderConfig::default());
    insta::assert_snapshot!(format!("{:#?}", firewall.profiles["database"]));
}

#[test]
fn model_a_host_with_no_endpoints() {
    let calc = cluster("elsewhere", &[]);
    insta::assert_snapshot!(model(&calc, &RenderConfig::default()));
}

#[test]
fn model_untracked_policy() {
    let calc = cluster(
        "my-host",
        &[(
            "/calico/v1/policy/tier/failsafe/policy/bgp",
            r#"{"selector": "role == 'webserver'", "untracked": true, "order": 1,
                "inbound_rules": [{"protocol": "tcp", "src_net": "192.0.2.0/24", "dst_ports": [179], "action": "allow"}],
                "outbound_rules": [{"protocol": "tcp", "dst_ports": [179], "action": "allow"}]}"#,
        )],
    );
    let firewall =
        calico_dataplane::firewall::build::firewall(calc.state(), &RenderConfig::default());
    insta::assert_snapshot!(format!("{:#?}", firewall.untracked));
}
