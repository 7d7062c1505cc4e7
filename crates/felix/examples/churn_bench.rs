//! Route and endpoint churn (docs/benchmarks.md, issue 13 item 5, issue 25 item 5): one host,
//! 100 workloads added and 100 removed per second for a minute, on each firewall backend in
//! turn (`NFTablesMode=Disabled`, iptables, the baseline rows; `Enabled`, nftables), each in a
//! namespace, etcd and Felix of its own. Each workload is a veth pair (`cali<n>` up in
//! Felix's namespace, its peer down in a per-second namespace) and an endpoint in etcd; its
//! endpoint is deleted about a second after it was written, so about 100 are alive at any time,
//! and each second's veths go in one batch with their namespace. The lag is from just before
//! the etcd write to the moment a netlink dump (every 2 ms) shows Felix's route
//! `10.x.y.z/32 dev cali<n> proto 80`. The baseline, in the same run: 20 workloads added one
//! at a time with nothing else going on. Felix's RSS is sampled every 10 s, its CPU time over
//! the minute; its metrics give the firewall's share (`felix_dataplane_apply_seconds`) and
//! what it wrote.
//!
//! ```text
//!   main thread: NetNs, etcd                            ── dropped last, also on panic
//!   bench thread (inside the namespace, one-thread runtime), Felix (`ip netns exec`)
//!     tick every 10 ms ─► add task: veth, up, etcd put ─► pending{ip → (ifindex, written)}
//!                      └► remove task (1 s later): etcd delete; per second: drop namespace
//!     poller task: route dump every 2 ms ─► pending route found ─► lag sample
//!     progress task: driver step times to stderr every 5 s
//! ```
//!
//! Run as root with the release build of Felix beside it (or `$CALICO_FELIX_BIN`);
//! `$CHURN_BENCH_BACKENDS=nftables` runs one backend; `$CHURN_FELIX_LOG=<prefix>` keeps Felix's
//! logs as `<prefix>-<backend>.log`:
//! `cargo build --release -p calico-felix --bin calico-felix --example churn_bench &&
//! target/release/examples/churn_bench`

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_linux::{Netlink, Netns, in_netns};
use calico_testkit::{EtcdServer, NetNs, Tails};
use ipnet::{IpNet, Ipv4Net};
use tokio::task::JoinHandle;
use tokio::time::{MissedTickBehavior, interval, sleep};

mod common;
use common::{Backend, Felix, METRICS_PORT, cpu_secs, rss_mib, sample, scrape};

const HOST: &str = "h1";
const CHURN: Duration = Duration::from_secs(60);
/// One workload added (and, once `ALIVE` are up, one removed) per period: 100/s.
const PERIOD: Duration = Duration::from_millis(10);
/// Workloads alive at a time: each lives `ALIVE × PERIOD` = 1 s.
const ALIVE: usize = 100;
const BASELINE: u32 = 20;
const POLL: Duration = Duration::from_millis(2);
const RSS_EVERY: Duration = Duration::from_secs(10);

/// Workload number `n`: interface `cali<n>`, address 10.64.0.0/10 + n.
#[derive(Clone, Copy)]
struct Workload(u32);

impl Workload {
    fn iface(self) -> String {
        format!("cali{}", self.0)
    }

    fn peer(self) -> String {
        format!("wl{}", self.0)
    }

    fn net(self) -> IpNet {
        let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 64, 0, 1)) + self.0);
        IpNet::V4(Ipv4Net::new(ip, 32).unwrap())
    }

    fn key(self) -> String {
        format!(
            "/calico/v1/host/{HOST}/workload/k8s/ns.w{}/endpoint/eth0",
            self.0
        )
    }

    fn value(self) -> String {
        let [_, a, b, c] = self.0.to_be_bytes();
        format!(
            r#"{{"state": "active", "name": "{}", "mac": "ee:ee:ee:{a:02x}:{b:02x}:{c:02x}", "profile_ids": ["open"], "ipv4_nets": ["{}"]}}"#,
            self.iface(),
            self.net()
        )
    }
}

/// Routes waiting to appear (destination → interface, time of the write), the lags seen, and
/// the workloads removed before their route showed.
#[derive(Default)]
struct Watch {
    pending: HashMap<IpNet, (u32, Instant)>,
    lags_ms: Vec<f64>,
    missed: usize,
    /// Steps done and the time they took: veth + up, etcd put, etcd delete, veth delete.
    steps: [(u32, Duration); 4],
}

type Shared = Arc<Mutex<Watch>>;

/// Dumps Felix's routes every `POLL` and turns each pending route found into a lag sample.
async fn poll_routes(netlink: Netlink, watch: Shared) {
    loop {
        let routes = netlink.calico_routes().await.expect("route dump");
        record(&mut watch.lock().unwrap(), &routes, Instant::now());
        sleep(POLL).await;
    }
}

/// Turns each pending route among `routes` into a lag sample.
fn record(watch: &mut Watch, routes: &[calico_linux::Route], now: Instant) {
    for route in routes {
        match watch.pending.get(&route.destination) {
            Some(&(ifindex, written)) if ifindex == route.ifindex => {
                watch.pending.remove(&route.destination);
                watch.lags_ms.push((now - written).as_secs_f64() * 1e3);
            }
            _ => {}
        }
    }
}

/// What the driver needs: netlink in the namespace, etcd, the shared watch.
struct Driver {
    netlink: Netlink,
    store: EtcdDatastore,
    watch: Shared,
}

impl Driver {
    /// Plugs the workload in (a veth: `cali<n>` here and up, its peer in `peer_netns` and
    /// down), then writes its endpoint.
    async fn add(&self, w: Workload, peer_netns: &Netns) {
        let (iface, t0) = (w.iface(), Instant::now());
        let netlink = &self.netlink;
        netlink
            .add_veth(&iface, &w.peer(), peer_netns)
            .await
            .unwrap();
        let index = netlink.link_by_name(&iface).await.unwrap().unwrap().index;
        netlink.set_up(index).await.unwrap();
        let written = Instant::now();
        self.step(0, t0, written);
        let pending = (index, written);
        self.watch.lock().unwrap().pending.insert(w.net(), pending);
        self.store.put(&w.key(), &w.value()).await.unwrap();
        self.step(1, written, Instant::now());
    }

    fn step(&self, i: usize, from: Instant, to: Instant) {
        let step = &mut self.watch.lock().unwrap().steps[i];
        step.0 += 1;
        step.1 += to - from;
    }

    /// Deletes the endpoint, then (`unplug`) the veth; counts it if its route never showed.
    async fn remove(&self, w: Workload, unplug: bool) {
        let t0 = Instant::now();
        self.store.delete(&w.key()).await.unwrap();
        let t1 = Instant::now();
        self.step(2, t0, t1);
        {
            let mut watch = self.watch.lock().unwrap();
            if watch.pending.remove(&w.net()).is_some() {
                watch.missed += 1;
            }
        }
        if unplug {
            self.netlink.delete_link(&w.iface()).await.unwrap();
            self.step(3, t1, Instant::now());
        }
    }

    /// Waits (up to `within`) until no route is pending.
    async fn settle(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.watch.lock().unwrap().pending.is_empty() && Instant::now() < deadline {
            sleep(Duration::from_millis(5)).await;
        }
    }

    fn take_lags(&self) -> Vec<f64> {
        std::mem::take(&mut self.watch.lock().unwrap().lags_ms)
    }
}

/// The run's figures.
struct Report {
    baseline_ms: Vec<f64>,
    churn_ms: Vec<f64>,
    added: u32,
    removed_during: u32,
    churn_secs: f64,
    missed: usize,
    rss: Vec<(String, f64)>,
    felix_cpu: f64,
    /// Felix's metrics at the end of the churn.
    metrics: Metrics,
}

/// What Felix's metrics say about the whole run.
#[derive(Default)]
struct Metrics {
    /// Batches applied to the firewall, and the seconds they took.
    applies: f64,
    apply_secs: f64,
    iptables_bytes: f64,
    ipset_bytes: f64,
    nft_ops: f64,
}

impl Metrics {
    fn from_scrape(text: &str) -> Metrics {
        let get = |name: &str| sample(text, name).unwrap_or(0.0);
        Metrics {
            applies: get("felix_dataplane_apply_seconds_count"),
            apply_secs: get("felix_dataplane_apply_seconds_sum"),
            iptables_bytes: get(r#"felix_dataplane_written_bytes_total{tool="iptables"}"#),
            ipset_bytes: get(r#"felix_dataplane_written_bytes_total{tool="ipset"}"#),
            nft_ops: get("felix_dataplane_written_nft_ops_total"),
        }
    }
}

/// One workload at a time, each waited for: the lag with nothing else going on. The first
/// (`n = 0`) also waits for Felix to start and is left out.
async fn baseline(driver: &Driver) -> Vec<f64> {
    for n in 0..=BASELINE {
        driver.add(Workload(n), &Netns::current()).await;
        let within = if n == 0 { 30 } else { 5 };
        driver.settle(Duration::from_secs(within)).await;
        driver.remove(Workload(n), true).await;
        sleep(Duration::from_millis(100)).await;
    }
    let mut lags = driver.take_lags();
    assert_eq!(
        lags.len(),
        BASELINE as usize + 1,
        "a baseline route never showed"
    );
    lags.remove(0);
    lags
}

/// A minute of churn: a workload added every `PERIOD`, the endpoint of the one added `ALIVE`
/// periods earlier deleted. Each add and remove is its own task, so that a slow step does not
/// hold up the next tick (a remove waits for its workload's add).
///
/// Deleting a veth costs the kernel ~20 ms under the RTNL lock (an RCU grace period per
/// device), so 100 deletions a second one by one are more than the kernel can do, and they
/// stall veth creation and Felix's netlink calls. As when pods' namespaces are deleted, the
/// peers of each second's workloads live in one namespace, and deleting that namespace once
/// its endpoints are gone removes its 100 veths in one batch.
async fn churn(driver: &Arc<Driver>, pid: u32, first: u32, report: &mut Report) {
    let seconds = CHURN.as_secs() as usize + 1;
    let mut buckets: Vec<Option<NetNs>> =
        (0..seconds).map(|_| Some(NetNs::new("churnb"))).collect();
    let mut ticker = interval(PERIOD);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut alive = VecDeque::new();
    let mut removals = Vec::new();
    let start = Instant::now();
    let cpu_start = cpu_secs(pid).0;
    report.rss.push(("start".to_owned(), rss_mib(pid)));
    let mut next_rss = RSS_EVERY;
    let mut i = 0;
    while start.elapsed() < CHURN {
        ticker.tick().await;
        let (d, w) = (driver.clone(), Workload(first + i as u32));
        let peers = Netns::named(buckets[i / ALIVE].as_ref().unwrap().name());
        alive.push_back((i, tokio::spawn(async move { d.add(w, &peers).await })));
        i += 1;
        if alive.len() > ALIVE {
            let (j, added) = alive.pop_front().unwrap();
            removals.push(spawn_remove(driver, Workload(first + j as u32), added));
            if (j + 1) % ALIVE == 0 {
                let bucket = buckets[j / ALIVE].take();
                tokio::task::spawn_blocking(move || drop(bucket));
            }
        }
        if start.elapsed() >= next_rss {
            report
                .rss
                .push((format!("{} s", next_rss.as_secs()), rss_mib(pid)));
            next_rss += RSS_EVERY;
        }
    }
    report.churn_secs = start.elapsed().as_secs_f64();
    report.added = i as u32;
    report.removed_during = u32::try_from(removals.len()).unwrap();
    for removal in removals {
        removal.await.expect("remove task");
    }
    let (last, adds): (Vec<_>, Vec<_>) = alive.into_iter().unzip();
    for add in adds {
        add.await.expect("add task");
    }
    driver.settle(Duration::from_secs(2)).await;
    report.felix_cpu = (cpu_secs(pid).0 - cpu_start) / report.churn_secs;
    report.rss.push(("end of churn".to_owned(), rss_mib(pid)));
    for j in last {
        driver.remove(Workload(first + j as u32), false).await;
    }
    drop(buckets);
    sleep(Duration::from_secs(5)).await;
    report
        .rss
        .push(("all removed, +5 s".to_owned(), rss_mib(pid)));
}

fn spawn_remove(driver: &Arc<Driver>, w: Workload, added: JoinHandle<()>) -> JoinHandle<()> {
    let driver = driver.clone();
    tokio::spawn(async move {
        added.await.expect("add task");
        driver.remove(w, false).await;
    })
}

/// Prints, every 5 s, what the driver has done and how long its steps take on average.
async fn progress(watch: Shared) {
    loop {
        sleep(Duration::from_secs(5)).await;
        let watch = watch.lock().unwrap();
        let avg = |(n, t): (u32, Duration)| t.as_secs_f64() * 1e3 / f64::from(n.max(1));
        let [veth, put, del, unplug] = watch.steps;
        eprintln!(
            "added {}, removed {}, pending routes {}; average ms: veth {:.1}, put {:.1}, delete {:.1}, unplug {:.1}",
            put.0,
            del.0,
            watch.pending.len(),
            avg(veth),
            avg(put),
            avg(del),
            avg(unplug)
        );
    }
}

async fn bench(etcd: String, netns: String, backend: Backend) -> (Report, String) {
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: vec![etcd.clone()],
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
        .put("/calico/v1/config/InterfacePrefix", "cali")
        .await
        .unwrap();
    store.put("/calico/v1/Ready", "true").await.unwrap();
    let env = [
        backend.felix_env(),
        ("FELIX_PROMETHEUSMETRICSENABLED", "true".to_owned()),
        ("FELIX_PROMETHEUSMETRICSPORT", METRICS_PORT.to_string()),
    ];
    let felix = Felix::start(&netns, HOST, &etcd, &env);
    let watch = Shared::default();
    let poller = Netlink::connect(&Netns::current()).unwrap();
    let poll = tokio::spawn(poll_routes(poller, watch.clone()));
    let progress = tokio::spawn(progress(watch.clone()));
    let driver = Arc::new(Driver {
        netlink: Netlink::connect(&Netns::current()).unwrap(),
        store,
        watch,
    });
    let mut report = Report {
        baseline_ms: baseline(&driver).await,
        churn_ms: Vec::new(),
        added: 0,
        removed_during: 0,
        churn_secs: 0.0,
        missed: 0,
        rss: Vec::new(),
        felix_cpu: 0.0,
        metrics: Metrics::default(),
    };
    let text = scrape().await.expect("Felix serves its metrics");
    let running = format!("felix_dataplane_backend{{backend=\"{}\"}}", backend.name());
    assert_eq!(
        sample(&text, &running),
        Some(1.0),
        "Felix does not say it runs {}:\n{}",
        backend.name(),
        felix.log()
    );
    churn(&driver, felix.pid(), BASELINE + 1, &mut report).await;
    report.metrics = Metrics::from_scrape(&scrape().await.expect("Felix answers"));
    poll.abort();
    progress.abort();
    report.churn_ms = driver.take_lags();
    report.missed = driver.watch.lock().unwrap().missed;
    (report, felix.log())
}

/// Median, 99th percentile and maximum (ms).
fn stats(samples: &[f64]) -> (f64, f64, f64) {
    let t = Tails::of(samples.iter().copied()).expect("at least one route showed");
    (t.median, t.p99, t.max)
}

/// One backend's run.
struct Run {
    backend: Backend,
    report: Report,
    log: String,
}

fn print(runs: &[Run]) {
    // Percentiles are of the routes that did show; a workload removed (after ~1 s) before its
    // route showed is counted in the fourth column instead.
    println!(
        "| etcd write → route installed | backend | installed | not installed during its ~1 s life | median | p99 | max | × iptables (median / p99) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let iptables = runs.iter().find(|r| r.backend == Backend::Iptables);
    let vs = |pick: fn(&Report) -> &Vec<f64>, m: f64, p: f64| {
        iptables.map_or(String::new(), |i| {
            let (im, ip, _) = stats(pick(&i.report));
            format!("{:.2} / {:.2}", m / im, p / ip)
        })
    };
    for run in runs {
        let (r, name) = (&run.report, run.backend.name());
        let (bm, bp, bx) = stats(&r.baseline_ms);
        println!(
            "| baseline: one workload at a time, no churn | {name} | {} | 0 | {bm:.1} ms | {bp:.1} ms | {bx:.1} ms | {} |",
            r.baseline_ms.len(),
            vs(|r| &r.baseline_ms, bm, bp)
        );
    }
    for run in runs {
        let (r, name) = (&run.report, run.backend.name());
        let (bm, bp, _) = stats(&r.baseline_ms);
        let (cm, cp, cx) = stats(&r.churn_ms);
        let rate = f64::from(r.added) / r.churn_secs;
        println!(
            "| churn: {} added, {} removed in {:.1} s ({rate:.1}/s), ~{ALIVE} alive | {name} | {} | {} | {cm:.1} ms ({:.1}× baseline) | {cp:.1} ms ({:.1}×) | {cx:.1} ms | {} |",
            r.added,
            r.removed_during,
            r.churn_secs,
            r.churn_ms.len(),
            r.missed,
            cm / bm,
            cp / bp,
            vs(|r| &r.churn_ms, cm, cp)
        );
    }
    println!();
    println!(
        "| Felix during the run | backend | CPU during churn (one core) | firewall batches applied | mean apply | written: iptables-restore | ipset | nf_tables operations | route/interface batches |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for run in runs {
        let m = &run.report.metrics;
        println!(
            "| | {} | {:.0} % | {:.0} | {:.2} ms | {:.1} MiB | {:.1} KiB | {:.0} | {} |",
            run.backend.name(),
            run.report.felix_cpu * 100.0,
            m.applies,
            m.apply_secs * 1e3 / m.applies.max(1.0),
            m.iptables_bytes / 1024.0 / 1024.0,
            m.ipset_bytes / 1024.0,
            m.nft_ops,
            run.log.matches("routes and interfaces programmed").count()
        );
    }
    println!();
    let head: Vec<&str> = runs[0]
        .report
        .rss
        .iter()
        .map(|(at, _)| at.as_str())
        .collect();
    println!("| Felix RSS | {} |", head.join(" | "));
    println!("| --- |{}", " --- |".repeat(head.len()));
    for run in runs {
        let mib: Vec<String> = run
            .report
            .rss
            .iter()
            .map(|(_, v)| format!("{v:.1} MiB"))
            .collect();
        println!("| {} | {} |", run.backend.name(), mib.join(" | "));
    }
    println!();
    for run in runs {
        let warnings: Vec<&str> = run
            .log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect();
        println!(
            "Felix log, {}: {} warnings/errors",
            run.backend.name(),
            warnings.len()
        );
        for line in warnings.iter().take(10) {
            println!("  {line}");
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One backend: a namespace, its etcd and Felix, the baseline and the churn.
fn run(backend: Backend) -> Run {
    let ns = NetNs::new("churn");
    let etcd = EtcdServer::start_in_netns(ns.name());
    eprintln!(
        "{}: namespace {} (nsenter --net=/run/netns/{} …); baseline, then {} s of churn; load average {}",
        backend.name(),
        ns.name(),
        ns.name(),
        CHURN.as_secs(),
        load_average()
    );
    let (endpoint, name) = (etcd.endpoint(), ns.name().to_owned());
    // The bench runs on a thread inside the namespace: etcd's loopback and Felix's routes are
    // there; the runtime's sockets are made on that thread.
    let (report, log) = in_netns(&Netns::named(ns.name()), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(bench(endpoint, name, backend)))
    })
    .expect("the benchmark ran");
    if let Ok(prefix) = std::env::var("CHURN_FELIX_LOG") {
        let path = format!("{prefix}-{}.log", backend.name());
        std::fs::write(&path, &log).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
    Run {
        backend,
        report,
        log,
    }
}

fn main() {
    let started = Instant::now();
    let runs: Vec<Run> = Backend::chosen("CHURN_BENCH_BACKENDS")
        .into_iter()
        .map(run)
        .collect();
    print(&runs);
    println!();
    println!(
        "Run: {:.0} s, load average at the end {}.",
        started.elapsed().as_secs_f64(),
        load_average()
    );
}
