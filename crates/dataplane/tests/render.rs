//! Golden tests of the rendered iptables and ipset text for fixture clusters built from the
//! seed examples. Review a change with `INSTA_UPDATE=always cargo test -p calico-dataplane`
//! and `git diff crates/dataplane/tests/snapshots`.

use calico_calc::Calculator;
use calico_dataplane::{DropAction, IpVersion, RenderConfig, render_filter, render_ipsets};

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
        calico_dataplane::render_nat(IpVersion::V4)
    );
    insta::assert_snapshot!(text);
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
