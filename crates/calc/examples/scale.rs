//! The scale scenario of docs/benchmarks.md, end to end, printing wall-clock figures and peak
//! memory: `cargo run --release -p calico-calc --example scale [-- ENDPOINTS]`.
//!
//! A cluster of ENDPOINTS endpoints (default 100,000) on ENDPOINTS/100 hosts (so 100 on the
//! measured host), 1,000 profiles, 100 namespace profiles and 2,001 policies in 5 tiers; then a
//! stream of endpoint label changes, of namespace (parent profile) relabels and of policy edits.
//! Each stream prints its rate and the p50, p99 and max of one update, and the label changes
//! their ratio to two baselines measured in the same run: parsing and validating the same key
//! and value, which every update needs anyway; and applying them to the cluster model alone
//! (after the peak memory is taken, so it does not count).

use std::time::{Duration, Instant};

use calico_calc::{Calculator, Cluster};
use calico_model::{Key, parse_value};

#[path = "../benches/scenario/mod.rs"]
mod scenario;

use scenario::Scenario;

const USAGE: &str = "usage: scale [ENDPOINTS]   (default 100000)";

/// How many endpoint label changes are measured.
const RELABELS: usize = 20_000;

fn main() {
    let endpoints = match std::env::args().nth(1).as_deref() {
        None => 100_000,
        Some("-h" | "--help") => return println!("{USAGE}"),
        Some(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("ENDPOINTS {n:?}: not a number")),
    };
    let scenario = Scenario::new(endpoints);
    // Updates are generated as they are applied, so peak memory is the calculator's.
    let start = Instant::now();
    let mut calc = Calculator::new("host-0");
    let mut count = 0;
    scenario.initial_updates(|key, value| {
        calc.apply(key, Some(value));
        count += 1;
    });
    let initial = start.elapsed();
    let state = calc.state();
    println!(
        "initial state: {} updates in {:.2?} ({} local endpoints, {} policies, {} profiles, {} IP sets active)",
        count,
        initial,
        state.endpoints.len(),
        state.policies.len(),
        state.profiles.len(),
        state.ipsets.len()
    );
    calc.take_changes();

    let relabels = |n| scenario.label_change(n);
    let parse = Stream::run(RELABELS, relabels, |key, value| {
        let parsed = Key::parse(key).expect("a valid key");
        parse_value(&parsed, value).expect("a valid value");
    });
    parse.print("parse endpoint (baseline)", None);
    let changes = Stream::run(RELABELS, relabels, |key, value| {
        calc.apply(key, Some(value));
    });
    changes.print("endpoint label changes", Some(&parse));
    calc.take_changes();

    let namespaces = |n| scenario.namespace_relabel(n);
    let parents = Stream::run(50, namespaces, |key, value| {
        calc.apply(key, Some(value));
    });
    parents.print(
        &format!(
            "namespace relabels ({} endpoints each)",
            scenario.namespace_size()
        ),
        None,
    );
    calc.take_changes();

    let edits = Stream::run(
        2_000,
        |n| scenario.policy_edit(n),
        |key, value| {
            calc.apply(key, Some(value));
        },
    );
    edits.print("policy edits", None);
    println!("peak memory (VmHWM): {}", peak_memory());

    // The second baseline: the same label changes applied to the cluster model alone (parse,
    // validate, store), which the calculator keeps and cannot be cheaper than.
    drop(calc);
    let start = Instant::now();
    let mut cluster = Cluster::default();
    scenario.initial_updates(|key, value| {
        cluster.apply(key, Some(value));
    });
    println!(
        "initial state, cluster model alone (baseline): {:.2?}",
        start.elapsed()
    );
    let store = Stream::run(RELABELS, relabels, |key, value| {
        cluster.apply(key, Some(value));
    });
    store.print("cluster model alone (baseline)", None);
    changes.print("endpoint label changes", Some(&store));
}

/// The time of each update of a stream.
struct Stream {
    times: Vec<Duration>,
}

impl Stream {
    /// Applies `count` updates, each generated just before it is timed (so that the updates
    /// take no memory beside the calculator's).
    fn run(
        count: usize,
        update: impl Fn(usize) -> (String, String),
        mut apply: impl FnMut(&str, &str),
    ) -> Stream {
        let times = (0..count)
            .map(|n| {
                let (key, value) = update(n);
                let start = Instant::now();
                apply(&key, &value);
                start.elapsed()
            })
            .collect();
        Stream { times }
    }

    fn total(&self) -> Duration {
        self.times.iter().sum()
    }

    fn percentile(&self, p: usize) -> Duration {
        let mut sorted = self.times.clone();
        sorted.sort_unstable();
        sorted[(sorted.len() - 1) * p / 100]
    }

    fn print(&self, name: &str, baseline: Option<&Stream>) {
        let total = self.total();
        let ratio = baseline
            .map(|b| {
                let per = |s: &Stream| s.percentile(50).as_secs_f64();
                format!(", p50 {:.1}x the baseline's", per(self) / per(b))
            })
            .unwrap_or_default();
        println!(
            "{name}: {} in {:.2?} = {:.0}/s; p50 {:.2?}, p99 {:.2?}, max {:.2?}{ratio}",
            self.times.len(),
            total,
            self.times.len() as f64 / total.as_secs_f64(),
            self.percentile(50),
            self.percentile(99),
            self.percentile(100),
        );
    }
}

fn peak_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
