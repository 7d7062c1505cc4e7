//! The console's explain line runs as printed: a flow posted to the real `calico-flows`,
//! opened in the real console (headless chromium through chromedriver), its "explain" line
//! read from the page and run, word for word, with calicoctl against a real etcd holding the
//! flow's endpoints and policy.
//!
//! Needs chromium and chromium-driver (scripts/setup-test-deps.sh) and calico-flows built
//! beside calicoctl (cargo build -p calico-flows).

#[path = "common/aggregator.rs"]
mod aggregator;
mod common;

use std::process::Command;
use std::time::Duration;

use aggregator::{Aggregator, ingress, policy_step, wep, wep_key};
use calico_testkit::eventually;
use calico_testkit::webdriver::Browser;
use common::{Ctl, text};
use serde_json::{Value, json};

/// front (10.65.0.1) and db (10.65.0.2) in profile "open"; db-guard denies db's port 5432 to
/// front (rule 1).
fn datastore(ctl: &Ctl) {
    let wep = |ip: &str, role: &str| {
        json!({"state": "active", "name": format!("cali{role}"), "profile_ids": ["open"],
               "ipv4_nets": [format!("{ip}/32")], "labels": {"role": role}})
    };
    let bundle = json!({
        wep_key("h1", "ns.front"): wep("10.65.0.1", "front"),
        wep_key("h2", "ns.db"): wep("10.65.0.2", "db"),
        "/calico/v1/policy/profile/open/rules":
            {"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]},
        "/calico/v1/policy/tier/default/metadata": {"order": "default"},
        "/calico/v1/policy/tier/default/policy/db-guard": {
            "selector": "role == 'db'",
            "inbound_rules": [
                {"action": "deny", "protocol": "tcp", "src_selector": "role == 'front'", "dst_ports": [5432]},
                {"action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}
    });
    ctl.ok(&["load", "-f", "-"], &bundle.to_string());
}

/// The words of a shell line of plain words and '...' quoted ones (what the console prints).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('\'') {
            Some(quoted) => quoted.split_once('\'').expect("a closed quote"),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        words.push(word.to_owned());
        rest = after.trim_start();
    }
    words
}

#[test]
fn the_consoles_explain_line_runs_as_printed() {
    let ctl = Ctl::start();
    datastore(&ctl);
    let flows = Aggregator::start(&[]);
    let src = wep("h1", "ns.front", "open");
    let step = policy_step("default", "db-guard", 0, "deny");
    flows.post(&[ingress(src, "ns.db", 5432, step, 5)]);

    let browser = Browser::start();
    browser.open(&format!("{}/", flows.url()));
    eventually(
        "the flow in the table",
        Duration::from_secs(15),
        || match browser.texts("#flows tbody tr").len() {
            1 => Ok(()),
            n => Err(format!("{n} rows")),
        },
    );
    browser.click("#flows tbody tr");
    let mut line = String::new();
    eventually("the explain line", Duration::from_secs(5), || {
        line = browser.texts("#explain").concat();
        if line.starts_with("calicoctl ") {
            Ok(())
        } else {
            Err(format!("#explain: {line:?}"))
        }
    });

    let words = shell_words(&line);
    assert!(
        !line.contains("ADDRESS-OF"),
        "no placeholder to fill in: {line}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_calicoctl"))
        .args(&words[1..])
        .env_remove("CALICO_FLOWS_URL")
        .env("ETCD_ENDPOINTS", ctl.etcd.endpoint())
        .output()
        .expect("calicoctl runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "the console's line `{line}` failed:\n{stdout}{stderr}"
    );
    assert!(
        stdout
            .trim_end()
            .ends_with("agree: explain decides as the data plane recorded"),
        "`{line}`:\n{stdout}"
    );
    // The flow it names is the one shown.
    let id = browser.texts("#detail-id").concat();
    assert!(
        words.windows(2).any(|w| w == ["--id", id.as_str()]),
        "{line} / {id}"
    );
    let listed: Value = serde_json::from_str(&text(
        &Command::new(env!("CARGO_BIN_EXE_calicoctl"))
            .args(["flows", "--flows-url", &flows.url(), "-o", "json"])
            .output()
            .unwrap()
            .stdout,
    ))
    .unwrap();
    assert_eq!(listed["flows"][0]["id"], json!(id), "{listed}");
}
