//! Felix idle at size (docs/benchmarks.md, issue 17 item 5): resident memory and CPU per minute
//! of a Felix with nothing changing, in a cluster of 100,000 endpoints. The baseline, in the
//! same run: the same host (the same 100 local endpoints, profiles and policies) in a cluster
//! of only those 100 endpoints, so the ratio is what the other 99,900 endpoints cost.
//!
//! The cluster is the calculation's reference scenario (`crates/calc/benches/scenario`):
//! endpoints on hosts of 100 each, 1,000 profiles with tags, 100 namespace profiles with an `||`
//! selector, 2,001 policies in 5 tiers and an `all()` policy allowing egress to `role !=
//! "monitoring"` (an IP set of nearly every endpoint). Felix runs as `host-0` in a namespace of
//! its own with a real etcd there; the 100 local endpoints' interfaces are veth pairs (peers
//! down in another namespace), so Felix programs their routes, rules and IP sets for real.
//!
//! ```text
//!   main thread: namespaces, etcd                  ── dropped last, also on panic
//!   per site, a thread inside Felix's namespace (one-thread runtime):
//!     veths ─► etcd transactions of 100 puts ─► Felix (`ip netns exec`)
//!     ─► poll /metrics every 100 ms until felix_applied_revision ≥ the last write and every
//!        local route is in ─► settle ─► idle window: RSS every second, CPU time at both ends
//! ```
//!
//! Run as root from the workspace root with the release build of Felix beside it (or
//! `$CALICO_FELIX_BIN`). `$IDLE_ENDPOINTS` (default 100000) sizes the cluster, `$IDLE_SECS`
//! (default 60) the idle window, `$IDLE_FELIX_LOG=<prefix>` keeps Felix's logs:
//! `cargo build --release -p calico-felix --bin calico-felix --example idle_bench &&
//! target/release/examples/idle_bench`

use std::time::{Duration, Instant};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore, TxnOp};
use calico_linux::{Netlink, Netns, in_netns};
use calico_testkit::{EtcdServer, NetNs};
use tokio::time::sleep;

mod common;
use common::{Felix, METRICS_PORT, cpu_secs, ip, rss_mib, sample, scrape};

#[path = "../../calc/benches/scenario/mod.rs"]
mod scenario;

use scenario::Scenario;

/// The measured host: the scenario puts endpoints 0..100 on it.
const HOST: &str = "host-0";
const LOCAL: usize = 100;
const POLL: Duration = Duration::from_millis(100);
/// After "programmed", before the idle window: late writes and the first status report.
const SETTLE: Duration = Duration::from_secs(10);
/// etcd's default limit is 128 operations per transaction.
const BATCH: usize = 100;

/// One Felix host in a cluster of `endpoints` (fields drop in this order: etcd first, Felix's
/// namespace last).
struct Site {
    etcd: EtcdServer,
    peers: NetNs,
    netns: NetNs,
    endpoints: usize,
}

impl Site {
    fn new(name: &str, endpoints: usize) -> Site {
        let netns = NetNs::new(name);
        let etcd = EtcdServer::start_in_netns(netns.name());
        Site {
            etcd,
            peers: NetNs::new(&format!("{name}p")),
            netns,
            endpoints,
        }
    }

    /// The local endpoints' interfaces (`cali<i in hex>`, as the scenario names them), up.
    fn plug(&self) {
        let mut batch = String::new();
        for i in 0..LOCAL {
            let peer = format!("wl{i} netns {}", self.peers.name());
            batch.push_str(&format!("link add cali{i:x} type veth peer name {peer}\n"));
            batch.push_str(&format!("link set cali{i:x} up\n"));
        }
        ip(&["-n", self.netns.name(), "-batch", "-"], &batch);
    }

    /// The scenario in transactions; returns the revision of the last write.
    async fn write(&self, store: &EtcdDatastore) -> i64 {
        let mut puts = vec![(
            "/calico/v1/config/InterfacePrefix".to_owned(),
            "cali".to_owned(),
        )];
        Scenario::new(self.endpoints)
            .initial_updates(|key, value| puts.push((key.to_owned(), value.to_owned())));
        puts.push(("/calico/v1/Ready".to_owned(), "true".to_owned()));
        for chunk in puts.chunks(BATCH) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|(key, value)| TxnOp::Put {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect();
            assert!(
                store.transaction(&[], &ops).await.unwrap(),
                "a set-up transaction"
            );
        }
        store.revision().await.unwrap()
    }
}

/// A process's peak resident memory in MiB (`VmHWM`).
fn peak_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process runs");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib / 1024.0
}

/// What one site measured.
struct Report {
    setup: Duration,
    /// Spawn to programmed.
    start: Duration,
    /// CPU seconds until programmed (Felix's own).
    start_cpu: f64,
    /// RSS each second of the idle window, sorted.
    rss: Vec<f64>,
    peak: f64,
    /// Over the idle window, per minute: Felix's own CPU seconds, its children's.
    cpu_per_minute: (f64, f64),
    /// Revision Felix applied at the end (unchanged: nothing was written).
    revisions: (f64, f64),
    warnings: Vec<String>,
}

async fn run_site(site: &Site, idle: Duration) -> Report {
    let t0 = Instant::now();
    site.plug();
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: vec![site.etcd.endpoint()],
        ..EtcdConfig::default()
    })
    .await
    .unwrap();
    let revision = site.write(&store).await;
    let setup = t0.elapsed();
    eprintln!(
        "{}: set-up {:.1} s ({} endpoints); starting Felix",
        site.netns.name(),
        setup.as_secs_f64(),
        site.endpoints
    );
    let netlink = Netlink::connect(&Netns::current()).unwrap();
    let metrics = [
        ("FELIX_PROMETHEUSMETRICSENABLED", "true".to_owned()),
        ("FELIX_PROMETHEUSMETRICSPORT", METRICS_PORT.to_string()),
    ];
    let felix = Felix::start(site.netns.name(), HOST, &site.etcd.endpoint(), &metrics);
    let deadline = Duration::from_secs(900);
    let (start, start_cpu) = loop {
        assert!(
            felix.spawned.elapsed() < deadline,
            "Felix not programmed in {deadline:?}; its log:\n{}",
            felix.log()
        );
        if let Some(text) = scrape().await
            && sample(&text, "felix_applied_revision").unwrap_or(0.0) >= revision as f64
            && netlink.calico_routes().await.expect("route dump").len() >= LOCAL
        {
            break (felix.spawned.elapsed(), cpu_secs(felix.pid()).0);
        }
        sleep(POLL).await;
    };
    eprintln!(
        "{}: programmed {:.1} s after spawn; settling {} s, then idle {} s",
        site.netns.name(),
        start.as_secs_f64(),
        SETTLE.as_secs(),
        idle.as_secs()
    );
    sleep(SETTLE).await;
    let first = scrape().await.expect("Felix answers");
    let cpu0 = cpu_secs(felix.pid());
    let t1 = Instant::now();
    let mut rss = Vec::new();
    while t1.elapsed() < idle {
        rss.push(rss_mib(felix.pid()));
        sleep(Duration::from_secs(1)).await;
    }
    let cpu1 = cpu_secs(felix.pid());
    let minutes = t1.elapsed().as_secs_f64() / 60.0;
    let last = scrape().await.expect("Felix answers");
    let applied = |text: &str| sample(text, "felix_applied_revision").unwrap_or(0.0);
    rss.sort_by(f64::total_cmp);
    let log = felix.log();
    if let Ok(prefix) = std::env::var("IDLE_FELIX_LOG") {
        let path = format!("{prefix}-{}.log", site.endpoints);
        std::fs::write(&path, &log).expect("writing Felix's log");
    }
    Report {
        setup,
        start,
        start_cpu,
        peak: peak_mib(felix.pid()),
        rss,
        cpu_per_minute: ((cpu1.0 - cpu0.0) / minutes, (cpu1.1 - cpu0.1) / minutes),
        revisions: (applied(&first), applied(&last)),
        warnings: log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .map(str::to_owned)
            .collect(),
    }
}

/// Runs `site` on a thread inside its namespace (etcd's loopback and Felix's routes are there).
fn measure(site: &Site, idle: Duration) -> Report {
    in_netns(&Netns::named(site.netns.name()), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(run_site(site, idle)))
    })
    .expect("the benchmark ran")
}

/// The `q` quantile of sorted samples (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn print(base: &Report, big: &Report, endpoints: usize, idle: Duration) {
    println!(
        "| Felix idle, {} s window | {LOCAL} endpoints (baseline) | {endpoints} endpoints | ratio |",
        idle.as_secs()
    );
    println!("| --- | --- | --- | --- |");
    let row = |what: &str, b: f64, s: f64, unit: &str| {
        let ratio = match b > 0.0 {
            true => format!("{:.2}×", s / b),
            false => "—".to_owned(),
        };
        println!("| {what} | {b:.2} {unit} | {s:.2} {unit} | {ratio} |");
    };
    for (what, q) in [("RSS p50", 0.5), ("RSS p99", 0.99), ("RSS max", 1.0)] {
        row(what, quantile(&base.rss, q), quantile(&big.rss, q), "MiB");
    }
    row("peak RSS since start (VmHWM)", base.peak, big.peak, "MiB");
    row(
        "CPU per minute idle, Felix",
        base.cpu_per_minute.0,
        big.cpu_per_minute.0,
        "s",
    );
    println!(
        "| CPU per minute idle, its iptables/ipset children | {:.2} s | {:.2} s | — |",
        base.cpu_per_minute.1, big.cpu_per_minute.1
    );
    row(
        "start → programmed",
        base.start.as_secs_f64(),
        big.start.as_secs_f64(),
        "s",
    );
    row(
        "CPU until programmed, Felix",
        base.start_cpu,
        big.start_cpu,
        "s",
    );
    println!();
    println!(
        "Set-up (not timed above): baseline {:.1} s, at size {:.1} s. Applied revision at the \
         window's start and end: baseline {} → {}, at size {} → {}.",
        base.setup.as_secs_f64(),
        big.setup.as_secs_f64(),
        base.revisions.0,
        base.revisions.1,
        big.revisions.0,
        big.revisions.1
    );
    for (what, report) in [("baseline", base), ("at size", big)] {
        println!(
            "Felix's log, {what}: {} warnings/errors",
            report.warnings.len()
        );
        for line in report.warnings.iter().take(5) {
            println!("  {line}");
        }
    }
}

/// `$name` if set, else `default`.
fn size(name: &str, default: usize) -> usize {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number"))
    })
}

fn main() {
    let endpoints = size("IDLE_ENDPOINTS", 100_000);
    let idle = Duration::from_secs(size("IDLE_SECS", 60) as u64);
    assert!(
        endpoints >= LOCAL,
        "IDLE_ENDPOINTS must be at least {LOCAL}"
    );
    let base = measure(&Site::new("idleb", LOCAL), idle);
    let big = measure(&Site::new("idles", endpoints), idle);
    print(&base, &big, endpoints, idle);
}
