//! One change → kernel, at size (docs/benchmarks.md): 100 local endpoints, 200 IP sets of 1,000
//! members each, 200 policies with 3,000 rules, programmed into a real kernel (a network
//! namespace this benchmark makes per backend), on both firewall backends: iptables (the
//! baseline) and nftables. Then, many times each: one policy edit, one set member added (a
//! remote endpoint joining one set), one local endpoint added. For each it prints the time
//! `apply` takes (median, p99, max) and what it wrote (bytes of `iptables-restore` and `ipset
//! restore` input; operations of the nf_tables transaction), next to a full sync, and a
//! restart with everything in place: a new dataplane's full sync, which reads the kernel back,
//! renders everything and writes nothing.
//!
//! Run as root: `cargo run --release -p calico-dataplane --example apply_bench`
//! (`APPLY_BENCH_BACKENDS=nftables` for one backend only, `APPLY_BENCH_SAMPLES` for another
//! number of samples of each change than 200).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use calico_calc::Calculator;
use calico_calc::{Changes, DesiredState};
use calico_dataplane::{Dataplane, NftDataplane, RenderConfig, Written, calico_table};
use calico_linux::nft::Nft;
use calico_linux::{CommandError, Family, FirewallTables, IpSets, Ipset, Iptables, Netns};
use calico_testkit::{NetNs, Tails};

const LOCAL: usize = 100;
const SETS: usize = 200;
const MEMBERS: usize = 1000;
const POLICIES: usize = 200;
const RULES_PER_POLICY: usize = 15;
const SAMPLES: usize = 200;

/// Counts the bytes written through the firewall seams.
#[derive(Debug, Clone)]
struct Counting<T> {
    inner: T,
    bytes: Arc<AtomicUsize>,
}

impl<T: FirewallTables + Clone + 'static> FirewallTables for Counting<T> {
    fn restore(&self, family: Family, input: &str) -> Result<(), CommandError> {
        self.bytes.fetch_add(input.len(), Ordering::Relaxed);
        self.inner.restore(family, input)
    }
    fn chains(
        &self,
        family: Family,
        table: &str,
        prefix: &str,
    ) -> Result<Vec<String>, CommandError> {
        self.inner.chains(family, table, prefix)
    }
    fn save(&self, family: Family, table: &str) -> Result<String, CommandError> {
        self.inner.save(family, table)
    }
    fn ensure_jump(
        &self,
        family: Family,
        table: &str,
        chain: &str,
        target: &str,
    ) -> Result<bool, CommandError> {
        self.inner.ensure_jump(family, table, chain, target)
    }
    fn handle(&self) -> Box<dyn FirewallTables> {
        Box::new(self.clone())
    }
}

impl<T: IpSets + Clone + 'static> IpSets for Counting<T> {
    fn restore(&self, input: &str) -> Result<(), CommandError> {
        self.bytes.fetch_add(input.len(), Ordering::Relaxed);
        self.inner.restore(input)
    }
    fn names(&self) -> Result<Vec<String>, CommandError> {
        self.inner.names()
    }
    fn save(&self) -> Result<String, CommandError> {
        self.inner.save()
    }
    fn handle(&self) -> Box<dyn IpSets> {
        Box::new(self.clone())
    }
}

fn local(i: usize) -> (String, String) {
    let key = format!("/calico/v1/host/h1/workload/k8s/ns.l{i}/endpoint/eth0");
    let value = format!(
        r#"{{"state": "active", "name": "calil{i}", "profile_ids": ["p"], "ipv4_nets": ["10.1.{}.{}/32"], "labels": {{"app": "a{}"}}}}"#,
        i / 250,
        i % 250 + 1,
        i % 20
    );
    (key, value)
}

/// A remote endpoint in the sets `s{k}` for each `k` of `sets`.
fn remote(j: usize, sets: &[usize]) -> (String, String) {
    let key = format!("/calico/v1/host/h2/workload/k8s/ns.r{j}/endpoint/eth0");
    let labels: Vec<String> = sets.iter().map(|k| format!(r#""s{k}": "1""#)).collect();
    let value = format!(
        r#"{{"state": "active", "name": "calir{j}", "profile_ids": ["p"], "ipv4_nets": ["10.{}.{}.{}/32"], "labels": {{{}}}}}"#,
        20 + j / 65_000,
        (j / 250) % 250,
        j % 250 + 1,
        labels.join(", ")
    );
    (key, value)
}

/// Policy `n` (rules reference sets `s{n}`…) with `port` in its first rule.
fn policy(n: usize, port: usize) -> (String, String) {
    let key = format!("/calico/v1/policy/tier/bench/policy/p{n:03}");
    let rules: Vec<String> = (0..RULES_PER_POLICY)
        .map(|r| {
            let set = (n + r * 13) % SETS;
            let port = if r == 0 { port } else { 1000 + r };
            format!(
                r#"{{"protocol": "tcp", "src_selector": "has(s{set})", "dst_ports": [{port}], "action": "allow"}}"#
            )
        })
        .collect();
    let value = format!(
        r#"{{"selector": "app == 'a{}'", "order": {n}, "inbound_rules": [{}], "outbound_rules": [{{"action": "allow"}}]}}"#,
        n % 20,
        rules.join(", ")
    );
    (key, value)
}

fn stats(samples: Vec<f64>) -> (f64, f64, f64) {
    let t = Tails::of(samples).expect("samples");
    (t.median, t.p99, t.max)
}

/// A backend under measurement, and how it counts what it writes.
enum Plane {
    Iptables(Box<Dataplane>, Arc<AtomicUsize>),
    Nftables(Box<NftDataplane>, Arc<Written>),
}

impl Plane {
    fn new(nftables: bool, netns: &Netns) -> Plane {
        if nftables {
            let written = Arc::new(Written::default());
            let nft = Box::new(Nft::new(netns.clone(), calico_table()));
            let plane = NftDataplane::with_kernel(nft, RenderConfig::default())
                .counting_into(written.clone());
            return Plane::Nftables(Box::new(plane), written);
        }
        let bytes = Arc::new(AtomicUsize::new(0));
        let plane = Dataplane::with_kernel(
            Box::new(Counting {
                inner: Iptables::new(netns.clone()),
                bytes: bytes.clone(),
            }),
            Box::new(Counting {
                inner: Ipset::new(netns.clone()),
                bytes: bytes.clone(),
            }),
            RenderConfig::default(),
        );
        Plane::Iptables(Box::new(plane), bytes)
    }

    fn sync(&mut self, state: &DesiredState) {
        match self {
            Plane::Iptables(plane, _) => drop(plane.sync(state).unwrap()),
            Plane::Nftables(plane, _) => drop(plane.sync(state).unwrap()),
        }
    }

    fn apply(&mut self, state: &DesiredState, changes: &Changes) {
        match self {
            Plane::Iptables(plane, _) => plane.apply(state, changes).unwrap(),
            Plane::Nftables(plane, _) => plane.apply(state, changes).unwrap(),
        }
    }

    /// What was written since the last call: bytes, or nf_tables operations.
    fn take_written(&self) -> usize {
        match self {
            Plane::Iptables(_, bytes) => bytes.swap(0, Ordering::Relaxed),
            Plane::Nftables(_, written) => written.nft_ops.swap(0, Ordering::Relaxed) as usize,
        }
    }

    /// A new dataplane of the same backend on the same kernel (a restarted Felix).
    fn restarted(&self, netns: &Netns) -> Plane {
        Plane::new(matches!(self, Plane::Nftables(..)), netns)
    }

    fn unit(&self) -> &'static str {
        match self {
            Plane::Iptables(..) => "bytes",
            Plane::Nftables(..) => "ops",
        }
    }
}

/// The cluster at size.
fn calculator() -> (Calculator, usize) {
    let mut calc = Calculator::new("h1");
    calc.apply(
        "/calico/v1/policy/profile/p/rules",
        Some(
            r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
        ),
    );
    calc.apply(
        "/calico/v1/policy/tier/bench/metadata",
        Some(r#"{"order": 1}"#),
    );
    for i in 0..LOCAL {
        let (key, value) = local(i);
        calc.apply(&key, Some(&value));
    }
    // Remote endpoint j is in 10 sets: s{(j % 20) * 10 + t}; each set gets 1,000 members.
    let remotes = SETS * MEMBERS / 10;
    for j in 0..remotes {
        let sets: Vec<usize> = (0..10).map(|t| (j % 20) * 10 + t).collect();
        let (key, value) = remote(j, &sets);
        calc.apply(&key, Some(&value));
    }
    for n in 0..POLICIES {
        let (key, value) = policy(n, 80);
        calc.apply(&key, Some(&value));
    }
    calc.take_changes();
    (calc, remotes)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let samples = std::env::var("APPLY_BENCH_SAMPLES")
        .ok()
        .map_or(SAMPLES, |v| {
            v.parse().expect("APPLY_BENCH_SAMPLES is a number")
        });
    println!(
        "| {LOCAL} local endpoints, {SETS} sets × {MEMBERS} members, {} rules | backend | median | p99 | max | written (median) |",
        POLICIES * RULES_PER_POLICY
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut floors = Vec::new();
    let only = std::env::var("APPLY_BENCH_BACKENDS").unwrap_or_default();
    for nftables in [false, true] {
        let backend = if nftables { "nftables" } else { "iptables" };
        if !only.is_empty() && !only.split(',').any(|b| b == backend) {
            continue;
        }
        let ns = NetNs::new("calico-applybench");
        let netns = Netns::named(ns.name());
        let mut plane = Plane::new(nftables, &netns);
        let (mut calc, remotes) = calculator();
        let state = calc.state();
        let members: usize = state.ipsets.values().map(|s| s.members.len()).sum();
        eprintln!(
            "{backend} (load average {}): {} endpoints local, {} sets with {members} members, {} policies; full sync ...",
            load_average(),
            state.endpoints.len(),
            state.ipsets.len(),
            state.policies.len()
        );
        let started = Instant::now();
        plane.sync(state);
        let sync_ms = started.elapsed().as_secs_f64() * 1e3;
        let full = plane.take_written();
        let unit = plane.unit();
        println!("| full sync | {backend} | {sync_ms:.1} ms | | | {full} {unit} |");
        if !nftables {
            floors = iptables_floor(&netns, samples);
        }
        let mut restarts = Vec::new();
        for _ in 0..5 {
            let mut fresh = plane.restarted(&netns);
            let started = Instant::now();
            fresh.sync(state);
            restarts.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(
                fresh.take_written(),
                0,
                "a restart in place wrote something"
            );
        }
        let (median, p99, max) = stats(restarts);
        println!(
            "| restart in place: a new dataplane's full sync (5 samples) | {backend} | {median:.1} ms | {p99:.1} ms | {max:.1} ms | 0 {unit} |"
        );
        for change in [
            "one policy edit",
            "one set member added",
            "one local endpoint added",
        ] {
            let (mut times, mut written) = (Vec::new(), Vec::new());
            for s in 0..samples {
                match change {
                    "one policy edit" => {
                        let (key, value) = policy(s % POLICIES, 2000 + s);
                        calc.apply(&key, Some(&value));
                    }
                    "one set member added" => {
                        let (key, value) = remote(remotes + s, &[s % SETS]);
                        calc.apply(&key, Some(&value));
                    }
                    _ => {
                        let (key, value) = local(LOCAL + s);
                        calc.apply(&key, Some(&value));
                    }
                }
                let changes = calc.take_changes();
                plane.take_written();
                let started = Instant::now();
                plane.apply(calc.state(), &changes);
                times.push(started.elapsed().as_secs_f64() * 1e3);
                written.push(plane.take_written());
            }
            written.sort_unstable();
            let (median, p99, max) = stats(times);
            println!(
                "| {change} | {backend} | {median:.2} ms | {p99:.2} ms | {max:.2} ms | {} {unit} ({:.4}× the full sync) |",
                written[written.len() / 2],
                written[written.len() / 2] as f64 / full as f64
            );
        }
    }
    for row in floors {
        println!("{row}");
    }
    println!();
    println!(
        "{samples} samples of each change; load average at the end {}.",
        load_average()
    );
}

/// The iptables tools' fixed cost at this size: a restore that changes nothing still loads the
/// table.
fn iptables_floor(netns: &Netns, samples: usize) -> Vec<String> {
    let tables = Iptables::new(netns.clone());
    let time = |input: &str| -> Vec<f64> {
        (0..samples)
            .map(|_| {
                let started = Instant::now();
                tables.restore(Family::V4, input).unwrap();
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect()
    };
    let probe = "*filter\n:cali-bench-probe - [0:0]\n-A cali-bench-probe -j RETURN\nCOMMIT\n";
    let (m1, p1, x1) = stats(time("*filter\nCOMMIT\n"));
    let (m2, p2, x2) = stats(time(probe));
    // The probe chain goes again: a restart must find the table as the dataplane left it.
    tables
        .restore(
            Family::V4,
            "*filter\n-F cali-bench-probe\n-X cali-bench-probe\nCOMMIT\n",
        )
        .unwrap();
    vec![
        format!(
            "| iptables-restore that changes nothing (the tool's floor) | iptables | {m1:.2} ms | {p1:.2} ms | {x1:.2} ms | 14 bytes |"
        ),
        format!(
            "| iptables-restore of one one-rule chain (the tool at this size) | iptables | {m2:.2} ms | {p2:.2} ms | {x2:.2} ms | {} bytes |",
            probe.len()
        ),
    ]
}
