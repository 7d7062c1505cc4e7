//! Flow-log counts with real packets, on the backend `CALICO_TEST_BACKEND` names: connection
//! attempts to a denied port whose SYNs the kernel retransmits are one connection each at both
//! ends, and both ends count every SYN that was sent (the source's conntrack entry says 1
//! packet however many SYNs it sent); an allowed connection likewise; and an end-of-tier drop
//! names the policy of its tier that applied.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_testkit::eventually;
use common::TestLab;
use common::guarded::{WEB, guarded_web};
use serde_json::Value;

/// Felix sends every 5 s in the lab; the aggregator adds at most a refresh.
const WITHIN: Duration = Duration::from_secs(90);

/// Attempts to the denied port.
const ATTEMPTS: u64 = 2;

/// Each attempt waits 2 s: the kernel sends the SYN and retransmits it after 1 s (the next
/// retransmission would be at 3 s).
const ATTEMPT_MS: u32 = 2_000;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

/// Every record the aggregator holds (`calicoctl flows -o json --limit 1000`).
fn records(lab: &TestLab, url: &str) -> Vec<Value> {
    let ctl = std::path::PathBuf::from(common::BIN).with_file_name("calicoctl");
    let out = Command::new(&ctl)
        .env("CALICO_FLOWS_URL", url)
        .env("ETCD_ENDPOINTS", &lab.state().client_endpoint)
        .args(["flows", "-o", "json", "--limit", "1000"])
        .output()
        .expect("calicoctl runs");
    assert!(
        out.status.success(),
        "calicoctl flows: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("calicoctl flows -o json");
    let flows = answer["flows"].as_array().cloned().unwrap_or_default();
    flows
        .into_iter()
        .map(|result| result["flow"].clone())
        .collect()
}

/// What a host reported of the flows to `WEB:port`, summed over intervals:
/// (connections_started, packets_in, packets_out, records).
type Sums = (u64, u64, u64, usize);

fn sums(all: &[Value], reporter: &str, port: u16) -> Sums {
    let count = |flow: &Value, field: &str| flow[field].as_u64().unwrap_or(0);
    all.iter()
        .filter(|f| f["reporter"] == reporter && f["dst_port"] == port)
        .fold((0, 0, 0, 0), |(c, i, o, n), f| {
            (
                c + count(f, "connections_started"),
                i + count(f, "packets_in"),
                o + count(f, "packets_out"),
                n + 1,
            )
        })
}

/// The newest `end_time` each host reported.
fn reported_until(all: &[Value]) -> HashMap<String, u64> {
    let mut until = HashMap::new();
    for flow in all {
        let (Some(host), Some(end)) = (flow["reporter"].as_str(), flow["end_time"].as_u64()) else {
            continue;
        };
        let at = until.entry(host.to_owned()).or_insert(0);
        *at = end.max(*at);
    }
    until
}

#[test]
fn retransmitted_syns_count_once_per_connection_and_every_syn_at_both_ends() {
    let (lab, url) = guarded_web();

    // Each attempt from its own source port; the kernel retransmits each SYN once.
    for _ in 0..ATTEMPTS {
        let word = lab.probe_single("client", &[common::tcp(WEB, 6379)], ATTEMPT_MS);
        assert_eq!(word, ["blocked"], "no-redis denies 6379");
    }
    // 9000: no rule of guard matches, so its end of tier drops it.
    let word = lab.probe_single("client", &[common::tcp(WEB, 9000)], ATTEMPT_MS);
    assert_eq!(word, ["blocked"], "the end of tier guard drops 9000");
    let sent = unix_now();
    // Allowed (refused by the workload: a SYN and its RST), and what tells that each host
    // has reported an interval that began after every SYN above was sent.
    assert!(lab.tcp("client", WEB, 80), "the profile allows 80");

    let mut all = Vec::new();
    eventually(
        "both hosts reporting an interval after the attempts",
        WITHIN,
        || {
            all = records(&lab, &url);
            let until = reported_until(&all);
            let done = ["host1", "host2"]
                .iter()
                .all(|h| until.get(*h).is_some_and(|end| *end > sent + 1));
            let counted_80 = sums(&all, "host1", 80).3 > 0 && sums(&all, "host2", 80).3 > 0;
            match done && counted_80 {
                true => Ok(()),
                false => Err(format!("reported until {until:?}")),
            }
        },
    );

    let (dst, src) = (sums(&all, "host2", 6379), sums(&all, "host1", 6379));
    let syns = 2 * ATTEMPTS;
    assert_eq!(
        (dst.0, src.0),
        (ATTEMPTS, ATTEMPTS),
        "connections_started at the destination and the source: {all:#?}"
    );
    assert_eq!(
        (dst.1, src.2),
        (syns, syns),
        "packets_in at the destination, packets_out at the source: every SYN: {all:#?}"
    );
    assert_eq!((dst.2, src.1), (0, 0), "nothing came back: {all:#?}");

    let (dst, src) = (sums(&all, "host2", 80), sums(&all, "host1", 80));
    assert_eq!((dst.0, src.0), (1, 1), "one allowed connection: {all:#?}");
    assert_eq!(
        (dst.1, dst.2),
        (src.2, src.1),
        "both ends count the same packets each way: {all:#?}"
    );
    assert!(dst.1 >= 1 && dst.2 >= 1, "the SYN and the RST: {all:#?}");

    let (dst, src) = (sums(&all, "host2", 9000), sums(&all, "host1", 9000));
    assert_eq!((dst.0, src.0), (1, 1), "one attempt at 9000: {all:#?}");
    assert_eq!(
        (dst.1, src.2),
        (2, 2),
        "its two SYNs at both ends: {all:#?}"
    );
    let end = all
        .iter()
        .find(|f| f["reporter"] == "host2" && f["dst_port"] == 9000)
        .and_then(|f| f["policies"]["enforced"].as_array()?.last().cloned())
        .unwrap_or_default();
    assert_eq!(
        (&end["kind"], &end["tier"], &end["name"], &end["action"]),
        (
            &Value::from("end-of-tier"),
            &Value::from("guard"),
            &Value::from("no-redis"),
            &Value::from("deny")
        ),
        "the end of tier guard names the policy that applied: {all:#?}"
    );
}
