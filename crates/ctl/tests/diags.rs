//! `calicoctl diags` through the built binary: with etcd up, then with etcd down. The archive is
//! listed and read back; what could not be collected must be said, never silently left out.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use calico_testkit::{EtcdServer, require_tool};
use flate2::read::GzDecoder;

const FELIX_LOG: &str = "\
2026-11-23T18:47:57Z  INFO calico_felix: connecting to etcd endpoints=[] hostname=h1
2026-11-23T18:47:57Z  INFO calico_felix: config LogSeverityScreen = \"debug\" (etcd host config)
2026-11-23T18:47:57Z  INFO calico_felix: config HealthPort = \"9099\" (default)
";

fn diags(endpoint: &str, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .env("ETCD_ENDPOINTS", endpoint)
        .arg("diags")
        .arg("--output-dir")
        .arg(dir)
        .arg("--hostname")
        .arg("h1")
        .arg("--felix-log")
        .arg(dir.join("felix.log"))
        .arg("--node-log")
        .arg(dir.join("calico-node.log"))
        .args(["--bird-socket", "/nonexistent/bird.ctl"])
        .output()
        .expect("calicoctl runs")
}

/// The archive named on the last line, as file name (below the top directory) → text.
fn archive(out: &Output) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
    let last = stdout.lines().last().expect("a last line");
    let path = last.strip_prefix("diagnostics written to ").expect(last);
    assert!(
        path.ends_with(".tar.gz") && path.contains("calico-diags-h1-"),
        "{path}"
    );
    let file = std::fs::File::open(path).expect("the archive exists");
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let mut files = BTreeMap::new();
    for entry in tar.entries().expect("a tar.gz") {
        let mut entry = entry.expect("an entry");
        let name = entry.path().expect("a name").to_string_lossy().into_owned();
        let (top, rest) = name.split_once('/').expect("under one directory");
        assert!(top.starts_with("calico-diags-h1-"), "{name}");
        let mut text = String::new();
        entry.read_to_string(&mut text).expect("text");
        files.insert(rest.to_owned(), text);
    }
    println!("archive: {:?}", files.keys().collect::<Vec<_>>());
    files
}

#[test]
fn diags_collects_with_etcd_up_and_says_what_is_missing_with_etcd_down() {
    require_tool("ip");
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("felix.log"), FELIX_LOG).expect("felix log");
    std::fs::write(dir.path().join("calico-node.log"), "node started\n").expect("node log");
    let mut etcd = EtcdServer::start();
    etcd.put("/calico/v1/host/h1/config/LogSeverityScreen", "debug");
    etcd.put("/calico/v1/config/InterfacePrefix", "cali");
    etcd.put("/calico/bgp/v1/host/h1/ip_addr_v4", "10.0.0.1");
    etcd.put("/calico/v1/host/h2/config/LogSeverityScreen", "info");

    let up = archive(&diags(&etcd.endpoint(), dir.path()));
    for name in [
        "versions.txt",
        "logs/felix.log",
        "logs/calico-node.log",
        "ip-route.txt",
        "ip-6-route.txt",
        "ip-neigh.txt",
        "etcd-keys.json",
        "felix-config.txt",
        "not-collected.txt",
    ] {
        assert!(up.contains_key(name), "{name} missing: {:?}", up.keys());
    }
    assert!(
        up["versions.txt"].starts_with("calicoctl "),
        "{}",
        up["versions.txt"]
    );
    assert_eq!(up["logs/felix.log"], FELIX_LOG);
    let keys: serde_json::Value = serde_json::from_str(&up["etcd-keys.json"]).expect("json");
    assert_eq!(keys["/calico/bgp/v1/host/h1/ip_addr_v4"], "10.0.0.1");
    assert!(
        keys.get("/calico/v1/host/h2/config/LogSeverityScreen")
            .is_none()
    );
    let config = &up["felix-config.txt"];
    assert!(
        config.contains("LogSeverityScreen = \"debug\" (etcd host config)\nHealthPort"),
        "{config}"
    );
    assert!(
        config.contains("InterfacePrefix = \"cali\" (etcd /calico/v1/config)"),
        "{config}"
    );
    let missing = &up["not-collected.txt"];
    assert!(
        missing.contains("bird-protocols.txt: `birdc -s /nonexistent/bird.ctl"),
        "{missing}"
    );
    assert!(!missing.contains("etcd"), "{missing}");

    etcd.stop();
    let down = archive(&diags(&etcd.endpoint(), dir.path()));
    assert!(!down.contains_key("etcd-keys.json"));
    let missing = &down["not-collected.txt"];
    assert!(
        missing.contains("etcd-keys.json: datastore not reachable: "),
        "{missing}"
    );
    assert!(missing.contains(&etcd.endpoint()), "{missing}");
    assert!(down["felix-config.txt"].contains("HealthPort = \"9099\" (default)"));
    assert!(down["felix-config.txt"].contains("(datastore not reachable)"));
}

#[test]
fn the_help_names_what_is_collected_for_either_backend() {
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(["diags", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(help.contains("iptables/ip6tables/ipset"), "{help}");
    assert!(help.contains("nft -a list ruleset"), "{help}");
}
