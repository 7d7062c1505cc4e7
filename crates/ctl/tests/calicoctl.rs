//! calicoctl driven as an operator would: the built binary against a real etcd started on a
//! free loopback port, with etcdctl alongside to check that the keys are the public ones.

use std::path::Path;
use std::process::{Command, Output};

use calico_testkit::{EtcdServer, output_with_stdin, require_tool};

const WEBSERVER_KEY: &str = "/calico/v1/policy/tier/my-tier/policy/webserver";
const WEBSERVER: &str = r#"{"selector": "role==\"webserver\"", "order": 100, "inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

struct Ctl {
    etcd: EtcdServer,
}

impl Ctl {
    fn start() -> Self {
        Self {
            etcd: EtcdServer::start(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, "")
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        calicoctl(&self.etcd.endpoint(), args, stdin)
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        require_tool("etcdctl");
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(self.etcd.endpoint())
            .args(args)
            .output()
            .expect("etcdctl runs")
    }
}

fn calicoctl(endpoint: &str, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_calicoctl"));
    command.env("ETCD_ENDPOINTS", endpoint).args(args);
    output_with_stdin(&mut command, stdin)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "calicoctl failed: {}\n{}",
        stdout(output),
        stderr(output)
    );
}

#[test]
fn put_then_get_returns_the_value_as_written_and_etcdctl_sees_it() {
    let ctl = Ctl::start();
    assert_ok(&ctl.run(&["put", WEBSERVER_KEY, WEBSERVER]));
    let got = ctl.run(&["get", WEBSERVER_KEY]);
    assert_ok(&got);
    assert_eq!(stdout(&got).trim_end(), WEBSERVER);
    let seen = ctl.etcdctl(&["get", WEBSERVER_KEY, "--print-value-only"]);
    assert_eq!(stdout(&seen).trim_end(), WEBSERVER);
}

#[test]
fn seed_etcdctl_commands_produce_objects_calicoctl_accepts() {
    let ctl = Ctl::start();
    let failsafe_meta = "/calico/v1/policy/tier/failsafe/metadata";
    assert_ok(&ctl.etcdctl(&["put", failsafe_meta, r#"{"order": 0}"#]));
    assert_ok(&ctl.etcdctl(&["put", "/calico/v1/Ready", "true"]));
    let listed = ctl.run(&["get", "/calico/v1/"]);
    assert_ok(&listed);
    assert!(
        stdout(&listed).contains(failsafe_meta),
        "{}",
        stdout(&listed)
    );
    assert!(
        !stderr(&listed).contains("warning"),
        "seed objects flagged invalid: {}",
        stderr(&listed)
    );
}

#[test]
fn an_invalid_object_is_refused_with_field_and_reason_and_nothing_is_written() {
    let ctl = Ctl::start();
    let key = "/calico/v1/policy/profile/web/rules";
    let out = ctl.run(&[
        "put",
        key,
        r#"{"inbound_rules": [{"dst_ports": [80], "action": "allow"}]}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("inbound_rules[0]"),
        "no field path in: {}",
        stderr(&out)
    );
    let got = ctl.run(&["get", key]);
    assert!(!got.status.success(), "the invalid object was written");
    assert!(stderr(&got).contains("nothing at"), "{}", stderr(&got));
}

#[test]
fn get_flags_stored_objects_that_calico_would_treat_as_missing() {
    let ctl = Ctl::start();
    let key = "/calico/v1/host/h1/endpoint/eth0";
    assert_ok(&ctl.etcdctl(&["put", key, r#"{"labels": {"foo": "bar"}}"#]));
    let out = ctl.run(&["get", key]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("'name' or 'expected_ipvX_addrs' must be present"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn delete_removes_a_key_and_a_prefix() {
    let ctl = Ctl::start();
    let tier = "/calico/v1/policy/tier/my-tier/";
    assert_ok(&ctl.run(&["put", &format!("{tier}metadata"), r#"{"order": 100}"#]));
    assert_ok(&ctl.run(&["put", WEBSERVER_KEY, WEBSERVER]));
    assert_ok(&ctl.run(&["delete", WEBSERVER_KEY]));
    assert!(!ctl.run(&["get", WEBSERVER_KEY]).status.success());
    let missing = ctl.run(&["delete", WEBSERVER_KEY]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("no such key"),
        "{}",
        stderr(&missing)
    );
    let out = ctl.run(&["delete", "--prefix", tier]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), "deleted 1 keys");
    let refused = ctl.run(&["delete", "--prefix", "/"]);
    assert!(!refused.status.success());
}

/// A prefix ends at a `/`: deleting host h2's keys leaves host h22's alone, with or without the
/// trailing slash.
#[test]
fn delete_prefix_stops_at_a_path_boundary() {
    let ctl = Ctl::start();
    let config = |host: &str| format!("/calico/v1/host/{host}/config/LogSeverityScreen");
    for host in ["h2", "h22", "h2.example"] {
        assert_ok(&ctl.run(&["put", &config(host), "info"]));
    }
    let out = ctl.run(&["delete", "--prefix", "/calico/v1/host/h2"]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), "deleted 1 keys");
    let left = ctl.etcdctl(&["get", "--prefix", "--keys-only", "/calico/v1/host/"]);
    let left: Vec<String> = stdout(&left)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(left, [config("h2.example"), config("h22")]);
    let out = ctl.run(&["delete", "--prefix", "/calico/v1/host/h22/"]);
    assert_eq!(stdout(&out).trim(), "deleted 1 keys");
    assert_ok(&ctl.run(&["get", &config("h2.example")]));
}

#[test]
fn every_example_bundle_loads_and_get_json_round_trips() {
    let ctl = Ctl::start();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut bundles: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    bundles.sort();
    assert!(
        bundles.len() >= 6,
        "examples missing in {}",
        examples.display()
    );
    for bundle in &bundles {
        assert_ok(&ctl.run(&["load", "-f", bundle.to_str().unwrap()]));
    }
    let exported = ctl.run(&["get", "/calico/", "-o", "json"]);
    assert_ok(&exported);
    assert!(stderr(&exported).is_empty(), "{}", stderr(&exported));

    let other = Ctl::start();
    assert_ok(&other.run_with_stdin(&["load", "-f", "-"], &stdout(&exported)));
    let again = other.run(&["get", "/calico/", "-o", "json"]);
    assert_eq!(stdout(&again), stdout(&exported));
}

#[test]
fn a_bundle_with_one_invalid_entry_writes_nothing() {
    let ctl = Ctl::start();
    let bundle = r#"{
        "/calico/v1/policy/tier/t1/metadata": {"order": 1},
        "/calico/v1/policy/tier/t1/policy/p1": {"selector": "a ==", "order": 1}
    }"#;
    let out = ctl.run_with_stdin(&["load", "-f", "-"], bundle);
    assert!(!out.status.success());
    assert!(stdout(&out).contains("selector"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("nothing was written"),
        "{}",
        stderr(&out)
    );
    assert!(
        !ctl.run(&["get", "/calico/v1/policy/tier/t1/metadata"])
            .status
            .success()
    );
}

#[test]
fn validate_prints_ok_or_the_precise_error() {
    let ok = calicoctl(
        "http://127.0.0.1:1",
        &["validate", WEBSERVER_KEY, WEBSERVER],
        "",
    );
    assert_ok(&ok);
    assert_eq!(stdout(&ok).trim(), "OK");
    let bad = calicoctl(
        "http://127.0.0.1:1",
        &["validate", "/calico/v1/host/h/endpoint/e", "-f", "-"],
        r#"{"labels": {"foo": "bar"}, "profile_ids": ["profl"]}"#,
    );
    assert!(!bad.status.success());
    assert!(
        stdout(&bad).contains("'name' or 'expected_ipvX_addrs' must be present"),
        "{}",
        stdout(&bad)
    );
}

#[test]
fn selector_eval_prints_one_verdict_per_line() {
    let input = [
        r#"{"selector": "role == \"db\"", "labels": {"role": "db"}}"#,
        r#"{"selector": "role != \"db\"", "labels": {}}"#,
        r#"{"selector": "has(role) && role in {\"a\", \"b\"}", "labels": {"role": "c"}}"#,
        r#"{"selector": "role = \"db\"", "labels": {}}"#,
        r#"not json"#,
    ]
    .join("\n");
    let out = calicoctl("http://127.0.0.1:1", &["selector", "eval"], &input);
    assert_ok(&out);
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(lines[..3], ["true", "true", "false"]);
    assert!(lines[3].starts_with("error: "), "{}", lines[3]);
    assert!(
        lines[4].starts_with("error: invalid input line"),
        "{}",
        lines[4]
    );
    assert_eq!(lines.len(), 5);
}

#[test]
fn an_unreachable_etcd_is_reported_with_its_endpoint() {
    let out = calicoctl("http://127.0.0.1:9", &["get", "/calico/"], "");
    assert!(!out.status.success());
    // One line: the endpoint, the cause and what to check.
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "cannot reach etcd at http://127.0.0.1:9: tcp connect error: Connection refused"
        ) && err.contains("check --etcd-endpoints / ETCD_ENDPOINTS"),
        "{err}"
    );
}

#[test]
fn policy_explain_names_what_decided() {
    let ctl = Ctl::start();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for bundle in [
        "10-failsafe-tier.json",
        "30-profiles.json",
        "40-endpoints.json",
    ] {
        let path = examples.join(bundle);
        assert_ok(&ctl.run(&["load", "-f", path.to_str().unwrap()]));
    }
    let postgres = "/calico/v1/host/my-host/workload/docker/postgres-1/endpoint/eth0";
    let explain = |src: &str, port: &str| {
        let args = ["policy", "explain", "--endpoint", postgres, "--src", src];
        let out = ctl.run(&[&args[..], &["--dst-port", port]].concat());
        assert_ok(&out);
        stdout(&out)
    };
    // frontend-1 (10.65.0.2) has profile db-user, whose tag the database profile admits.
    let allowed = explain("10.65.0.2", "5432");
    assert!(
        allowed.contains("tier failsafe policy failsafe: rule 3 matches (next-tier)"),
        "{allowed}"
    );
    assert!(
        allowed
            .trim_end()
            .ends_with("allow: profile database, rule 1 (allow)"),
        "{allowed}"
    );
    assert!(
        allowed.contains("tcp 10.65.0.2 -> 10.65.0.3:5432"),
        "{allowed}"
    );
    let denied = explain("10.65.0.99", "5432");
    assert!(
        denied.trim_end().ends_with("deny: no profile rule matched"),
        "{denied}"
    );
    let bad = ctl.run(&[
        "policy",
        "explain",
        "--endpoint",
        "/calico/v1/Ready",
        "--src",
        "10.0.0.1",
    ]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("not an endpoint"), "{}", stderr(&bad));
}

/// `node list` reads every prefix calico-node builds the BGP configuration from
/// (`calico_bgp::datastore_prefixes`): a mesh switched off through the 1.x key is off here too,
/// and a value Calico treats as missing is reported with the one warning line.
#[test]
fn node_list_reads_the_1x_mesh_switch_as_calico_node_does() {
    let ctl = Ctl::start();
    assert_ok(&ctl.etcdctl(&["put", "/calico/bgp/v1/host/h1/ip_addr_v4", "10.0.0.1"]));
    let list = ctl.run(&["node", "list"]);
    assert_ok(&list);
    assert!(stdout(&list).contains("h1"), "{}", stdout(&list));
    assert!(
        stdout(&list).contains("node-to-node mesh: on"),
        "{}",
        stdout(&list)
    );

    assert_ok(&ctl.etcdctl(&[
        "put",
        "/calico/v1/config/bgp_node_mesh",
        r#"{"enabled": false}"#,
    ]));
    assert_ok(&ctl.etcdctl(&["put", "/calico/bgp/v1/host/h2/as_num", "not-a-number"]));
    let list = ctl.run(&["node", "list"]);
    assert_ok(&list);
    assert!(
        stdout(&list).contains("node-to-node mesh: off"),
        "{}",
        stdout(&list)
    );
    assert!(
        stderr(&list).contains(
            "warning: Validation failed for /calico/bgp/v1/host/h2/as_num, treating as missing:"
        ),
        "{}",
        stderr(&list)
    );
}

const NO_HOST_BLOCK_KEY: &str = "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26";
/// Calico 1.4's JSON for a block of no host: `"affinity": ""`, `"strict_affinity": false`,
/// `handle_id` attributes, a `secondary` with a number.
const NO_HOST_BLOCK: &str = include_str!("../../ipam/tests/fixtures/calico-1.4/no-host-block.json");
const STRICT_BLOCK_KEY: &str = "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26";
const STRICT_BLOCK: &str = include_str!("../../ipam/tests/fixtures/calico-1.4/strict-block.json");

/// Blocks exactly as Calico 1.4 writes them go through `validate`, `put` and `get` unchanged and
/// unflagged.
#[test]
fn calico_1_4_blocks_validate_put_and_get_as_written() {
    let ctl = Ctl::start();
    for (key, block) in [
        (NO_HOST_BLOCK_KEY, NO_HOST_BLOCK),
        (STRICT_BLOCK_KEY, STRICT_BLOCK),
    ] {
        let block = block.trim_end();
        let checked = ctl.run(&["validate", key, block]);
        assert_ok(&checked);
        assert_eq!(stdout(&checked).trim(), "OK");
        assert_ok(&ctl.run(&["put", key, block]));
        let got = ctl.run(&["get", key]);
        assert_ok(&got);
        assert_eq!(stdout(&got).trim_end(), block);
        assert!(stderr(&got).is_empty(), "flagged: {}", stderr(&got));
        let seen = ctl.etcdctl(&["get", key, "--print-value-only"]);
        assert_eq!(stdout(&seen).trim_end(), block);
    }
    let listed = ctl.run(&["get", "/calico/ipam/v2/"]);
    assert_ok(&listed);
    assert!(stderr(&listed).is_empty(), "flagged: {}", stderr(&listed));
}

/// The two strict flags of a block must agree; the error names the field read second.
#[test]
fn a_block_whose_two_strict_flags_disagree_is_refused_naming_them() {
    let ctl = Ctl::start();
    let both = STRICT_BLOCK.replace(
        r#""strict_affinity": true"#,
        r#""strict_affinity": true, "strictAffinity": false"#,
    );
    let out = ctl.run(&["put", STRICT_BLOCK_KEY, &both]);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("strictAffinity: is false but strict_affinity is true; remove the one"),
        "{}",
        stderr(&out)
    );
    assert!(!ctl.run(&["get", STRICT_BLOCK_KEY]).status.success());
}

/// Calico 1.4 refused a config in which a host could neither claim a block nor borrow.
#[test]
fn put_of_an_ipam_config_with_both_flags_false_is_refused_naming_both() {
    let ctl = Ctl::start();
    let key = "/calico/ipam/v2/config";
    let out = ctl.run(&[
        "put",
        key,
        r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "auto_allocate_blocks: cannot be false while strict_affinity is false (a host could \
             neither claim a block nor borrow); set one of them to true"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!ctl.run(&["get", key]).status.success(), "it was written");

    let config = include_str!("../../ipam/tests/fixtures/calico-1.4/config.json").trim_end();
    assert_ok(&ctl.run(&["put", key, config]));
    let strict_only = r#"{"auto_allocate_blocks": false, "strict_affinity": true}"#;
    assert_ok(&ctl.run(&["validate", key, strict_only]));
    let misspelt = ctl.run(&["validate", key, r#"{"strictAffinity": true}"#]);
    assert!(!misspelt.status.success());
    assert!(
        stdout(&misspelt).contains("strictAffinity: unknown field"),
        "{}",
        stdout(&misspelt)
    );
}

/// `node list -o json|yaml`: the hosts with their AS and where it comes from, and the mesh.
#[test]
fn node_list_json_and_yaml_for_scripts() {
    let ctl = Ctl::start();
    assert_ok(&ctl.etcdctl(&["put", "/calico/bgp/v1/host/h1/ip_addr_v4", "10.0.0.1"]));
    assert_ok(&ctl.etcdctl(&["put", "/calico/bgp/v1/host/h2/ip_addr_v4", "10.0.0.2"]));
    assert_ok(&ctl.etcdctl(&["put", "/calico/bgp/v1/host/h2/as_num", "64513"]));
    let list = ctl.run(&["node", "list", "-o", "json"]);
    assert_ok(&list);
    let v: serde_json::Value = serde_json::from_str(&stdout(&list)).expect("JSON");
    assert_eq!(v["nodeToNodeMesh"], true);
    assert_eq!(
        v["nodes"],
        serde_json::json!([
            {"host": "h1", "ipv4": "10.0.0.1", "ipv6": null, "asNumber": 64512,
             "asSource": "default", "routeReflectorClusterId": null},
            {"host": "h2", "ipv4": "10.0.0.2", "ipv6": null, "asNumber": 64513,
             "asSource": "node", "routeReflectorClusterId": null},
        ])
    );
    let yaml = ctl.run(&["node", "list", "-o", "yaml"]);
    assert_ok(&yaml);
    assert!(
        stdout(&yaml).starts_with("---\nnodes:\n"),
        "{}",
        stdout(&yaml)
    );
    // Only table, json and yaml: anything else is a usage error (exit 2).
    let wide = ctl.run(&["node", "list", "-o", "wide"]);
    assert_eq!(wide.status.code(), Some(2), "{}", stderr(&wide));
}

/// The older commands' error paths through the binary, and their exit status.
#[test]
fn older_commands_fail_with_exit_1_naming_what_is_wrong() {
    let ctl = Ctl::start();
    // delete of a missing key
    let out = ctl.run(&["delete", "/calico/v1/policy/tier/nope/metadata"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    println!("delete missing: {}", stderr(&out));
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));
    // policy explain of a missing endpoint
    let endpoint = "/calico/v1/host/h1/workload/k8s/w1/endpoint/missing";
    let out = ctl.run(&["policy", "explain", "--endpoint", endpoint]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    println!("explain missing: {}", stderr(&out));
    assert!(stderr(&out).contains(endpoint), "{}", stderr(&out));
    // get of a missing key
    let out = ctl.run(&["get", "/calico/v1/config/Nope"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // a usage error is clap's: exit 2
    let out = ctl.run(&["put"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
