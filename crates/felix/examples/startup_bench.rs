//! Start-up at size (docs/benchmarks.md, issue 13 item 3): Felix from start to fully programmed
//! with 1,000 local endpoints and 5,000 policies, then restarts with everything in place, which
//! must rewrite nothing and lose no echo of a ping running through the host. The baseline, in
//! the same run: 10 endpoints and no policy, in a namespace (and etcd) of its own.
//!
//! **Fully programmed** is the first moment, polled every 20 ms from Felix's spawn, when both
//! hold: Felix's `/metrics` shows `felix_applied_revision` at or past the etcd revision of the
//! last set-up write (Felix sets it only once the firewall's full sync is done, every route and
//! interface setting is programmed and the encapsulation is in step: the same moment
//! `/readiness` turns 200), and a netlink dump shows a Calico route for every endpoint. Bytes
//! written are Felix's own count of restore input (`felix_dataplane_written_bytes_total`, by
//! tool, and `felix_dataplane_written_chains_total`), read at that moment and again 3 s later.
//!
//! Each workload is a veth pair: `cali<n>` up in Felix's namespace, its peer down in a shared
//! namespace, except workloads 0 and 1, whose peers are `eth0` in namespaces of their own with
//! their /32 address, the endpoint's MAC and routes via 169.254.1.1, as the CNI plugin sets
//! them up (Felix's namespace has an uplink `eth0` with a default route, without which proxy
//! ARP does not answer for 169.254.1.1). Policy `i` of the tier `bench` applies to the endpoints labelled `app=a<i % 250>`
//! (20 policies each), with rules over other endpoints' labels (260 IP sets) and nets; the
//! policy `ping` lets workloads 0 and 1 ping each other.
//!
//! ```text
//!   main thread: namespaces, etcd          ── dropped last, also on panic
//!   bench thread per site (inside Felix's namespace, one-thread runtime):
//!     set-up: ip -batch (veths), etcd transactions of 100 puts
//!     Felix (`ip netns exec`) ─► poll /metrics + route dump every 20 ms ─► programmed
//!     restart: ping -i 0.01 (workload 0 → 1) ─► kill Felix ─► start ─► programmed ─► lost echoes
//! ```
//!
//! Run as root from the workspace root with the release build of Felix beside it (or
//! `$CALICO_FELIX_BIN`). `$STARTUP_FELIX_LOG=<prefix>` keeps the logs of the Felix at size as
//! `<prefix>-cold.log`, `-KILL.log`, `-TERM.log`; `$STARTUP_ENDPOINTS` and `$STARTUP_POLICIES`
//! shrink the run, `$STARTUP_HOLD` keeps everything up for 5 min if the first ping fails:
//! `cargo build --release -p calico-felix --bin calico-felix --example startup_bench &&
//! target/release/examples/startup_bench`

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore, TxnOp};
use calico_linux::{Netlink, Netns, in_netns};
use calico_testkit::{EtcdServer, NetNs};
use serde_json::json;
use tokio::time::sleep;

mod common;
use common::{Felix, METRICS_PORT, cpu_secs, ip, rss_mib, sample, scrape};

const HOST: &str = "h1";
const ENDPOINTS: u32 = 1_000;
const POLICIES: u32 = 5_000;
const BASE_ENDPOINTS: u32 = 10;
/// Endpoints are labelled `app=a<n % APPS>`: each policy's selector picks one value.
const APPS: u32 = 250;
const GROUPS: u32 = 10;
const POLL: Duration = Duration::from_millis(20);
/// How long after "programmed" the written bytes are read again (late writes show there).
const SETTLE: Duration = Duration::from_secs(3);
/// etcd's default limit is 128 operations per transaction.
const BATCH: usize = 100;

/// Felix with its Prometheus metrics on (they say when it is programmed and what it wrote).
fn start_felix(netns: &str, etcd: &str) -> Felix {
    let metrics = [
        ("FELIX_PROMETHEUSMETRICSENABLED", "true".to_owned()),
        ("FELIX_PROMETHEUSMETRICSPORT", METRICS_PORT.to_string()),
    ];
    Felix::start(netns, HOST, etcd, &metrics)
}

/// Workload number `n`: interface `cali<n>`, address 10.64.0.0/10 + n.
#[derive(Clone, Copy)]
struct Workload(u32);

impl Workload {
    fn iface(self) -> String {
        format!("cali{}", self.0)
    }

    fn ip(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 64, 0, 1)) + self.0)
    }

    fn mac(self) -> String {
        let [_, a, b, c] = self.0.to_be_bytes();
        format!("ee:ee:ee:{a:02x}:{b:02x}:{c:02x}")
    }

    fn key(self) -> String {
        format!(
            "/calico/v1/host/{HOST}/workload/k8s/ns.w{}/endpoint/eth0",
            self.0
        )
    }

    /// Workloads 0 and 1 ping each other (`ping=yes`).
    fn value(self) -> String {
        let mut labels = json!({
            "app": format!("a{}", self.0 % APPS),
            "group": format!("g{}", self.0 % GROUPS),
        });
        if self.0 < 2 {
            labels["ping"] = json!("yes");
        }
        json!({
            "state": "active",
            "name": self.iface(),
            "mac": self.mac(),
            "profile_ids": ["open"],
            "ipv4_nets": [format!("{}/32", self.ip())],
            "labels": labels,
        })
        .to_string()
    }
}

/// Policy `i`: for `app=a<i % APPS>`, TCP in from another app's endpoints, DNS in from a net,
/// HTTPS out to a group.
fn policy(i: u32) -> (String, String) {
    let value = json!({
        "order": 10 + i,
        "selector": format!("app == \"a{}\"", i % APPS),
        "inbound_rules": [
            {"action": "allow", "protocol": "tcp", "dst_ports": [1000 + i % 1000],
             "src_selector": format!("app == \"a{}\"", (i * 7 + 1) % APPS)},
            {"action": "allow", "protocol": "udp", "dst_ports": [53],
             "src_net": format!("172.{}.{}.0/24", 16 + i % 16, i / 16 % 256)},
        ],
        "outbound_rules": [
            {"action": "allow", "protocol": "tcp", "dst_ports": [443],
             "dst_selector": format!("group == \"g{}\"", i % GROUPS)},
        ],
    });
    let key = format!("/calico/v1/policy/tier/bench/policy/p{i}");
    (key, value.to_string())
}

/// ICMP between the two pinging workloads, ahead of the other policies.
fn ping_policy() -> (String, String) {
    let value = json!({
        "order": 0,
        "selector": "ping == \"yes\"",
        "inbound_rules": [{"action": "allow", "protocol": "icmp", "src_selector": "ping == \"yes\""}],
        "outbound_rules": [{"action": "allow", "protocol": "icmp", "dst_selector": "ping == \"yes\""}],
    });
    let key = "/calico/v1/policy/tier/bench/policy/ping".to_owned();
    (key, value.to_string())
}

/// One Felix host: its namespace, the namespaces of its workloads' peers, its etcd (fields drop
/// in this order: etcd first, Felix's namespace last).
struct Site {
    etcd: EtcdServer,
    /// Workloads 0 and 1, when they ping each other.
    pingers: Option<[NetNs; 2]>,
    peers: NetNs,
    netns: NetNs,
    endpoints: u32,
    policies: u32,
}

impl Site {
    fn new(name: &str, endpoints: u32, policies: u32, ping: bool) -> Site {
        let netns = NetNs::new(name);
        let etcd = EtcdServer::start_in_netns(netns.name());
        Site {
            etcd,
            peers: NetNs::new(&format!("{name}p")),
            pingers: ping.then(|| {
                [
                    NetNs::new(&format!("{name}a")),
                    NetNs::new(&format!("{name}b")),
                ]
            }),
            netns,
            endpoints,
            policies,
        }
    }

    /// The veth pairs: one `ip -batch` in Felix's namespace, then the pinging workloads' insides.
    fn plug(&self) {
        let mut batch = String::new();
        for n in 0..self.endpoints {
            let w = Workload(n);
            let peer = match &self.pingers {
                Some(ns) if n < 2 => format!("eth0 netns {}", ns[n as usize].name()),
                _ => format!("wl{n} netns {}", self.peers.name()),
            };
            batch.push_str(&format!(
                "link add {} type veth peer name {peer}\n",
                w.iface()
            ));
            batch.push_str(&format!("link set {} up\n", w.iface()));
        }
        // The host's uplink, with a default route as every host has: proxy ARP answers for
        // 169.254.1.1 only if the host has a route to it (through another interface).
        let peers = self.peers.name();
        batch.push_str(&format!(
            "link add eth0 type veth peer name uplink netns {peers}\nlink set eth0 up\n\
             addr add 192.0.2.1/24 dev eth0\nroute add default via 192.0.2.254 dev eth0\n"
        ));
        ip(&["-n", self.netns.name(), "-batch", "-"], &batch);
        ip(&["-n", peers, "link", "set", "uplink", "up"], "");
        for (n, ns) in self.pingers.iter().flatten().enumerate() {
            let w = Workload(n as u32);
            let inside = format!(
                "link set lo up\nlink set eth0 address {}\nlink set eth0 up\n\
                 addr add {}/32 dev eth0\nroute add 169.254.1.1 dev eth0 scope link\n\
                 route add default via 169.254.1.1 dev eth0\n",
                w.mac(),
                w.ip()
            );
            ip(&["-n", ns.name(), "-batch", "-"], &inside);
        }
    }

    /// Everything Felix reads, in transactions; returns the revision of the last write.
    async fn write(&self, store: &EtcdDatastore) -> i64 {
        let open =
            r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
        let mut puts = vec![
            (
                "/calico/v1/policy/profile/open/rules".to_owned(),
                open.to_owned(),
            ),
            (
                "/calico/v1/config/InterfacePrefix".to_owned(),
                "cali".to_owned(),
            ),
        ];
        puts.extend((0..self.endpoints).map(|n| (Workload(n).key(), Workload(n).value())));
        if self.policies > 0 {
            let tier = "/calico/v1/policy/tier/bench/metadata".to_owned();
            puts.push((tier, r#"{"order": 10}"#.to_owned()));
            puts.push(ping_policy());
            puts.extend((0..self.policies).map(policy));
        }
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

    /// The kernel's firewall as `iptables-save`, `ip6tables-save` and `ipset save` print it:
    /// bytes of each, and the time each dump took (what reading the kernel costs at least).
    fn kernel_sizes(&self) -> [(usize, Duration); 3] {
        ["iptables-save", "ip6tables-save", "ipset save"].map(|cmd| {
            let mut args = vec!["netns", "exec", self.netns.name()];
            args.extend(cmd.split(' '));
            let t0 = Instant::now();
            let out = Command::new("ip").args(&args).output().expect("ip runs");
            assert!(out.status.success(), "{cmd} in {}", self.netns.name());
            (out.stdout.len(), t0.elapsed())
        })
    }
}

impl Site {
    /// Three echoes from workload 0 to 1; on failure, what is needed to see why (stderr).
    fn ping_once(&self, from: &NetNs) -> bool {
        let to = Workload(1).ip().to_string();
        let out = from.run("ping", &["-n", "-c", "3", "-i", "0.2", "-W", "1", &to], "");
        if !out.status.success() {
            eprintln!("ping failed:\n{}", String::from_utf8_lossy(&out.stdout));
            let felix = self.netns.name();
            let looks: [&[&str]; 5] = [
                &["-n", felix, "route", "show", "proto", "80"],
                &["-n", felix, "neigh", "show", "nud", "permanent"],
                &["-n", from.name(), "addr"],
                &["-n", from.name(), "route"],
                &["-n", felix, "-s", "link", "show", "cali0"],
            ];
            for args in looks {
                let out = Command::new("ip").args(args).output().expect("ip runs");
                let text = String::from_utf8_lossy(&out.stdout);
                let head: Vec<&str> = text.lines().take(8).collect();
                eprintln!("ip {}:\n{}", args.join(" "), head.join("\n"));
            }
            if std::env::var_os("STARTUP_HOLD").is_some() {
                std::thread::sleep(Duration::from_secs(300));
            }
        }
        out.status.success()
    }
}

/// What Felix says it wrote: iptables bytes, ipset bytes, chains.
#[derive(Clone, Copy, Default)]
struct Written([u64; 3]);

impl Written {
    fn from_scrape(text: &str) -> Written {
        let names = [
            r#"felix_dataplane_written_bytes_total{tool="iptables"}"#,
            r#"felix_dataplane_written_bytes_total{tool="ipset"}"#,
            "felix_dataplane_written_chains_total",
        ];
        Written(names.map(|n| sample(text, n).unwrap_or(0.0) as u64))
    }
}

/// One start of Felix, measured.
struct Start {
    /// Spawn to fully programmed.
    took: Duration,
    at_ready: Written,
    settled: Written,
    rss_mib: f64,
    /// CPU seconds until programmed: Felix's own, and its waited-for children's
    /// (`iptables-restore`, `iptables-save`, `ipset`).
    cpu: (f64, f64),
    /// `written_chains`, `written_sets` of the full sync, from Felix's log.
    sync_log: String,
}

/// Polls until Felix has programmed revision `revision` and every endpoint's route is in.
async fn programmed(felix: &Felix, netlink: &Netlink, site: &Site, revision: i64) -> Start {
    let deadline = Duration::from_secs(900);
    let (took, at_ready, cpu) = loop {
        assert!(
            felix.spawned.elapsed() < deadline,
            "Felix not programmed in {deadline:?}"
        );
        if let Some(text) = scrape().await
            && sample(&text, "felix_applied_revision").unwrap_or(0.0) >= revision as f64
        {
            let routes = netlink.calico_routes().await.expect("route dump");
            if routes.len() >= site.endpoints as usize {
                let took = felix.spawned.elapsed();
                break (took, Written::from_scrape(&text), cpu_secs(felix.pid()));
            }
        }
        sleep(POLL).await;
    };
    sleep(SETTLE).await;
    let settled = Written::from_scrape(&scrape().await.expect("Felix answers"));
    let log = felix.log();
    let sync_log = log
        .lines()
        .find(|l| l.contains("dataplane programmed"))
        .map(|l| {
            let field = |f: &str| {
                let at = l.find(f).map(|i| i + f.len() + 2)?;
                Some(l[at..].split([',', ' ', '}']).next()?.to_owned())
            };
            let (c, s) = (field("written_chains"), field("written_sets"));
            format!(
                "{} chains, {} sets",
                c.unwrap_or_default(),
                s.unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "no sync logged".to_owned());
    Start {
        took,
        at_ready,
        settled,
        rss_mib: rss_mib(felix.pid()),
        cpu,
        sync_log,
    }
}

/// `ping -i 0.01` from workload 0 to workload 1, stopped with SIGINT for its summary.
struct Ping {
    child: Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ping {
    fn start(from: &NetNs) -> Ping {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("ping.txt");
        let file = File::create(&out).expect("ping output");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                from.name(),
                "ping",
                "-n",
                "-O",
                "-i",
                "0.01",
                "-W",
                "1",
            ])
            .arg(Workload(1).ip().to_string())
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .expect("ping starts");
        Ping {
            child,
            out,
            _dir: dir,
        }
    }

    /// Echoes sent and lost (sent but unanswered, as ping's summary counts them).
    fn stop(mut self) -> (u64, u64) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-s", "INT", &pid]).status();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let summary = text
            .lines()
            .find(|l| l.contains("packets transmitted"))
            .unwrap_or_else(|| panic!("no ping summary in:\n{text}"));
        let numbers: Vec<u64> = summary
            .split([' ', ','])
            .filter_map(|w| w.parse().ok())
            .collect();
        (numbers[0], numbers[0] - numbers[1])
    }
}

impl Drop for Ping {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A restart under a running ping: the start measured, echoes sent and lost.
struct Restart {
    signal: &'static str,
    start: Start,
    echoes: (u64, u64),
}

/// What one site measured.
struct SiteReport {
    setup: Duration,
    cold: Start,
    kernel: [(usize, Duration); 3],
    ping_ok: bool,
    restarts: Vec<Restart>,
    /// Felix's log of each start: `cold`, `KILL`, `TERM`.
    logs: Vec<(&'static str, String)>,
}

async fn run_site(site: &Site, signals: &[&'static str]) -> SiteReport {
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
        "{}: set-up {:.1} s ({} veths, {} endpoints, {} policies); cold start",
        site.netns.name(),
        setup.as_secs_f64(),
        site.endpoints,
        site.endpoints,
        site.policies
    );
    let netlink = Netlink::connect(&Netns::current()).unwrap();
    let mut felix = start_felix(site.netns.name(), &site.etcd.endpoint());
    let cold = programmed(&felix, &netlink, site, revision).await;
    let kernel = site.kernel_sizes();
    let ping_ok = site
        .pingers
        .as_ref()
        .is_some_and(|ns| site.ping_once(&ns[0]));
    let (mut restarts, mut logs) = (Vec::new(), Vec::new());
    let mut phase = "cold";
    for &signal in signals {
        eprintln!("{}: restart after SIG{signal}", site.netns.name());
        let ping = site.pingers.as_ref().map(|ns| Ping::start(&ns[0]));
        sleep(Duration::from_secs(1)).await;
        logs.push((phase, felix.stop(signal)));
        phase = signal;
        felix = start_felix(site.netns.name(), &site.etcd.endpoint());
        let start = programmed(&felix, &netlink, site, revision).await;
        let echoes = ping.map(Ping::stop).unwrap_or_default();
        restarts.push(Restart {
            signal,
            start,
            echoes,
        });
    }
    logs.push((phase, felix.log()));
    SiteReport {
        setup,
        cold,
        kernel,
        ping_ok,
        restarts,
        logs,
    }
}

/// Runs `site` on a thread inside its namespace (etcd's loopback and Felix's routes are there).
fn measure(site: &Site, signals: &[&'static str]) -> SiteReport {
    in_netns(&Netns::named(site.netns.name()), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(run_site(site, signals)))
    })
    .expect("the benchmark ran")
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn print(base: &SiteReport, big: &SiteReport, endpoints: u32, policies: u32) {
    let secs = |s: &Start| s.took.as_secs_f64();
    println!(
        "| Felix start → fully programmed | {BASE_ENDPOINTS} endpoints, 0 policies | \
         {endpoints} endpoints, {policies} policies | ratio |"
    );
    println!("| --- | --- | --- | --- |");
    let row = |what: &str, b: &Start, s: &Start| {
        println!(
            "| {what} | {:.2} s | {:.2} s | {:.1}× |",
            secs(b),
            secs(s),
            secs(s) / secs(b)
        );
    };
    row("cold start (empty kernel)", &base.cold, &big.cold);
    for (b, s) in base.restarts.iter().zip(&big.restarts) {
        row(
            &format!("restart after SIG{}", s.signal),
            &b.start,
            &s.start,
        );
    }
    println!();
    println!(
        "| bytes written by Felix ({endpoints} endpoints, {policies} policies) | iptables-restore \
         | ipset restore | chains | full sync (Felix's log) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let bytes = |what: &str, s: &Start| {
        let [t, i, c] = s.at_ready.0;
        let [t2, i2, c2] = s.settled.0;
        println!(
            "| {what} | {} (+{} in {}s after) | {} (+{}) | {c} (+{}) | {} |",
            kib(t),
            t2 - t,
            SETTLE.as_secs(),
            kib(i),
            i2 - i,
            c2 - c,
            s.sync_log
        );
    };
    bytes("cold start", &big.cold);
    for r in &big.restarts {
        bytes(&format!("restart after SIG{}", r.signal), &r.start);
    }
    let [(v4, t4), (v6, t6), (sets, ts)] = big.kernel;
    println!();
    println!(
        "A full render, as the kernel dumps it: iptables-save {} ({:.2} s), ip6tables-save {} \
         ({:.2} s), ipset save {} ({:.2} s).",
        kib(v4 as u64),
        t4.as_secs_f64(),
        kib(v6 as u64),
        t6.as_secs_f64(),
        kib(sets as u64),
        ts.as_secs_f64()
    );
    println!(
        "Baseline cold start wrote {} to iptables-restore, {} to ipset.",
        kib(base.cold.at_ready.0[0]),
        kib(base.cold.at_ready.0[1])
    );
    println!();
    println!("| ping -i 0.01 workload 0 → 1 through the host | echoes sent | lost |");
    println!("| --- | --- | --- |");
    println!(
        "| after cold start (3 echoes) | 3 | {} |",
        if big.ping_ok {
            "0"
        } else {
            "some (ping failed)"
        }
    );
    for r in &big.restarts {
        let (sent, lost) = r.echoes;
        println!(
            "| across a restart after SIG{} | {sent} | {lost} |",
            r.signal
        );
    }
    println!();
    println!("| Felix RSS, 3 s after programmed | baseline | at size |");
    println!("| --- | --- | --- |");
    println!(
        "| cold start | {:.1} MiB | {:.1} MiB |",
        base.cold.rss_mib, big.cold.rss_mib
    );
    for (b, s) in base.restarts.iter().zip(&big.restarts) {
        println!(
            "| restart after SIG{} | {:.1} MiB | {:.1} MiB |",
            s.signal, b.start.rss_mib, s.start.rss_mib
        );
    }
    println!();
    println!("| Felix CPU until programmed (at size) | Felix | its iptables/ipset children |");
    println!("| --- | --- | --- |");
    let starts = std::iter::once(("cold start".to_owned(), &big.cold)).chain(
        big.restarts
            .iter()
            .map(|r| (format!("restart after SIG{}", r.signal), &r.start)),
    );
    for (what, s) in starts {
        println!("| {what} | {:.1} s | {:.1} s |", s.cpu.0, s.cpu.1);
    }
    println!();
    println!(
        "Set-up (not timed above): baseline {:.1} s, at size {:.1} s.",
        base.setup.as_secs_f64(),
        big.setup.as_secs_f64()
    );
    let warnings: Vec<&str> = big
        .logs
        .iter()
        .flat_map(|(_, log)| log.lines())
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    println!("Felix's logs at size: {} warnings/errors", warnings.len());
    for line in warnings.iter().take(10) {
        println!("  {line}");
    }
}

/// `$name` if set (a smaller run while debugging), else `default`.
fn size(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number"))
    })
}

fn main() {
    let signals = ["KILL", "TERM"];
    let (endpoints, policies) = (
        size("STARTUP_ENDPOINTS", ENDPOINTS),
        size("STARTUP_POLICIES", POLICIES),
    );
    let base = {
        let site = Site::new("startb", BASE_ENDPOINTS, 0, false);
        measure(&site, &signals)
    };
    let big = {
        let site = Site::new("starts", endpoints, policies, true);
        eprintln!(
            "namespace {} (nsenter --net=/run/netns/{} …)",
            site.netns.name(),
            site.netns.name()
        );
        measure(&site, &signals)
    };
    if let Ok(prefix) = std::env::var("STARTUP_FELIX_LOG") {
        for (phase, log) in &big.logs {
            let path = format!("{prefix}-{phase}.log");
            std::fs::write(&path, log).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
        }
    }
    print(&base, &big, endpoints, policies);
}
