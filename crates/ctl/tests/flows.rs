//! `calicoctl flows` against the real aggregator (`calico-flows` on a loopback port, fed
//! records by HTTP posts as Felix posts them) and, for `--explain`, a real etcd.

#[path = "common/aggregator.rs"]
mod aggregator;
mod common;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use aggregator::{Aggregator, ingress, policy_step, profile_step, wep, wep_key};
use calico_model::flow::FlowRecord;
use calico_testkit::{eventually, refusing_port};
use common::{Ctl, text};
use serde_json::{Value, json};

const CALICOCTL: &str = env!("CARGO_BIN_EXE_calicoctl");

fn calicoctl(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(CALICOCTL)
        .env_remove("CALICO_FLOWS_URL")
        .envs(envs.iter().copied())
        .args(args)
        .output()
        .expect("calicoctl runs")
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let out = calicoctl(args, &[]);
    assert!(
        out.status.success(),
        "calicoctl {args:?} failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Denied front -> db by db-guard rule 3 (index 2); allowed web -> db by profile open, which a
/// staged policy would deny; an egress flow from web to outside reported by h1.
fn three_flows() -> Vec<Value> {
    let denied = ingress(
        wep("h1", "ns.front", "front"),
        "ns.db",
        5432,
        policy_step("default", "db-guard", 2, "deny"),
        5,
    );
    // Start times: 20 s, 115 s and 215 s ago.
    let mut staged = ingress(
        wep("h1", "ns.web", "yes"),
        "ns.db",
        5432,
        profile_step("open", 0, "allow"),
        100,
    );
    staged["policies"]["pending"] = json!([
        {"kind": "staged-policy", "tier": "default", "name": "lockdown", "rule_index": 0, "action": "deny"}
    ]);
    let mut egress = ingress(
        wep("h1", "ns.web", "yes"),
        "ns.db",
        443,
        profile_step("open", 0, "allow"),
        200,
    );
    egress["reporter"] = json!("h1");
    egress["direction"] = json!("egress");
    egress["destination"] = json!({"kind": "net", "net": "192.0.2.7"});
    vec![denied, staged, egress]
}

/// The rows of a table (without the header), each as its cells.
fn rows(table: &str) -> Vec<Vec<String>> {
    let lines = table.lines().skip(1).filter(|l| !l.starts_with('('));
    lines
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn the_table_names_each_flows_deciding_step_and_staged_verdict_and_flags_filter() {
    let flows = Aggregator::start(&[]);
    flows.post(&three_flows());
    let url = flows.url();
    let table = ok(&["flows", "--flows-url", &url]);
    let header = table.lines().next().unwrap();
    for column in [
        "#",
        "TIME",
        "REPORTER",
        "SOURCE",
        "DESTINATION",
        "PROTO/PORT",
        "DIRECTION",
        "ACTION",
        "DECIDED BY",
        "STAGED",
        "ID",
    ] {
        assert!(header.contains(column), "{column} in {header}");
    }
    let listed = rows(&table);
    assert_eq!(listed.len(), 3, "{table}");
    // Newest first: the denied flow, with the step as explain prints it.
    assert_eq!(
        &listed[0][2..5],
        ["h2", "h1/ns.front/eth0", "h2/ns.db/eth0"]
    );
    assert_eq!(
        &listed[0][5..9],
        [
            "tcp/5432",
            "ingress",
            "deny",
            "tier default policy db-guard rule 3: deny"
        ]
    );
    assert_eq!(
        listed[1][9],
        "would deny: tier default staged policy lockdown rule 1: deny"
    );
    assert_eq!(
        &listed[2][3..7],
        ["h1/ns.web/eth0", "192.0.2.7", "tcp/443", "egress"]
    );

    let only = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["flows", "--flows-url", &url];
        all.extend_from_slice(args);
        rows(&ok(&all))
            .into_iter()
            .map(|row| row[3].clone() + " " + &row[5])
            .collect()
    };
    let denied = ["h1/ns.front/eth0 tcp/5432"];
    assert_eq!(only(&["--action", "deny"]), denied);
    assert_eq!(only(&["--policy", "db-guard"]), denied);
    assert_eq!(only(&["--endpoint", "ns.front"]), denied);
    assert_eq!(only(&["--profile", "front"]), denied);
    assert_eq!(only(&["--reporter", "h1"]), ["h1/ns.web/eth0 tcp/443"]);
    assert_eq!(
        only(&["--direction", "egress", "--direction", "ingress"]).len(),
        3
    );
    assert_eq!(
        only(&["--tier", "default", "--action", "allow"]),
        ["h1/ns.web/eth0 tcp/5432"]
    );
    assert_eq!(only(&["--since", "60s"]), denied);
    assert_eq!(only(&["--until", "60s"]).len(), 2);
    let later =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() + Duration::from_secs(600));
    assert!(only(&["--since", &later.to_string()]).is_empty());
    assert_eq!(only(&["--limit", "1"]), denied);
    let limited = ok(&["flows", "--flows-url", &url, "--limit", "1"]);
    assert!(
        limited.contains("(the newest 1 of 3 flows that match"),
        "{limited}"
    );
    // --id lists that flow alone.
    let id = listed[2][9].clone(); // no STAGED cell in this row
    assert_eq!(only(&["--id", &id]), ["h1/ns.web/eth0 tcp/443"]);

    // Bad values are refused by the flag's name.
    let out = calicoctl(&["flows", "--flows-url", &url, "--since", "yesterday"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--since"),
        "{}",
        text(&out.stderr)
    );
    let out = calicoctl(&["flows", "--flows-url", &url, "--endpoint", ""], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--endpoint \"\": must not be empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn json_and_yaml_carry_the_records_and_yaml_quotes_what_yaml_1_1_would_misread() {
    let flows = Aggregator::start(&[]);
    let posted = three_flows();
    flows.post(&posted);
    let url = flows.url();
    let json: Value =
        serde_json::from_str(&ok(&["flows", "--flows-url", &url, "-o", "json"])).unwrap();
    assert_eq!(json["total"], json!(3));
    let listed: Vec<FlowRecord> = json["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::from_value(f["flow"].clone()).unwrap())
        .collect();
    let expected: Vec<FlowRecord> = posted
        .iter()
        .map(|r| serde_json::from_value(r.clone()).unwrap())
        .collect();
    for record in &expected {
        assert!(listed.contains(record), "{record:?} not in {listed:?}");
    }
    let yaml = ok(&["flows", "--flows-url", &url, "-o", "yaml"]);
    assert!(yaml.starts_with("---\n"), "{yaml}");
    // The profile "yes" is a boolean to a YAML 1.1 reader unless quoted.
    assert!(yaml.contains("- \"yes\""), "{yaml}");
    let back: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(back, json);
}

#[test]
fn the_table_and_json_show_each_sides_address_and_address_filters() {
    let flows = Aggregator::start(&[]);
    let mut posted = three_flows();
    posted[0]["source"]["address"] = json!("10.65.0.10");
    posted[0]["destination"]["address"] = json!("10.65.1.20");
    posted[2]["source"]["address"] = json!("10.65.0.11");
    posted[2]["destination"]["address"] = json!("192.0.2.7");
    flows.post(&posted); // the second as an older Felix sends it: no addresses
    let url = flows.url();
    let listed = rows(&ok(&["flows", "--flows-url", &url]));
    assert_eq!(
        &listed[0][3..5],
        [
            "h1/ns.front/eth0 (10.65.0.10)",
            "h2/ns.db/eth0 (10.65.1.20)"
        ]
    );
    assert_eq!(&listed[1][3..5], ["h1/ns.web/eth0", "h2/ns.db/eth0"]);
    assert_eq!(
        &listed[2][3..5],
        ["h1/ns.web/eth0 (10.65.0.11)", "192.0.2.7"]
    );
    let only = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["flows", "--flows-url", &url];
        all.extend_from_slice(args);
        rows(&ok(&all))
            .into_iter()
            .map(|row| row[5].clone())
            .collect()
    };
    assert_eq!(only(&["--address", "10.65.0.10"]), ["tcp/5432"]);
    assert_eq!(
        only(&["--address", "10.65.0.0/24"]),
        ["tcp/5432", "tcp/443"]
    );
    assert_eq!(only(&["--address", "192.0.2.0/24"]), ["tcp/443"]);
    assert!(only(&["--address", "10.66.0.0/16"]).is_empty());
    let json: Value = serde_json::from_str(&ok(&[
        "flows",
        "--flows-url",
        &url,
        "--address",
        "10.65.1.20",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(json["total"], json!(1));
    let sides = &json["flows"][0]["flow"];
    assert_eq!(
        (
            &sides["source"]["address"],
            &sides["destination"]["address"]
        ),
        (&json!("10.65.0.10"), &json!("10.65.1.20"))
    );
    let out = calicoctl(&["flows", "--flows-url", &url, "--address", "web"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--address \"web\": expected an IP address"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_aggregator_that_cannot_be_reached_is_one_line_naming_the_url_and_the_way_out() {
    let refusing = refusing_port();
    let url = refusing.url();
    for (args, envs) in [
        (vec!["flows", "--flows-url", url.as_str()], vec![]),
        (vec!["flows"], vec![("CALICO_FLOWS_URL", url.as_str())]),
    ] {
        let out = calicoctl(&args, &envs);
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: cannot reach the flow aggregator at {url} ("
            )),
            "{stderr}"
        );
        assert!(
            stderr.contains("--flows-url or CALICO_FLOWS_URL"),
            "{stderr}"
        );
    }
    // The default is this host's port 7480; https is refused by name.
    let out = calicoctl(&["flows", "--flows-url", "https://10.0.0.1:7480"], &[]);
    assert!(
        text(&out.stderr).contains("--flows-url \"https://10.0.0.1:7480\": https is not served")
    );
    let help = ok(&["flows", "--help"]);
    assert!(
        help.contains("[env: CALICO_FLOWS_URL=]")
            && help.contains("[default: http://127.0.0.1:7480]"),
        "{help}"
    );
    // The environment variable reaches a real aggregator.
    let flows = Aggregator::start(&[]);
    flows.post(&three_flows()[..1]);
    let out = calicoctl(&["flows"], &[("CALICO_FLOWS_URL", &flows.url())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("db-guard"));
}

/// A running `calicoctl` with its output in files (read while it runs).
struct Running {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| std::fs::File::create(dir.path().join(name)).unwrap();
        let child = Command::new(CALICOCTL)
            .env_remove("CALICO_FLOWS_URL")
            .args(args)
            .stdin(Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .expect("calicoctl starts");
        Running { child, dir }
    }

    fn read(&self, name: &str) -> String {
        let mut text = String::new();
        let _ = std::fs::File::open(self.dir.path().join(name))
            .and_then(|mut f| f.read_to_string(&mut text));
        text
    }

    fn wait_for(&self, name: &str, what: &str) {
        eventually(
            &format!("{what} in calicoctl's {name}"),
            Duration::from_secs(20),
            || {
                let text = self.read(name);
                if text.contains(what) {
                    Ok(())
                } else {
                    Err(format!("{name}: {text}\nstderr: {}", self.read("stderr")))
                }
            },
        );
    }

    fn interrupt(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        self.child.wait().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn follow_prints_matching_flows_as_they_arrive_and_ctrl_c_ends_it_cleanly() {
    let flows = Aggregator::start(&[]);
    let url = flows.url();
    let mut follow =
        Running::start(&["flows", "--flows-url", &url, "--follow", "--action", "deny"]);
    follow.wait_for("stdout", "DECIDED BY");
    flows.wait_for_subscribers(1);
    let [denied, allowed, _] = <[Value; 3]>::try_from(three_flows()).unwrap();
    flows.post(&[allowed, denied]);
    follow.wait_for("stdout", "tier default policy db-guard rule 3: deny");
    let status = follow.interrupt();
    assert!(
        status.success(),
        "Ctrl-C should end --follow with 0, got {status:?}"
    );
    let out = follow.read("stdout");
    assert_eq!(
        out.lines().count(),
        2,
        "the header and the denied flow only:\n{out}"
    );
    assert!(
        follow.read("stderr").is_empty(),
        "{}",
        follow.read("stderr")
    );
}

#[test]
fn a_follower_that_falls_behind_is_told_how_many_it_missed() {
    let flows = Aggregator::start(&["--stream-buffer", "1"]);
    let url = flows.url();
    let follow = Running::start(&["flows", "--flows-url", &url, "--follow", "-o", "json"]);
    flows.wait_for_subscribers(1);
    let records: Vec<Value> = (0..2000)
        .map(|i| {
            let src = wep("h1", &format!("ns.w{i}"), "front");
            ingress(src, "ns.db", 5432, profile_step("open", 0, "allow"), 5)
        })
        .collect();
    flows.post(&records);
    follow.wait_for("stderr", "flow record(s): narrow the filter");
    let stderr = follow.read("stderr");
    assert!(
        stderr.starts_with("warning: this stream fell behind and the aggregator skipped "),
        "{stderr}"
    );
    // Each line of -o json while following is one record (the warning may come before the
    // first record after the skip is printed).
    follow.wait_for("stdout", "\n");
    let first = follow
        .read("stdout")
        .lines()
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let event: Value = serde_json::from_str(&first).expect("a JSON line");
    assert!(event["flow"]["reporter"] == json!("h2"), "{event}");
}

/// front (10.65.0.1, role front), db (10.65.0.2, role db) in profile "open" (allow all), and
/// db-guard: db's port 5432 denied to front (rule 1), everything else allowed (rule 2).
fn datastore(ctl: &Ctl, guard_action: &str) {
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
                {"action": guard_action, "protocol": "tcp", "src_selector": "role == 'front'", "dst_ports": [5432]},
                {"action": "allow"}],
            "outbound_rules": [{"action": "allow"}]}
    });
    ctl.ok(&["load", "-f", "-"], &bundle.to_string());
}

fn explain(ctl: &Ctl, url: &str, args: &[&str]) -> String {
    let mut all = vec!["flows", "--flows-url", url, "--explain"];
    all.extend_from_slice(args);
    ctl.ok(&all, "")
}

#[test]
fn explain_runs_policy_explain_for_a_flow_and_says_whether_and_why_they_disagree() {
    let ctl = Ctl::start();
    datastore(&ctl, "deny");
    let flows = Aggregator::start(&[]);
    let url = flows.url();
    // What the data plane recorded: denied by db-guard rule 1 (index 0).
    flows.post(&[ingress(
        wep("h1", "ns.front", "open"),
        "ns.db",
        5432,
        policy_step("default", "db-guard", 0, "deny"),
        5,
    )]);
    let agree = explain(&ctl, &url, &["1"]);
    assert!(
        agree.contains("recorded (data plane)") && agree.contains("explain now (datastore)"),
        "{agree}"
    );
    let decided = agree.lines().find(|l| l.starts_with("decided by")).unwrap();
    assert_eq!(
        decided
            .matches("tier default policy db-guard rule 1: deny")
            .count(),
        2,
        "{agree}"
    );
    assert!(agree.contains(&format!(
        "calicoctl policy explain --endpoint {} --direction inbound --src 10.65.0.1 --dst 10.65.0.2 --protocol tcp --dst-port 5432",
        wep_key("h2", "ns.db")
    )), "{agree}");
    assert!(
        agree
            .trim_end()
            .ends_with("agree: explain decides as the data plane recorded"),
        "{agree}"
    );
    let id = serde_json::from_str::<Value>(&ok(&["flows", "--flows-url", &url, "-o", "json"]))
        .unwrap()["flows"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The policy changes: the same flow now disagrees, and the evidence is named.
    datastore(&ctl, "allow");
    let changed = explain(&ctl, &url, &["--id", &id]);
    assert!(changed.trim_end().ends_with(
        "disagree: the policy changed since the flow was recorded: rule 1 of policy db-guard of tier default is allow now, was deny"
    ), "{changed}");
    let report: Value =
        serde_json::from_str(&explain(&ctl, &url, &["--id", &id, "-o", "json"])).unwrap();
    assert_eq!(report["agreement"]["cause"], json!("changed-since"));
    assert_eq!(report["explain"]["verdict"], json!("allow"));
    assert_eq!(report["flow"]["id"], json!(id));

    // A record no datastore change explains: allowed by rule 2, which still allows, while
    // rule 1 still denies front.
    datastore(&ctl, "deny");
    let flows = Aggregator::start(&[]);
    let url = flows.url();
    flows.post(&[ingress(
        wep("h1", "ns.front", "open"),
        "ns.db",
        5432,
        policy_step("default", "db-guard", 1, "allow"),
        5,
    )]);
    let bug = explain(&ctl, &url, &["1"]);
    assert!(
        bug.contains(
            "disagree: a bug: the record names policy db-guard of tier default, which decides now"
        ),
        "{bug}"
    );

    // A record from before db-guard (allowed by the profile): db-guard is a change since.
    flows.post(&[ingress(
        wep("h1", "ns.front", "open"),
        "ns.db",
        5432,
        profile_step("open", 0, "allow"),
        1,
    )]);
    let new_policy = explain(
        &ctl,
        &url,
        &["1", "--endpoint", "ns.front", "--policy", "open"],
    );
    assert!(new_policy.contains(
        "disagree: the policy changed since the flow was recorded: policy db-guard of tier default decides now (tier default policy db-guard rule 1: deny), and the recorded trail never reached it: it was added"
    ), "{new_policy}");

    // The flow to explain must be named, and exist.
    let out = ctl.stdin(&["flows", "--flows-url", &url, "--explain"], "");
    assert!(
        text(&out.stderr).contains("--explain needs the flow"),
        "{}",
        text(&out.stderr)
    );
    let out = ctl.stdin(&["flows", "--flows-url", &url, "--explain", "3"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--explain 3: the listing with these filters has 2 flow(s)"),
        "{}",
        text(&out.stderr)
    );
    let out = ctl.stdin(
        &["flows", "--flows-url", &url, "--follow", "--explain", "1"],
        "",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "--follow and --explain conflict"
    );
}
