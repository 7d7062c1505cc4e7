//! BGP benchmarks on a lab (docs/benchmarks.md):
//!
//! 1. a new workload until another host reaches it: with an address in a block its host
//!    already announces (the baseline: no BGP change), and with an address in a new block (IPAM
//!    claims it, calico-node reconfigures BIRD, BGP announces it, the peer installs the route);
//! 2. route convergence after a host is lost: until the other hosts have dropped its block,
//!    after a clean stop (calico-node ends; BIRD closes its sessions) and after its link goes
//!    down (nothing is said; the BGP hold time, 9 s, runs out).
//!
//! Run as root after building the binaries in the same profile:
//! `cargo build --release --workspace --bins && cargo run --release -p calico-lab --example bgp_bench`

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Down, lab, median_p99};

const OPEN: &str =
    r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
const SAMPLES: usize = 15;
const LOSSES: usize = 3;

fn main() {
    let name = format!("bgpbench{}", std::process::id());
    let _down = Down(name.clone());
    lab(&name, &["up", "--hosts", "2", "--no-flows"]);
    put(&name, "/calico/v1/policy/profile/open/rules", OPEN);
    lab(
        &name,
        &[
            "workload",
            "add",
            "--host",
            "host2",
            "--name",
            "client",
            "--ip",
            "10.65.200.1",
            "--profile",
            "open",
        ],
    );
    // Claims 10.65.100.0/26 for host1.
    lab(
        &name,
        &[
            "workload",
            "add",
            "--host",
            "host1",
            "--name",
            "anchor",
            "--ip",
            "10.65.100.1",
            "--profile",
            "open",
        ],
    );
    lab(&name, &["wait"]);
    let mut existing = Vec::new();
    let mut fresh = Vec::new();
    for i in 0..SAMPLES {
        existing.push(add_until_reachable(
            &name,
            &format!("e{i}"),
            &format!("10.65.100.{}", 2 + i),
        ));
        fresh.push(add_until_reachable(
            &name,
            &format!("f{i}"),
            &format!("10.65.{}.1", 110 + i),
        ));
    }
    drop(_down);

    let mut clean = Vec::new();
    let mut cut = Vec::new();
    for i in 0..LOSSES {
        clean.push(loss(&format!("{name}c{i}"), false));
        cut.push(loss(&format!("{name}l{i}"), true));
    }
    let (e, f) = (median_p99(&existing), median_p99(&fresh));
    println!(
        "| new workload → reachable from another host ({SAMPLES} samples) | median | p99 | × existing block |"
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| address in a block already announced (baseline) | {:.0} ms | {:.0} ms | 1 |",
        e.0, e.1
    );
    println!(
        "| address in a new block (claimed, announced over BGP) | {:.0} ms | {:.0} ms | {:.2} |",
        f.0,
        f.1,
        f.0 / e.0
    );
    let (c, l) = (median_p99(&clean), median_p99(&cut));
    println!();
    println!(
        "| host lost → its block withdrawn on the other hosts ({LOSSES} samples) | median | max |"
    );
    println!("| --- | --- | --- |");
    println!(
        "| clean stop (calico-node and BIRD end) | {:.0} ms | {:.0} ms |",
        c.0, c.1
    );
    println!(
        "| link down (hold time 9 s) | {:.0} ms | {:.0} ms |",
        l.0, l.1
    );
}

fn put(name: &str, key: &str, value: &str) {
    let env = lab(name, &["env"]);
    let endpoint = env
        .lines()
        .find_map(|l| l.strip_prefix("export ETCD_ENDPOINTS="))
        .expect("ETCD_ENDPOINTS");
    let out = Command::new("etcdctl")
        .args(["--endpoints", endpoint, "put", key, value])
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "etcdctl put {key}: {out:?}");
}

/// Milliseconds from `workload add` on host1 to the client on host2 reaching it on TCP 80.
fn add_until_reachable(name: &str, workload: &str, ip: &str) -> f64 {
    let start = Instant::now();
    lab(
        name,
        &[
            "workload",
            "add",
            "--host",
            "host1",
            "--name",
            workload,
            "--ip",
            ip,
            "--profile",
            "open",
        ],
    );
    let target = format!("{ip}:80");
    lab(
        name,
        &[
            "exec",
            "client",
            "--",
            lab_path().as_str(),
            "wait-open",
            &target,
            "--attempt-ms",
            "2",
        ],
    );
    start.elapsed().as_secs_f64() * 1000.0
}

fn lab_path() -> String {
    common::lab_bin().display().to_string()
}

/// A fresh 3-host lab with a workload on host3; host3 is lost; milliseconds until host1 no
/// longer routes host3's block.
fn loss(name: &str, link_down: bool) -> f64 {
    let _down = Down(name.to_owned());
    lab(name, &["up", "--hosts", "3", "--no-flows"]);
    lab(
        name,
        &[
            "workload",
            "add",
            "--host",
            "host3",
            "--name",
            "w3",
            "--ip",
            "10.65.3.1",
        ],
    );
    lab(name, &["wait"]);
    let host1 = format!("{name}.host1");
    let host3 = format!("{name}.host3");
    let routed = || {
        let out = Command::new("ip")
            .args(["-n", &host1, "route", "show", "10.65.3.0/26"])
            .output()
            .unwrap();
        !out.stdout.is_empty()
    };
    assert!(
        routed(),
        "host1 has no route to host3's block before the loss"
    );
    let start = Instant::now();
    if link_down {
        let out = Command::new("ip")
            .args(["-n", &host3, "link", "set", "eth0", "down"])
            .output()
            .unwrap();
        assert!(out.status.success());
    } else {
        let out = Command::new("ip")
            .args(["netns", "pids", &host3])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "calico-node")
            {
                let _ = Command::new("kill").args(["-TERM", pid]).status();
            }
        }
    }
    while routed() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "host1 never withdrew host3's block"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed().as_secs_f64() * 1000.0
}
