//! The memory cap in resident terms: the real `calico-flows` with `--max-memory 32MiB`, fed
//! far more distinct flows (each with labels on both sides and a tiered trail, as Felix sends
//! them) than the cap holds, through its HTTP API from two connections. Its resident memory
//! (VmRSS, while fed and after a query) must stay within 1.5 × the cap above a base: the same
//! load against a window of 1 MiB, which costs the code, the batches being read and checked
//! and the query. Prints the figures docs/observability.md quotes (run with `--nocapture`).

mod common;
mod load;

use common::{Connection, Flows, json_of, now, rss_kib};
use load::{BATCH, body};

const CAP_MIB: u64 = 32;
/// Batches offered in all: 120,000 distinct flows, several windows' worth.
const BATCHES: usize = 120;
const THREADS: usize = 2;

/// Posts batches `first..` every `THREADS`th; the highest RSS seen after each.
fn feed(flows_address: String, pid: u32, thread: usize, now: u64) -> u64 {
    let mut connection = Connection::open(&flows_address).unwrap();
    let mut peak = 0;
    for batch in (thread..BATCHES).step_by(THREADS) {
        let (status, answer) = connection
            .request(
                "POST",
                "/api/v1/flows",
                &[],
                &body(batch * BATCH, now),
                false,
            )
            .expect("the aggregator answers");
        let reply = json_of(&answer);
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["accepted"], BATCH, "{reply}");
        peak = peak.max(rss_kib(pid));
    }
    peak
}

/// What one aggregator showed under the load.
#[derive(Debug)]
struct Seen {
    /// RSS in KiB: the highest while fed, after a query and the hints.
    peak: u64,
    end: u64,
    stats: serde_json::Value,
}

/// A `calico-flows` with `--max-memory MIB`, fed the whole load from two connections, then
/// asked a query over the whole window (its newest 1000) and the hints, as the console asks.
fn run(mib: u64) -> Seen {
    let cap = format!("{mib}MiB");
    let flows = Flows::start(&["--max-memory", &cap, "--max-flows", "10000000"]);
    let pid = flows.pid();
    let start = rss_kib(pid);
    let now = now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let address = flows.address.clone();
            std::thread::spawn(move || feed(address, pid, t, now))
        })
        .collect();
    let peak = threads
        .into_iter()
        .map(|t| t.join().expect("a feeding thread"))
        .max()
        .unwrap();
    let list = flows.get("/api/v1/flows?limit=1000");
    let held = list["total"].as_u64().unwrap().min(1000);
    assert_eq!(
        list["flows"].as_array().unwrap().len() as u64,
        held,
        "{}",
        list["total"]
    );
    flows.get("/api/v1/hints");
    let end = rss_kib(pid);
    let stats = flows.get("/api/v1/stats");
    let seen = Seen { peak, end, stats };
    let field = |name: &str| seen.stats[name].as_u64().unwrap();
    eprintln!(
        "memory: cap {mib} MiB; {} flows held, estimated {:.2} MiB; RSS {start} KiB at start, \
         peak {peak} KiB while fed {} records, {end} KiB after a query and hints; {} evicted",
        field("flows"),
        field("memory_bytes") as f64 / (1 << 20) as f64,
        BATCHES * BATCH,
        field("evicted"),
    );
    assert!(field("evicted") > 0, "the cap was reached: {}", seen.stats);
    assert!(field("memory_bytes") <= mib << 20, "{}", seen.stats);
    seen
}

#[test]
fn resident_memory_stays_near_the_memory_cap() {
    // The same load against a window of 1 MiB: what the process costs besides its window
    // (its code, the batches being read and checked, the query): the base.
    let base = run(1);
    let full = run(CAP_MIB);
    let allowed = (CAP_MIB - 1) * 1024 * 3 / 2;
    for (when, rss, without) in [
        ("while fed", full.peak, base.peak),
        ("after a query and hints", full.end, base.end),
    ] {
        assert!(
            rss <= without + allowed,
            "RSS {when}: {rss} KiB with a {CAP_MIB} MiB window, {without} KiB with 1 MiB: \
             the window costs more than 1.5 × the {} MiB between them; {}",
            CAP_MIB - 1,
            full.stats
        );
    }
}
