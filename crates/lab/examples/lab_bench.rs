//! System benchmarks on a lab (docs/benchmarks.md):
//!
//! 1. policy programming latency: etcd write → the kernel lets the first packet through, with
//!    100 local endpoints, without extra policies (the baseline) and with 2,000 policies; 200
//!    samples each, with Felix's periodic drift check every 10 s (`IptablesRefreshInterval`), so
//!    that the samples span many checks and the tail shows whether a check holds up an update;
//! 2. iperf3 throughput and new TCP connections per second between workloads on two hosts:
//!    the routed path with no Calico rule on it (the baseline), through our chains with no
//!    policy, and with 1,000 policies applying to the server; and a plain veth pair between two
//!    namespaces for scale.
//!
//! Run as root after building the binaries in the same profile:
//! `cargo build --release -p calico-lab -p calico-felix && cargo run --release -p calico-lab --example lab_bench`

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_lab::{Lab, sh};
use calico_testkit::{NetNs, Tails};

mod common;
use common::{Down, lab, lab_bin};

const ENDPOINTS: usize = 100;
const POLICIES: usize = 2000;
const ACTIVE_POLICIES: usize = 1000;
const SAMPLES: usize = 200;
/// Felix's drift check period during the run (seconds): short, so that many checks fall among
/// the samples.
const REFRESH_SECS: u32 = 10;
const SERVER: &str = "10.66.1.1";
/// Connections in flight at a time when measuring the connection setup rate.
const CONN_PARALLEL: usize = 4;
/// Runs of each throughput and connection-rate measurement; the median is reported.
const RUNS: usize = 3;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn gate(allow: bool) -> String {
    let inbound = if allow {
        r#"[{"protocol": "tcp", "dst_ports": [80], "action": "allow"}]"#
    } else {
        "[]"
    };
    format!(
        r#"{{"selector": "app == \"server\"", "order": 0, "inbound_rules": {inbound}, "outbound_rules": [{{"action": "allow"}}]}}"#
    )
}

/// Latency samples in milliseconds: write the allow, time until a connection gets through.
async fn latencies(name: &str, store: &EtcdDatastore) -> Vec<f64> {
    let key = "/calico/v1/policy/tier/bench/policy/gate";
    let mut samples = Vec::new();
    for _ in 0..SAMPLES {
        store.put(key, &gate(false)).await.unwrap();
        lab(name, &["wait"]);
        let to = format!("{SERVER}:80");
        let waiter = Command::new(lab_bin())
            .args(["--lab", name, "exec", "client", "--"])
            .arg(lab_bin())
            .args([
                "wait-open",
                &to,
                "--attempt-ms",
                "2",
                "--deadline-ms",
                "20000",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200)); // the waiter is trying by now
        let start = now_ns();
        store.put(key, &gate(true)).await.unwrap();
        let out = waiter.wait_with_output().unwrap();
        let opened: u128 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("wait-open printed a time");
        samples.push((opened.saturating_sub(start)) as f64 / 1e6);
    }
    samples
}

/// Gbit/s received, from iperf3's JSON report.
fn gbits(report: &str) -> f64 {
    let json: serde_json::Value = serde_json::from_str(report).unwrap_or_default();
    let bits = json["end"]["sum_received"]["bits_per_second"].as_f64();
    bits.unwrap_or_else(|| panic!("iperf3 failed:\n{report}")) / 1e9
}

/// One measured path: iperf3 throughput and the connection setup rate, each the median of
/// `RUNS` runs, with the connection tails of the median run.
#[derive(Debug, Clone, Copy)]
struct PathFigures {
    gbits: f64,
    /// The lowest and highest of the runs' throughputs.
    gbits_range: (f64, f64),
    conns: Rate,
    conns_range: (f64, f64),
}

/// `calico-lab connect-rate --json`.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
struct Rate {
    per_second: f64,
    median_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl PathFigures {
    /// Runs `measure` (iperf3 report, connect-rate JSON) `RUNS` times.
    fn measure(mut measure: impl FnMut() -> (String, String)) -> PathFigures {
        let (mut gbits, mut rates) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let (iperf, rate) = measure();
            gbits.push(self::gbits(&iperf));
            let rate: Rate = serde_json::from_str(rate.trim())
                .unwrap_or_else(|e| panic!("connect-rate printed {rate:?}: {e}"));
            rates.push(rate);
        }
        gbits.sort_by(f64::total_cmp);
        rates.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        PathFigures {
            gbits: gbits[RUNS / 2],
            gbits_range: (gbits[0], gbits[RUNS - 1]),
            conns: rates[RUNS / 2],
            conns_range: (rates[0].per_second, rates[RUNS - 1].per_second),
        }
    }
}

/// iperf3 throughput and the connection setup rate from the client to the server.
fn path(name: &str) -> PathFigures {
    let to = format!("{SERVER}:80");
    let parallel = CONN_PARALLEL.to_string();
    let bin = lab_bin();
    PathFigures::measure(|| {
        let iperf = lab(
            name,
            &[
                "exec", "client", "--", "iperf3", "-c", SERVER, "-t", "3", "-J",
            ],
        );
        let rate = lab(
            name,
            &[
                "exec",
                "client",
                "--",
                bin.to_str().unwrap(),
                "connect-rate",
                &to,
                "--secs",
                "3",
                "--parallel",
                &parallel,
                "--json",
            ],
        );
        (iperf, rate)
    })
}

/// The same two measurements over a plain veth pair between two namespaces.
fn plain_veth() -> PathFigures {
    let (ns_a, ns_b) = (NetNs::new("bench-veth-a"), NetNs::new("bench-veth-b"));
    let (a, b) = (ns_a.name().to_owned(), ns_b.name().to_owned());
    let ip = |args: &[&str]| {
        assert!(
            Command::new("ip").args(args).status().unwrap().success(),
            "ip {args:?}"
        )
    };
    ip(&[
        "-n", &a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", &b,
    ]);
    for (ns, addr) in [(&a, "10.67.0.1/24"), (&b, "10.67.0.2/24")] {
        ip(&["-n", ns, "addr", "add", addr, "dev", "eth0"]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    let mut echo = sh::command_in(&b, lab_bin())
        .args(["serve", "--ports", "80"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let parallel = CONN_PARALLEL.to_string();
    let figures = PathFigures::measure(|| {
        let mut server = sh::command_in(&b, "iperf3")
            .args(["-s", "-1"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let iperf = sh::command_in(&a, "iperf3")
            .args(["-c", "10.67.0.2", "-t", "3", "-J"])
            .output()
            .unwrap();
        let _ = server.wait();
        let rate = sh::command_in(&a, lab_bin())
            .args([
                "connect-rate",
                "10.67.0.2:80",
                "--secs",
                "3",
                "--parallel",
                &parallel,
                "--json",
            ])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&iperf.stdout).into_owned(),
            String::from_utf8_lossy(&rate.stdout).into_owned(),
        )
    });
    let _ = echo.kill();
    let _ = echo.wait();
    figures
}

#[tokio::main]
async fn main() {
    let name = format!("bench{}", std::process::id());
    let refresh = format!("IptablesRefreshInterval={REFRESH_SECS}");
    lab(&name, &["up", "--hosts", "2", "--felix-config", &refresh]);
    let _down = Down(name.clone());
    let state = Lab::load(&name).unwrap();
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: state.client_endpoints(),
        ..EtcdConfig::default()
    })
    .await
    .unwrap();
    let open =
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
    store
        .put("/calico/v1/policy/profile/open/rules", open)
        .await
        .unwrap();
    store
        .put("/calico/v1/policy/tier/bench/metadata", r#"{"order": 10}"#)
        .await
        .unwrap();
    eprintln!("adding {ENDPOINTS} workloads on host1 and a client on host2 ...");
    let add = |host: &str, workload: &str, ip: &str, label: Option<&str>| {
        let mut args = vec![
            "workload", "add", "--host", host, "--name", workload, "--ip", ip,
        ];
        args.extend(["--profile", "open"]);
        if let Some(label) = label {
            args.extend(["--label", label]);
        }
        lab(&name, &args);
    };
    add("host2", "client", "10.66.0.1", None);
    add("host1", "server", SERVER, Some("app=server"));
    for i in 1..ENDPOINTS {
        let (ip, label) = (format!("10.66.2.{i}"), format!("app=filler{i}"));
        add("host1", &format!("f{i}"), &ip, Some(&label));
    }

    eprintln!("latency, no other policies ...");
    let base = latencies(&name, &store).await;
    eprintln!("writing {POLICIES} policies ...");
    for i in 0..POLICIES {
        let value = format!(
            r#"{{"selector": "app == \"filler{}\"", "order": {}, "inbound_rules": [{{"protocol": "tcp", "dst_ports": [{}], "src_net": "10.66.0.0/16", "action": "allow"}}], "outbound_rules": [{{"action": "allow"}}]}}"#,
            i % (ENDPOINTS - 1) + 1,
            i + 1,
            1000 + i % 50_000
        );
        store
            .put(
                &format!("/calico/v1/policy/tier/bench/policy/p{i:04}"),
                &value,
            )
            .await
            .unwrap();
    }
    lab(&name, &["wait", "--timeout-secs", "300"]);
    eprintln!("latency, {POLICIES} policies ...");
    let loaded = latencies(&name, &store).await;
    eprintln!("latencies (ms), baseline: {base:?}\nwith {POLICIES} policies: {loaded:?}");

    eprintln!("throughput and connection setup rate ...");
    // The gate lets only port 80 through; iperf3 uses 5201: without it the profile allows all.
    store
        .delete("/calico/v1/policy/tier/bench/policy/gate")
        .await
        .unwrap();
    store
        .delete_prefix("/calico/v1/policy/tier/bench/policy/p")
        .await
        .unwrap();
    lab(&name, &["wait"]);
    lab(&name, &["exec", "server", "--", "iperf3", "-s", "-D"]);
    std::thread::sleep(Duration::from_secs(1));
    let veth = plain_veth();
    // The same routed path with no Calico rule on it: an ACCEPT ahead of Felix's jump in
    // FORWARD on both hosts (Felix's drift check puts back only its own jump; this rule stays).
    let bypass = |add: bool| {
        for host in &state.hosts {
            for tool in ["iptables", "ip6tables"] {
                let op = if add {
                    ["-I", "FORWARD", "1"]
                } else {
                    ["-D", "FORWARD", ""]
                };
                let mut args: Vec<&str> = op.iter().copied().filter(|a| !a.is_empty()).collect();
                args.extend(["-j", "ACCEPT"]);
                sh::in_ns(&host.netns, tool, &args).unwrap();
            }
        }
    };
    bypass(true);
    let routed = path(&name);
    bypass(false);
    let chains = path(&name);
    // All select the server and none matches the ports used. First each ends in `next-tier`
    // (the first one a connection meets passes it on); then only the last does, so a new
    // connection walks all 1,000 policy chains.
    let write_active = |every_one_passes: bool| {
        let store = &store;
        async move {
            for i in 0..ACTIVE_POLICIES {
                let pass = every_one_passes || i + 1 == ACTIVE_POLICIES;
                let next_tier = if pass {
                    r#", {"action": "next-tier"}"#
                } else {
                    ""
                };
                let value = format!(
                    r#"{{"selector": "app == \"server\"", "order": {}, "inbound_rules": [{{"protocol": "tcp", "dst_ports": [{}], "action": "allow"}}{next_tier}], "outbound_rules": [{{"action": "next-tier"}}]}}"#,
                    i + 1,
                    10_000 + i
                );
                store
                    .put(
                        &format!("/calico/v1/policy/tier/active/policy/a{i:04}"),
                        &value,
                    )
                    .await
                    .unwrap();
            }
        }
    };
    write_active(true).await;
    store
        .put("/calico/v1/policy/tier/active/metadata", r#"{"order": 5}"#)
        .await
        .unwrap();
    lab(&name, &["wait", "--timeout-secs", "300"]);
    let active = path(&name);
    write_active(false).await;
    lab(&name, &["wait", "--timeout-secs", "300"]);
    let walked = path(&name);

    let base = Tails::of(base).expect("baseline samples");
    let loaded = Tails::of(loaded).expect("samples with policies");
    let ratio = loaded.ratio(&base);
    println!(
        "| policy programming latency ({ENDPOINTS} local endpoints, {SAMPLES} samples, drift check every {REFRESH_SECS} s) | median | p99 | max |"
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| no other policies (baseline) | {:.1} ms | {:.1} ms | {:.1} ms |",
        base.median, base.p99, base.max
    );
    println!(
        "| {POLICIES} policies | {:.1} ms ({:.2}×) | {:.1} ms ({:.2}×) | {:.1} ms ({:.2}×) |",
        loaded.median, ratio.median, loaded.p99, ratio.p99, loaded.max, ratio.max
    );
    println!();
    println!(
        "| path, client on host2 → server on host1 (median of {RUNS} runs, [lowest, highest]) | iperf3 Gbit/s (3 s, one stream) | × routed | new TCP connections/s ({CONN_PARALLEL} at a time, 3 s) | × routed | connect → echo: median | p99 | max |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let rows = [
        ("plain veth pair between two namespaces", veth),
        (
            "routed between two hosts, no Calico rule (baseline)",
            routed,
        ),
        ("routed, through our chains, no policy", chains),
        (
            "routed, through our chains, 1,000 policies on the server, the first passes (`next-tier`)",
            active,
        ),
        (
            "routed, through our chains, 1,000 policies on the server, all walked",
            walked,
        ),
    ];
    for (what, p) in rows {
        let c = p.conns;
        println!(
            "| {what} | {:.2} [{:.2}, {:.2}] | {:.2} | {:.0} [{:.0}, {:.0}] | {:.2} | {:.3} ms | {:.3} ms | {:.3} ms |",
            p.gbits,
            p.gbits_range.0,
            p.gbits_range.1,
            p.gbits / routed.gbits,
            c.per_second,
            p.conns_range.0,
            p.conns_range.1,
            c.per_second / routed.conns.per_second,
            c.median_ms,
            c.p99_ms,
            c.max_ms,
        );
    }
}
