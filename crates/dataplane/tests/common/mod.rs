//! Datastore updates shared by the incremental tests of both backends: each key with the values
//! it takes in turn (`None`: deleted).

pub const HOST: &str = "h1";

pub fn pool() -> Vec<(String, Vec<Option<String>>)> {
    let wep = |host: &str, name: &str| {
        format!("/calico/v1/host/{host}/workload/k8s/ns.{name}/endpoint/eth0")
    };
    let body = |iface: &str, ip: &str, profiles: &str, labels: &str| {
        Some(format!(
            r#"{{"state": "active", "name": "{iface}", "profile_ids": [{profiles}], "ipv4_nets": ["{ip}/32"], "labels": {{{labels}}}}}"#
        ))
    };
    let s = |text: &str| Some(text.to_owned());
    vec![
        (
            wep(HOST, "a"),
            vec![
                body("calia", "10.0.0.1", r#""p1""#, r#""role": "web""#),
                body("calia", "10.0.0.1", r#""p1", "p2""#, r#""role": "db""#),
                body("calia2", "10.0.0.9", r#""p2""#, ""),
                s(r#"{"state": "inactive", "name": "calia", "profile_ids": ["p3"]}"#),
                None,
            ],
        ),
        (
            wep(HOST, "b"),
            vec![
                body("calib", "10.0.0.2", r#""p2""#, r#""role": "db""#),
                body("calib", "10.0.0.2", r#""p3", "p1""#, r#""env": "prod""#),
                None,
            ],
        ),
        (
            wep("h2", "c"),
            vec![
                body("calic", "10.0.1.1", r#""p1""#, r#""role": "web""#),
                None,
            ],
        ),
        (
            format!("/calico/v1/host/{HOST}/endpoint/eth0"),
            vec![
                s(
                    r#"{"name": "eth0", "expected_ipv4_addrs": ["192.0.2.1"], "profile_ids": ["p2"], "labels": {"role": "host"}}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p1/rules".to_owned(),
            vec![
                s(
                    r#"{"inbound_rules": [{"src_tag": "t1", "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
                ),
                s(
                    r#"{"inbound_rules": [{"src_selector": "role == 'db'", "protocol": "tcp", "dst_ports": [80], "action": "allow"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/profile/p2/rules".to_owned(),
            vec![s(r#"{"inbound_rules": [{"action": "deny"}]}"#), None],
        ),
        (
            "/calico/v1/policy/profile/p3/rules".to_owned(),
            vec![s("{}"), None],
        ),
        (
            "/calico/v1/policy/profile/p1/tags".to_owned(),
            vec![s(r#"["t1"]"#), None],
        ),
        (
            "/calico/v1/policy/tier/t1/metadata".to_owned(),
            vec![s(r#"{"order": 1}"#), s(r#"{"order": 30}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t2/metadata".to_owned(),
            vec![s(r#"{"order": 20}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t1/policy/web".to_owned(),
            vec![
                s(
                    r#"{"selector": "role == 'web'", "inbound_rules": [{"src_selector": "role == 'db'", "action": "allow"}]}"#,
                ),
                s(r#"{"selector": "role != 'db'", "inbound_rules": [{"action": "next-tier"}]}"#),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t2/policy/all".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "outbound_rules": [{"protocol": "udp", "action": "deny"}]}"#,
                ),
                None,
            ],
        ),
        // Enough keyed policies in one tier for a verdict map (nftables), a NAT mapping, a
        // masquerading pool and an untracked policy of the host endpoint.
        (
            "/calico/v1/policy/tier/t1/policy/keyed1".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "order": 1, "inbound_rules": [{"protocol": "tcp", "dst_ports": [80, "8000:8080"], "action": "allow"}]}"#,
                ),
                s(
                    r#"{"selector": "all()", "order": 1, "inbound_rules": [{"protocol": "udp", "dst_ports": [53], "action": "deny"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t1/policy/keyed2".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "order": 2, "inbound_rules": [{"protocol": "tcp", "dst_ports": [443], "src_selector": "role == 'web'", "action": "allow"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/policy/tier/t1/policy/keyed3".to_owned(),
            vec![
                s(
                    r#"{"selector": "all()", "order": 3, "inbound_rules": [{"protocol": "tcp", "dst_ports": ["1:1000"], "action": "next-tier"}, {"protocol": "icmp", "action": "allow"}]}"#,
                ),
                None,
            ],
        ),
        (
            wep(HOST, "d"),
            vec![
                s(
                    r#"{"state": "active", "name": "calid", "profile_ids": ["p1"], "ipv4_nets": ["10.0.0.4/32", "10.0.0.5/32"], "ipv6_nets": ["fd00::4/128"], "ipv4_nat": [{"int_ip": "10.0.0.4", "ext_ip": "172.16.0.4"}]}"#,
                ),
                None,
            ],
        ),
        (
            "/calico/v1/ipam/v4/pool/10.0.0.0-16".to_owned(),
            vec![s(r#"{"cidr": "10.0.0.0/16", "masquerade": true}"#), None],
        ),
        (
            "/calico/v1/policy/tier/t2/policy/raw".to_owned(),
            vec![
                s(
                    r#"{"selector": "role == 'host'", "untracked": true, "inbound_rules": [{"protocol": "tcp", "dst_ports": [179], "action": "allow"}]}"#,
                ),
                None,
            ],
        ),
    ]
}
