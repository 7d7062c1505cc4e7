//! Ingest as fast as the aggregator answers: four kept-alive connections post 500-record
//! batches back to back, first to an aggregator in memory only (`--memory-only`, the baseline),
//! then to one with its store (the default), in the same run, so a machine busy with other work
//! weighs on both alike. Every record must be answered accepted. Prints records/s, the POST's
//! latency (median, p99, max) and the load average, for docs/benchmarks.md; run it release:
//!
//! ```sh
//! cargo test --release -p calico-flows --test ingest_rate -- --nocapture
//! ```
//!
//! `INGEST_BATCHES` sets the batches per connection (default 60: 120,000 records a case).

mod common;

use std::time::Instant;

use calico_testkit::Tails;
use common::{Connection, Flows, json_of, now};

const CONNECTIONS: usize = 4;
const BATCH: usize = 500;

/// Record `n`: what Felix sends for a workload talking to a net, 20 keys a workload so that
/// a tenth of the records merge into a flow of the same bucket.
fn record(n: usize, now: u64) -> String {
    let end = now - 2;
    format!(
        r#"{{"reporter":"node-{}","start_time":{},"end_time":{end},"source":{{"kind":"wep","key":"/calico/v1/host/node-{}/workload/k8s/shop.frontend-{}/endpoint/eth0","profiles":["kns.shop"],"labels":{{"app":"frontend"}}}},"destination":{{"kind":"net","net":"10.{}.{}.0/24"}},"protocol":"tcp","dst_port":443,"direction":"egress","action":"allow","policies":{{"enforced":[{{"kind":"policy","tier":"default","name":"default.allow-web","rule_index":0,"action":"allow"}}]}},"packets_in":4,"bytes_in":300,"packets_out":5,"bytes_out":900,"connections_started":1}}"#,
        n % 7,
        end - 10,
        n % 7,
        n / 20 % 50_000,
        (n >> 8) & 255,
        n & 255,
    )
}

fn body(first: usize, now: u64) -> Vec<u8> {
    let records: Vec<String> = (first..first + BATCH).map(|n| record(n, now)).collect();
    format!(r#"{{"records":[{}]}}"#, records.join(",")).into_bytes()
}

fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One case: the rate, the POST latencies, the load average before and after.
fn run(name: &str, args: &[&str], batches: usize) -> (f64, Tails, String) {
    let flows = Flows::start(args);
    let now = now();
    let bodies: Vec<Vec<Vec<u8>>> = (0..CONNECTIONS)
        .map(|c| {
            (0..batches)
                .map(|b| body((c * batches + b) * BATCH, now))
                .collect()
        })
        .collect();
    let before = load_average();
    let started = Instant::now();
    let threads: Vec<_> = bodies
        .into_iter()
        .map(|bodies| {
            let address = flows.address.clone();
            std::thread::spawn(move || {
                let mut connection = Connection::open(&address).unwrap();
                let mut latencies = Vec::new();
                for body in bodies {
                    let sent = Instant::now();
                    let (status, answer) = connection
                        .request("POST", "/api/v1/flows", &[], &body, false)
                        .expect("the aggregator answers");
                    latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                    let reply = json_of(&answer);
                    assert_eq!(
                        (status, reply["accepted"].as_u64()),
                        (200, Some(500)),
                        "{reply}"
                    );
                }
                latencies
            })
        })
        .collect();
    let latencies: Vec<f64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a sender"))
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    let records = (CONNECTIONS * batches * BATCH) as f64;
    let stats = flows.get("/api/v1/stats");
    assert_eq!(stats["accepted"].as_f64(), Some(records), "{stats}");
    let tails = Tails::of(latencies).unwrap();
    let after = load_average();
    let rate = records / elapsed;
    let commits = flows.metric("calico_flows_store_commits_total");
    eprintln!(
        "{name}: {records} records in {elapsed:.2} s = {rate:.0} records/s; POST of {BATCH}: \
         median {:.1} ms, p99 {:.1} ms, max {:.1} ms; {commits} store commits; load average \
         {before} → {after}",
        tails.median, tails.p99, tails.max
    );
    (rate, tails, after)
}

#[test]
fn ingest_rate_in_memory_and_on_disk() {
    let batches = std::env::var("INGEST_BATCHES")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(60);
    let (memory, ..) = run("memory only", &["--memory-only"], batches);
    let (disk, tails, _) = run("with the store", &[], batches);
    eprintln!(
        "on disk ÷ memory only: {:.2}×; the store's POST p99 {:.1} ms",
        disk / memory,
        tails.p99
    );
}
