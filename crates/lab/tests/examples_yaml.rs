//! The YAML resource documents of `examples/` against the JSON bundles they stand for: each
//! `NN-name.yaml` applied with `calicoctl apply -f` into one etcd, its `NN-name.json` loaded
//! with `calicoctl load -f` into another, and both etcds must then hold the same keys with the
//! same values. Values are compared as JSON; where `apply` writes the model's canonical form
//! and the bundle the seed's spelling (`role == "webserver"` for `role=="webserver"`, an AS
//! number as a number, `"masquerade": false` written out), they must parse to the same model
//! value: the equality `apply` itself uses to report `unchanged`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use calico_model::bundle::{self, Entry};
use calico_model::{Key, parse_value};
use calico_testkit::EtcdServer;
use serde_json::Value;

/// Bundles without a YAML twin, and why.
const BUNDLES_ONLY: [(&str, &str); 1] = [(
    "00-ready.json",
    "/calico/v1/Ready is no resource (`calico-lab up` and calico-node write it)",
)];

/// Keys of a bundle that no resource kind covers, so its YAML twin cannot give them.
const NOT_RESOURCES: [(&str, &[&str]); 1] = [(
    "60-bgp.json",
    &[
        "/calico/bgp/v1/global/as_num",
        "/calico/bgp/v1/global/node_mesh",
    ],
)];

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn calicoctl() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_calico-lab")).with_file_name("calicoctl");
    assert!(
        path.is_file(),
        "{} is missing: build it first (`cargo build -p calico-ctl`; scripts/test.sh does)",
        path.display()
    );
    path
}

/// `calicoctl ARGS` against `etcd`; panics with its output unless it succeeds.
fn ctl(etcd: &EtcdServer, args: &[&str]) -> Output {
    let out = Command::new(calicoctl())
        .env("ETCD_ENDPOINTS", etcd.endpoint())
        .args(args)
        .output()
        .expect("calicoctl runs");
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every key under `/calico/` and the text stored there, sorted by key.
fn contents(etcd: &EtcdServer) -> Vec<Entry> {
    let out = ctl(etcd, &["get", "/calico/", "-o", "json"]);
    let mut entries = bundle::parse(&String::from_utf8_lossy(&out.stdout)).expect("a bundle");
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn clear(etcd: &EtcdServer) {
    let out = etcd.etcdctl(&["del", "--prefix", "/"]);
    assert!(out.status.success(), "etcdctl del --prefix /");
}

/// The same value: equal as JSON (or as text), else equal as the model parses them.
fn same_value(key: &str, a: &str, b: &str) -> bool {
    let json = |raw: &str| serde_json::from_str::<Value>(raw).ok();
    if a == b || json(a).is_some_and(|a| Some(a) == json(b)) {
        return true;
    }
    let key = Key::parse(key).unwrap_or_else(|e| panic!("{key}: {e:?}"));
    matches!((parse_value(&key, a), parse_value(&key, b)), (Ok(x), Ok(y)) if x == y)
}

/// The problems with `yaml` (applied) against `json` (loaded); keys the bundle may have alone.
fn differences(applied: &[Entry], loaded: &[Entry], bundle_only: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for entry in loaded {
        match applied.iter().find(|a| a.key == entry.key) {
            None if bundle_only.contains(&entry.key.as_str()) => {}
            None => problems.push(format!("{}: only in the bundle", entry.key)),
            Some(a) if !same_value(&entry.key, &a.raw, &entry.raw) => problems.push(format!(
                "{}: applied {} but loaded {}",
                entry.key, a.raw, entry.raw
            )),
            Some(_) => {}
        }
    }
    for entry in applied {
        if !loaded.iter().any(|l| l.key == entry.key) {
            problems.push(format!("{}: only in the YAML", entry.key));
        }
    }
    problems
}

/// The `.json` bundles, sorted, each with its YAML twin (None for those in `BUNDLES_ONLY`).
fn pairs() -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut bundles: Vec<PathBuf> = std::fs::read_dir(examples())
        .expect("examples/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    bundles.sort();
    let name = |path: &Path| path.file_name().unwrap().to_string_lossy().into_owned();
    bundles
        .into_iter()
        .map(|json| {
            let yaml = json.with_extension("yaml");
            let alone = BUNDLES_ONLY.iter().any(|(b, _)| *b == name(&json));
            assert!(
                alone || yaml.is_file(),
                "{} has no YAML twin {}: write one, or add it to BUNDLES_ONLY with the reason",
                json.display(),
                yaml.display()
            );
            (json, (!alone).then_some(yaml))
        })
        .collect()
}

#[test]
fn every_yaml_example_writes_the_keys_of_its_json_bundle() {
    let (yaml_etcd, json_etcd) = (EtcdServer::start(), EtcdServer::start());
    let pairs = pairs();
    assert!(pairs.len() >= 6, "examples missing in {:?}", examples());
    for (json, yaml) in pairs {
        let Some(yaml) = yaml else { continue };
        clear(&yaml_etcd);
        clear(&json_etcd);
        ctl(&yaml_etcd, &["apply", "-f", yaml.to_str().unwrap()]);
        ctl(&json_etcd, &["load", "-f", json.to_str().unwrap()]);
        let file = json.file_name().unwrap().to_string_lossy();
        let bundle_only = NOT_RESOURCES
            .iter()
            .find(|(name, _)| *name == file)
            .map_or(&[][..], |(_, keys)| keys);
        let (applied, loaded) = (contents(&yaml_etcd), contents(&json_etcd));
        assert!(!applied.is_empty(), "{}: wrote nothing", yaml.display());
        let problems = differences(&applied, &loaded, bundle_only);
        assert!(
            problems.is_empty(),
            "{} against {}:\n  {}",
            yaml.display(),
            json.display(),
            problems.join("\n  ")
        );
        for key in bundle_only {
            assert!(
                loaded.iter().any(|l| l.key == *key),
                "{file}: NOT_RESOURCES names {key}, which the bundle does not have"
            );
        }
    }
}
