//! The dependency rules of `docs/architecture.md`, checked against every `crates/*/Cargo.toml`.
//!
//! The allowed edges live in one place: the table between the `allowed-dependencies` markers of
//! `docs/architecture.md`, parsed here. Each failure names the crate, the edge and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use toml::{Table, Value};

mod common;

use common::{crate_dirs, workspace as root};

const DOC: &str = "docs/architecture.md";
const BEGIN: &str = "<!-- allowed-dependencies:begin -->";
const END: &str = "<!-- allowed-dependencies:end -->";

/// Outside crates whose every use must be a row of the table (rules 1 and 6, 7).
const POLICED_EXACT: &[&str] = &["anyhow", "nix", "rtnetlink"];
const POLICED_PREFIX: &[&str] = &["netlink-"];

/// Rule 4: these never reach `datastore`, not even through another crate.
const PURE: &[&str] = &["model", "calc", "dataplane", "bgp"];

/// Rule 3: these depend on nothing of ours.
const LEAVES: &[&str] = &["model", "datastore", "linux", "http", "daemon", "testkit"];

/// Rule 6: outside `linux`, `nix` only with these features.
const NIX_FEATURES_OUTSIDE_LINUX: &[&str] = &["signal"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Normal,
    Dev,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Normal => "normal",
            Kind::Dev => "dev",
        }
    }
}

/// One dependency as a manifest states it.
#[derive(Debug, Clone)]
struct Dep {
    /// The package it names (`package = ...` or the key).
    package: String,
    kind: Kind,
    /// The table it is in, for messages: `[dependencies]`, `[target.'cfg(unix)'.dev-dependencies]`.
    section: String,
    features: Vec<String>,
}

/// One workspace crate: its directory name under `crates/` and what its manifest says.
#[derive(Debug)]
struct Crate {
    dir: String,
    package: String,
    manifest: PathBuf,
    deps: Vec<Dep>,
    bins: Vec<String>,
}

/// One row of the table.
#[derive(Debug, Clone)]
struct Row {
    from: String,
    to: String,
    kind: Kind,
    verdict: String,
    line: usize,
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn crates(root: &Path) -> Vec<Crate> {
    crate_dirs(root)
        .iter()
        .map(|dir| parse_crate(dir))
        .collect()
}

fn parse_crate(dir: &Path) -> Crate {
    let manifest = dir.join("Cargo.toml");
    let table: Table = read(&manifest)
        .parse()
        .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", manifest.display()));
    let package = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{} has no package.name", manifest.display()))
        .to_owned();
    let mut deps = Vec::new();
    collect_deps(&table, "", &mut deps);
    if let Some(targets) = table.get("target").and_then(Value::as_table) {
        for (cfg, target) in targets {
            if let Some(target) = target.as_table() {
                collect_deps(target, &format!("target.'{cfg}'."), &mut deps);
            }
        }
    }
    let mut bins: Vec<String> = table
        .get("bin")
        .and_then(Value::as_array)
        .map(|bins| {
            bins.iter()
                .filter_map(|b| b.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if bins.is_empty() && dir.join("src/main.rs").is_file() {
        bins.push(package.clone());
    }
    Crate {
        dir: dir.file_name().unwrap().to_string_lossy().into_owned(),
        package,
        manifest,
        deps,
        bins,
    }
}

fn collect_deps(table: &Table, prefix: &str, deps: &mut Vec<Dep>) {
    for (section, kind) in [
        ("dependencies", Kind::Normal),
        ("build-dependencies", Kind::Normal),
        ("dev-dependencies", Kind::Dev),
    ] {
        let Some(entries) = table.get(section).and_then(Value::as_table) else {
            continue;
        };
        for (name, spec) in entries {
            let package = spec
                .get("package")
                .and_then(Value::as_str)
                .unwrap_or(name)
                .to_owned();
            let features = spec
                .get("features")
                .and_then(Value::as_array)
                .map(|f| {
                    f.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            deps.push(Dep {
                package,
                kind,
                section: format!("[{prefix}{section}]"),
                features,
            });
        }
    }
}

/// The table of `docs/architecture.md`: rows of `| from | to | kind | verdict | reason |`.
fn table(root: &Path) -> Vec<Row> {
    let text = read(&root.join(DOC));
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{DOC} has no `{BEGIN}` marker"));
    let end = text
        .find(END)
        .unwrap_or_else(|| panic!("{DOC} has no `{END}` marker"));
    let first_line = text[..start].lines().count() + 1;
    let mut rows = Vec::new();
    for (i, line) in text[start + BEGIN.len()..end].lines().enumerate() {
        let line_no = first_line + i;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let line = line.replace("\\|", "/");
        let cells: Vec<&str> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`'))
            .collect();
        if cells.first() == Some(&"from") || cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
            continue;
        }
        assert!(
            cells.len() >= 5,
            "{DOC}:{line_no}: a row needs from | to | kind | verdict | reason: {line}"
        );
        let kind = match cells[2] {
            "normal" => Kind::Normal,
            "dev" => Kind::Dev,
            other => panic!("{DOC}:{line_no}: kind must be `normal` or `dev`, not `{other}`"),
        };
        assert!(
            ["intent", "accepted", "departure"].contains(&cells[3]),
            "{DOC}:{line_no}: verdict must be intent, accepted or departure, not `{}`",
            cells[3]
        );
        assert!(
            !cells[4].is_empty(),
            "{DOC}:{line_no}: the edge {} → {} needs a reason",
            cells[0],
            cells[1]
        );
        rows.push(Row {
            from: cells[0].to_owned(),
            to: cells[1].to_owned(),
            kind,
            verdict: cells[3].to_owned(),
            line: line_no,
        });
    }
    assert!(!rows.is_empty(), "{DOC}: the dependency table is empty");
    rows
}

/// Everything the rules look at, with the crates named by their directory (`calc`), outside
/// crates by their package name (`anyhow`).
struct World {
    crates: Vec<Crate>,
    /// Package name → directory name, for our crates.
    ours: BTreeMap<String, String>,
    rows: Vec<Row>,
}

impl World {
    fn load() -> World {
        let root = root();
        let crates = crates(&root);
        assert!(
            crates.len() >= 13,
            "found only {} crates under {}/crates",
            crates.len(),
            root.display()
        );
        let ours = crates
            .iter()
            .map(|c| (c.package.clone(), c.dir.clone()))
            .collect();
        World {
            crates,
            ours,
            rows: table(&root),
        }
    }

    /// The name a dependency goes by in the table, if the rules police it.
    fn policed(&self, package: &str) -> Option<String> {
        if let Some(dir) = self.ours.get(package) {
            return Some(dir.clone());
        }
        let outside = POLICED_EXACT.contains(&package)
            || POLICED_PREFIX.iter().any(|p| package.starts_with(p));
        outside.then(|| package.to_owned())
    }

    fn is_ours(&self, name: &str) -> bool {
        self.ours.values().any(|dir| dir == name)
    }

    fn allowed(&self, from: &str, to: &str, kind: Kind) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.from == from && r.to == to && r.kind == kind)
    }

    /// Every policed edge of the manifests: (from, to, kind) → the dependencies stating it.
    fn edges(&self) -> BTreeMap<(String, String, Kind), Vec<&Dep>> {
        let mut edges: BTreeMap<_, Vec<&Dep>> = BTreeMap::new();
        for krate in &self.crates {
            for dep in &krate.deps {
                if let Some(to) = self.policed(&dep.package) {
                    edges
                        .entry((krate.dir.clone(), to, dep.kind))
                        .or_default()
                        .push(dep);
                }
            }
        }
        edges
    }

    /// Our crates `from` reaches through normal dependencies.
    fn reaches(&self, from: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(next) = todo.pop() {
            let Some(krate) = self.crates.iter().find(|c| c.dir == next) else {
                continue;
            };
            for dep in krate.deps.iter().filter(|d| d.kind == Kind::Normal) {
                if let Some(dir) = self.ours.get(&dep.package)
                    && seen.insert(dir.clone())
                {
                    todo.push(dir.clone());
                }
            }
        }
        seen
    }

    fn krate(&self, dir: &str) -> &Crate {
        self.crates
            .iter()
            .find(|c| c.dir == dir)
            .unwrap_or_else(|| panic!("no crate `{dir}`"))
    }
}

fn report(rule: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{rule} (see {DOC}):\n  {}",
        problems.join("\n  ")
    );
}

/// Rule 1: every edge to one of ours, or to a policed outside crate, is a row of the table.
#[test]
fn every_dependency_is_allowed_by_the_table() {
    let world = World::load();
    let mut problems = Vec::new();
    for ((from, to, kind), deps) in world.edges() {
        let allowed = match kind {
            Kind::Normal => world.allowed(&from, &to, kind).is_some(),
            // testkit is every crate's fixture; a dev edge may also repeat a normal one.
            Kind::Dev => {
                to == "testkit"
                    || world.allowed(&from, &to, Kind::Dev).is_some()
                    || world.allowed(&from, &to, Kind::Normal).is_some()
            }
        };
        if !allowed {
            let krate = world.krate(&from);
            problems.push(format!(
                "crate `{from}` ({}) depends on `{to}` in {}: forbidden edge {from} → {to} \
                 ({}); add a row to the table only if the rules allow it",
                krate.manifest.display(),
                deps[0].section,
                kind.name(),
            ));
        }
    }
    report("dependencies the rules do not allow", problems);
}

/// Rule 2: no row names an edge that no manifest has.
#[test]
fn the_table_has_no_stale_rows() {
    let world = World::load();
    let edges = world.edges();
    let mut problems = Vec::new();
    for row in &world.rows {
        if !edges.contains_key(&(row.from.clone(), row.to.clone(), row.kind)) {
            problems.push(format!(
                "{DOC}:{}: the table allows {} → {} ({}), but crates/{}/Cargo.toml has no \
                 such dependency; remove the row",
                row.line,
                row.from,
                row.to,
                row.kind.name(),
                row.from
            ));
        }
        if !world.is_ours(&row.from) {
            problems.push(format!(
                "{DOC}:{}: `{}` is not a crate of the workspace",
                row.line, row.from
            ));
        }
    }
    report("stale rows in the dependency table", problems);
}

/// Rules 3 and 4: the leaves depend on nothing of ours; the pure cores never reach datastore.
#[test]
fn the_pure_cores_stay_pure() {
    let world = World::load();
    let mut problems = Vec::new();
    for leaf in LEAVES {
        for to in world.reaches(leaf) {
            problems.push(format!(
                "crate `{leaf}` depends on `{to}`: forbidden edge {leaf} → {to} ({leaf} \
                 depends on nothing of ours)"
            ));
        }
    }
    for pure in PURE {
        if world.reaches(pure).contains("datastore") {
            problems.push(format!(
                "crate `{pure}` reaches `datastore` (through {:?}): forbidden, the pure \
                 cores take updates as values",
                world.reaches(pure)
            ));
        }
    }
    report("pure crates with forbidden dependencies", problems);
}

/// Rule 5: testkit only in `[dev-dependencies]`.
#[test]
fn testkit_is_only_a_dev_dependency() {
    let world = World::load();
    let mut problems = Vec::new();
    for krate in &world.crates {
        for dep in &krate.deps {
            if world.ours.get(&dep.package).map(String::as_str) == Some("testkit")
                && dep.kind != Kind::Dev
            {
                problems.push(format!(
                    "crate `{}` depends on `testkit` in {}: forbidden edge {} → testkit \
                     (testkit only in [dev-dependencies])",
                    krate.dir, dep.section, krate.dir
                ));
            }
        }
    }
    report("testkit outside [dev-dependencies]", problems);
}

/// Rule 6: outside `linux`, `nix` only for signals.
#[test]
fn only_linux_uses_nix_beyond_signals() {
    let world = World::load();
    let mut problems = Vec::new();
    for krate in world.crates.iter().filter(|c| c.dir != "linux") {
        for dep in krate.deps.iter().filter(|d| d.package == "nix") {
            let extra: Vec<&String> = dep
                .features
                .iter()
                .filter(|f| !NIX_FEATURES_OUTSIDE_LINUX.contains(&f.as_str()))
                .collect();
            if !extra.is_empty() {
                problems.push(format!(
                    "crate `{}` uses nix with {extra:?} in {}: only `linux` talks to the \
                     kernel; outside it nix is for {NIX_FEATURES_OUTSIDE_LINUX:?} only",
                    krate.dir, dep.section
                ));
            }
        }
    }
    report("kernel access outside linux", problems);
}

/// Rules 7 and 8: anyhow only in binary crates; no edge into a binary crate unless it is a
/// known departure.
#[test]
fn binaries_are_the_top_of_the_graph() {
    let world = World::load();
    let mut problems = Vec::new();
    for krate in &world.crates {
        for dep in &krate.deps {
            if dep.kind == Kind::Normal && dep.package == "anyhow" && krate.bins.is_empty() {
                problems.push(format!(
                    "crate `{}` depends on `anyhow` in {} but has no binary: forbidden edge \
                     {} → anyhow (libraries return typed errors)",
                    krate.dir, dep.section, krate.dir
                ));
            }
            let Some(to) = world.ours.get(&dep.package) else {
                continue;
            };
            if dep.kind == Kind::Normal && !world.krate(to).bins.is_empty() {
                let departure = world
                    .allowed(&krate.dir, to, Kind::Normal)
                    .is_some_and(|r| r.verdict == "departure");
                if !departure {
                    problems.push(format!(
                        "crate `{}` depends on the binary crate `{to}`: forbidden edge {} → \
                         {to} (nothing depends on a binary crate)",
                        krate.dir, krate.dir
                    ));
                }
            }
        }
    }
    report("binary crates used as libraries", problems);
}

/// Rule 9: every binary is named on the page.
#[test]
fn every_binary_is_on_the_map() {
    let world = World::load();
    let doc = read(&root().join(DOC));
    let mut problems = Vec::new();
    for krate in &world.crates {
        for bin in &krate.bins {
            if !doc.contains(&format!("`{bin}`")) {
                problems.push(format!(
                    "crate `{}` builds the binary `{bin}`, which {DOC} does not mention",
                    krate.dir
                ));
            }
        }
    }
    report("binaries missing from the map", problems);
}
