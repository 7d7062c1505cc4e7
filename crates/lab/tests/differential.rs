//! The kernel against the reference evaluator: random profiles and tiered policies, random
//! flows (TCP, UDP and ICMP echo, over IPv4 and IPv6) between six lab workloads on two hosts;
//! whether each packet arrived must equal what `calicoctl policy explain` says of the source's
//! outbound and the destination's inbound policy.
//!
//! The run is deterministic. Settings (the defaults are CI's sample):
//!
//! | variable            | default    | meaning                                                  |
//! |---------------------|------------|----------------------------------------------------------|
//! | `CALICO_DIFF_SEED`  | 20261123   | the first seed (a number, or `random`: from the clock)   |
//! | `CALICO_DIFF_SEEDS` | 1          | how many seeds: the first, the first + 1, ...            |
//! | `CALICO_DIFF_FLOWS` | 60         | different flows per scenario (5 scenarios per seed)      |
//!
//! Of each seed's scenarios, the last adds a tier of several policies keyed by protocol and
//! port ([`scenario::Kind::Keyed`]): the nftables backend dispatches runs of such policies by
//! a verdict map, and on that backend (`CALICO_TEST_BACKEND=nftables`) the test fails unless
//! some keyed scenario gave a host such a map.
//!
//! `scripts/differential.sh` runs it at volume. Each seed is replayed on its own with
//! `CALICO_DIFF_SEED=S CALICO_DIFF_SEEDS=1` (and the same `CALICO_DIFF_FLOWS`).
//!
//! What a flow costs: every flow of a scenario is probed at once (one probe process per source
//! workload, all sources together). A dropped packet is only known by its silence, so the first
//! wait is short ([`FIRST_WAIT_MS`]: an allowed SYN, datagram or echo between veths on one
//! machine is answered in about a millisecond), and every flow that was silent is probed again
//! with a longer wait ([`SECOND_WAIT_MS`]) before it counts as dropped (on a loaded 2-core
//! machine, 7 allowed flows in 10,000 needed it); a flow the kernel
//! dropped but explain allows is probed a third time ([`RECHECK_WAIT_MS`]) before it is called
//! a mismatch. Meanwhile `calicoctl policy explain` runs twice per flow, a few at a time, in the
//! fabric namespace next to etcd; that is most of the time (about 20 ms a flow).

mod common;
#[path = "common/scenario.rs"]
mod scenario;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{BIN, Backend, TestLab, arrived};
use scenario::{Endpoint, Fabric, Flow, Rng, WORKLOADS};

const SCENARIOS: u64 = 5;
/// The round whose scenario is [`scenario::Kind::Keyed`] (the others are plain).
const KEYED_ROUND: u64 = 4;
/// The seed CI runs: its scenarios deliver and drop flows in useful proportions, and one of its
/// flows is an IPv6 packet meeting a rule pinned to IPv4 by a negated net (the reference
/// evaluator once let such a rule match: this seed then had 1 mismatch).
const DEFAULT_SEED: u64 = 20_261_124;
const DEFAULT_FLOWS: usize = 60;
const FIRST_WAIT_MS: u32 = 250;
const SECOND_WAIT_MS: u32 = 1500;
const RECHECK_WAIT_MS: u32 = 5000;
/// `calicoctl policy explain` processes run at once.
const EXPLAINERS: usize = 3;

struct Config {
    first_seed: u64,
    seeds: u64,
    flows: usize,
}

fn variable<T: std::str::FromStr>(name: &str, default: T, expected: &str) -> T {
    match std::env::var(name).ok().as_deref() {
        None | Some("") => default,
        Some(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?}: expected {expected}")),
    }
}

impl Config {
    fn from_env() -> Config {
        let first_seed = match std::env::var("CALICO_DIFF_SEED").ok().as_deref() {
            Some("random") => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64,
            _ => variable("CALICO_DIFF_SEED", DEFAULT_SEED, "a number or `random`"),
        };
        let seeds = variable("CALICO_DIFF_SEEDS", 1, "a number of seeds, at least 1");
        assert!(seeds >= 1, "CALICO_DIFF_SEEDS={seeds}: at least 1");
        let most = scenario::distinct_flows();
        let flows = variable("CALICO_DIFF_FLOWS", DEFAULT_FLOWS, "a number of flows");
        assert!(
            (1..=most).contains(&flows),
            "CALICO_DIFF_FLOWS={flows}: between 1 and {most} (the different flows there are)"
        );
        Config {
            first_seed,
            seeds,
            flows,
        }
    }
}

/// What the run saw so far.
#[derive(Default)]
struct Tally {
    flows: usize,
    delivered: usize,
    /// Silent at the first wait, answered at the second.
    late: usize,
    /// Silent twice, answered at the recheck: delivered after all.
    rechecked: usize,
    mismatches: Vec<String>,
    /// Keyed scenarios after which a host's nftables table had a tier's verdict map.
    mapped: usize,
    /// Seconds spent writing scenarios (and waiting for Felix), probing, and explaining.
    writing: f64,
    probing: f64,
    explaining: f64,
}

/// What `calicoctl policy explain` says of both ends of a flow.
struct Expected {
    allowed: bool,
    outbound: String,
    inbound: String,
}

fn calicoctl() -> PathBuf {
    let path = Path::new(BIN).with_file_name("calicoctl");
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p calico-ctl; scripts/test.sh does)",
        path.display()
    );
    path
}

/// `calicoctl policy explain` at one end of the flow: whether it allows, and what it printed.
fn explain(fabric: &Fabric, endpoints: &[Endpoint], flow: &Flow, outbound: bool) -> (bool, String) {
    let (endpoint, direction) = match outbound {
        true => (flow.from, "outbound"),
        false => (flow.to, "inbound"),
    };
    let mut args = vec![
        "policy",
        "explain",
        "--endpoint",
        &endpoints[endpoint].key,
        "--direction",
        direction,
        "--src",
        flow.src(),
        "--dst",
        flow.dst(),
        "--protocol",
        flow.protocol_name(),
    ];
    let port = flow.port.to_string();
    match flow.protocol {
        scenario::Protocol::Icmp if flow.v6 => args.extend(["--icmp-type", "128"]),
        scenario::Protocol::Icmp => args.extend(["--icmp-type", "8"]),
        _ => args.extend(["--dst-port", &port]),
    }
    if flow.protocol == scenario::Protocol::Icmp {
        args.extend(["--icmp-code", "0"]);
    }
    let out = fabric.command(calicoctl()).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let allowed = text.lines().last().unwrap_or("").starts_with("allow");
    (allowed, text)
}

/// Both ends of every flow, [`EXPLAINERS`] processes at a time.
fn explain_all(fabric: &Fabric, endpoints: &[Endpoint], flows: &[Flow]) -> Vec<Expected> {
    let next = AtomicUsize::new(0);
    let mut found: Vec<(usize, Expected)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..EXPLAINERS)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(flow) = flows.get(i) else {
                            return mine;
                        };
                        let (out_ok, outbound) = explain(fabric, endpoints, flow, true);
                        let (in_ok, inbound) = explain(fabric, endpoints, flow, false);
                        let allowed = out_ok && in_ok;
                        mine.push((
                            i,
                            Expected {
                                allowed,
                                outbound,
                                inbound,
                            },
                        ));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, e)| e).collect()
}

/// Probes the flows `which` with one wait, every source workload at once; whether each arrived.
fn probe(lab: &TestLab, flows: &[Flow], which: &[usize], wait_ms: u32) -> Vec<(usize, bool)> {
    std::thread::scope(|scope| {
        let sources: Vec<_> = (0..WORKLOADS.len())
            .map(|source| {
                scope.spawn(move || {
                    let mine: Vec<usize> = which
                        .iter()
                        .copied()
                        .filter(|&i| flows[i].from == source)
                        .collect();
                    if mine.is_empty() {
                        return Vec::new();
                    }
                    let targets: Vec<String> = mine.iter().map(|&i| flows[i].target()).collect();
                    let words = lab.probe_single(WORKLOADS[source].name, &targets, wait_ms);
                    let arrived = words.iter().map(|w| arrived(w));
                    mine.into_iter().zip(arrived).collect::<Vec<_>>()
                })
            })
            .collect();
        sources
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect()
    })
}

/// Whether each flow arrived: probed once with a short wait, the silent ones again with a
/// longer one.
fn kernel(lab: &TestLab, flows: &[Flow], tally: &mut Tally) -> Vec<bool> {
    let all: Vec<usize> = (0..flows.len()).collect();
    let mut arrived = vec![false; flows.len()];
    for (i, ok) in probe(lab, flows, &all, FIRST_WAIT_MS) {
        arrived[i] = ok;
    }
    let silent: Vec<usize> = all.into_iter().filter(|&i| !arrived[i]).collect();
    for (i, ok) in probe(lab, flows, &silent, SECOND_WAIT_MS) {
        arrived[i] = ok;
        tally.late += usize::from(ok);
    }
    arrived
}

/// Forgets the connections of the previous scenario: a flow of this one must be judged by
/// this scenario's policy, not let through as part of an older connection that reused its
/// addresses, ports or ICMP id.
fn forget_connections(lab: &TestLab) {
    for host in ["host1", "host2"] {
        let out = lab.in_host(host, "conntrack", &["-F"]);
        assert!(
            out.status.success(),
            "conntrack -F in {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn describe(flow: &Flow) -> String {
    let (from, to) = (WORKLOADS[flow.from].name, WORKLOADS[flow.to].name);
    format!("{from} -> {to} {}", flow.target())
}

/// The lab, etcd in its fabric, and the workloads' endpoints.
struct Rig {
    lab: TestLab,
    fabric: Fabric,
    endpoints: Vec<Endpoint>,
}

/// One scenario of one seed: write it, probe its flows, compare with explain.
fn run_scenario(rig: &mut Rig, seed: u64, round: u64, config: &Config, tally: &mut Tally) {
    let Rig {
        lab,
        fabric,
        endpoints,
    } = rig;
    let clock = Instant::now();
    let kind = match round {
        KEYED_ROUND => scenario::Kind::Keyed,
        _ => scenario::Kind::Plain,
    };
    let description = scenario::write(fabric, &mut Rng::derive(seed, round), endpoints, kind);
    lab.wait();
    if kind == scenario::Kind::Keyed && lab.backend == Backend::Nftables {
        let mapped = ["host1", "host2"]
            .iter()
            .any(|host| lab.firewall(host).contains("th dport vmap @tier-"));
        tally.mapped += usize::from(mapped);
    }
    forget_connections(lab);
    tally.writing += clock.elapsed().as_secs_f64();
    let flows = scenario::flows(&mut Rng::derive(seed, 1000 + round), config.flows);
    // Probing mostly waits for silence: explain meanwhile.
    let (mut arrived, expected) = std::thread::scope(|scope| {
        let explained = scope.spawn(|| {
            let clock = Instant::now();
            (explain_all(fabric, endpoints, &flows), clock.elapsed())
        });
        let clock = Instant::now();
        let arrived = kernel(lab, &flows, tally);
        tally.probing += clock.elapsed().as_secs_f64();
        let (expected, took) = explained.join().unwrap();
        tally.explaining += took.as_secs_f64();
        (arrived, expected)
    });
    let disagree: Vec<usize> = (0..flows.len())
        .filter(|&i| arrived[i] != expected[i].allowed)
        .collect();
    let recheck: Vec<usize> = disagree.iter().copied().filter(|&i| !arrived[i]).collect();
    for (i, ok) in probe(lab, &flows, &recheck, RECHECK_WAIT_MS) {
        arrived[i] = ok;
        tally.rechecked += usize::from(ok);
    }
    let mut reported = false;
    for i in disagree
        .into_iter()
        .filter(|&i| arrived[i] != expected[i].allowed)
    {
        let (kernel, explain) = match arrived[i] {
            true => ("delivered", "deny"),
            false => ("dropped", "allow"),
        };
        let mut text = format!(
            "MISMATCH seed {seed} scenario {round}: {}: the kernel {kernel} it, explain says {explain}\n\
             --- outbound ---\n{}--- inbound ---\n{}",
            describe(&flows[i]),
            expected[i].outbound,
            expected[i].inbound,
        );
        if !reported {
            text += &format!("--- scenario {round} of seed {seed} ---\n{description}");
            reported = true;
        }
        eprintln!("{text}");
        tally.mismatches.push(text);
    }
    tally.flows += flows.len();
    tally.delivered += arrived.iter().filter(|&&a| a).count();
}

#[test]
fn kernel_verdicts_equal_policy_explain() {
    let config = Config::from_env();
    // A seed from the clock may lie near the top of the range: seeds wrap around.
    let last = config.first_seed.wrapping_add(config.seeds - 1);
    eprintln!(
        "differential test: seeds {}..={last}, {SCENARIOS} scenarios each, {} flows per scenario \
         (CALICO_DIFF_SEED={} CALICO_DIFF_SEEDS={} CALICO_DIFF_FLOWS={} replays it)",
        config.first_seed, config.flows, config.first_seed, config.seeds, config.flows
    );
    let lab = TestLab::up(2, &[]);
    let lab_backend = lab.backend;
    let fabric = Fabric::of(&lab);
    let endpoints = scenario::plug_in(&lab, &fabric);
    let mut rig = Rig {
        lab,
        fabric,
        endpoints,
    };
    let started = Instant::now();
    let mut tally = Tally::default();
    for seed in (0..config.seeds).map(|i| config.first_seed.wrapping_add(i)) {
        let (flows, delivered, mismatches) = (tally.flows, tally.delivered, tally.mismatches.len());
        for round in 0..SCENARIOS {
            run_scenario(&mut rig, seed, round, &config, &mut tally);
        }
        let flows = tally.flows - flows;
        let delivered = tally.delivered - delivered;
        eprintln!(
            "seed {seed}: {flows} flows, {delivered} delivered, {} dropped, {} mismatches ({:.0} s so far)",
            flows - delivered,
            tally.mismatches.len() - mismatches,
            started.elapsed().as_secs_f64()
        );
    }
    let dropped = tally.flows - tally.delivered;
    eprintln!(
        "differential: {} seeds, {} flows: {} delivered, {dropped} dropped, {} mismatches; \
         {} silent at {FIRST_WAIT_MS} ms answered at {SECOND_WAIT_MS} ms, {} silent twice answered \
         at {RECHECK_WAIT_MS} ms; {:.0} s ({:.0} s writing scenarios; {:.0} s probing and, at the \
         same time, {:.0} s explaining)",
        config.seeds,
        tally.flows,
        tally.delivered,
        tally.mismatches.len(),
        tally.late,
        tally.rechecked,
        started.elapsed().as_secs_f64(),
        tally.writing,
        tally.probing,
        tally.explaining
    );
    if lab_backend == Backend::Nftables {
        eprintln!(
            "nftables: {} of {} keyed scenarios left a tier's policies behind a verdict map",
            tally.mapped, config.seeds
        );
    }
    // Each mismatch was printed when found, with both explanations and its scenario.
    let first = tally
        .mismatches
        .first()
        .map_or("", |m| m.lines().next().unwrap_or(""));
    assert!(
        tally.mismatches.is_empty(),
        "{} flows where the kernel and calicoctl policy explain disagree (each printed above); \
         the first: {first}",
        tally.mismatches.len(),
    );
    // On nftables, some keyed scenario must have put a tier's policies behind a verdict map,
    // or the map dispatch went untested.
    assert!(
        lab_backend != Backend::Nftables || tally.mapped > 0,
        "no keyed scenario gave a host a tier verdict map (`th dport vmap @tier-`): pick a seed \
         whose keyed scenario does"
    );
    // Both verdicts must be represented (at least 5% each; the generator aims at about a
    // third delivered), or the comparison says little.
    assert!(
        tally.delivered * 20 >= tally.flows && dropped * 20 >= tally.flows,
        "{} delivered, {dropped} dropped: too one-sided to compare",
        tally.delivered
    );
}
