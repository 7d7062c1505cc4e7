//! Bad input at volume for the model's parsers: etcd keys, the value of every key kind, the
//! selector language and the JSON bundle. Arbitrary bytes and mutated real inputs (the seed
//! examples' keys and values, the fixtures, the selector tests' selectors); see
//! `fuzzing/mod.rs` for the harness and `scripts/fuzz.sh` for the long run.

mod fuzzing;
#[path = "fuzzing/json.rs"]
mod fuzzing_json;

use calico_model::selector::{MAX_DEPTH, Selector};
use calico_model::{Key, bundle, parse_value};
use fuzzing::{Target, Verdict, ensure, input, run, text};

/// The seed examples: bundles of real keys and values of every kind an operator loads.
const EXAMPLES: &[&str] = &[
    include_str!("../../../examples/00-ready.json"),
    include_str!("../../../examples/10-failsafe-tier.json"),
    include_str!("../../../examples/20-webserver-tier.json"),
    include_str!("../../../examples/30-profiles.json"),
    include_str!("../../../examples/40-endpoints.json"),
    include_str!("../../../examples/50-ip-pools.json"),
    include_str!("../../../examples/60-bgp.json"),
];

/// Keys and values of the kinds the examples do not hold (fixtures and the value tests').
const MORE_PAIRS: &[(&str, &str)] = &[
    (
        "/calico/v1/host/node1/workload/k8s/default.nginx/endpoint/eth0",
        include_str!("fixtures/workload-endpoint.json"),
    ),
    (
        "/calico/v1/host/h/endpoint/e",
        include_str!("fixtures/host-endpoint-named.json"),
    ),
    (
        "/calico/v1/policy/profile/p/rules",
        include_str!("fixtures/profile-rules.json"),
    ),
    (
        "/calico/v1/policy/profile/p/labels",
        include_str!("fixtures/profile-labels.json"),
    ),
    (
        "/calico/v1/policy/tier/default/policy/p",
        include_str!("fixtures/policy-webserver.json"),
    ),
    (
        "/calico/v1/ipam/v6/pool/fd80:24e2:f998:72d6::-64",
        include_str!("fixtures/pool-v6.json"),
    ),
    (
        "/calico/ipam/v2/assignment/ipv4/block/192.168.0.0-24",
        include_str!("fixtures/ipam-block.json"),
    ),
    (
        "/calico/ipam/v2/handle/0cd47986-24ad-4c00-b9d3-5db9e5c02028",
        include_str!("fixtures/ipam-handle.json"),
    ),
    (
        "/calico/bgp/v1/global/peer_v4/192.0.2.1",
        include_str!("fixtures/bgp-peer.json"),
    ),
    (
        "/calico/ipam/v2/config",
        include_str!("../../ipam/tests/fixtures/calico-1.4/config.json"),
    ),
    (
        "/calico/ipam/v2/host/calico-host-01/ipv6/block/fd80::-122",
        "",
    ),
    (
        "/calico/v1/host/h1/vxlan_tunnel",
        r#"{"address": "10.0.0.1", "mac": "66:00:00:00:00:01", "parent_address": "192.0.2.1/24"}"#,
    ),
    (
        "/calico/felix/v1/host/h/status",
        r#"{"time": "2016-06-01T12:00:00Z", "uptime": 30.5, "first_update": false}"#,
    ),
    (
        "/calico/felix/v1/host/h/workload/k8s/ns.pod/endpoint/eth0",
        r#"{"status": "up"}"#,
    ),
    ("/calico/v1/host/my-host/bird_ip", "10.0.0.1"),
    ("/calico/bgp/v1/host/node1/ip_addr_v6", "fd00::1"),
    ("/calico/bgp/v1/host/node1/rr_cluster_id", "1.2.3.4"),
    ("/calico/bgp/v1/host/node1/loglevel", "debug"),
    ("/calico/bgp/v1/host/node1/as_num", "4200000000"),
    ("/calico/v1/host/node1/config/LogSeverityScreen", "INFO"),
];

const KEY_TOKENS: &[&[u8]] = &[
    b"/calico/",
    b"v1",
    b"/host/",
    b"/workload/",
    b"/endpoint/",
    b"/config/",
    b"/policy/tier/",
    b"/policy/profile/",
    b"/ipam/v2/",
    b"/assignment/ipv4/block/",
    b"ipv6",
    b"v4",
    b"v6",
    b"/bgp/v1/",
    b"/felix/v1/",
    b"peer_v4/",
    b"bgp_peer_v6/",
    b"10.65.0.0-26",
    b"fd80::-64",
    b"::ffff:1.2.3.4",
    b"-",
    b"..",
    b"%25",
];

const VALUE_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"\":",
    b"null",
    b"true",
    b"-1",
    b"1.5e999",
    b"\"10.0.0.0/8\"",
    b"\"fd00::/200\"",
    b"\"10.0.0.1/33\"",
    b"\"action\": \"deny\"",
    b"\"protocol\": \"icmp\"",
    b"\"icmp_type\": 255",
    b"\"dst_ports\": [\"1:65535\", 0, 65536, \"5:3\"]",
    b"\"selector\": \"a == 'b'\"",
    b"\"order\": 1e300",
    b"\"mac\": \"ff:ff:ff:ff:ff:ff\"",
    b"\"allocations\": [",
    b"\"ipv4_nets\": [\"10.0.0.1/32\"]",
    b"\"labels\": {\"calico/x\": \"\"}",
    b"\"as_num\": \"4294967296\"",
    b"\\u0000",
    b"\\ud800",
];

const SELECTORS: &[&str] = &[
    r#"role == "db""#,
    r#"role != 'web' && env == "prod""#,
    r#"type in {"frontend", "backend"}"#,
    r#"type not in {}"#,
    r#"has(calico/k8s_ns) || !has(a)"#,
    r#"all()"#,
    r#"!(a == "1" || (b == "2" && !c in {"x"}))"#,
    r#"name contains "ng" && name starts with 'ng' && name ends with "x""#,
    r#"app.kubernetes.io/name == "nginx" && tier-1 != """#,
    r#"((a == "1") && ((b == "2")))"#,
    r#"x == "ünïcödé""#,
    "",
];

const SELECTOR_TOKENS: &[&[u8]] = &[
    b"==",
    b"!=",
    b"&&",
    b"||",
    b"!",
    b"(",
    b")",
    b"has(",
    b"all()",
    b" in ",
    b" not in ",
    b"{",
    b"}",
    b",",
    b"\"",
    b"'",
    b" contains ",
    b" starts with ",
    b" ends with ",
    b"((((",
    b"!!!!",
    b"a",
    b"\xc2\xa0",
];

#[test]
fn keys() {
    let seeds: Vec<Vec<u8>> = pairs().into_iter().map(|(k, _)| k.into_bytes()).collect();
    let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
    let target = Target {
        name: "model keys",
        seeds: &seeds,
        tokens: KEY_TOKENS,
    };
    run(
        target.name,
        |rng| text(&input(rng, &target)),
        |key| check_key(key),
    );
}

fn check_key(key: &str) -> Result<Verdict, String> {
    match Key::parse(key) {
        // Display writes a parsed key back exactly (one spelling per key).
        Ok(parsed) => {
            let written = parsed.to_string();
            ensure(written == key, || {
                format!("parsed and written back as {written:?}")
            })?;
            Ok(Verdict::Accepted)
        }
        Err(e) => {
            ensure(e.key == key && !e.reason.trim().is_empty(), || {
                format!("the error does not name the key and a reason: {e:?}")
            })?;
            Ok(Verdict::Rejected)
        }
    }
}

#[test]
fn values_of_every_key_kind() {
    let pairs: Vec<(Key, String)> = pairs()
        .into_iter()
        .map(|(k, v)| (Key::parse(&k).unwrap_or_else(|e| panic!("seed: {e}")), v))
        .collect();
    let all_values: Vec<&[u8]> = pairs.iter().map(|(_, v)| v.as_bytes()).collect();
    run(
        "model values",
        |rng| {
            let (key, value) = rng.pick(&pairs);
            // Mostly the key's own value mutated; sometimes another kind's (mismatches).
            let own = [value.as_bytes()];
            let seeds: &[&[u8]] = if rng.one_in(4) { &all_values } else { &own };
            // JSON values: half of the time their tree is changed rather than their bytes.
            if value.starts_with(['{', '[']) && rng.one_in(2) {
                let seed = rng.bytes(seeds);
                return (
                    key.clone(),
                    text(&fuzzing_json::mutated(rng, seed, VALUE_TOKENS)),
                );
            }
            let target = Target {
                name: "",
                seeds,
                tokens: VALUE_TOKENS,
            };
            (key.clone(), text(&input(rng, &target)))
        },
        |(key, value)| check_value(key, value),
    );
}

fn check_value(key: &Key, value: &str) -> Result<Verdict, String> {
    match parse_value(key, value) {
        Ok(_) => Ok(Verdict::Accepted),
        Err(e) => {
            let shown = e.to_string();
            ensure(!e.reason.trim().is_empty() && !shown.is_empty(), || {
                format!("an error without a reason: {e:?}")
            })?;
            ensure(names_what(&e.field, &e.reason), || {
                format!("the error names no field, position or value: {shown:?}")
            })?;
            Ok(Verdict::Rejected)
        }
    }
}

/// An error about a value names the field, or (for the value as a whole) what is wrong in
/// words that point at it: the position in the JSON text, the expected form, the field serde
/// found missing or doubled (in backquotes), the bad value (quoted), or what to store.
fn names_what(field: &str, reason: &str) -> bool {
    !field.is_empty()
        || [" at line ", "expected", "`", "\"", "must", "store "]
            .iter()
            .any(|hint| reason.contains(hint))
}

#[test]
fn selectors() {
    let seeds: Vec<&[u8]> = SELECTORS.iter().map(|s| s.as_bytes()).collect();
    let target = Target {
        name: "model selectors",
        seeds: &seeds,
        tokens: SELECTOR_TOKENS,
    };
    run(
        target.name,
        |rng| text(&input(rng, &target)),
        |s| check_selector(s),
    );
}

fn check_selector(text: &str) -> Result<Verdict, String> {
    match Selector::parse(text) {
        // The canonical form parses to itself.
        Ok(selector) => {
            let canonical = selector.canonical();
            let again = Selector::parse(canonical)
                .map_err(|e| format!("its canonical form {canonical:?} does not parse: {e}"))?;
            ensure(again.canonical() == canonical, || {
                format!("canonical {canonical:?} parses to {:?}", again.canonical())
            })?;
            Ok(Verdict::Accepted)
        }
        Err(e) => {
            let chars = text.chars().count();
            ensure(e.position <= chars && !e.reason.trim().is_empty(), || {
                format!(
                    "the error has no position within the text ({chars} characters) or no reason: {e:?}"
                )
            })?;
            Ok(Verdict::Rejected)
        }
    }
}

#[test]
fn bundles() {
    let seeds: Vec<&[u8]> = EXAMPLES.iter().map(|s| s.as_bytes()).collect();
    let target = Target {
        name: "model bundles",
        seeds: &seeds,
        tokens: VALUE_TOKENS,
    };
    run(
        target.name,
        |rng| text(&input(rng, &target)),
        |text| match bundle::parse(text) {
            Ok(_) => Ok(Verdict::Accepted),
            Err(e) => {
                let shown = e.to_string();
                ensure(shown.contains("bundle"), || {
                    format!("vague error {shown:?}")
                })?;
                Ok(Verdict::Rejected)
            }
        },
    );
}

/// Fixed with this fuzzing (the harness's long repeats reach it): a selector nested deep
/// enough overflowed the parser's stack and aborted the process. Now it is an error at the
/// first `(` or `!` too many.
#[test]
fn deeply_nested_selectors_are_refused_at_the_nesting_limit() {
    let nested = |open: &str, depth: usize| {
        let close = if open.ends_with('(') { depth } else { 0 };
        format!("{}a == \"b\"{}", open.repeat(depth), ")".repeat(close))
    };
    for open in ["(", "!", "!("] {
        let at_limit = nested(open, MAX_DEPTH / open.len());
        assert!(Selector::parse(&at_limit).is_ok(), "{open} × limit");
        let e = Selector::parse(&nested(open, 1_000_000)).unwrap_err();
        assert_eq!(e.position, MAX_DEPTH, "{open}: {e}");
        assert!(e.reason.contains("nested more than 100 levels"), "{e}");
    }
}

/// Every (key, value) of the seed examples and [`MORE_PAIRS`].
fn pairs() -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = EXAMPLES
        .iter()
        .flat_map(|text| bundle::parse(text).expect("the examples are bundles"))
        .map(|entry| (entry.key, entry.raw))
        .collect();
    pairs.extend(
        MORE_PAIRS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    pairs
}

#[test]
fn every_seed_is_valid() {
    for (key, value) in pairs() {
        let parsed = Key::parse(&key).unwrap_or_else(|e| panic!("{e}"));
        parse_value(&parsed, &value).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    for selector in SELECTORS {
        Selector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
    }
}
