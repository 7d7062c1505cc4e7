//! `calico-flows` for real, on a free loopback port: batches good, malformed and hostile, each
//! record answered by index; the limits; queries, hints and the live stream through the
//! `calico_flowlog` client; Felix's sender against an aggregator that is down, comes up and
//! restarts.

mod common;

use std::time::Duration;

use calico_flowlog::protocol::FlowResult;
use calico_flowlog::{
    FlowFilter, FlowLogError, FlowSender, QueryClient, SenderConfig, StreamEvent,
};
use calico_model::flow::FlowRecord;
use calico_testkit::{eventually, free_port};
use common::{Connection, Flows, batch, http, ingress, json_of, now, wep};
use serde_json::{Value, json};

fn denied() -> Value {
    ingress(
        wep("h1", "ns.front", "front"),
        "ns.db",
        "deny",
        "db-guard",
        2,
        5,
    )
}

fn allowed() -> Value {
    ingress(wep("h1", "ns.web", "web"), "ns.db", "allow", "db-in", 0, 5)
}

/// (index, field, part of the reason) of each refusal.
fn refusals(reply: &Value) -> Vec<(u64, String, String)> {
    reply["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap().to_owned();
            (r["index"].as_u64().unwrap(), text("field"), text("reason"))
        })
        .collect()
}

#[test]
fn each_record_is_answered_by_index_and_the_connection_goes_on() {
    let flows = Flows::start(&[]);
    let mut long_key = allowed();
    long_key["source"]["key"] = json!(format!(
        "/calico/v1/host/h1/workload/k8s/{}/endpoint/eth0",
        "w".repeat(100_000)
    ));
    let mut script_profile = allowed();
    script_profile["destination"]["profiles"] = json!(["<script>alert(1)</script>"]);
    let mut many_labels = allowed();
    many_labels["source"]["labels"] = (0..65).map(|i| (format!("l{i}"), json!("v"))).collect();
    let mut future = allowed();
    future["end_time"] = json!(now() + 3600);
    future["start_time"] = json!(now() + 3000);
    let mut not_its_endpoint = allowed();
    not_its_endpoint["reporter"] = json!("h9");
    let mut contradiction = denied();
    contradiction["action"] = json!("allow");
    let mut huge_number = allowed();
    huge_number["packets_in"] = json!("1e400"); // a string, not a number
    let nested: Value =
        serde_json::from_str(&format!("{}{}", "[".repeat(40), "]".repeat(40))).unwrap();
    let records = [
        allowed(),                 // 0 accepted
        json!({"reporter": "h2"}), // 1 missing fields
        long_key,                  // 2 a 100 kB workload id
        script_profile,            // 3 markup as a profile id
        many_labels,               // 4 65 labels
        future,                    // 5 an hour ahead of the clock
        not_its_endpoint,          // 6 h9 reporting h2's endpoint
        contradiction,             // 7 says allow, trail says deny
        huge_number,               // 8 a counter that is no number
        nested,                    // 9 nested junk
        denied(),                  // 10 accepted
    ];
    let mut body = batch(&records);
    // 11: a record that is not even JSON once decoded — lone surrogate escapes in a name.
    body.truncate(body.len() - 2);
    body.extend_from_slice(br#",{"reporter": "\udc00\udc00"}]}"#);
    let mut connection = Connection::open(&flows.address).unwrap();
    let (status, reply) = connection
        .request("POST", "/api/v1/flows", &[], &body, false)
        .unwrap();
    let reply = json_of(&reply);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["accepted"], 2, "{reply}");
    let expected: [(u64, &str, &str); 10] = [
        (1, "records[1]", "missing field `start_time`"),
        (2, "records[2].source.key", "bytes long, the limit is 253"),
        (
            3,
            "records[3].destination.profiles[0]",
            "invalid profile id \"<script>alert(1)</script>\"",
        ),
        (4, "records[4].source.labels", "65 labels, the limit is 64"),
        (
            5,
            "records[5].end_time",
            "s ahead of the aggregator's clock, the limit is 300",
        ),
        (
            6,
            "records[6].destination.key",
            "on host \"h2\" but the reporter is \"h9\"",
        ),
        (
            7,
            "records[7].action",
            "the action is allow but the enforced trail ends in tier default policy db-guard rule 3: deny",
        ),
        (8, "records[8].packets_in", "invalid type: string"),
        (
            9,
            "records[9][0]",
            "invalid type: sequence, expected a string",
        ),
        (11, "records[11].reporter", "lone leading surrogate"),
    ];
    let got = refusals(&reply);
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for ((index, field, reason), (want_index, want_field, want_reason)) in got.iter().zip(expected)
    {
        assert_eq!(
            (*index, field.as_str()),
            (want_index, want_field),
            "{reason}"
        );
        assert!(
            reason.contains(want_reason),
            "{field}: {reason:?} lacks {want_reason:?}"
        );
    }

    // The same connection takes the next batch, then a body that is no batch, then another.
    let again = connection
        .request("POST", "/api/v1/flows", &[], &batch(&[allowed()]), false)
        .unwrap();
    assert_eq!(
        (again.0, json_of(&again.1)["accepted"].as_u64()),
        (200, Some(1))
    );
    let junk = connection
        .request("POST", "/api/v1/flows", &[], b"\xff\xfe not json", false)
        .unwrap();
    assert_eq!(junk.0, 400);
    assert!(
        json_of(&junk.1)["error"]
            .as_str()
            .unwrap()
            .starts_with("the body is not a batch")
    );
    let last = connection
        .request("POST", "/api/v1/flows", &[], &batch(&[denied()]), true)
        .unwrap();
    assert_eq!(json_of(&last.1)["accepted"], 1);

    // Every record counted once; refusals by the field at fault.
    let stats = flows.get("/api/v1/stats");
    assert_eq!(
        (stats["received"].as_u64(), stats["accepted"].as_u64()),
        (Some(14), Some(4))
    );
    assert_eq!(
        (stats["refused"].as_u64(), stats["batches_refused"].as_u64()),
        (Some(10), Some(1))
    );
    assert_eq!(
        flows.metric("calico_flows_records_refused_total{field=\"source\"}"),
        2.0
    );
    assert_eq!(
        flows.metric("calico_flows_records_refused_total{field=\"record\"}"),
        2.0
    );
    assert_eq!(
        flows.metric("calico_flows_batches_refused_total{reason=\"not-a-batch\"}"),
        1.0
    );
    // Two keys, each seen twice.
    let list = flows.get("/api/v1/flows");
    assert_eq!(list["total"], 2, "{list}");
    assert!(
        list["flows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["records"] == 2)
    );
}

#[test]
fn bodies_over_the_limits_are_refused_whole_or_past_the_limit() {
    let flows = Flows::start(&[
        "--max-batch-bytes",
        "64KiB",
        "--max-batch-records",
        "3",
        "--token",
        "s3cret",
    ]);
    let auth = [("Authorization", "Bearer s3cret")];
    let post = |headers: &[(&str, &str)], body: &[u8]| {
        let (status, answer) = http(&flows.address, "POST", "/api/v1/flows", headers, body);
        (status, json_of(&answer))
    };
    let (status, reply) = post(&[], &batch(&[allowed()]));
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer")
    );
    assert_eq!(
        post(&[("Authorization", "Bearer guess")], &batch(&[allowed()])).0,
        401
    );

    let padding = vec![b' '; 70 * 1024];
    let mut big = batch(&[allowed()]);
    big.splice(1..1, padding);
    let (status, reply) = post(&auth, &big);
    assert_eq!(status, 413, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("the limit of 65536 bytes (--max-batch-bytes)")
    );

    let five: Vec<Value> = (0..5).map(|_| allowed()).collect();
    let (status, reply) = post(&auth, &batch(&five));
    assert_eq!(
        (status, reply["accepted"].as_u64()),
        (200, Some(3)),
        "{reply}"
    );
    let past: Vec<u64> = refusals(&reply).iter().map(|r| r.0).collect();
    assert_eq!(past, [3, 4]);
    assert!(
        refusals(&reply)[0]
            .2
            .contains("the batch has 5 records, the limit is 3")
    );
    for (reason, count) in [("unauthorized", 2.0), ("too-large", 1.0)] {
        let series = format!("calico_flows_batches_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(flows.metric(&series), count, "{series}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_hints_and_the_live_stream_share_one_filter() {
    let flows = Flows::start(&[]);
    let client = QueryClient::new(&flows.url()).unwrap();
    let denials = FlowFilter::from_query("action=deny&reporter=h2").unwrap();
    let mut stream = client.stream(&denials).await.unwrap();
    let mut staged = allowed();
    staged["policies"]["pending"] = json!([{"kind": "staged-policy", "tier": "default", "name": "lockdown", "rule_index": 0, "action": "deny"}]);
    let mut other_host = ingress(
        wep("h2", "ns.cache", "cache"),
        "ns.db",
        "deny",
        "db-guard",
        2,
        5,
    );
    other_host["reporter"] = json!("h2");
    assert_eq!(
        flows.post(&batch(&[staged, denied(), other_host])).1["accepted"],
        3
    );

    // The stream: the two denials, in order, not the allowed flow.
    let mut streamed = Vec::new();
    while streamed.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        match event
            .expect("an event within 10 s")
            .expect("the stream is open")
            .unwrap()
        {
            StreamEvent::Flow(flow) => streamed.push(*flow),
            StreamEvent::Lagged(lagged) => panic!("lagged: {lagged:?}"),
        }
    }
    let sources: Vec<String> = streamed
        .iter()
        .map(|f: &FlowResult| f.flow.source.name())
        .collect();
    assert!(
        sources[0].contains("ns.front") && sources[1].contains("ns.cache"),
        "{sources:?}"
    );
    assert!(streamed.iter().all(|f| f.records == 1));

    // The query: the same filter, then narrower ones.
    let list = client.list(&denials, None).await.unwrap();
    assert_eq!(list.total, 2);
    assert_eq!(list.flows[0].id.len(), 16);
    let ids: Vec<&str> = streamed.iter().map(|f| f.id.as_str()).collect();
    assert!(
        list.flows.iter().all(|f| ids.contains(&f.id.as_str())),
        "stream and query name flows alike"
    );
    for (query, total) in [
        ("endpoint=ns.cache", 1),
        ("profile=front", 1),
        ("policy=lockdown", 1),
        ("tier=default", 3),
        ("policy=nope", 0),
        ("start_gte=-60", 3),
        ("start_lt=-60", 0),
    ] {
        let filter = FlowFilter::from_query(query).unwrap();
        assert_eq!(
            client.list(&filter, Some(10)).await.unwrap().total,
            total,
            "{query}"
        );
    }
    let one = client.list(&FlowFilter::default(), Some(1)).await.unwrap();
    assert_eq!((one.flows.len(), one.total), (1, 3));

    let hints = client.hints(&denials).await.unwrap();
    assert_eq!(hints.actions, ["allow", "deny"]);
    assert_eq!(hints.policies, ["db-guard"]);
    assert_eq!(hints.profiles, ["cache", "db", "front"]);

    // A bad parameter is refused by name, for queries and streams alike.
    let bad = FlowFilter {
        start_gte: 0,
        ..FlowFilter::default()
    };
    let (status, answer) = http(&flows.address, "GET", "/api/v1/flows?limit=0", &[], b"");
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&answer).contains(
            "query parameter limit=\\\"0\\\": expected a number of flows from 1 to 10000"
        )
    );
    let (status, _) = http(
        &flows.address,
        "GET",
        "/api/v1/flows/stream?colour=red",
        &[],
        b"",
    );
    assert_eq!(status, 400);
    assert!(client.list(&bad, Some(10)).await.is_ok());
}

fn record(value: Value) -> FlowRecord {
    calico_model::from_json(&value.to_string()).expect("a valid record")
}

fn sender_config(url: &str) -> SenderConfig {
    SenderConfig {
        queue: 1000,
        batch: 100,
        linger: Duration::from_millis(50),
        min_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        ..SenderConfig::new(url)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_never_waits_counts_every_record_and_reconnects() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let sender = FlowSender::start(sender_config(&url)).unwrap();
    let settled = |sender: &FlowSender| {
        let s = sender.stats();
        s.queued == s.sent + s.dropped_unreachable
            && s.sent == s.accepted + s.refused + s.dropped_by_aggregator
    };

    // Nobody listens: the queue fills, the rest is dropped at once; what was queued is dropped
    // batch by batch as posts fail.
    let refused_at_once = (0..5000)
        .filter(|_| !sender.send(record(allowed())))
        .count() as u64;
    assert!(
        refused_at_once > 0,
        "none of 5000 dropped with the queue full"
    );
    eventually(
        "the queued records counted as unreachable",
        Duration::from_secs(30),
        || {
            let s = sender.stats();
            (settled(&sender) && s.queued + s.dropped_queue_full == 5000)
                .then_some(())
                .ok_or(format!("{s:?}"))
        },
    );
    let down = sender.stats();
    assert_eq!(down.dropped_queue_full, refused_at_once);
    assert!(
        down.failures > 0 && down.dropped_unreachable == down.queued && down.sent == 0,
        "{down:?}"
    );

    // The aggregator comes up: the sender reconnects after its backoff.
    let mut flows = Flows::start_on(port, &[]);
    for _ in 0..300 {
        assert!(sender.send(record(allowed())));
    }
    let mut bad = record(denied());
    bad.reporter = "h9".into(); // not its endpoint: the aggregator refuses it
    sender.send(bad);
    eventually("the new records accepted", Duration::from_secs(30), || {
        let s = sender.stats();
        (settled(&sender) && s.accepted + s.refused > 0 && s.queued == down.queued + 301)
            .then_some(())
            .ok_or(format!("{s:?}"))
    });
    let up = sender.stats();
    assert_eq!((up.accepted, up.refused), (300, 1), "{up:?}");
    assert_eq!(flows.get("/api/v1/stats")["accepted"], 300);

    // A restart loses what the aggregator held, and nothing more: the sender goes on.
    flows.stop();
    let flows = Flows::start_on(port, &[]);
    assert_eq!(
        flows.get("/api/v1/stats")["flows"],
        0,
        "a new aggregator starts empty"
    );
    for _ in 0..200 {
        sender.send(record(denied()));
    }
    eventually(
        "the records after the restart resolved",
        Duration::from_secs(30),
        || {
            let s = sender.stats();
            (settled(&sender) && s.queued == up.queued + 200)
                .then_some(())
                .ok_or(format!("{s:?}"))
        },
    );
    let after = sender.close(Duration::from_secs(5)).await;
    let taken = flows.get("/api/v1/stats")["accepted"].as_u64().unwrap();
    assert_eq!(after.accepted - up.accepted, taken, "{after:?}");
    assert_eq!(
        taken + (after.dropped_unreachable - up.dropped_unreachable),
        200,
        "{after:?}"
    );
    assert!(taken > 0, "{after:?}");
}

#[tokio::test]
async fn a_bad_address_is_refused_by_name() {
    let error = FlowSender::start(SenderConfig::new("https://flows:7480")).unwrap_err();
    assert!(matches!(error, FlowLogError::Url { .. }), "{error}");
    assert!(error.to_string().contains("https is not served"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_are_part_of_a_flow_and_filter_it() {
    let flows = Flows::start(&[]);
    let client = QueryClient::new(&flows.url()).unwrap();
    // One workload talking from two addresses, and a record of an older Felix (none).
    let from = |address: &str| {
        let mut record = allowed();
        record["source"]["address"] = json!(address);
        record["destination"]["address"] = json!("10.65.1.20");
        record
    };
    let records = [
        from("10.65.0.10"),
        from("10.65.0.11"),
        from("10.65.0.10"),
        denied(),
    ];
    assert_eq!(flows.post(&batch(&records)).1["accepted"], 4);
    let all = client.list(&FlowFilter::default(), None).await.unwrap();
    assert_eq!(all.total, 3, "two addresses of one workload are two flows");
    let by_address = |a: Option<std::net::IpAddr>| {
        all.flows
            .iter()
            .filter(|f| f.flow.source.address == a)
            .map(|f| f.records)
            .collect::<Vec<_>>()
    };
    assert_eq!(by_address(Some("10.65.0.10".parse().unwrap())), [2]);
    assert_eq!(by_address(Some("10.65.0.11".parse().unwrap())), [1]);
    for (query, total) in [
        ("address=10.65.0.10", 1),
        ("address=10.65.1.20", 2),
        ("address=10.65.0.0/24", 2),
        ("address=10.65.0.0/16", 2),
        ("address=10.65.0.11&address=10.99.0.0/16", 1),
        ("address=fd00::/8", 0),
    ] {
        let filter = FlowFilter::from_query(query).unwrap();
        assert_eq!(
            client.list(&filter, Some(10)).await.unwrap().total,
            total,
            "{query}"
        );
    }
    let path = "/api/v1/flows?address=10.65.0.300";
    let (status, answer) = http(&flows.address, "GET", path, &[], b"");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("query parameter address=") && answer.contains("expected an IP address"),
        "{answer}"
    );
}
