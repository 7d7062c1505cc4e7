//! A policy with a long tier and name (253 characters each, as the model allows): each rule's
//! comment fits what the kernel keeps (iptables 255 bytes, nftables 128) and still ends with
//! the rule's direction and position, in the rendering (pure) and as each kernel gives it
//! back (`iptables-save`, `nft list`) from a namespace made for the test.

use calico_calc::Calculator;
use calico_dataplane::comment::{IPTABLES_COMMENT_MAX, NFT_COMMENT_MAX};
use calico_dataplane::nft::NftRenderer;
use calico_dataplane::{
    Dataplane, IpVersion, NftDataplane, RenderConfig, calico_table, render_filter,
};
use calico_linux::Netns;
use calico_linux::nft::Nft;
use calico_testkit::{NetNs, require_tool};

fn tier() -> String {
    format!("tier-{}", "t".repeat(248))
}

fn policy() -> String {
    format!("policy-{}", "p".repeat(246))
}

fn calculator() -> Calculator {
    let mut calc = Calculator::new("h1");
    let policy_key = format!("/calico/v1/policy/tier/{}/policy/{}", tier(), policy());
    let tier_key = format!("/calico/v1/policy/tier/{}/metadata", tier());
    let updates = [
        (
            "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0".to_owned(),
            r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32"], "labels": {"role": "web"}}"#,
        ),
        ("/calico/v1/policy/profile/web/rules".to_owned(), "{}"),
        (tier_key, r#"{"order": 1}"#),
        (
            policy_key,
            r#"{"selector": "role == 'web'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}, {"protocol": "udp", "action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#,
        ),
    ];
    for (key, value) in &updates {
        calc.apply(key, Some(value));
    }
    calc
}

/// The comments of the long policy's rules among `comments`: each at most `max` bytes,
/// starting with the policy's kind and the start of its tier; the direction and position of
/// each rule present.
fn check(comments: &[String], max: usize, what: &str) {
    let ours: Vec<&String> = comments
        .iter()
        .filter(|c| c.starts_with("policy tier-ttt"))
        .collect();
    for comment in &ours {
        assert!(
            comment.len() <= max,
            "{what}: {} bytes: {comment}",
            comment.len()
        );
    }
    for tail in [" inbound rule 1", " inbound rule 2", " outbound rule 1"] {
        assert!(
            ours.iter().any(|c| c.ends_with(tail)),
            "{what}: no comment ends with {tail:?}: {ours:#?}"
        );
    }
}

/// The `--comment` values of `iptables-save` (or restore) text.
fn iptables_comments(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split("--comment ").nth(1))
        .map(|rest| match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
            None => rest.split(' ').next().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// The `comment "…"` values of `nft list` output.
fn nft_comments(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split("comment \"").nth(1))
        .map(|rest| rest.split('"').next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_renderers_keep_direction_and_position_within_the_limits() {
    let calc = calculator();
    let text = render_filter(calc.state(), &RenderConfig::default(), IpVersion::V4);
    check(&iptables_comments(&text), IPTABLES_COMMENT_MAX, "iptables");

    let mut renderer = NftRenderer::new(RenderConfig::default());
    let ruleset = renderer.render_all(calc.state());
    let comments: Vec<String> = ruleset
        .chains
        .values()
        .flat_map(|chain| chain.rules.iter().filter_map(|r| r.comment.clone()))
        .collect();
    check(&comments, NFT_COMMENT_MAX, "nftables");
}

#[test]
fn iptables_keeps_the_comments_as_written() {
    require_tool("iptables-save");
    let ns = NetNs::new("longcomment");
    let calc = calculator();
    let mut dataplane = Dataplane::new(Netns::named(ns.name()), RenderConfig::default());
    dataplane
        .sync(calc.state())
        .expect("the kernel takes the tables");
    let saved = ns.run_ok("iptables-save", &["-t", "filter"], "");
    check(
        &iptables_comments(&saved),
        IPTABLES_COMMENT_MAX,
        "iptables-save",
    );
}

#[test]
fn nftables_keeps_the_comments_as_written() {
    require_tool("nft");
    let ns = NetNs::new("longcommentnft");
    let calc = calculator();
    let nft = Box::new(Nft::new(Netns::named(ns.name()), calico_table()));
    let mut dataplane = NftDataplane::with_kernel(nft, RenderConfig::default());
    dataplane
        .sync(calc.state())
        .expect("the kernel takes the table");
    let listed = ns.run_ok("nft", &["list", "table", "inet", "calico"], "");
    check(&nft_comments(&listed), NFT_COMMENT_MAX, "nft list");
}
