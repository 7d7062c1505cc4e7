use calico_calc::Calculator;
use calico_dataplane::flowlog::{Step, StepAction, prefix};
use calico_model::error::Validate;
use calico_model::flow::PolicyHit;
use calico_model::rule::Action;

use super::*;

const WEB: &str = "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0";
const DB: &str = "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0";

fn names() -> FlowNames {
    let mut calc = Calculator::new("h1");
    for (key, value) in [
        (
            WEB,
            r#"{"state": "active", "name": "caliweb", "profile_ids": ["web"], "ipv4_nets": ["10.0.0.1/32", "10.0.0.11/32"], "labels": {"app": "web"}}"#,
        ),
        (
            DB,
            r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.0.0.2/32"]}"#,
        ),
        (
            "/calico/v1/policy/profile/web/rules",
            r#"{"inbound_rules": [{"action": "allow"}]}"#,
        ),
        ("/calico/v1/policy/tier/t/metadata", r#"{"order": 1}"#),
        (
            "/calico/v1/policy/tier/t/policy/gate",
            r#"{"selector": "all()", "inbound_rules": [{"protocol": "tcp", "dst_ports": [22], "action": "deny"}, {"action": "next-tier"}]}"#,
        ),
    ] {
        calc.apply(key, Some(value));
    }
    FlowNames::of("h1", calc.cluster(), calc.state())
}

fn packet(step: Step, action: StepAction, src: &str, dst: &str, dport: u16) -> LoggedPacket {
    LoggedPacket {
        prefix: prefix(&step, action, true),
        hook: 1,
        mark: None,
        in_ifindex: None,
        out_ifindex: None,
        header: Some(PacketHeader {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            protocol: 6,
            src_port: Some(40_000),
            dst_port: Some(dport),
            length: 60,
        }),
    }
}

fn gate(rule: u32) -> Step {
    Step::Policy {
        tier: "t".to_owned(),
        name: "gate".to_owned(),
        rule,
    }
}

fn logged(step: Step, action: StepAction) -> Logged {
    Logged {
        step,
        action,
        inbound: true,
    }
}

fn staged(tier: &str, name: &str) -> Step {
    Step::StagedPolicy {
        tier: tier.to_owned(),
        name: name.to_owned(),
        rule: 0,
    }
}

fn web(rule: u32) -> Step {
    Step::Profile {
        name: "web".to_owned(),
        rule,
    }
}

/// What a trail prints as, step by step (rules counted from 1, as `explain` prints them).
fn shown(hits: &[PolicyHit]) -> Vec<String> {
    hits.iter().map(ToString::to_string).collect()
}

#[test]
fn a_staged_deny_is_the_pending_trail_and_decides_nothing() {
    let steps = [
        logged(staged("t", "lockdown"), StepAction::Deny),
        logged(gate(1), StepAction::NextTier),
        logged(web(0), StepAction::Allow),
    ];
    assert_eq!(verdict_of(&steps[0]), None, "a staged step never decides");
    let mut trail = trail_of(&steps, |_| None);
    assert_eq!(
        shown(&trail.enforced),
        [
            "tier t policy gate rule 2: next-tier",
            "profile web rule 1: allow"
        ]
    );
    assert_eq!(
        shown(&trail.pending),
        ["tier t staged policy lockdown rule 1: deny"]
    );
    assert_eq!(trail.enforced_verdict(), Some(Verdict::Allow));
    assert_eq!(trail.pending_verdict(), Some(Verdict::Deny));
    trail.validate().expect("a trail the aggregator takes");
}

#[test]
fn a_staged_next_tier_skips_its_tier_and_the_rest_stands() {
    let steps = [
        logged(staged("t", "relax"), StepAction::NextTier),
        logged(gate(0), StepAction::Deny),
    ];
    let trail = trail_of(&steps, |_| None);
    assert_eq!(shown(&trail.enforced), ["tier t policy gate rule 1: deny"]);
    assert!(
        trail.pending.is_empty(),
        "what later tiers would say is unknown: no pending trail, not a wrong one"
    );

    let steps = [
        logged(staged("t", "relax"), StepAction::NextTier),
        logged(gate(1), StepAction::NextTier),
        logged(web(0), StepAction::Allow),
    ];
    let mut trail = trail_of(&steps, |_| None);
    assert_eq!(
        shown(&trail.pending),
        [
            "tier t staged policy relax rule 1: next-tier",
            "profile web rule 1: allow"
        ]
    );
    trail.validate().unwrap();

    let plain = trail_of(&steps[1..], |_| None);
    assert!(plain.pending.is_empty(), "no staged step: no pending trail");
}

#[test]
fn an_allowed_connection_has_its_trail_and_its_counters_per_interval() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    let t = 1_000_000_001;
    collector.logged(
        &names,
        &packet(gate(1), StepAction::NextTier, "10.0.0.2", "10.0.0.1", 80),
        t,
    );
    let profile = Step::Profile {
        name: "web".to_owned(),
        rule: 0,
    };
    collector.logged(
        &names,
        &packet(profile, StepAction::Allow, "10.0.0.2", "10.0.0.1", 80),
        t,
    );
    let tuple = Tuple {
        src: "10.0.0.2".parse().unwrap(),
        dst: "10.0.0.1".parse().unwrap(),
        protocol: 6,
        src_port: Some(40_000),
        dst_port: Some(80),
    };
    let connection = |out, back| Connection {
        original: tuple,
        reply: reversed(&tuple),
        packets_out: out,
        bytes_out: out * 100,
        packets_back: back,
        bytes_back: back * 1000,
    };
    collector.counted(&[connection(3, 2)]);
    let records = collector.flush(&names, 1_000_000_015);
    assert_eq!(records.len(), 1, "{records:?}");
    let mut r = records[0].clone();
    r.validate().expect("a record the aggregator takes");
    assert_eq!(r.direction, FlowDirection::Ingress);
    assert_eq!(r.destination.key.as_deref(), Some(WEB));
    assert_eq!(r.source.key.as_deref(), Some(DB), "the other end is named");
    assert_eq!(
        (r.source.address, r.destination.address),
        (Some(tuple.src), Some(tuple.dst)),
        "both ends carry the addresses the packets used"
    );
    assert_eq!(r.dst_port, Some(80));
    assert_eq!(r.action, Verdict::Allow);
    assert_eq!(
        r.policies.enforced,
        [
            PolicyHit::policy("t", "gate", 1, Action::NextTier),
            PolicyHit::profile("web", 0, Action::Allow)
        ]
    );
    assert_eq!(
        (r.packets_in, r.bytes_in, r.packets_out, r.bytes_out),
        (3, 300, 2, 2000)
    );
    assert_eq!(r.connections_started, 1);

    // The next interval counts only what came since; a gone connection is forgotten.
    collector.counted(&[connection(5, 4)]);
    let records = collector.flush(&names, 1_000_000_030);
    assert_eq!(
        (records[0].packets_in, records[0].connections_started),
        (2, 0)
    );
    collector.counted(&[]);
    assert!(collector.flush(&names, 1_000_000_045).is_empty());
}

#[test]
fn retried_denied_attempts_are_one_connection_with_every_packet() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    for t in 0..3 {
        let denied = packet(gate(0), StepAction::Deny, "192.0.2.9", "10.0.0.1", 22);
        collector.logged(&names, &denied, 1_000_000_001 + t);
    }
    let records = collector.flush(&names, 1_000_000_015);
    assert_eq!(records.len(), 1);
    let mut r = records[0].clone();
    r.validate().unwrap();
    assert_eq!(r.action, Verdict::Deny);
    assert_eq!(
        r.source.net,
        Some("192.0.2.9/32".parse().unwrap()),
        "an address Calico does not know"
    );
    assert_eq!(
        (r.connections_started, r.packets_in, r.bytes_in),
        (1, 3, 180)
    );
    assert_eq!(
        r.policies.enforced,
        [PolicyHit::policy("t", "gate", 0, Action::Deny)]
    );
}

#[test]
fn two_addresses_of_one_endpoint_are_two_flows_each_with_its_address() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    for dst in ["10.0.0.1", "10.0.0.11"] {
        let denied = packet(gate(0), StepAction::Deny, "192.0.2.9", dst, 22);
        collector.logged(&names, &denied, 1_000_000_001);
    }
    let mut records = collector.flush(&names, 1_000_000_015);
    records.sort_by_key(|r| r.destination.address);
    let seen: Vec<_> = records
        .iter_mut()
        .map(|r| {
            r.validate().expect("a record the aggregator takes");
            let address = |s: &str| Some(s.parse::<IpAddr>().unwrap());
            assert_eq!(r.destination.key.as_deref(), Some(WEB));
            assert_eq!(r.source.address, address("192.0.2.9"), "a net's address");
            assert_eq!(r.source.net, Some("192.0.2.9/32".parse().unwrap()));
            (r.destination.address.unwrap().to_string(), r.packets_in)
        })
        .collect();
    assert_eq!(seen, [("10.0.0.1".into(), 1), ("10.0.0.11".into(), 1)]);
}

#[test]
fn what_is_not_ours_is_counted_not_reported() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    let mut stray = packet(gate(0), StepAction::Deny, "10.0.0.2", "10.0.0.1", 22);
    stray.prefix = "calico-drop: ".to_owned();
    collector.logged(&names, &stray, 1_000_000_001);
    // The local end is another host's endpoint.
    let elsewhere = packet(gate(0), StepAction::Deny, "10.0.0.1", "10.0.0.2", 22);
    collector.logged(&names, &elsewhere, 1_000_000_001);
    assert_eq!(
        (
            collector.stats.unknown_prefix,
            collector.stats.unknown_endpoint
        ),
        (1, 1)
    );
    assert!(collector.flush(&names, 1_000_000_015).is_empty());
}

/// `packet` with the source port `port` and the direction `inbound`.
fn sent(step: Step, action: StepAction, inbound: bool, port: u16) -> LoggedPacket {
    let (src, dst) = match inbound {
        true => ("192.0.2.9", "10.0.0.1"),
        false => ("10.0.0.1", "192.0.2.9"),
    };
    let mut logged = packet(step, action, src, dst, 6379);
    logged.prefix = prefix(&names_step(&logged.prefix), action, inbound);
    if let Some(header) = &mut logged.header {
        header.src_port = Some(port);
    }
    logged
}

fn names_step(prefix: &str) -> Step {
    names().decoder.decode(prefix).expect("a known step").step
}

#[test]
fn retransmitted_denied_syns_are_one_attempt_across_flushes() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    let mut connections = 0;
    let mut packets = 0;
    // Two attempts, each a SYN and its retransmission 1 s later, the first across a flush.
    for (port, at) in [(40_001, 1_000_000_004), (40_002, 1_000_000_010)] {
        for t in [at, at + 1] {
            let syn = sent(gate(0), StepAction::Deny, true, port);
            collector.logged(&names, &syn, t);
            if t == 1_000_000_004 {
                for r in collector.flush(&names, 1_000_000_005) {
                    connections += r.connections_started;
                    packets += r.packets_in;
                }
            }
        }
    }
    for r in collector.flush(&names, 1_000_000_015) {
        connections += r.connections_started;
        packets += r.packets_in;
    }
    assert_eq!((connections, packets), (2, 4), "two attempts of two SYNs");

    // The same tuple after conntrack would have forgotten it is a new attempt.
    let late = sent(gate(0), StepAction::Deny, true, 40_001);
    collector.logged(&names, &late, 1_000_000_005 + 120);
    let records = collector.flush(&names, 1_000_000_130);
    assert_eq!(records[0].connections_started, 1, "{records:?}");
}

/// The egress of an allowed connection to `192.0.2.9:6379` from source port `port`.
fn allowed_out(port: u16) -> LoggedPacket {
    sent(web(0), StepAction::Allow, false, port)
}

fn tracked(port: u16, out: u64, back: u64) -> Connection {
    let tuple = Tuple {
        src: "10.0.0.1".parse().unwrap(),
        dst: "192.0.2.9".parse().unwrap(),
        protocol: 6,
        src_port: Some(port),
        dst_port: Some(6379),
    };
    Connection {
        original: tuple,
        reply: reversed(&tuple),
        packets_out: out,
        bytes_out: out * 60,
        packets_back: back,
        bytes_back: back * 60,
    }
}

#[test]
fn retransmitted_allowed_syns_are_one_connection_counting_every_syn() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    // Never answered: conntrack's SYN_SENT entry says 1 packet after two SYNs.
    collector.logged(&names, &allowed_out(40_001), 1_000_000_001);
    collector.logged(&names, &allowed_out(40_001), 1_000_000_002);
    // Answered after its retransmission, and no dump saw it unreplied.
    collector.logged(&names, &allowed_out(40_002), 1_000_000_003);
    collector.logged(&names, &allowed_out(40_002), 1_000_000_004);
    collector.counted(&[tracked(40_001, 1, 0), tracked(40_002, 3, 2)]);
    let records = collector.flush(&names, 1_000_000_015);
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r.direction, FlowDirection::Egress);
    assert_eq!(
        (
            r.connections_started,
            r.packets_out,
            r.bytes_out,
            r.packets_in
        ),
        (2, 2 + 4, 6 * 60, 2),
        "every SYN sent, once per connection: {r:?}"
    );

    // A dump that saw the first unreplied knows exactly; the reply adds only what came since.
    collector.counted(&[tracked(40_001, 2, 1), tracked(40_002, 3, 2)]);
    let records = collector.flush(&names, 1_000_000_030);
    assert_eq!(
        (
            records[0].connections_started,
            records[0].packets_out,
            records[0].packets_in
        ),
        (0, 1, 1)
    );

    // A logged packet of a replied connection's tuple is a new connection.
    collector.logged(&names, &allowed_out(40_002), 1_000_000_031);
    collector.counted(&[tracked(40_001, 2, 1), tracked(40_002, 1, 0)]);
    let records = collector.flush(&names, 1_000_000_045);
    assert_eq!(
        (records[0].connections_started, records[0].packets_out),
        (1, 1)
    );
}

#[test]
fn an_end_of_tier_step_names_the_policy_that_applied() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    let end = Step::EndOfTier {
        tier: "t".to_owned(),
    };
    let dropped = sent(end, StepAction::Deny, false, 40_001);
    collector.logged(&names, &dropped, 1_000_000_001);
    let records = collector.flush(&names, 1_000_000_015);
    assert_eq!(records.len(), 1, "{records:?}");
    let mut r = records[0].clone();
    r.validate().unwrap();
    assert_eq!(
        shown(&r.policies.enforced),
        ["end of tier t (policy gate applied): deny"]
    );
}

#[test]
fn a_new_connection_goes_out_at_once_and_the_flush_adds_only_what_came_since() {
    let names = names();
    let mut collector = Collector::new(1_000_000_000);
    collector.logged(&names, &allowed_out(40_001), 1_000_000_003);
    let first = collector.flush_new(&names, 1_000_000_003);
    assert_eq!(first.len(), 1, "{first:?}");
    let r = &first[0];
    assert_eq!(
        (r.connections_started, r.packets_out, r.bytes_out),
        (1, 1, 60)
    );
    assert_eq!((r.start_time, r.end_time), (1_000_000_003, 1_000_000_004));
    assert!(
        collector.flush_new(&names, 1_000_000_004).is_empty(),
        "nothing new"
    );
    // The dump: 4 out, 3 back in all; the SYN went out already.
    collector.counted(&[tracked(40_001, 4, 3)]);
    let rest = collector.flush(&names, 1_000_000_005);
    let r = &rest[0];
    assert_eq!(
        (r.connections_started, r.packets_out, r.packets_in),
        (0, 3, 3),
        "summed with the first record: exactly conntrack's, nothing twice"
    );
}
