use calico_flowlog::FlowFilter;
use calico_model::flow::{
    FlowDirection, FlowEndpoint, FlowRecord, PolicyHit, PolicyTrail, Verdict,
};
use calico_model::key::WorkloadEndpointId;
use calico_model::rule::{Action, Protocol};

use super::*;

const T0: u64 = 1_767_225_600; // a bucket boundary for 15 s buckets

fn limits(max_flows: usize) -> Limits {
    Limits {
        max_flows,
        max_memory: usize::MAX,
        retention: 0,
        bucket: 15,
    }
}

/// An egress flow from workload `w` on h1 to `dst`:80, allowed or denied by policy `p`.
fn flow(w: &str, dst: &str, verdict: Verdict, start: u64) -> FlowRecord {
    let id = WorkloadEndpointId {
        hostname: "h1".into(),
        orchestrator: "k8s".into(),
        workload: w.into(),
        endpoint: "eth0".into(),
    };
    let action = match verdict {
        Verdict::Allow => Action::Allow,
        Verdict::Deny => Action::Deny,
    };
    FlowRecord {
        reporter: "h1".into(),
        start_time: start,
        end_time: start + 15,
        source: FlowEndpoint::workload(&id, vec!["web".into()], Default::default()),
        destination: FlowEndpoint::net(dst.parse().unwrap()),
        protocol: Protocol::Tcp,
        dst_port: Some(80),
        direction: FlowDirection::Egress,
        action: verdict,
        policies: PolicyTrail {
            enforced: vec![PolicyHit::policy("default", "p", 0, action)],
            pending: vec![],
        },
        packets_in: 1,
        bytes_in: 100,
        packets_out: 2,
        bytes_out: 200,
        connections_started: 1,
    }
}

fn all(window: &Window, now: u64) -> FlowList {
    window.query(&FlowFilter::default(), now, usize::MAX)
}

/// The window's books agree with its entries.
fn assert_consistent(window: &Window) {
    let sum: usize = window.entries.values().map(|e| e.footprint).sum();
    assert_eq!(window.memory, sum, "memory accounting");
    let indexed: usize = window.index.values().map(Vec::len).sum();
    assert_eq!(indexed, window.entries.len(), "index size");
    for ((bucket, seq), entry) in &window.entries {
        assert!(window.index[&(*bucket, entry.hash)].contains(seq));
        assert_eq!(entry.footprint, super::stored(&entry.flow, &entry.labels));
    }
}

#[test]
fn records_of_one_key_in_one_bucket_are_summed() {
    let mut window = Window::new(limits(10));
    assert_eq!(
        window.insert(flow("a", "10.0.0.1/32", Verdict::Allow, T0), T0),
        Outcome::Added
    );
    let mut later = flow("a", "10.0.0.1/32", Verdict::Allow, T0 + 5);
    later.source.labels.insert("version".into(), "2".into());
    assert_eq!(window.insert(later, T0), Outcome::Merged);
    assert_eq!(window.len(), 1);
    let list = all(&window, T0);
    let result = &list.flows[0];
    assert_eq!(
        (result.records, result.flow.start_time, result.flow.end_time),
        (2, T0, T0 + 20)
    );
    assert_eq!((result.flow.packets_out, result.flow.bytes_in), (4, 200));
    assert_eq!(
        result.flow.source.labels["version"], "2",
        "labels of the later record"
    );
    assert_consistent(&window);
}

#[test]
fn buckets_are_kept_apart_and_summed_by_queries() {
    let mut window = Window::new(limits(10));
    for start in [T0, T0 + 15, T0 + 30] {
        window.insert(flow("a", "10.0.0.1/32", Verdict::Allow, start), T0);
    }
    assert_eq!(window.len(), 3, "one entry per bucket");
    let list = all(&window, T0);
    assert_eq!(list.total, 1);
    assert_eq!(
        (
            list.flows[0].records,
            list.flows[0].flow.connections_started
        ),
        (3, 3)
    );
    let recent = FlowFilter {
        start_gte: (T0 + 15) as i64,
        ..FlowFilter::default()
    };
    assert_eq!(window.query(&recent, T0, 10).flows[0].records, 2);
}

#[test]
fn different_keys_stay_different_flows() {
    let mut window = Window::new(limits(10));
    let base = flow("a", "10.0.0.1/32", Verdict::Allow, T0);
    let mut other_port = base.clone();
    other_port.dst_port = Some(81);
    let mut staged = base.clone();
    staged.policies.pending = vec![PolicyHit::staged("default", "s", 0, Action::Deny)];
    for record in [
        base.clone(),
        other_port,
        staged,
        flow("a", "10.0.0.1/32", Verdict::Deny, T0),
    ] {
        assert_eq!(window.insert(record, T0), Outcome::Added);
    }
    assert_eq!(all(&window, T0).total, 4);
    let ids: std::collections::BTreeSet<String> =
        all(&window, T0).flows.into_iter().map(|f| f.id).collect();
    assert_eq!(ids.len(), 4, "one id per key");
}

#[test]
fn two_addresses_of_one_workload_are_two_flows() {
    let mut window = Window::new(limits(10));
    let mut first = flow("a", "10.0.0.1/32", Verdict::Allow, T0);
    first.source = first.source.with_address("10.65.0.10".parse().unwrap());
    let mut second = first.clone();
    second.source.address = Some("10.65.0.11".parse().unwrap());
    let outcomes: Vec<Outcome> = [first.clone(), second, first]
        .into_iter()
        .map(|record| window.insert(record, T0))
        .collect();
    assert_eq!(outcomes, [Outcome::Added, Outcome::Added, Outcome::Merged]);
    let list = all(&window, T0);
    assert_eq!(list.total, 2);
    let mut records: Vec<u64> = list.flows.iter().map(|f| f.records).collect();
    records.sort();
    assert_eq!(records, [1, 2]);
}

#[test]
fn the_oldest_leave_first_when_over_max_flows() {
    let mut window = Window::new(limits(3));
    for i in 0..5u64 {
        let record = flow(&format!("w{i}"), "10.0.0.1/32", Verdict::Allow, T0 + 15 * i);
        assert_eq!(window.insert(record, T0), Outcome::Added);
    }
    assert_eq!(window.len(), 3);
    assert_eq!(window.removed().over_max_flows, 2);
    let kept: Vec<u64> = window.entries.values().map(|e| e.flow.start_time).collect();
    assert_eq!(kept, [T0 + 30, T0 + 45, T0 + 60]);
    // A record older than everything in the full window is dropped, not swapped in.
    let late = flow("late", "10.0.0.1/32", Verdict::Allow, T0);
    assert_eq!(
        window.insert(late, T0),
        Outcome::Dropped(DropReason::OlderThanWindow)
    );
    // One of a kept key still merges: it costs no room.
    let known = flow("w4", "10.0.0.1/32", Verdict::Allow, T0 + 60);
    assert_eq!(window.insert(known, T0), Outcome::Merged);
    assert_consistent(&window);
}

#[test]
fn memory_stays_under_its_cap() {
    let one = footprint(&flow("w0", "10.0.0.1/32", Verdict::Allow, T0));
    let mut window = Window::new(Limits {
        max_memory: one * 5 + one / 2,
        ..limits(usize::MAX)
    });
    for i in 0..100u64 {
        let mut record = flow(&format!("w{i}"), "10.0.0.1/32", Verdict::Allow, T0 + i);
        if i % 7 == 0 {
            record.source.labels.insert("big".into(), "x".repeat(200));
        }
        window.insert(record, T0);
        assert!(window.memory() <= window.limits().max_memory, "at {i}");
        assert_consistent(&window);
    }
    assert!(
        window.removed().over_max_memory >= 90,
        "{:?}",
        window.removed()
    );
}

#[test]
fn retention_drops_and_expires() {
    let mut window = Window::new(Limits {
        retention: 60,
        ..limits(100)
    });
    let now = T0 + 1000;
    let stale = flow("old", "10.0.0.1/32", Verdict::Allow, now - 100);
    assert_eq!(
        window.insert(stale, now),
        Outcome::Dropped(DropReason::Expired)
    );
    window.insert(flow("a", "10.0.0.1/32", Verdict::Allow, now - 50), now);
    window.insert(flow("b", "10.0.0.1/32", Verdict::Allow, now - 10), now);
    assert_eq!(window.expire(now), 0);
    assert_eq!(
        window.expire(now + 30),
        1,
        "a ended at now-35, past 60 s at now+30"
    );
    assert_eq!(window.len(), 1);
    assert_eq!(window.removed().expired, 1);
    assert_consistent(&window);
}

#[test]
fn queries_filter_sort_and_limit() {
    let mut window = Window::new(limits(100));
    window.insert(flow("a", "10.0.0.1/32", Verdict::Allow, T0), T0);
    window.insert(flow("b", "10.0.0.2/32", Verdict::Deny, T0 + 15), T0);
    window.insert(flow("c", "10.0.0.3/32", Verdict::Deny, T0 + 30), T0);
    let denied = FlowFilter::from_query("action=deny").unwrap();
    let list = window.query(&denied, T0, 1);
    assert_eq!(list.total, 2);
    assert_eq!(list.flows.len(), 1);
    assert_eq!(
        list.flows[0].flow.destination.name(),
        "10.0.0.3/32",
        "newest first"
    );
    let by_endpoint = FlowFilter::from_query("endpoint=ns-none&endpoint=10.0.0.2").unwrap();
    assert_eq!(window.query(&by_endpoint, T0, 10).total, 1);
}

#[test]
fn hints_leave_out_their_own_parameter() {
    let mut window = Window::new(limits(100));
    window.insert(flow("a", "10.0.0.1/32", Verdict::Allow, T0), T0);
    window.insert(flow("b", "10.0.0.2/32", Verdict::Deny, T0), T0);
    let hints = window.hints(&FlowFilter::from_query("action=deny").unwrap(), T0);
    assert_eq!(
        hints.actions,
        ["allow", "deny"],
        "the alternatives stay visible"
    );
    assert_eq!(hints.endpoints.len(), 2, "{:?}", hints.endpoints);
    assert!(hints.endpoints.contains(&"10.0.0.2/32".to_owned()));
    assert_eq!(hints.policies, ["p"]);
    assert_eq!(hints.tiers, ["default"]);
    assert_eq!(hints.profiles, ["web"]);
    assert_eq!(hints.reporters, ["h1"]);
}

#[test]
fn books_balance_under_a_mixed_load() {
    // A deterministic mix of new keys, repeats, late and expired records against every cap.
    let mut window = Window::new(Limits {
        max_flows: 50,
        max_memory: 40 * footprint(&flow("w0", "10.0.0.1/32", Verdict::Allow, T0)),
        retention: 300,
        bucket: 15,
    });
    let mut seed: u64 = 42;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        seed >> 33
    };
    let (mut kept, mut dropped) = (0u64, 0u64);
    for step in 0..3000u64 {
        let now = T0 + step / 5;
        let start = now.saturating_sub(next() % 400);
        let record = flow(
            &format!("w{}", next() % 80),
            "10.0.0.1/32",
            Verdict::Allow,
            start,
        );
        match window.insert(record, now) {
            Outcome::Dropped(_) => dropped += 1,
            _ => kept += 1,
        }
        if step % 50 == 0 {
            window.expire(now);
        }
        assert!(window.len() <= 50 && window.memory() <= window.limits().max_memory);
    }
    assert_consistent(&window);
    assert!(kept > 0 && dropped > 0, "kept {kept}, dropped {dropped}");
    let records: u64 = all(&window, T0 + 600).flows.iter().map(|f| f.records).sum();
    assert!(records <= kept);
}

#[test]
fn hints_are_bounded_and_sorted() {
    let mut window = Window::new(limits(5000));
    for i in 0..1200u64 {
        let net = format!("10.0.{}.{}/32", i / 256, i % 256);
        window.insert(flow(&format!("w{i:04}"), &net, Verdict::Allow, T0), T0);
    }
    let hints = window.hints(&FlowFilter::default(), T0);
    assert_eq!(hints.endpoints.len(), MAX_HINTS);
    let mut sorted = hints.endpoints.clone();
    sorted.sort();
    assert_eq!(hints.endpoints, sorted);
    assert_eq!(
        hints.endpoints[0],
        "/calico/v1/host/h1/workload/k8s/w0000/endpoint/eth0"
    );
}
