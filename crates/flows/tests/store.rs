//! The store against the real `calico-flows` and real files (a temp dir removed on drop):
//! records acknowledged are answered again after a SIGKILL under load and a restart; retention
//! by size and by time drops the oldest batches; bad store flags are refused by name.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use calico_testkit::{eventually, free_port};
use common::{Connection, FLOWS, Flows, json_of, now};

/// Record `n`: a key of its own (workload `s<n>`), ended 2 s ago.
fn record(n: u64, now: u64) -> String {
    let end = now - 2;
    format!(
        r#"{{"reporter":"h1","start_time":{},"end_time":{end},"source":{{"kind":"wep","key":"/calico/v1/host/h1/workload/k8s/s{n}/endpoint/eth0","profiles":["p"]}},"destination":{{"kind":"net","net":"10.9.0.1/32"}},"protocol":"tcp","dst_port":443,"direction":"egress","action":"allow","policies":{{"enforced":[{{"kind":"profile","name":"p","rule_index":0,"action":"allow"}}]}},"packets_in":1,"bytes_in":60,"packets_out":1,"bytes_out":60,"connections_started":1}}"#,
        end - 5
    )
}

fn body(first: u64, count: u64) -> Vec<u8> {
    let now = now();
    let records: Vec<String> = (first..first + count).map(|n| record(n, now)).collect();
    format!(r#"{{"records":[{}]}}"#, records.join(",")).into_bytes()
}

/// The workload numbers of the flows a query answers.
fn workloads(flows: &Flows, query: &str) -> BTreeSet<u64> {
    let answer = flows.get(&format!("/api/v1/flows?{query}&limit=10000"));
    let list = answer["flows"].as_array().expect("flows");
    list.iter()
        .map(|f| {
            let key = f["flow"]["source"]["key"].as_str().expect("a key");
            let name = key.split("/k8s/s").nth(1).expect("an s<n> workload");
            name.split('/').next().unwrap().parse().unwrap()
        })
        .collect()
}

/// A query that starts before what memory holds: answered from the store.
const FROM_DISK: &str = "start_gte=1";

#[test]
fn records_acknowledged_are_answered_after_a_sigkill_under_load() {
    let store = tempfile::tempdir().expect("store dir");
    let dir = store.path().to_str().unwrap().to_owned();
    let port = free_port();
    let mut flows = Flows::start_on(port, &["--store-dir", &dir]);

    // Two connections post batches of 50 as fast as they are answered until the kill; each
    // remembers the batches answered 200.
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..2u64)
        .map(|t| {
            let (address, stop) = (flows.address.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut connection = Connection::open(&address).unwrap();
                let mut acknowledged = Vec::new();
                for batch in 0.. {
                    let first = (t * 1_000_000) + batch * 50;
                    match connection.request("POST", "/api/v1/flows", &[], &body(first, 50), false)
                    {
                        Ok((200, answer)) => {
                            assert_eq!(json_of(&answer)["accepted"], 50);
                            acknowledged.extend(first..first + 50);
                        }
                        Ok((status, answer)) => panic!("{status}: {answer:?}"),
                        Err(_) => break, // killed mid-request: not acknowledged
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                acknowledged
            })
        })
        .collect();
    eventually("some batches stored", Duration::from_secs(30), || {
        let stored = flows.metric("calico_flows_store_commits_total");
        (stored >= 20.0)
            .then_some(())
            .ok_or(format!("{stored} commits"))
    });
    flows.stop(); // SIGKILL, with batches in flight
    stop.store(true, Ordering::Relaxed);
    let acknowledged: BTreeSet<u64> = senders
        .into_iter()
        .flat_map(|s| s.join().expect("a sender"))
        .collect();
    assert!(
        acknowledged.len() >= 1000,
        "{} acknowledged",
        acknowledged.len()
    );

    let flows = Flows::start_on(port, &["--store-dir", &dir]);
    let in_memory = workloads(&flows, "");
    let missing: Vec<_> = acknowledged.difference(&in_memory).take(5).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged records lost (e.g. {missing:?}); log:\n{}",
        acknowledged.difference(&in_memory).count(),
        acknowledged.len(),
        flows.log()
    );
    assert_eq!(
        workloads(&flows, FROM_DISK),
        in_memory,
        "the store's answer"
    );
    assert!(
        flows
            .log()
            .contains("the window is filled back from the store")
    );
    assert_eq!(
        flows.metric("calico_flows_store_loaded_records_total") as usize,
        in_memory.len()
    );
    assert!(store.path().join("flows.redb").is_file());
}

#[test]
fn the_size_cap_drops_the_oldest_batches() {
    // Each batch of 20 records is about 9 KiB: 64 KiB keeps the newest 6 or 7.
    let flows = Flows::start(&["--store-max-size", "64KiB"]);
    for batch in 0..30 {
        let (status, answer) = flows.post(&body(batch * 20, 20));
        assert_eq!(status, 200, "{answer}");
    }
    let kept = workloads(&flows, FROM_DISK);
    assert!(!kept.contains(&0), "the oldest batch is still kept");
    assert!(
        (580..600).all(|n| kept.contains(&n)),
        "the newest batch is gone"
    );
    let bytes = flows.metric("calico_flows_store_bytes");
    assert!(bytes <= 65536.0 && bytes > 40000.0, "{bytes} bytes kept");
    let removed = flows.metric("calico_flows_store_removed_records_total{cause=\"max-size\"}");
    assert_eq!(removed as usize, 600 - kept.len(), "{kept:?}");
    // What memory holds is not cut: the cap is the store's.
    assert_eq!(workloads(&flows, "").len(), 600);
}

#[test]
fn the_retention_drops_batches_older_than_it() {
    let flows = Flows::start(&["--store-retention", "2s"]);
    assert_eq!(flows.post(&body(0, 10)).0, 200);
    // The clock has to pass the retention: a small batch each try moves the horizon.
    let mut next = 1000;
    eventually(
        "the first batch past the retention",
        Duration::from_secs(20),
        || {
            assert_eq!(flows.post(&body(next, 1)).0, 200);
            next += 1;
            let kept = workloads(&flows, FROM_DISK);
            (!kept.contains(&0))
                .then_some(())
                .ok_or(format!("{} kept", kept.len()))
        },
    );
    let kept = workloads(&flows, FROM_DISK);
    assert!(
        kept.contains(&(next - 1)),
        "the newest batch is gone: {kept:?}"
    );
    let removed = flows.metric("calico_flows_store_removed_records_total{cause=\"retention\"}");
    assert!(removed >= 10.0, "{removed}");
}

/// Runs the binary with `args`; its exit code and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(FLOWS)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("calico-flows runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_store_flags_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store_dir = dir.path().to_str().unwrap();
    for (args, flag, reason) in [
        (
            vec!["--store-max-size", "2GB"],
            "--store-max-size",
            "unknown unit \"GB\"",
        ),
        (
            vec!["--store-max-size", "0"],
            "--store-max-size 0",
            "must be at least 1",
        ),
        (
            vec!["--store-retention", "1w"],
            "--store-retention",
            "unknown unit \"w\"",
        ),
    ] {
        let (code, stderr) = refused(&[&["--store-dir", store_dir], &args[..]].concat());
        assert_ne!(code, Some(0), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(reason),
            "{args:?}: {stderr}"
        );
    }
    // A store dir that is a file.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (code, stderr) = refused(&["--store-dir", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--store-dir") && stderr.contains("a-file"),
        "{stderr}"
    );
}

#[test]
fn a_second_aggregator_on_the_same_store_is_refused() {
    let store = tempfile::tempdir().expect("store dir");
    let dir = store.path().to_str().unwrap();
    let _first = Flows::start(&["--store-dir", dir]);
    let (code, stderr) = refused(&["--store-dir", dir]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--store-dir") && stderr.contains("flows.redb"),
        "{stderr}"
    );
}
