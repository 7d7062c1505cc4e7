//! A flood against the real `calico-flows`: 10,000 new flows per second for 3 seconds from two
//! connections, after the window was filled to its cap. Every record is answered and counted
//! (accepted, refused or dropped, here and in the aggregator's counters), the window stays at
//! its cap by evicting the oldest, and the aggregator's memory (RSS from /proc) stays flat.
//! Prints the figures docs/observability.md quotes (run with `--nocapture`).

mod common;

use std::time::{Duration, Instant};

use calico_testkit::Tails;
use common::{Connection, Flows, json_of, now, rss_kib};

const CAP: usize = 20_000;
const THREADS: usize = 2;
const BATCH: usize = 500;
/// Each thread sends a batch every 100 ms: 2 × 500 × 10 = 10,000 records per second.
const PERIOD: Duration = Duration::from_millis(100);
const SECONDS: usize = 3;

/// Record `n`: a new key each (workload `f<n>` to its own address); every 100th is malformed
/// (no destination port) and every 200th (others) ended before the retention.
fn record(n: usize, now: u64) -> String {
    let end = if n % 200 == 7 { now - 5000 } else { now - 2 };
    let port = if n % 100 == 3 {
        String::new()
    } else {
        "\"dst_port\":443,".to_owned()
    };
    format!(
        r#"{{"reporter":"h1","start_time":{},"end_time":{end},"source":{{"kind":"wep","key":"/calico/v1/host/h1/workload/k8s/f{n}/endpoint/eth0","profiles":["load"]}},"destination":{{"kind":"net","net":"10.{}.{}.{}"}},"protocol":"tcp",{port}"direction":"egress","action":"allow","policies":{{"enforced":[{{"kind":"profile","name":"load","rule_index":0,"action":"allow"}}]}},"packets_in":2,"bytes_in":120,"packets_out":3,"bytes_out":240,"connections_started":1}}"#,
        end - 10,
        (n >> 16) & 255,
        (n >> 8) & 255,
        n & 255,
    )
}

fn body(first: usize, count: usize, now: u64) -> Vec<u8> {
    let records: Vec<String> = (first..first + count).map(|n| record(n, now)).collect();
    format!(r#"{{"records":[{}]}}"#, records.join(",")).into_bytes()
}

/// What the answers to some batches added up to.
#[derive(Debug, Default, Clone, Copy)]
struct Counted {
    sent: u64,
    accepted: u64,
    refused: u64,
    dropped: u64,
}

impl Counted {
    fn add(&mut self, other: Counted) {
        self.sent += other.sent;
        self.accepted += other.accepted;
        self.refused += other.refused;
        self.dropped += other.dropped;
    }
}

fn post(connection: &mut Connection, body: &[u8], records: usize) -> Counted {
    let (status, answer) = connection
        .request("POST", "/api/v1/flows", &[], body, false)
        .expect("the aggregator answers");
    let reply = json_of(&answer);
    assert_eq!(status, 200, "{reply}");
    let counted = Counted {
        sent: records as u64,
        accepted: reply["accepted"].as_u64().unwrap(),
        refused: reply["refused"].as_array().unwrap().len() as u64,
        dropped: reply["dropped"].as_array().unwrap().len() as u64,
    };
    assert_eq!(
        counted.accepted + counted.refused + counted.dropped,
        counted.sent,
        "{reply}"
    );
    counted
}

/// One flooding connection: `batches` paced batches; the latency of each POST.
fn flood(address: String, bodies: Vec<Vec<u8>>) -> (Counted, Vec<f64>) {
    let mut connection = Connection::open(&address).unwrap();
    let (mut counted, mut latencies) = (Counted::default(), Vec::new());
    let start = Instant::now();
    for (i, body) in bodies.iter().enumerate() {
        if let Some(wait) = (start + PERIOD * i as u32).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        counted.add(post(&mut connection, body, BATCH));
        latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
    }
    (counted, latencies)
}

#[test]
fn a_flood_is_counted_record_by_record_and_memory_stays_flat() {
    let cap = CAP.to_string();
    let flows = Flows::start(&["--max-flows", &cap, "--max-memory", "1GiB"]);
    let rss_start = rss_kib(flows.pid());

    // Fill the window to its cap.
    let now = now();
    let mut warm = Connection::open(&flows.address).unwrap();
    let mut total = Counted::default();
    for first in (0..CAP).step_by(1000) {
        total.add(post(&mut warm, &body(first, 1000, now), 1000));
    }
    let rss_full = rss_kib(flows.pid());

    // The flood: bodies made beforehand, so the pace is the aggregator's.
    let per_thread = SECONDS * 10;
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let bodies: Vec<Vec<u8>> = (0..per_thread)
            .map(|i| body(CAP + (t * per_thread + i) * BATCH, BATCH, now))
            .collect();
        let address = flows.address.clone();
        threads.push(std::thread::spawn(move || flood(address, bodies)));
    }
    let started = Instant::now();
    let mut rss_samples = Vec::new();
    while threads.iter().any(|t| !t.is_finished()) {
        rss_samples.push(rss_kib(flows.pid()));
        std::thread::sleep(Duration::from_millis(250));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut flooded = Counted::default();
    let mut latencies = Vec::new();
    for thread in threads {
        let (counted, times) = thread.join().expect("a flooding thread");
        flooded.add(counted);
        latencies.extend(times);
    }
    total.add(flooded);
    let rss_end = rss_kib(flows.pid());
    let stats = flows.get("/api/v1/stats");

    let tails = Tails::of(latencies).unwrap();
    let rate = flooded.accepted as f64 / elapsed;
    eprintln!(
        "flood: {} records in {elapsed:.2} s from {THREADS} connections: {rate:.0} accepted/s \
         ({} accepted, {} refused, {} dropped); POST of {BATCH} records: median {:.1} ms, \
         p99 {:.1} ms, max {:.1} ms",
        flooded.sent,
        flooded.accepted,
        flooded.refused,
        flooded.dropped,
        tails.median,
        tails.p99,
        tails.max
    );
    eprintln!(
        "memory (RSS): {rss_start} KiB at start, {rss_full} KiB with the window full \
         ({CAP} flows), {rss_end} KiB after {} more; during the flood {:?} KiB",
        flooded.accepted, rss_samples
    );
    // Flat: the flood added more than the whole window again, but not its memory. The margin
    // covers allocator slack and the request buffers of the two connections.
    let margin = (rss_full - rss_start) / 2 + 8 * 1024;
    assert!(
        rss_end <= rss_full + margin,
        "RSS grew from {rss_full} KiB to {rss_end} KiB (margin {margin} KiB)"
    );

    // Every record answered and counted once, the same by the aggregator.
    let field = |name: &str| stats[name].as_u64().unwrap();
    assert_eq!(flooded.sent as usize, THREADS * per_thread * BATCH);
    assert_eq!(field("received"), total.sent, "{stats}");
    assert_eq!(
        (field("accepted"), field("refused"), field("dropped")),
        (total.accepted, total.refused, total.dropped),
        "{stats}"
    );
    assert!(total.refused > 0 && total.dropped > 0, "{total:?}");
    // The window at its cap; every new key beyond it pushed the oldest out.
    assert_eq!(field("flows") as usize, CAP, "{stats}");
    assert_eq!(field("evicted"), total.accepted - CAP as u64, "{stats}");
    assert_eq!(
        flows.metric("calico_flows_flows_evicted_total{cap=\"max-flows\"}") as u64,
        field("evicted")
    );
}
