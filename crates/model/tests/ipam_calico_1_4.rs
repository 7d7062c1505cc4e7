//! Calico 1.4's IPAM values, exactly as libcalico 0.15 writes them (the golden fixtures of
//! `calico-ipam`, `crates/ipam/tests/fixtures/calico-1.4/`), read by the model as `calicoctl get`,
//! `put` and `validate` read them: checked against their key, and equal after a round trip
//! through our own spelling.

mod common;

use calico_model::ipam::{AllocationBlock, AllocationHandle, IpamConfig};
use calico_model::{Key, Value, parse_value};
use common::round_trip;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ipam/tests/fixtures/calico-1.4"
);

/// (file, its text, the key it is stored at)
const BLOCKS: [(&str, &str, &str); 7] = [
    (
        "no-host-block.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/no-host-block.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26",
    ),
    (
        "no-host-block.after-release.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/no-host-block.after-release.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26",
    ),
    (
        "strict-block.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/strict-block.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26",
    ),
    (
        "strict-block.after-release.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/strict-block.after-release.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26",
    ),
    (
        "strict-block.after-assign.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/strict-block.after-assign.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26",
    ),
    (
        "pre-0.15-block.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/pre-0.15-block.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.128-26",
    ),
    (
        "pre-0.15-block.after-assign.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/pre-0.15-block.after-assign.json"),
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.128-26",
    ),
];

const HANDLES: [(&str, &str, &str); 3] = [
    (
        "handle-ba11f1de.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/handle-ba11f1de.json"),
        "/calico/ipam/v2/handle/ba11f1de-fc4d-46fd-9f15-424f4ef05a3a",
    ),
    (
        "handle-node1-web.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/handle-node1-web.json"),
        "/calico/ipam/v2/handle/node1-web",
    ),
    (
        "handle-old.json",
        include_str!("../../ipam/tests/fixtures/calico-1.4/handle-old.json"),
        "/calico/ipam/v2/handle/old",
    ),
];

const CONFIG: &str = include_str!("../../ipam/tests/fixtures/calico-1.4/config.json");

fn value(key: &str, raw: &str) -> Value {
    let key = Key::parse(key).unwrap();
    parse_value(&key, raw).unwrap_or_else(|e| panic!("{key}: {e}\n{raw}"))
}

fn block(name: &str) -> AllocationBlock {
    let (_, raw, key) = BLOCKS.iter().find(|(file, ..)| *file == name).unwrap();
    match value(key, raw) {
        Value::Block(block) => *block,
        other => panic!("{name}: read as {other:?}"),
    }
}

/// A new 1.4 fixture in `calico-ipam` must be read here too.
#[test]
fn every_calico_1_4_fixture_is_read() {
    let mut found: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap_or_else(|e| panic!("{FIXTURES}: {e}"))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    found.sort();
    let mut tested: Vec<&str> = BLOCKS.iter().chain(&HANDLES).map(|(f, ..)| *f).collect();
    tested.push("config.json");
    tested.sort_unstable();
    assert_eq!(found, tested);
}

#[test]
fn every_calico_1_4_block_reads_against_its_key_and_round_trips() {
    for (name, raw, key) in BLOCKS {
        value(key, raw);
        let parsed: AllocationBlock = round_trip(raw);
        let ours = serde_json::to_string(&parsed).unwrap();
        assert!(
            !ours.contains("strict_affinity") && !ours.contains("handle_id"),
            "{name}: {ours}"
        );
    }
}

#[test]
fn a_block_of_no_host_is_read_from_an_empty_affinity() {
    let block = block("no-host-block.json");
    assert_eq!((block.affinity.as_deref(), block.host()), (None, None));
    assert!(!block.strict_affinity);
    assert_eq!(block.attributes[0].primary, None);
    let attribute = &block.attributes[1];
    assert_eq!(
        attribute.primary.as_deref(),
        Some("ba11f1de-fc4d-46fd-9f15-424f4ef05a3a")
    );
    let details = attribute.secondary.as_ref().unwrap();
    assert_eq!(details["container-id"], "ba11f1de");
    assert_eq!(details["rack"], "1", "a number is held as its JSON text");
    assert_eq!(block.unallocated.as_ref().unwrap().last(), Some(&3));
}

#[test]
fn a_strict_block_keeps_its_flag_and_its_host() {
    for name in ["strict-block.json", "strict-block.after-assign.json"] {
        let block = block(name);
        assert!(block.strict_affinity, "{name}");
        assert_eq!(block.host(), Some("node1"), "{name}");
        assert_eq!(block.attributes[0].primary.as_deref(), Some("node1-web"));
    }
}

#[test]
fn a_block_written_before_libcalico_0_15_has_no_free_list_and_no_strict_flag() {
    let block = block("pre-0.15-block.json");
    assert_eq!(block.unallocated, None);
    assert!(!block.strict_affinity);
    assert_eq!(block.host(), Some("node2"));
    assert_eq!(
        block.attributes[0].secondary.as_ref().map(|d| d.len()),
        Some(0)
    );
}

#[test]
fn calico_1_4_handles_read_against_their_key() {
    for (name, raw, key) in HANDLES {
        assert!(matches!(value(key, raw), Value::Handle(_)), "{name}");
        let handle: AllocationHandle = round_trip(raw);
        assert_eq!(handle.block.len(), 1, "{name}");
    }
}

#[test]
fn the_calico_1_4_config_reads_and_is_written_back_as_it_was() {
    let Value::IpamConfig(config) = value("/calico/ipam/v2/config", CONFIG) else {
        panic!("not a config");
    };
    assert_eq!(config, IpamConfig::default());
    assert!(config.auto_allocate_blocks && !config.strict_affinity);
    let written = serde_json::to_string(&config).unwrap();
    let again: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(
        again,
        serde_json::from_str::<serde_json::Value>(CONFIG).unwrap()
    );
    let _: IpamConfig = round_trip(CONFIG);
}

#[test]
fn a_config_calico_1_4_refused_is_refused_naming_both_fields() {
    let key = Key::IpamConfig;
    let raw = CONFIG.replace(
        r#""auto_allocate_blocks": true"#,
        r#""auto_allocate_blocks": false"#,
    );
    let err = parse_value(&key, &raw).unwrap_err();
    assert_eq!(err.field, "auto_allocate_blocks");
    assert!(
        err.reason.contains("while strict_affinity is false"),
        "{err}"
    );
}
