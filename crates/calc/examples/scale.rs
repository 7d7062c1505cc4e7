//! The scale scenario of docs/benchmarks.md, end to end, printing wall-clock figures and peak
//! memory: `cargo run --release -p calico-calc --example scale [-- ENDPOINTS]`.
//!
//! A cluster of ENDPOINTS endpoints (default 100,000) on ENDPOINTS/100 hosts (so 100 on the
//! measured host), 1,000 profiles and 2,000 policies in 5 tiers; then a stream of endpoint label
//! changes and of policy edits.

use std::time::Instant;

use calico_calc::Calculator;

#[path = "../benches/scenario/mod.rs"]
mod scenario;

use scenario::Scenario;

fn main() {
    let endpoints: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("ENDPOINTS is a number"))
        .unwrap_or(100_000);
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

    let relabels = scenario.label_changes(20_000);
    let start = Instant::now();
    for (key, value) in &relabels {
        calc.apply(key, Some(value));
    }
    let elapsed = start.elapsed();
    println!(
        "endpoint label changes: {} in {:.2?} = {:.0}/s",
        relabels.len(),
        elapsed,
        relabels.len() as f64 / elapsed.as_secs_f64()
    );

    let edits = scenario.policy_edits(2_000);
    let start = Instant::now();
    for (key, value) in &edits {
        calc.apply(key, Some(value));
    }
    let elapsed = start.elapsed();
    println!(
        "policy edits: {} in {:.2?} = {:.0}/s",
        edits.len(),
        elapsed,
        edits.len() as f64 / elapsed.as_secs_f64()
    );
    println!("peak memory (VmHWM): {}", peak_memory());
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
