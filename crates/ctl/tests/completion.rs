//! `calicoctl completion bash`: the script bash sources completes the subcommands.

use std::process::Command;

use calico_testkit::require_tool;

/// What bash offers for `calicoctl WORDS...` (the last word being typed).
fn complete(script: &str, words: &[&str]) -> String {
    let words_array = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let cword = words.len() - 1;
    let prev = words[cword - 1];
    let cur = words[cword];
    let probe = format!(
        "source {script}; COMP_WORDS=({words_array}); COMP_CWORD={cword}; \
         _calicoctl calicoctl '{cur}' '{prev}'; echo \"${{COMPREPLY[*]}}\""
    );
    let out = Command::new("bash")
        .args(["-c", &probe])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn bash_completion_offers_subcommands_and_flags() {
    require_tool("bash");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(["completion", "bash"])
        .output()
        .expect("calicoctl runs");
    assert!(out.status.success());
    let script = dir.path().join("calicoctl.bash");
    std::fs::write(&script, &out.stdout).expect("script written");
    let script = script.to_string_lossy();
    assert_eq!(
        complete(&script, &["calicoctl", "datastore", "mi"]),
        "migrate"
    );
    assert_eq!(complete(&script, &["calicoctl", "node", "re"]), "remove");
    assert_eq!(complete(&script, &["calicoctl", "dia"]), "diags");
    assert!(complete(&script, &["calicoctl", "datastore", "migrate", "--"]).contains("--from-v2"));
}

/// `calicoctl get <TAB>` offers the kinds (as documents spell them), not only flags.
#[test]
fn bash_completion_offers_kinds_after_get_and_delete() {
    require_tool("bash");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(["completion", "bash"])
        .output()
        .expect("calicoctl runs");
    assert!(out.status.success());
    let script = dir.path().join("calicoctl.bash");
    std::fs::write(&script, &out.stdout).expect("script written");
    let script = script.to_string_lossy();
    let offered = complete(&script, &["calicoctl", "get", ""]);
    let words: Vec<&str> = offered.split(' ').collect();
    for kind in [
        "tier",
        "policy",
        "profile",
        "workloadEndpoint",
        "hostEndpoint",
        "ipPool",
        "bgpPeer",
        "node",
        "felixConfig",
        "ipamConfig",
    ] {
        assert!(words.contains(&kind), "{kind} not offered: {offered}");
    }
    assert_eq!(
        complete(&script, &["calicoctl", "get", "wor"]),
        "workloadEndpoint"
    );
    assert_eq!(complete(&script, &["calicoctl", "delete", "ipP"]), "ipPool");
}

/// `calicoctl flows` and `policy impact` complete, with their flags and values.
#[test]
fn bash_completion_offers_flows_and_policy_impact() {
    require_tool("bash");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(["completion", "bash"])
        .output()
        .expect("calicoctl runs");
    assert!(out.status.success());
    let script = dir.path().join("calicoctl.bash");
    std::fs::write(&script, &out.stdout).expect("script written");
    let script = script.to_string_lossy();
    assert_eq!(complete(&script, &["calicoctl", "flo"]), "flows");
    assert_eq!(complete(&script, &["calicoctl", "policy", "im"]), "impact");
    let flags = complete(&script, &["calicoctl", "flows", "--"]);
    for flag in [
        "--follow",
        "--explain",
        "--id",
        "--endpoint",
        "--profile",
        "--tier",
        "--policy",
        "--action",
        "--reporter",
        "--direction",
        "--since",
        "--until",
        "--limit",
        "--flows-url",
        "--output",
    ] {
        assert!(
            flags.split(' ').any(|f| f == flag),
            "{flag} not offered: {flags}"
        );
    }
    assert_eq!(
        complete(&script, &["calicoctl", "flows", "--action", "d"]),
        "deny"
    );
    let impact = complete(&script, &["calicoctl", "policy", "impact", "--"]);
    for flag in [
        "--filename",
        "--delete",
        "--since",
        "--no-flows",
        "--flows-url",
        "--output",
    ] {
        assert!(
            impact.split(' ').any(|f| f == flag),
            "{flag} not offered: {impact}"
        );
    }
}
