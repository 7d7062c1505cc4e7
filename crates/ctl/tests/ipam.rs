//! `calicoctl ipam` as an operator uses it: the built binary against a real etcd, pools written
//! with etcdctl as the seeds do.

use std::process::{Command, Output};

use calico_testkit::{EtcdServer, output_with_stdin, require_tool};

struct Ctl {
    etcd: EtcdServer,
}

impl Ctl {
    fn start() -> Ctl {
        let ctl = Ctl {
            etcd: EtcdServer::start(),
        };
        ctl.etcdctl(&[
            "put",
            "/calico/v1/ipam/v4/pool/10.70.0.0-24",
            r#"{"cidr": "10.70.0.0/24"}"#,
        ]);
        ctl.etcdctl(&[
            "put",
            "/calico/v1/ipam/v6/pool/fd00:70::-120",
            r#"{"cidr": "fd00:70::/120"}"#,
        ]);
        ctl
    }

    /// Runs calicoctl; returns (success, stdout + stderr).
    fn run(&self, args: &[&str], stdin: &str) -> (bool, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_calicoctl"));
        command
            .env("ETCD_ENDPOINTS", self.etcd.endpoint())
            .args(args);
        let out = output_with_stdin(&mut command, stdin);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.run(args, "");
        assert!(ok, "calicoctl {args:?} failed:\n{text}");
        text
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        require_tool("etcdctl");
        let out = Command::new("etcdctl")
            .arg("--endpoints")
            .arg(self.etcd.endpoint())
            .args(args)
            .output()
            .expect("etcdctl runs");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

#[test]
fn assign_show_and_release_addresses() {
    let ctl = Ctl::start();
    let text = ctl.ok(&[
        "ipam", "assign", "--handle", "web-1", "--ipv4", "2", "--ipv6", "1", "--host", "node1",
    ]);
    let ips: Vec<&str> = text.lines().collect();
    assert_eq!(ips.len(), 3, "{text}");
    assert!(
        ips[0].starts_with("10.70.0.") && ips[2].starts_with("fd00:70::"),
        "{text}"
    );
    ctl.ok(&[
        "ipam",
        "assign",
        "--handle",
        "static",
        "--ip",
        "10.70.0.200",
        "--host",
        "node2",
    ]);

    let usage = ctl.ok(&["ipam", "show", "--blocks"]);
    let pool_line = usage
        .lines()
        .find(|l| l.starts_with("10.70.0.0/24"))
        .expect(&usage);
    let columns: Vec<&str> = pool_line.split_whitespace().collect();
    assert_eq!(columns[1..], ["256", "2", "3", "1%", "enabled"], "{usage}");
    assert!(
        usage.contains("10.70.0.192/26") && usage.contains("node2"),
        "{usage}"
    );

    let info = ctl.ok(&["ipam", "show", "--ip", ips[0]]);
    assert!(info.contains("assigned to handle web-1"), "{info}");

    // Assigning a taken address says who holds it.
    let (ok, text) = ctl.run(
        &[
            "ipam",
            "assign",
            "--handle",
            "x",
            "--host",
            "node1",
            "--ip",
            "10.70.0.200",
        ],
        "",
    );
    assert!(
        !ok && text.contains("10.70.0.200 is already assigned to handle static"),
        "{text}"
    );

    let text = ctl.ok(&["ipam", "release", "--handle", "web-1"]);
    assert!(text.contains("3 address(es) released"), "{text}");
    let text = ctl.ok(&[
        "ipam",
        "release",
        "--ip",
        "10.70.0.200",
        "--ip",
        "10.70.0.201",
    ]);
    assert!(
        text.contains("10.70.0.201 was not assigned") && text.contains("1 address(es) released"),
        "{text}"
    );
    let info = ctl.ok(&["ipam", "show", "--ip", ips[0]]);
    assert!(info.contains("is not assigned"), "{info}");
    // node1's blocks are empty now: a decommissioned node gives them up.
    let text = ctl.ok(&["ipam", "release", "--empty-blocks-of", "node1"]);
    assert!(
        text.contains("2 empty block(s) of node1 released"),
        "{text}"
    );
    let keys = ctl.etcdctl(&[
        "get",
        "/calico/ipam/v2/host/node1/",
        "--prefix",
        "--keys-only",
    ]);
    assert!(keys.stdout.iter().all(u8::is_ascii_whitespace), "{keys:?}");
    let usage = ctl.ok(&["ipam", "show", "--blocks"]);
    assert!(
        !usage.contains("node1") && usage.contains("node2"),
        "{usage}"
    );
    // The handle keys are gone, as etcdctl sees it.
    let keys = ctl.etcdctl(&["get", "/calico/ipam/v2/handle/", "--prefix", "--keys-only"]);
    assert!(keys.stdout.iter().all(u8::is_ascii_whitespace), "{keys:?}");
}

#[test]
fn check_finds_a_leak_and_fix_releases_it_after_confirmation() {
    let ctl = Ctl::start();
    let used = ctl.ok(&[
        "ipam", "assign", "--handle", "pod-a", "--ipv4", "1", "--host", "node1",
    ]);
    let used = used.trim();
    ctl.ok(&[
        "ipam", "assign", "--handle", "pod-gone", "--ipv4", "1", "--host", "node1",
    ]);
    let endpoint = format!(
        r#"{{"state": "active", "name": "cali1234567890a", "profile_ids": [], "ipv4_nets": ["{used}/32"], "ipv6_nets": []}}"#
    );
    ctl.etcdctl(&[
        "put",
        "/calico/v1/host/node1/workload/cni/pod-a/endpoint/eth0",
        &endpoint,
    ]);

    let (ok, text) = ctl.run(&["ipam", "check"], "");
    assert!(!ok, "a leak must fail the check:\n{text}");
    assert!(
        text.contains("leaked: ") && text.contains("handle pod-gone"),
        "{text}"
    );

    // Answering no changes nothing.
    let (ok, text) = ctl.run(&["ipam", "check", "--fix"], "n\n");
    assert!(!ok && text.contains("nothing changed"), "{text}");
    let (ok, text) = ctl.run(&["ipam", "check", "--fix"], "y\n");
    assert!(
        ok && text.contains("released 1 address(es)") && text.contains("consistent now"),
        "{text}"
    );
    let text = ctl.ok(&["ipam", "check"]);
    assert!(
        text.starts_with("IPAM is consistent: 1 block(s), 1 address(es) assigned"),
        "{text}"
    );
}

#[test]
fn bad_arguments_are_refused_with_the_reason() {
    let ctl = Ctl::start();
    let (ok, text) = ctl.run(&["ipam", "assign", "--handle", "h", "--host", "n"], "");
    assert!(!ok && text.contains("nothing to assign"), "{text}");
    let (ok, text) = ctl.run(&["ipam", "assign", "--handle", "h", "--ipv4", "1"], "");
    assert!(
        !ok && text.contains("--host"),
        "the host must be named: {text}"
    );
    let (ok, text) = ctl.run(
        &[
            "ipam",
            "assign",
            "--handle",
            "bad/handle",
            "--host",
            "n",
            "--ipv4",
            "1",
        ],
        "",
    );
    assert!(!ok && text.contains("handle \"bad/handle\""), "{text}");
    let (ok, text) = ctl.run(&["ipam", "release"], "");
    assert!(
        !ok && text.contains("--ip") && text.contains("--handle"),
        "{text}"
    );
    let (ok, text) = ctl.run(
        &[
            "ipam",
            "assign",
            "--handle",
            "h",
            "--host",
            "n",
            "--ip",
            "10.99.0.1",
        ],
        "",
    );
    assert!(
        !ok && text.contains("10.99.0.1 is in no configured IP pool"),
        "{text}"
    );
}

#[test]
fn one_block_is_claimed_and_released_for_one_host() {
    let ctl = Ctl::start();
    let text = ctl.ok(&["ipam", "block", "claim", "10.70.0.64/26", "--host", "node1"]);
    assert_eq!(text, "block 10.70.0.64/26 is affine to host node1\n");
    let keys = ctl.etcdctl(&[
        "get",
        "/calico/ipam/v2/host/node1/",
        "--prefix",
        "--keys-only",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&keys.stdout).trim(),
        "/calico/ipam/v2/host/node1/ipv4/block/10.70.0.64-26"
    );
    let (ok, text) = ctl.run(
        &["ipam", "block", "claim", "10.70.0.64/26", "--host", "node2"],
        "",
    );
    assert!(
        !ok && text.contains(
            "nothing changed: block 10.70.0.64/26 is affine to host node1; release it there \
             first (calicoctl ipam block release 10.70.0.64/26 --host node1)"
        ),
        "{text}"
    );
    let (ok, text) = ctl.run(
        &["ipam", "block", "claim", "10.70.0.0/25", "--host", "node2"],
        "",
    );
    assert!(
        !ok && text.contains("10.70.0.0/25 is not a block of pool 10.70.0.0/24"),
        "{text}"
    );
    // node1 fills its block first; released, the block keeps the address and has no host.
    let ip = ctl.ok(&[
        "ipam", "assign", "--handle", "w", "--ipv4", "1", "--host", "node1",
    ]);
    assert!(ip.starts_with("10.70.0."), "{ip}");
    let last: u8 = ip.trim().rsplit('.').next().unwrap().parse().unwrap();
    assert!((64..128).contains(&last), "{ip}");
    let text = ctl.ok(&[
        "ipam",
        "block",
        "release",
        "10.70.0.64/26",
        "--host",
        "node1",
    ]);
    assert!(
        text.contains("keeps its addresses, affine to no host"),
        "{text}"
    );
    let usage = ctl.ok(&["ipam", "show", "--blocks"]);
    let line = usage
        .lines()
        .find(|l| l.starts_with("10.70.0.64/26"))
        .expect(&usage);
    assert!(line.contains("(none)"), "{usage}");
    let (ok, text) = ctl.run(
        &[
            "ipam",
            "block",
            "release",
            "10.70.0.64/26",
            "--host",
            "node1",
        ],
        "",
    );
    assert!(
        !ok && text.contains("block 10.70.0.64/26 is affine to no host, not node1"),
        "{text}"
    );
}

#[test]
fn a_gone_host_gives_up_blocks_that_still_hold_addresses() {
    let ctl = Ctl::start();
    let ips = ctl.ok(&[
        "ipam", "assign", "--handle", "w", "--ipv4", "1", "--ipv6", "1", "--host", "gone",
    ]);
    // --empty-blocks-of keeps them: they hold addresses.
    let text = ctl.ok(&["ipam", "release", "--empty-blocks-of", "gone"]);
    assert!(text.contains("0 empty block(s) of gone released"), "{text}");
    let text = ctl.ok(&["ipam", "release", "--host-gone", "gone"]);
    assert!(
        text.contains("keeps its addresses, affine to no host")
            && text.contains("2 affinity(ies) of gone released"),
        "{text}"
    );
    let keys = ctl.etcdctl(&["get", "/calico/ipam/v2/host/", "--prefix", "--keys-only"]);
    assert!(keys.stdout.iter().all(u8::is_ascii_whitespace), "{keys:?}");
    let ip4 = ips.lines().next().unwrap();
    let info = ctl.ok(&["ipam", "show", "--ip", ip4]);
    assert!(
        info.contains(&format!("{ip4} is assigned to handle w in block"))
            && info.contains("(host (none))"),
        "{info}"
    );
    // With their last address the blocks of no host are deleted.
    ctl.ok(&["ipam", "release", "--handle", "w"]);
    let keys = ctl.etcdctl(&["get", "/calico/ipam/v2/", "--prefix", "--keys-only"]);
    assert!(keys.stdout.iter().all(u8::is_ascii_whitespace), "{keys:?}");
}

#[test]
fn show_ip_names_the_handle_attributes_and_block_of_a_calico_1_4_allocation() {
    let ctl = Ctl::start();
    ctl.etcdctl(&[
        "put",
        "/calico/v1/ipam/v4/pool/10.65.0.0-24",
        r#"{"cidr": "10.65.0.0/24"}"#,
    ]);
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ipam/tests/fixtures/calico-1.4/no-host-block.json"
    );
    let block = std::fs::read_to_string(fixture).expect(fixture);
    ctl.etcdctl(&[
        "put",
        "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26",
        &block,
    ]);
    let info = ctl.ok(&["ipam", "show", "--ip", "10.65.0.9"]);
    assert_eq!(
        info,
        "10.65.0.9 is assigned to handle ba11f1de-fc4d-46fd-9f15-424f4ef05a3a in block \
         10.65.0.0/26 (host (none))\n  container-id: ba11f1de\n  rack: 1\n"
    );
    let info = ctl.ok(&["ipam", "show", "--ip", "10.65.0.5"]);
    assert_eq!(
        info,
        "10.65.0.5 is assigned to handle (none) in block 10.65.0.0/26 (host (none))\n  \
         attributes: (none)\n"
    );
    let usage = ctl.ok(&["ipam", "show", "--blocks"]);
    assert!(usage.contains("10.65.0.0/26"), "{usage}");
    // Its addresses are used by no endpoint: check says so, and nothing else.
    let (ok, text) = ctl.run(&["ipam", "check"], "");
    assert!(!ok && text.contains("leaked: 10.65.0.9"), "{text}");
    assert!(!text.contains("invalid:"), "{text}");
}

#[test]
fn the_ipam_config_is_shown_set_and_validated() {
    let ctl = Ctl::start();
    let text = ctl.ok(&["ipam", "config"]);
    assert_eq!(text, "strict_affinity: false\nauto_allocate_blocks: true\n");
    let (ok, text) = ctl.run(&["ipam", "config", "--auto-allocate-blocks", "false"], "");
    assert!(
        !ok && text.contains(
            "/calico/ipam/v2/config: auto_allocate_blocks: cannot be false while \
             strict_affinity is false"
        ),
        "{text}"
    );
    let text = ctl.ok(&[
        "ipam",
        "config",
        "--strict-affinity",
        "true",
        "--auto-allocate-blocks",
        "false",
    ]);
    assert_eq!(text, "strict_affinity: true\nauto_allocate_blocks: false\n");
    let stored = ctl.etcdctl(&["get", "/calico/ipam/v2/config", "--print-value-only"]);
    let stored: serde_json::Value = serde_json::from_slice(&stored.stdout).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"auto_allocate_blocks": false, "strict_affinity": true})
    );
    // A config written by hand that no Calico accepts is reported with key, field and fix,
    // and does not stop `ipam show`.
    ctl.etcdctl(&[
        "put",
        "/calico/ipam/v2/config",
        r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#,
    ]);
    let (ok, text) = ctl.run(&["ipam", "check"], "");
    assert!(
        !ok && text.contains(
            "invalid: /calico/ipam/v2/config: auto_allocate_blocks: cannot be false while \
             strict_affinity is false"
        ) && text.contains("fix: set it again with calicoctl ipam config"),
        "{text}"
    );
    ctl.ok(&["ipam", "show"]);
    let text = ctl.ok(&["ipam", "config", "--strict-affinity", "true"]);
    assert_eq!(text, "strict_affinity: true\nauto_allocate_blocks: true\n");
}

/// `ipam show -o json` (pools and blocks) and `ipam show --ip -o json`; release of an address
/// that is not assigned says so.
#[test]
fn show_json_and_releasing_an_unassigned_address() {
    let ctl = Ctl::start();
    ctl.ok(&[
        "ipam",
        "assign",
        "--handle",
        "h",
        "--ip",
        "10.70.0.5",
        "--host",
        "node1",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&ctl.ok(&["ipam", "show", "-o", "json"])).expect("JSON");
    assert_eq!(
        v["pools"][0],
        serde_json::json!({"cidr": "10.70.0.0/24", "addresses": 256, "hostBits": 8,
                           "blocks": 1, "assigned": 1, "enabled": true})
    );
    assert_eq!(v["pools"][1]["cidr"], "fd00:70::/120");
    assert_eq!(
        v["blocks"],
        serde_json::json!([{"cidr": "10.70.0.0/26", "host": "node1", "addresses": 64,
                            "assigned": 1, "strictAffinity": false}])
    );
    assert_eq!(v["unreadableBlocks"], serde_json::json!([]));
    let v: serde_json::Value =
        serde_json::from_str(&ctl.ok(&["ipam", "show", "--ip", "10.70.0.5", "-o", "json"]))
            .expect("JSON");
    assert_eq!(v["assigned"], true);
    assert_eq!(v["handle"], "h");
    assert_eq!(v["block"], "10.70.0.0/26");
    assert_eq!(v["host"], "node1");
    let yaml = ctl.ok(&["ipam", "show", "--ip", "10.70.0.6", "-o", "yaml"]);
    let v: serde_json::Value = serde_yaml_ng::from_str(&yaml).expect("YAML");
    assert_eq!(v["assigned"], false, "{yaml}");

    let text = ctl.ok(&["ipam", "release", "--ip", "10.70.0.9"]);
    assert!(text.contains("10.70.0.9 was not assigned"), "{text}");
    assert!(text.contains("0 address(es) released"), "{text}");
}
