//! System benchmarks on a lab (docs/benchmarks.md), on each firewall backend in turn: a lab
//! whose Felixes run iptables (`NFTablesMode=Disabled`, the baseline rows), then one whose
//! Felixes run nftables (`NFTablesMode=Enabled`):
//!
//! 1. policy programming latency: etcd write → the kernel lets the first packet through, with
//!    100 local endpoints, without extra policies (the baseline) and with 2,000 policies; 200
//!    samples each, with Felix's periodic drift check every 10 s (`IptablesRefreshInterval`), so
//!    that the samples span many checks and the tail shows whether a check holds up an update;
//! 2. iperf3 throughput and new TCP connections per second between workloads on two hosts:
//!    the routed path with no Calico rule on it (the baseline), through our chains with no
//!    policy, and with 1,000 policies applying to the server, in three shapes (the first passes
//!    the connection on; 1,000 that name other ports, which cannot match it; 1,000 without
//!    ports whose source nets do not match, which a connection must walk); and a plain veth
//!    pair between two namespaces for scale;
//! 3. the cost of flow logs: the paths through no policy and through the 1,000 policies that
//!    are walked again with `FlowLogsEnabled` (every decision logged to NFLOG, read by Felix
//!    and sent to the lab's `calico-flows`), against the same paths with flow logs off.
//!
//! Run as root after building the binaries in the same profile
//! (`$LAB_BENCH_BACKENDS=nftables` for one backend, `$LAB_BENCH_SAMPLES` for fewer latency
//! samples):
//! `cargo build --release -p calico-lab -p calico-felix -p calico-node -p calico-cni -p calico-flows --bins --examples && target/release/examples/lab_bench`

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_lab::flows::FLOWS_PORT;
use calico_lab::processes;
use calico_lab::state::FABRIC_IP;
use calico_lab::{Lab, sh};
use calico_testkit::{NetNs, Tails};

mod common;
use common::{Down, lab, lab_bin};

const ENDPOINTS: usize = 100;
const POLICIES: usize = 2000;
const ACTIVE_POLICIES: usize = 1000;
const SAMPLES: usize = 200;
/// Seconds between drift checks while throughput is measured: the routed baseline of an
/// nftables lab is an `accept` at the head of Felix's own forward chain, which a check would
/// take out.
const QUIET_REFRESH_SECS: u32 = 31_536_000;
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
async fn latencies(name: &str, store: &EtcdDatastore, samples_wanted: usize) -> Vec<f64> {
    let key = "/calico/v1/policy/tier/bench/policy/gate";
    let mut samples = Vec::new();
    for _ in 0..samples_wanted {
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

/// The firewall backend of a lab's Felixes (`NFTablesMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Iptables,
    Nftables,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables",
            Backend::Nftables => "nftables",
        }
    }

    fn mode(self) -> &'static str {
        match self {
            Backend::Iptables => "Disabled",
            Backend::Nftables => "Enabled",
        }
    }

    /// Both, iptables first, or those named in `$LAB_BENCH_BACKENDS` (comma-separated).
    fn chosen() -> Vec<Backend> {
        let only = std::env::var("LAB_BENCH_BACKENDS").unwrap_or_default();
        let all = [Backend::Iptables, Backend::Nftables];
        for name in only.split(',').filter(|n| !n.is_empty()) {
            assert!(
                all.iter().any(|b| b.name() == name),
                "LAB_BENCH_BACKENDS={only:?}: {name:?} is not a backend (iptables, nftables)"
            );
        }
        all.into_iter()
            .filter(|b| only.is_empty() || only.split(',').any(|n| n == b.name()))
            .collect()
    }
}

/// The routed path with no Calico rule on it: for iptables an `ACCEPT` ahead of Felix's jump
/// in `FORWARD` (Felix's drift check puts back only its own jump; this rule stays); for
/// nftables, whose base chain sees the packet whatever another table decides, an `accept` at
/// the head of Felix's own `filter-forward` (drift checks are paused meanwhile, see
/// `QUIET_REFRESH_SECS`).
fn bypass(state: &Lab, backend: Backend, add: bool) {
    const TAG: &str = "lab-bench-bypass";
    for host in &state.hosts {
        match backend {
            Backend::Iptables => {
                for tool in ["iptables", "ip6tables"] {
                    let op: &[&str] = if add {
                        &["-I", "FORWARD", "1"]
                    } else {
                        &["-D", "FORWARD"]
                    };
                    let mut args = op.to_vec();
                    args.extend(["-j", "ACCEPT"]);
                    sh::in_ns(&host.netns, tool, &args).unwrap();
                }
            }
            Backend::Nftables if add => {
                let comment = format!("\"{TAG}\"");
                let args = ["insert", "rule", "inet", "calico", "filter-forward"];
                let mut args = args.to_vec();
                args.extend(["accept", "comment", &comment]);
                sh::in_ns(&host.netns, "nft", &args).unwrap();
            }
            Backend::Nftables => {
                let handle = bypass_handle(&host.netns).unwrap_or_else(|| {
                    panic!(
                        "the bypass rule left {}'s filter-forward during the routed measurement \
                         (a drift check ran): the routed figures are not of the bypass",
                        host.name
                    )
                });
                let args = [
                    "delete",
                    "rule",
                    "inet",
                    "calico",
                    "filter-forward",
                    "handle",
                ];
                let mut args = args.to_vec();
                args.push(&handle);
                sh::in_ns(&host.netns, "nft", &args).unwrap();
            }
        }
    }
}

/// The handle of the nftables bypass rule, if it is there.
fn bypass_handle(netns: &str) -> Option<String> {
    let args = ["-a", "list", "chain", "inet", "calico", "filter-forward"];
    let listing = sh::in_ns(netns, "nft", &args).unwrap();
    let line = listing.lines().find(|l| l.contains("lab-bench-bypass"))?;
    Some(line.rsplit(' ').next()?.to_owned())
}

/// How the 1,000 policies on the server are shaped; each selects the server and none allows
/// the connection, the last (or each) passes it to the next tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Each allows one TCP port the connection does not use, then passes: the first policy a
    /// connection meets passes it on.
    FirstPasses,
    /// Each allows one TCP port the connection does not use; only the last passes. iptables
    /// walks all 1,000; nftables dispatches them by (protocol, port) and walks none of them.
    OtherPorts,
    /// Each allows a source net (no protocol, no port) that is not the client's; only the last
    /// passes. Both backends walk all 1,000: they could match another connection to port 80.
    Portless,
}

impl Shape {
    fn row(self) -> &'static str {
        match self {
            Shape::FirstPasses => {
                "routed, through our chains, 1,000 policies on the server, the first passes (`next-tier`)"
            }
            Shape::OtherPorts => {
                "routed, through our chains, 1,000 policies that cannot match (each names another TCP port)"
            }
            Shape::Portless => {
                "routed, through our chains, 1,000 policies a connection must walk (no ports; source nets that do not match)"
            }
        }
    }

    fn inbound(self, i: usize) -> String {
        let pass = self == Shape::FirstPasses || i + 1 == ACTIVE_POLICIES;
        let next_tier = if pass {
            r#", {"action": "next-tier"}"#
        } else {
            ""
        };
        let allow = match self {
            Shape::Portless => format!(
                r#"{{"src_net": "172.{}.{}.0/24", "action": "allow"}}"#,
                16 + i / 256,
                i % 256
            ),
            _ => format!(
                r#"{{"protocol": "tcp", "dst_ports": [{}], "action": "allow"}}"#,
                10_000 + i
            ),
        };
        format!("[{allow}{next_tier}]")
    }
}

async fn write_active(store: &EtcdDatastore, shape: Shape) {
    for i in 0..ACTIVE_POLICIES {
        let value = format!(
            r#"{{"selector": "app == \"server\"", "order": {}, "inbound_rules": {}, "outbound_rules": [{{"action": "next-tier"}}]}}"#,
            i + 1,
            shape.inbound(i)
        );
        let key = format!("/calico/v1/policy/tier/active/policy/a{i:04}");
        store.put(&key, &value).await.unwrap();
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// What one backend's lab measured.
struct Figures {
    backend: Backend,
    base: Tails,
    loaded: Tails,
    /// The routed baseline first.
    paths: Vec<(&'static str, PathFigures)>,
    /// The load average as each phase began.
    load: Vec<(&'static str, String)>,
}

const REFRESH_KEY: &str = "/calico/v1/config/IptablesRefreshInterval";
const FLOW_LOGS_KEY: &str = "/calico/v1/config/FlowLogsEnabled";
const FLOWS_WALKED: &str = "flow logs on: 1,000 policies that are walked";
const FLOWS_NO_POLICY: &str = "flow logs on: through our chains, no policy";

/// Waits until host1's firewall logs decisions to NFLOG (the live change of `FlowLogsEnabled`
/// reached the kernel).
fn wait_for_flow_logs(state: &Lab, backend: Backend) {
    let netns = &state.hosts[0].netns;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let rules = match backend {
            Backend::Iptables => sh::in_ns(netns, "iptables-save", &["-t", "filter"]),
            Backend::Nftables => sh::in_ns(netns, "nft", &["list", "table", "inet", "calico"]),
        }
        .unwrap_or_default();
        // `-j NFLOG --nflog-group 32100 …` / `log prefix "…" group 32100`
        if rules.contains("--nflog-group") || rules.contains("\" group ") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "host1's firewall does not log to NFLOG 120 s after FlowLogsEnabled=true"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn run_backend(backend: Backend, samples: usize) -> Figures {
    let mut load = vec![("lab up", load_average())];
    let name = format!("bench{}{}", std::process::id(), &backend.name()[..1]);
    let mode = format!("NFTablesMode={}", backend.mode());
    lab(
        &name,
        &[
            "up",
            "--hosts",
            "2",
            "--no-flows",
            "--felix-config",
            &mode,
            // Where flow records go once part 3 turns flow logs on (in etcd, live); the
            // aggregator is started then.
            "--felix-config",
            &format!("FlowLogsAggregator={FABRIC_IP}:{FLOWS_PORT}"),
        ],
    );
    let _down = Down(name.clone());
    let state = Lab::load(&name).unwrap();
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: state.client_endpoints(),
        ..EtcdConfig::default()
    })
    .await
    .unwrap();
    // In etcd rather than Felix's environment, so that it can change while Felix runs.
    store
        .put(REFRESH_KEY, &REFRESH_SECS.to_string())
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
    eprintln!(
        "{}: adding {ENDPOINTS} workloads on host1 and a client on host2 ...",
        backend.name()
    );
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
    let ruleset = sh::in_ns(&state.hosts[0].netns, "nft", &["list", "tables"]).unwrap();
    let has_table = ruleset.contains("inet calico");
    assert_eq!(
        has_table,
        backend == Backend::Nftables,
        "host1's nf_tables tables ({ruleset:?}) do not fit NFTablesMode={}",
        backend.mode()
    );

    load.push(("latency", load_average()));
    eprintln!("latency, no other policies ...");
    let base = latencies(&name, &store, samples).await;
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
    load.push(("latency, 2,000 policies", load_average()));
    eprintln!("latency, {POLICIES} policies ...");
    let loaded = latencies(&name, &store, samples).await;
    eprintln!("latencies (ms), baseline: {base:?}\nwith {POLICIES} policies: {loaded:?}");

    load.push(("throughput", load_average()));
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
    store
        .put(REFRESH_KEY, &QUIET_REFRESH_SECS.to_string())
        .await
        .unwrap();
    lab(&name, &["wait"]);
    // Felix re-reads its configuration and restarts its timers at the new period.
    std::thread::sleep(Duration::from_secs(3));
    lab(&name, &["exec", "server", "--", "iperf3", "-s", "-D"]);
    std::thread::sleep(Duration::from_secs(1));
    bypass(&state, backend, true);
    let routed = path(&name);
    bypass(&state, backend, false);
    let mut paths = vec![
        (
            "routed between two hosts, no Calico rule (baseline)",
            routed,
        ),
        ("routed, through our chains, no policy", path(&name)),
    ];
    store
        .put("/calico/v1/policy/tier/active/metadata", r#"{"order": 5}"#)
        .await
        .unwrap();
    for shape in [Shape::FirstPasses, Shape::OtherPorts, Shape::Portless] {
        write_active(&store, shape).await;
        lab(&name, &["wait", "--timeout-secs", "300"]);
        eprintln!("{} (load average {})", shape.row(), load_average());
        paths.push((shape.row(), path(&name)));
    }

    // 3. Flow logs on: the walked policies (still in place), then no policy.
    load.push(("flow logs", load_average()));
    // The aggregator in the fabric, where Felix sends (no relay: `flows::start`'s relay is a
    // calico-lab subcommand); its pid in the lab's state, so that `down` stops it.
    let mut with_flows = Lab::load(&name).unwrap();
    let binary = lab_bin().with_file_name("calico-flows");
    assert!(
        binary.is_file(),
        "{} is missing: build calico-flows (see the run line above)",
        binary.display()
    );
    let listen = format!("{FABRIC_IP}:{FLOWS_PORT}");
    let pid = processes::spawn(
        Some(&Lab::fabric_netns(&name)),
        &binary,
        &["--listen", &listen],
        &[],
        &with_flows.log_path("calico-flows"),
    )
    .expect("calico-flows starts");
    with_flows.pids.push(pid);
    with_flows.save().unwrap();
    store.put(FLOW_LOGS_KEY, "true").await.unwrap();
    lab(&name, &["wait", "--timeout-secs", "300"]);
    wait_for_flow_logs(&with_flows, backend);
    eprintln!("flow logs on (load average {}) ...", load_average());
    paths.push((FLOWS_WALKED, path(&name)));
    store
        .delete_prefix("/calico/v1/policy/tier/active/policy/")
        .await
        .unwrap();
    lab(&name, &["wait", "--timeout-secs", "300"]);
    paths.push((FLOWS_NO_POLICY, path(&name)));
    load.push(("end", load_average()));
    Figures {
        backend,
        base: Tails::of(base).expect("baseline samples"),
        loaded: Tails::of(loaded).expect("samples with policies"),
        paths,
        load,
    }
}

fn print_latency(runs: &[Figures], samples: usize) {
    println!(
        "| policy programming latency ({ENDPOINTS} local endpoints, {samples} samples, drift check every {REFRESH_SECS} s) | backend | median | p99 | max | p99 ÷ p99 without |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in runs {
        let (b, l) = (&r.base, &r.loaded);
        let ratio = l.ratio(b);
        println!(
            "| no other policies (baseline) | {} | {:.1} ms | {:.1} ms | {:.1} ms | 1 |",
            r.backend.name(),
            b.median,
            b.p99,
            b.max
        );
        println!(
            "| {POLICIES} policies | {} | {:.1} ms ({:.2}×) | {:.1} ms | {:.1} ms ({:.2}×) | **{:.2}×** |",
            r.backend.name(),
            l.median,
            ratio.median,
            l.p99,
            l.max,
            ratio.max,
            ratio.p99
        );
    }
}

fn print_paths(runs: &[Figures], veth: &PathFigures) {
    println!();
    println!(
        "| path, client on host2 → server on host1 (median of {RUNS} runs, [lowest, highest]) | backend | iperf3 Gbit/s (3 s, one stream) | × routed | new TCP connections/s ({CONN_PARALLEL} at a time, 3 s) | × routed | connect → echo: median | p99 | max |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let row = |what: &str, backend: &str, p: &PathFigures, routed: &PathFigures| {
        let c = p.conns;
        println!(
            "| {what} | {backend} | {:.2} [{:.2}, {:.2}] | {:.2} | {:.0} [{:.0}, {:.0}] | {:.2} | {:.3} ms | {:.3} ms | {:.3} ms |",
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
    };
    let first_routed = runs[0].paths[0].1;
    row(
        "plain veth pair between two namespaces",
        "—",
        veth,
        &first_routed,
    );
    let rows = runs[0].paths.len();
    for i in 0..rows {
        for r in runs {
            let (what, p) = &r.paths[i];
            row(what, r.backend.name(), p, &r.paths[0].1);
        }
    }
    println!();
    println!(
        "| flow logs on ÷ off (the same path, same lab) | backend | iperf3 Gbit/s | new TCP connections/s | connect → echo p99 (off ÷ on) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for r in runs {
        let find = |what: &str| r.paths.iter().find(|(w, _)| *w == what).map(|(_, p)| *p);
        for (off, on, what) in [
            (
                "routed, through our chains, no policy",
                FLOWS_NO_POLICY,
                "no policy",
            ),
            (Shape::Portless.row(), FLOWS_WALKED, "1,000 policies walked"),
        ] {
            let (Some(off), Some(on)) = (find(off), find(on)) else {
                continue;
            };
            println!(
                "| {what} | {} | {:.2} | {:.2} | {:.2} |",
                r.backend.name(),
                on.gbits / off.gbits,
                on.conns.per_second / off.conns.per_second,
                off.conns.p99_ms / on.conns.p99_ms,
            );
        }
    }
    println!();
    for r in runs {
        let load: Vec<String> = r
            .load
            .iter()
            .map(|(phase, l)| format!("{phase} {l}"))
            .collect();
        println!("Load average, {}: {}.", r.backend.name(), load.join("; "));
    }
}

#[tokio::main]
async fn main() {
    let started = std::time::Instant::now();
    let samples = std::env::var("LAB_BENCH_SAMPLES")
        .ok()
        .map_or(SAMPLES, |v| {
            v.parse().expect("LAB_BENCH_SAMPLES is a number")
        });
    eprintln!("plain veth pair (load average {}) ...", load_average());
    let veth = plain_veth();
    let mut runs = Vec::new();
    for backend in Backend::chosen() {
        runs.push(run_backend(backend, samples).await);
    }
    print_latency(&runs, samples);
    print_paths(&runs, &veth);
    println!(
        "Run: {:.0} min, load average at the end {}.",
        started.elapsed().as_secs_f64() / 60.0,
        load_average()
    );
}
