//! The command line around flows and kinds, as a user reads it: `calicoctl flows --help`'s
//! usage (no flag required; only `--explain` reads etcd), and every kind — `stagedPolicy`
//! too — in the unknown-kind error (from a real etcd), in `get --help` and in
//! docs/resources.md's table of short names.

mod common;

use std::process::Command;

use calico_ctl::resource::kind::Kind;
use common::{Ctl, text};

fn calicoctl(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("CALICO_FLOWS_URL")
        .output()
        .expect("calicoctl runs")
}

/// The words of `line` not inside `[...]`.
fn outside_brackets(line: &str) -> Vec<String> {
    let mut depth = 0;
    let mut kept = String::new();
    for c in line.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn flows_usage_requires_no_flag_and_only_explain_reads_etcd() {
    let help = text(&calicoctl(&["flows", "--help"], &[]).stdout);
    let usage: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Usage: "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(usage.len(), 3, "three forms: list, follow, explain\n{help}");
    for line in &usage {
        assert!(line.contains("[--flows-url URL]"), "optional: {line}");
        // A flag named outside brackets would read as required.
        for word in outside_brackets(line)
            .iter()
            .filter(|w| w.starts_with("--"))
        {
            assert!(
                matches!(word.as_str(), "--follow" | "--explain"),
                "{word} in {line}"
            );
        }
    }
    let etcd: Vec<&&str> = usage.iter().filter(|l| l.contains("etcd")).collect();
    assert_eq!(etcd.len(), 1, "only the explain form names etcd: {usage:?}");
    assert!(etcd[0].contains("--explain") && etcd[0].contains("[--etcd-endpoints ENDPOINTS]"));
    assert!(help.contains("No flag is required."), "{help}");
    assert!(
        help.contains("listing and --follow never touch etcd"),
        "{help}"
    );

    // As said: listing with etcd unreachable fails on the aggregator alone.
    let out = calicoctl(
        &["flows", "--flows-url", "http://127.0.0.1:1"],
        &[("ETCD_ENDPOINTS", "http://127.0.0.1:1")],
    );
    let error = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        error.contains("cannot reach the flow aggregator at http://127.0.0.1:1")
            && !error.contains("etcd"),
        "{error}"
    );
}

#[test]
fn every_kind_is_named_where_kinds_are_listed() {
    let ctl = Ctl::start();
    let error = ctl.fails(&["get", "widget"], "");
    let get_help = text(&calicoctl(&["get", "--help"], &[]).stdout);
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/resources.md"
    ))
    .expect("docs/resources.md");
    for kind in Kind::ALL {
        let name = kind.as_str();
        assert!(
            error.contains(name),
            "the unknown-kind error lacks {name}: {error}"
        );
        assert!(
            get_help.contains(name),
            "get --help lacks {name}:\n{get_help}"
        );
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/resources.md has no short-name row for {name}"));
        let row = row.to_ascii_lowercase();
        for alias in kind.aliases() {
            assert!(
                row.contains(&format!("`{alias}`")),
                "docs/resources.md: {name} lacks {alias}"
            );
        }
    }
    assert!(
        error.contains("unknown resource kind \"widget\""),
        "{error}"
    );
}
