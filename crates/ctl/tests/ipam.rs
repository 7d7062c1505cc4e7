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
