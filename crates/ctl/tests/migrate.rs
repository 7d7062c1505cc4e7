//! `calicoctl datastore migrate --from-v2` from a real Calico 1.4 datastore: an etcd serving the
//! v2 API, populated with the seeds' `etcdctl set` commands (v2), migrated into a second etcd
//! (v3), checked with etcdctl, run again, and refused where v3 holds other data.

use std::process::{Command, Output};

use calico_testkit::EtcdServer;
use calico_testkit::etcd_v2::EtcdV2Server;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../model/tests/fixtures");
const HOST: &str = "calico-host-01";
const HANDLE: &str = "0cd47986-24ad-4c00-b9d3-5db9e5c02028";
const WEBSERVER: &str = r#"{
  "selector": "role==\"webserver\"",
  "order": 100,
  "inbound_rules": [
    {"protocol": "tcp", "dst_ports": [80], "action": "allow"}
  ],
  "outbound_rules": [
    {"action": "allow"}
  ]
}"#;
/// The seed's "Validation failed" host endpoint (no name, no addresses).
const INVALID_KEY: &str = "/calico/v1/host/calico-host-01/endpoint/bad";
const STATUS_KEY: &str = "/calico/felix/v1/host/calico-host-01/status";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("seed fixture")
}

/// The seed examples as (key, value): 000's literal commands and the data model's examples.
fn seed_keys() -> Vec<(String, String)> {
    let workload = format!("/calico/v1/host/{HOST}/workload/docker/ba11f1de/endpoint/{HANDLE}");
    [
        ("/calico/v1/Ready", "true".to_owned()),
        (
            "/calico/v1/policy/tier/failsafe/metadata",
            r#"{"order": 0}"#.to_owned(),
        ),
        (
            "/calico/v1/policy/tier/failsafe/policy/failsafe",
            fixture("policy-failsafe.json"),
        ),
        (
            "/calico/v1/policy/tier/my-tier/metadata",
            r#"{"order": 100}"#.to_owned(),
        ),
        (
            "/calico/v1/policy/tier/my-tier/policy/webserver",
            WEBSERVER.to_owned(),
        ),
        (
            "/calico/v1/policy/profile/prof1/rules",
            fixture("profile-rules.json"),
        ),
        (
            "/calico/v1/policy/profile/prof1/tags",
            fixture("profile-tags.json"),
        ),
        (
            "/calico/v1/policy/profile/prof1/labels",
            fixture("profile-labels.json"),
        ),
        (workload.as_str(), fixture("workload-endpoint.json")),
        (
            "/calico/v1/host/calico-host-01/endpoint/eth0",
            fixture("host-endpoint-named.json"),
        ),
        (
            "/calico/v1/ipam/v4/pool/192.168.0.0-16",
            fixture("pool-v4.json"),
        ),
        (
            "/calico/ipam/v2/assignment/ipv4/block/192.168.0.0-24",
            fixture("ipam-block.json"),
        ),
        (
            "/calico/ipam/v2/host/calico-host-01/ipv4/block/192.168.0.0-24",
            String::new(),
        ),
        (
            &format!("/calico/ipam/v2/handle/{HANDLE}"),
            fixture("ipam-handle.json"),
        ),
        (
            "/calico/v1/config/bgp_node_mesh",
            fixture("bgp-node-mesh.json"),
        ),
        (
            "/calico/v1/config/bgp_peer_v4/192.0.2.1",
            fixture("bgp-peer.json"),
        ),
        ("/calico/bgp/v1/global/as_num", "64511".to_owned()),
        (
            "/calico/bgp/v1/host/calico-host-01/ip_addr_v4",
            "10.0.0.1".to_owned(),
        ),
        ("/calico/v1/config/LogSeverityScreen", "info".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A v2 datastore holding the seed keys, one invalid key and a Felix status with a TTL.
fn populated_v2() -> EtcdV2Server {
    let v2 = EtcdV2Server::start();
    for (key, value) in seed_keys() {
        v2.set(&key, &value);
    }
    v2.set(INVALID_KEY, &fixture("host-endpoint-invalid.json"));
    let status = r#"{"time": "2016-06-01T12:00:00Z", "uptime": 10.0, "first_update": true}"#;
    let out = v2.etcdctl(&["set", "--ttl", "600", STATUS_KEY, status]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    v2
}

fn migrate(v3: &EtcdServer, v2: &EtcdV2Server, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .env("ETCD_ENDPOINTS", v3.endpoint())
        .args(["datastore", "migrate", "--from-v2", &v2.endpoint()])
        .args(flags)
        .output()
        .expect("calicoctl runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn v3_value(v3: &EtcdServer, key: &str) -> Option<String> {
    let out = v3.etcdctl(&["get", key, "--print-value-only"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let value = text(&out.stdout);
    (!value.is_empty()).then(|| value.strip_suffix('\n').unwrap_or(&value).to_owned())
}

fn v3_count(v3: &EtcdServer) -> usize {
    let out = v3.etcdctl(&["get", "--prefix", "/calico/", "--keys-only"]);
    text(&out.stdout).lines().filter(|l| !l.is_empty()).count()
}

fn revision(v3: &EtcdServer) -> String {
    let out = v3.etcdctl(&["get", "/", "-w", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
    json["header"]["revision"].to_string()
}

#[track_caller]
fn assert_status(out: &Output, success: bool) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.success(),
        success,
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

#[test]
fn seed_datastore_migrates_once_and_a_second_run_writes_nothing() {
    let v2 = populated_v2();
    let v3 = EtcdServer::start();

    let dry = assert_status(&migrate(&v3, &v2, &[]), true);
    println!("--- dry run ---\n{dry}");
    assert!(
        dry.contains("dry run: nothing written; 19 keys would be written"),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("invalid, not copied (1):\n  {INVALID_KEY}: ")),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("with a TTL, not copied (1):\n  {STATUS_KEY}")),
        "{dry}"
    );
    assert!(dry.contains("IPAM block                        1"), "{dry}");
    assert_eq!(v3_count(&v3), 0, "the dry run wrote");

    let applied = assert_status(&migrate(&v3, &v2, &["--apply"]), true);
    println!("--- apply ---\n{applied}");
    assert!(applied.contains("wrote 19 keys"), "{applied}");
    for (key, value) in seed_keys() {
        assert_eq!(
            v3_value(&v3, &key).as_deref(),
            Some(value.as_str()),
            "{key}"
        );
    }
    assert_eq!(v3_count(&v3), 19, "only the valid keys without TTL");
    assert_eq!(v3_value(&v3, INVALID_KEY), None);
    assert_eq!(v3_value(&v3, STATUS_KEY), None);

    let before = revision(&v3);
    let again = assert_status(&migrate(&v3, &v2, &["--apply"]), true);
    println!("--- again ---\n{again}");
    assert!(again.contains("wrote 0 keys"), "{again}");
    assert!(
        again.contains("total                             0     19          0"),
        "{again}"
    );
    assert_eq!(revision(&v3), before, "the second run wrote");
}

#[test]
fn newer_v3_data_is_kept_unless_forced() {
    let v2 = populated_v2();
    let v3 = EtcdServer::start();
    let tier = "/calico/v1/policy/tier/my-tier/metadata";
    v3.put(tier, r#"{"order": 50}"#);

    let refused = assert_status(&migrate(&v3, &v2, &["--apply"]), false);
    assert!(
        refused.contains(&format!("different in v3 (1):\n  {tier}")),
        "{refused}"
    );
    assert!(
        refused.contains("refused: 1 keys hold other (newer) values"),
        "{refused}"
    );
    // Both values, so that --force can be decided.
    assert!(
        refused.contains(&format!(
            "  {tier}\n    v2: {{\"order\": 100}}\n    v3: {{\"order\": 50}}\n"
        )),
        "{refused}"
    );
    assert_eq!(
        v3_count(&v3),
        1,
        "nothing may be written while a key differs"
    );
    assert_eq!(v3_value(&v3, tier).as_deref(), Some(r#"{"order": 50}"#));

    let forced = assert_status(&migrate(&v3, &v2, &["--apply", "--force"]), true);
    assert!(forced.contains("wrote 19 keys"), "{forced}");
    assert_eq!(v3_value(&v3, tier).as_deref(), Some(r#"{"order": 100}"#));
}

#[test]
fn an_unreachable_or_v3_only_source_is_an_error_naming_it() {
    let v3 = EtcdServer::start();
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .env("ETCD_ENDPOINTS", v3.endpoint())
        .args(["datastore", "migrate", "--from-v2", &v3.endpoint()])
        .output()
        .expect("calicoctl runs");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--enable-v2"), "{stderr}");
    assert!(stderr.contains(&v3.endpoint()), "{stderr}");
}

#[test]
fn the_v2_source_is_read_over_https_with_a_client_certificate() {
    let pki = calico_testkit::Pki::generate();
    let v2 = EtcdV2Server::start_tls(&pki);
    v2.set(
        "/calico/v1/policy/tier/my-tier/metadata",
        r#"{"order": 100}"#,
    );
    let v3 = EtcdServer::start();
    let ca = pki.ca_cert();
    let (cert, key) = (pki.client_cert(), pki.client_key());
    let tls = [
        "--v2-ca-cert-file",
        ca.to_str().expect("utf-8 path"),
        "--v2-cert-file",
        cert.to_str().expect("utf-8 path"),
        "--v2-key-file",
        key.to_str().expect("utf-8 path"),
    ];
    let applied = assert_status(&migrate(&v3, &v2, &[&tls[..], &["--apply"]].concat()), true);
    assert!(applied.contains("wrote 1 keys"), "{applied}");
    assert_eq!(
        v3_value(&v3, "/calico/v1/policy/tier/my-tier/metadata").as_deref(),
        Some(r#"{"order": 100}"#)
    );

    let no_ca = migrate(&v3, &v2, &[]);
    assert!(!no_ca.status.success());
    assert!(
        text(&no_ca.stderr).contains("give the CA certificate file"),
        "{}",
        text(&no_ca.stderr)
    );
}

/// `-o json`: counts per kind, invalid keys with reasons, TTL keys, conflicts and the outcome.
#[test]
fn migrate_json_report_for_scripts() {
    let v2 = populated_v2();
    let v3 = EtcdServer::start();
    let dry = assert_status(&migrate(&v3, &v2, &["-o", "json"]), true);
    let v: serde_json::Value = serde_json::from_str(&dry).expect("JSON");
    assert_eq!(v["outcome"], "dry-run");
    assert_eq!(v["keysWritten"], 19);
    assert_eq!(
        v["total"],
        serde_json::json!({"new": 19, "same": 0, "different": 0})
    );
    assert_eq!(v["kinds"]["IPAM block"]["new"], 1);
    assert_eq!(v["invalid"][0]["key"], INVALID_KEY);
    assert!(
        v["invalid"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid")
    );
    assert_eq!(v["withTtl"][0]["key"], STATUS_KEY);
    assert_eq!(v3_count(&v3), 0, "the dry run wrote");

    let applied = assert_status(&migrate(&v3, &v2, &["--apply", "-o", "json"]), true);
    let v: serde_json::Value = serde_json::from_str(&applied).expect("JSON");
    assert_eq!(v["outcome"], "written");
    assert_eq!(v["keysWritten"], 19);

    let (key, _) = &seed_keys()[0];
    let out = v3.etcdctl(&["put", key, "{}"]);
    assert!(out.status.success());
    let refused = assert_status(&migrate(&v3, &v2, &["--apply", "-o", "json"]), false);
    let v: serde_json::Value = serde_json::from_str(&refused).expect("JSON");
    assert_eq!(v["outcome"], "refused");
    assert_eq!(v["keysWritten"], 0);
    assert_eq!(v["different"], serde_json::json!([key]));
    assert_eq!(
        v["differentValues"],
        serde_json::json!([{"key": key, "v2": "true", "v3": "{}"}])
    );
    assert_eq!(v["total"]["different"], 1);
}
