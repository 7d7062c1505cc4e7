//! The README's first command builds every binary a doc tells the user to run.
//!
//! After `./scripts/demo.sh` a user follows any doc literally (docs/docker.md starts
//! `calico-libnetwork`, `calico-lab up --openstack` runs `calico-neutron`), so the build line of
//! the demo script must cover every binary of the workspace that README.md or `docs/` names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every package of the workspace with the binaries it builds: `[[bin]]` names, `src/bin/*.rs`
/// and `src/main.rs` (named after the package).
fn binaries(root: &Path) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let table: Table = text.parse().unwrap();
        let package = table["package"]["name"].as_str().unwrap().to_owned();
        let mut bins: BTreeSet<String> = table
            .get("bin")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        if let Ok(files) = std::fs::read_dir(dir.join("src/bin")) {
            for file in files {
                let path = file.unwrap().path();
                if path.extension().is_some_and(|e| e == "rs") {
                    bins.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
                }
            }
        }
        if dir.join("src/main.rs").is_file() && table.get("bin").is_none() {
            bins.insert(package.clone());
        }
        out.push((package, bins.into_iter().collect()));
    }
    out
}

/// The packages the demo script's `cargo build` line builds binaries of.
fn built_by_demo(script: &str, all: &[(String, Vec<String>)]) -> BTreeSet<String> {
    let line = script
        .lines()
        .find(|line| line.trim_start().starts_with("cargo build"))
        .expect("scripts/demo.sh has no `cargo build` line");
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.contains(&"--workspace") {
        return all.iter().flat_map(|(_, bins)| bins.clone()).collect();
    }
    let packages: BTreeSet<&str> = words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1])
        .collect();
    all.iter()
        .filter(|(package, _)| packages.contains(package.as_str()))
        .flat_map(|(_, bins)| bins.clone())
        .collect()
}

#[test]
fn the_demo_builds_every_binary_the_docs_name() {
    let root = root();
    let all = binaries(&root);
    let built = built_by_demo(&read(&root.join("scripts/demo.sh")), &all);
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        docs.push(entry.unwrap().path());
    }
    let text: String = docs.iter().map(|path| read(path)).collect();
    let missing: Vec<String> = all
        .iter()
        .flat_map(|(_, bins)| bins)
        .filter(|bin| text.contains(bin.as_str()) && !built.contains(*bin))
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "the docs name binaries that ./scripts/demo.sh does not build: {missing:?}"
    );
}
