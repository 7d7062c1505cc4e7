//! Start-up at size (docs/benchmarks.md, issue 13 item 3, issue 25 item 5): Felix from start to
//! fully programmed with 1,000 local endpoints and 5,000 policies, then restarts with everything
//! in place, which must rewrite nothing and lose no echo of a ping running through the host; on
//! both firewall backends in one run (`NFTablesMode=Disabled`, iptables, the baseline rows;
//! `Enabled`, nftables). The baseline of each backend, in the same run: 10 endpoints and no
//! policy, in a namespace (and etcd) of its own.
//!
//! **Fully programmed** is the first moment, polled every 20 ms from Felix's spawn, when both
//! hold: Felix's `/metrics` shows `felix_applied_revision` at or past the etcd revision of the
//! last set-up write (Felix sets it only once the firewall's full sync is done, every route and
//! interface setting is programmed and the encapsulation is in step: the same moment
//! `/readiness` turns 200), and a netlink dump shows a Calico route for every endpoint. What
//! Felix wrote is its own count (`felix_dataplane_written_bytes_total` by tool,
//! `felix_dataplane_written_chains_total`, `felix_dataplane_written_nft_ops_total`), read at that
//! moment and again 3 s later; `felix_dataplane_backend` must name the backend asked for.
//!
//! Each workload is a veth pair: `cali<n>` up in Felix's namespace, its peer down in a shared
//! namespace, except workloads 0 and 1, whose peers are `eth0` in namespaces of their own with
//! their /32 address, the endpoint's MAC and routes via 169.254.1.1, as the CNI plugin sets
//! them up (Felix's namespace has an uplink `eth0` with a default route, without which proxy
//! ARP does not answer for 169.254.1.1). Policy `i` of the tier `bench` applies to the endpoints
//! labelled `app=a<i % 250>` (20 policies each), with rules over other endpoints' labels (260 IP
//! sets) and nets; the policy `ping` lets workloads 0 and 1 ping each other.
//!
//! Each backend gets `$STARTUP_RUNS` (3) sites at size, each a cold start followed by restarts
//! after SIGKILL, SIGTERM, SIGKILL, SIGTERM: 3 cold starts and 6 restarts of each kind.
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
//! `$CALICO_FELIX_BIN`). `$STARTUP_BENCH_BACKENDS=nftables` runs one backend;
//! `$STARTUP_FELIX_LOG=<prefix>` keeps the logs of the first Felix at size of each backend as
//! `<prefix>-<backend>-cold.log`, `-KILL.log`, …; `$STARTUP_ENDPOINTS`, `$STARTUP_POLICIES`
//! and `$STARTUP_RUNS` shrink the run, `$STARTUP_HOLD` keeps everything up for 5 min if the
//! first ping fails:
//! `cargo build --release -p calico-felix --bin calico-felix --example startup_bench &&
//! target/release/examples/startup_bench`

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_dataplane::calico_table;
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore, TxnOp};
use calico_linux::nft::{NfTables, Nft};
use calico_linux::{Netlink, Netns, in_netns};
use calico_testkit::{EtcdServer, NetNs};
use serde_json::json;
use tokio::time::sleep;

mod common;
#[path = "startup_bench/report.rs"]
mod report;
use common::{Backend, Felix, METRICS_PORT, cpu_secs, ip, rss_mib, sample, scrape};
use report::{
    BackendReport, Restart, SiteReport, Start, Written, print_echoes, print_resources, print_times,
    print_written,
};

const HOST: &str = "h1";
const ENDPOINTS: u32 = 1_000;
const POLICIES: u32 = 5_000;
const BASE_ENDPOINTS: u32 = 10;
/// Sites at size per backend (each one cold start and `SIGNALS.len()` restarts).
const RUNS: u32 = 3;
const SIGNALS: [&str; 4] = ["KILL", "TERM", "KILL", "TERM"];
/// Endpoints are labelled `app=a<n % APPS>`: each policy's selector picks one value.
const APPS: u32 = 250;
const GROUPS: u32 = 10;
const POLL: Duration = Duration::from_millis(20);
/// How long after "programmed" the written counters are read again (late writes show there).
const SETTLE: Duration = Duration::from_secs(3);
/// etcd's default limit is 128 operations per transaction.
const BATCH: usize = 100;

/// Felix on `backend`, with its Prometheus metrics on (they say when it is programmed, what it
/// wrote and which backend runs).
fn start_felix(netns: &str, etcd: &str, backend: Backend) -> Felix {
    let (mode, value) = backend.felix_env();
    let env = [
        ("FELIX_PROMETHEUSMETRICSENABLED", "true".to_owned()),
        ("FELIX_PROMETHEUSMETRICSPORT", METRICS_PORT.to_string()),
        (mode, value),
    ];
    Felix::start(netns, HOST, etcd, &env)
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
    backend: Backend,
}

impl Site {
    fn new(name: &str, size: (u32, u32), ping: bool, backend: Backend) -> Site {
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
            endpoints: size.0,
            policies: size.1,
            backend,
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

    /// The kernel's firewall as the tools dump it (bytes, and the time each dump took: what
    /// reading the kernel costs at least), and for nftables the read Felix makes at a restart.
    fn kernel_dumps(&self) -> Vec<(String, Option<usize>, Duration)> {
        let commands: &[&str] = match self.backend {
            Backend::Iptables => &["iptables-save", "ip6tables-save", "ipset save"],
            Backend::Nftables => &["nft list table inet calico", "iptables-save"],
        };
        let mut dumps: Vec<(String, Option<usize>, Duration)> = commands
            .iter()
            .map(|cmd| {
                let mut args = vec!["netns", "exec", self.netns.name()];
                args.extend(cmd.split(' '));
                let t0 = Instant::now();
                let out = Command::new("ip").args(&args).output().expect("ip runs");
                assert!(out.status.success(), "{cmd} in {}", self.netns.name());
                (format!("`{cmd}`"), Some(out.stdout.len()), t0.elapsed())
            })
            .collect();
        if self.backend == Backend::Nftables {
            let nft = Nft::new(Netns::named(self.netns.name()), calico_table());
            let t0 = Instant::now();
            let table = nft.read().expect("the table reads back").expect("a table");
            let took = t0.elapsed();
            let elements: usize = table.sets.values().map(|s| s.elements.len()).sum();
            let rules: usize = table.chains.values().map(|c| c.rules.len()).sum();
            let what = format!(
                "netlink read (Felix's restart read: {} chains, {rules} rules, {} sets, {elements} elements)",
                table.chains.len(),
                table.sets.len()
            );
            dumps.push((what, None, took));
        }
        dumps
    }

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

/// The fields of Felix's "dataplane programmed" line: chains and sets written, and how long
/// the full sync took.
fn sync_log(log: &str) -> String {
    let Some(line) = log.lines().find(|l| l.contains("dataplane programmed")) else {
        return "no sync logged".to_owned();
    };
    let field = |name: &str, sep: &str| {
        let at = line.find(&format!("{name}{sep}"))? + name.len() + sep.len();
        Some(line[at..].split([',', ' ', '}']).next()?.to_owned())
    };
    format!(
        "{} chains, {} sets in {}",
        field("written_chains", ": ").unwrap_or_default(),
        field("written_sets", ": ").unwrap_or_default(),
        field("elapsed", "=").unwrap_or_default()
    )
}

/// Polls until Felix has programmed revision `revision` and every endpoint's route is in.
async fn programmed(felix: &Felix, netlink: &Netlink, site: &Site, revision: i64) -> Start {
    let deadline = Duration::from_secs(900);
    let (took, text, cpu) = loop {
        assert!(
            felix.spawned.elapsed() < deadline,
            "Felix not programmed in {deadline:?}"
        );
        if let Some(text) = scrape().await
            && sample(&text, "felix_applied_revision").unwrap_or(0.0) >= revision as f64
        {
            let routes = netlink.calico_routes().await.expect("route dump");
            if routes.len() >= site.endpoints as usize {
                break (felix.spawned.elapsed(), text, cpu_secs(felix.pid()));
            }
        }
        sleep(POLL).await;
    };
    let running = format!(
        "felix_dataplane_backend{{backend=\"{}\"}}",
        site.backend.name()
    );
    assert_eq!(
        sample(&text, &running),
        Some(1.0),
        "Felix does not say it runs {}: {}",
        site.backend.name(),
        felix.log()
    );
    sleep(SETTLE).await;
    let settled = Written::from_scrape(&scrape().await.expect("Felix answers"));
    Start {
        took,
        at_ready: Written::from_scrape(&text),
        settled,
        rss_mib: rss_mib(felix.pid()),
        cpu,
        sync_log: sync_log(&felix.log()),
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
            .args(["netns", "exec", from.name(), "ping", "-n", "-O"])
            .args(["-i", "0.01", "-W", "1"])
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
    eprintln!(
        "{} ({}): set-up {:.1} s ({} veths and endpoints, {} policies); cold start",
        site.netns.name(),
        site.backend.name(),
        t0.elapsed().as_secs_f64(),
        site.endpoints,
        site.policies
    );
    let netlink = Netlink::connect(&Netns::current()).unwrap();
    let etcd = site.etcd.endpoint();
    let mut felix = start_felix(site.netns.name(), &etcd, site.backend);
    let cold = programmed(&felix, &netlink, site, revision).await;
    eprintln!("  cold start {:.2} s", cold.took.as_secs_f64());
    let kernel = site.kernel_dumps();
    let ping_ok = site
        .pingers
        .as_ref()
        .is_some_and(|ns| site.ping_once(&ns[0]));
    let (mut restarts, mut logs) = (Vec::new(), Vec::new());
    let mut phase = "cold";
    for &signal in signals {
        let ping = site.pingers.as_ref().map(|ns| Ping::start(&ns[0]));
        sleep(Duration::from_secs(1)).await;
        logs.push((phase, felix.stop(signal)));
        phase = signal;
        felix = start_felix(site.netns.name(), &etcd, site.backend);
        let start = programmed(&felix, &netlink, site, revision).await;
        let echoes = ping.map(Ping::stop).unwrap_or_default();
        eprintln!(
            "  restart after SIG{signal} {:.2} s, {} of {} echoes lost",
            start.took.as_secs_f64(),
            echoes.1,
            echoes.0
        );
        restarts.push(Restart {
            signal,
            start,
            echoes,
        });
    }
    logs.push((phase, felix.log()));
    SiteReport {
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

/// `$name` if set (a smaller run while debugging), else `default`.
fn size(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number"))
    })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let started = Instant::now();
    let at_size = (
        size("STARTUP_ENDPOINTS", ENDPOINTS),
        size("STARTUP_POLICIES", POLICIES),
    );
    let runs = size("STARTUP_RUNS", RUNS).max(1);
    let mut reports = Vec::new();
    for backend in Backend::chosen("STARTUP_BENCH_BACKENDS") {
        eprintln!("{}: load average {}", backend.name(), load_average());
        let base = {
            let site = Site::new("startb", (BASE_ENDPOINTS, 0), false, backend);
            measure(&site, &SIGNALS)
        };
        let big: Vec<SiteReport> = (0..runs)
            .map(|_| {
                let site = Site::new("starts", at_size, true, backend);
                eprintln!(
                    "namespace {} (nsenter --net=/run/netns/{} …)",
                    site.netns.name(),
                    site.netns.name()
                );
                measure(&site, &SIGNALS)
            })
            .collect();
        if let Ok(prefix) = std::env::var("STARTUP_FELIX_LOG") {
            for (phase, log) in &big[0].logs {
                let path = format!("{prefix}-{}-{phase}.log", backend.name());
                std::fs::write(&path, log).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
            }
        }
        reports.push(BackendReport { backend, base, big });
    }
    print_times(&reports, BASE_ENDPOINTS, at_size);
    print_written(&reports, at_size, SETTLE);
    print_echoes(&reports);
    print_resources(&reports);
    println!();
    println!(
        "Run: {:.0} s, load average at the end {}.",
        started.elapsed().as_secs_f64(),
        load_average()
    );
}
