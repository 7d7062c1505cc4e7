//! The kernel against the reference evaluator: random profiles and tiered policies, random
//! flows between lab workloads on two hosts; whether each packet arrived must equal what
//! `calicoctl policy explain` says of the source's outbound and the destination's inbound
//! policy. The run is deterministic: it uses a fixed seed unless CALICO_DIFF_SEED names
//! another (a number, or `random` for one taken from the clock); the seed is printed.

mod common;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use common::{BIN, TestLab, arrived};
use serde_json::{Value, json};

const SCENARIOS: usize = 4;
const FLOWS_PER_SCENARIO: usize = 60;
const PORTS: [u16; 5] = [80, 443, 5432, 6379, 8080];
/// The seed CI runs: its scenarios deliver and drop flows in useful proportions.
const DEFAULT_SEED: u64 = 20_261_123;

/// SplitMix64: small, seedable, good enough to pick test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

struct Workload {
    name: &'static str,
    host: &'static str,
    ip: &'static str,
}

const WORKLOADS: [Workload; 4] = [
    Workload {
        name: "wa",
        host: "host1",
        ip: "10.65.1.1",
    },
    Workload {
        name: "wb",
        host: "host1",
        ip: "10.65.1.2",
    },
    Workload {
        name: "wc",
        host: "host2",
        ip: "10.65.2.1",
    },
    Workload {
        name: "wd",
        host: "host2",
        ip: "10.65.2.2",
    },
];

const SELECTORS: [&str; 7] = [
    "role == \"a\"",
    "role == \"b\"",
    "role != \"a\"",
    "has(env)",
    "env == \"x\" || role == \"c\"",
    "role in {\"a\", \"c\"}",
    "all()",
];

fn rule(rng: &mut Rng, actions: &[&str]) -> Value {
    let mut rule = serde_json::Map::new();
    match rng.below(5) {
        0 => {}
        1 => {
            rule.insert("protocol".into(), json!("udp"));
        }
        2 => {
            rule.insert("protocol".into(), json!("icmp"));
            if rng.chance(50) {
                rule.insert("icmp_type".into(), json!(8));
            }
        }
        _ => {
            rule.insert("protocol".into(), json!("tcp"));
        }
    }
    if rule.get("protocol").is_some_and(|p| p != "icmp") && rng.chance(70) {
        let ports: Vec<Value> = match rng.below(3) {
            0 => vec![json!(*rng.pick(&PORTS))],
            1 => vec![json!(*rng.pick(&PORTS)), json!(*rng.pick(&PORTS))],
            _ => vec![json!("400:6000")],
        };
        let key = if rng.chance(80) {
            "dst_ports"
        } else {
            "!dst_ports"
        };
        rule.insert(key.into(), json!(ports));
    }
    match rng.below(6) {
        0 => {
            rule.insert("src_selector".into(), json!(rng.pick(&SELECTORS)));
        }
        1 => {
            rule.insert("!src_selector".into(), json!(rng.pick(&SELECTORS)));
        }
        2 => {
            rule.insert("src_tag".into(), json!(rng.pick(&["t1", "t2"])));
        }
        3 => {
            rule.insert(
                "src_net".into(),
                json!(rng.pick(&["10.65.1.0/24", "10.65.2.0/24"])),
            );
        }
        _ => {}
    }
    rule.insert("action".into(), json!(rng.pick(actions)));
    Value::Object(rule)
}

fn rules(rng: &mut Rng, actions: &[&str], max: usize) -> Vec<Value> {
    (0..rng.below(max + 1))
        .map(|_| rule(rng, actions))
        .collect()
}

/// Writes one random scenario; returns its description for failure messages.
fn scenario(lab: &TestLab, rng: &mut Rng, first: bool) -> String {
    let mut text = String::new();
    let put = |text: &mut String, key: String, value: String| {
        let _ = writeln!(text, "{key} {value}");
        lab.put(&key, &value);
    };
    // Profiles: tags and rules (inbound mostly restrictive, outbound mostly open).
    for profile in ["p1", "p2", "p3"] {
        let tags: Vec<&str> = ["t1", "t2"]
            .into_iter()
            .filter(|_| rng.chance(40))
            .collect();
        put(
            &mut text,
            format!("/calico/v1/policy/profile/{profile}/tags"),
            json!(tags).to_string(),
        );
        let mut inbound = rules(rng, &["allow", "deny"], 3);
        if rng.chance(70) {
            inbound.push(json!({"action": "allow"}));
        }
        let outbound = if rng.chance(85) {
            vec![json!({"action": "allow"})]
        } else {
            rules(rng, &["allow", "deny"], 2)
        };
        put(
            &mut text,
            format!("/calico/v1/policy/profile/{profile}/rules"),
            json!({"inbound_rules": inbound, "outbound_rules": outbound}).to_string(),
        );
    }
    // Two tiers with a policy or two each.
    for (tier, order) in [("ta", 10), ("tb", 20)] {
        put(
            &mut text,
            format!("/calico/v1/policy/tier/{tier}/metadata"),
            json!({"order": order}).to_string(),
        );
        for policy in ["x", "y"] {
            let key = format!("/calico/v1/policy/tier/{tier}/policy/{policy}");
            if rng.chance(30) {
                lab.del(&key);
                let _ = writeln!(text, "(deleted {key})");
                continue;
            }
            // Often ending in next-tier, or a tier that applies drops most of what it sees.
            let tail = |mut rules: Vec<Value>, rng: &mut Rng| {
                if rng.chance(60) {
                    rules.push(json!({"action": "next-tier"}));
                }
                rules
            };
            let inbound = rules(rng, &["allow", "deny", "next-tier"], 3);
            let outbound = rules(rng, &["allow", "deny", "next-tier"], 2);
            let value = json!({
                "selector": rng.pick(&SELECTORS),
                "order": rng.below(3),
                "inbound_rules": tail(inbound, rng),
                "outbound_rules": tail(outbound, rng),
            });
            put(&mut text, key, value.to_string());
        }
    }
    // Workloads: labels and profiles change by rewriting the endpoints.
    for w in &WORKLOADS {
        let mut labels = serde_json::Map::new();
        if rng.chance(80) {
            labels.insert("role".into(), json!(rng.pick(&["a", "b", "c"])));
        }
        if rng.chance(50) {
            labels.insert("env".into(), json!(rng.pick(&["x", "y"])));
        }
        let profiles: Vec<&str> = match rng.below(10) {
            0 => vec![],
            1 => vec!["p1", "p2"],
            _ => vec![*rng.pick(&["p1", "p2", "p3"])],
        };
        if first {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                .collect();
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            lab.workload(w.host, w.name, w.ip, &profiles, &labels);
        } else {
            let key = lab.state().workload(w.name).unwrap().key.clone();
            let out = lab.etcdctl(&["get", &key, "--print-value-only"]);
            let mut endpoint: Value = serde_json::from_slice(&out.stdout).unwrap();
            endpoint["labels"] = Value::Object(labels.clone());
            endpoint["profile_ids"] = json!(profiles);
            lab.put(&key, &endpoint.to_string());
        }
        let _ = writeln!(
            text,
            "{} labels {} profiles {profiles:?}",
            w.name,
            Value::Object(labels)
        );
    }
    text
}

#[derive(Debug, Clone, Copy)]
struct Flow {
    from: usize,
    to: usize,
    protocol: &'static str,
    port: u16,
}

impl Flow {
    fn target(&self) -> String {
        let ip = WORKLOADS[self.to].ip;
        match self.protocol {
            "icmp" => format!("icmp:{ip}"),
            p => format!("{p}:{ip}:{}", self.port),
        }
    }
}

fn calicoctl() -> PathBuf {
    let path = PathBuf::from(BIN).with_file_name("calicoctl");
    assert!(
        path.is_file(),
        "{} is missing: build it first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// What `calicoctl policy explain` says of one end of the flow: "allow" or "deny".
fn explain(lab: &TestLab, flow: &Flow, outbound: bool) -> (bool, String) {
    let (endpoint, direction) = if outbound {
        (flow.from, "outbound")
    } else {
        (flow.to, "inbound")
    };
    let key = lab
        .state()
        .workload(WORKLOADS[endpoint].name)
        .unwrap()
        .key
        .clone();
    let mut args = vec![
        "policy".to_owned(),
        "explain".into(),
        "--endpoint".into(),
        key,
        "--direction".into(),
        direction.into(),
        "--src".into(),
        WORKLOADS[flow.from].ip.into(),
        "--dst".into(),
        WORKLOADS[flow.to].ip.into(),
        "--protocol".into(),
        flow.protocol.into(),
    ];
    if flow.protocol == "icmp" {
        args.extend([
            "--icmp-type".into(),
            "8".into(),
            "--icmp-code".into(),
            "0".into(),
        ]);
    } else {
        args.extend(["--dst-port".into(), flow.port.to_string()]);
    }
    let out = Command::new(calicoctl())
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(&args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = text.lines().last().unwrap_or("").to_owned();
    (last.starts_with("allow"), text)
}

#[test]
fn kernel_verdicts_equal_policy_explain() {
    let seed = match std::env::var("CALICO_DIFF_SEED").ok().as_deref() {
        None | Some("") => DEFAULT_SEED,
        Some("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        Some(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("CALICO_DIFF_SEED={text:?}: expected a number or `random`")),
    };
    eprintln!("differential test seed: {seed} (CALICO_DIFF_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let lab = TestLab::up(2, &[]);
    let (mut checked, mut delivered) = (0, 0);
    for round in 0..SCENARIOS {
        let description = scenario(&lab, &mut rng, round == 0);
        lab.wait();
        let flows: Vec<Flow> = (0..FLOWS_PER_SCENARIO)
            .map(|_| {
                let from = rng.below(WORKLOADS.len());
                let to = (from + 1 + rng.below(WORKLOADS.len() - 1)) % WORKLOADS.len();
                let protocol = *rng.pick(&["tcp", "tcp", "udp", "icmp"]);
                Flow {
                    from,
                    to,
                    protocol,
                    port: *rng.pick(&PORTS),
                }
            })
            .collect();
        // Probe all flows of one source at once.
        let mut kernel = vec![false; flows.len()];
        for (index, w) in WORKLOADS.iter().enumerate() {
            let mine: Vec<usize> = (0..flows.len())
                .filter(|&i| flows[i].from == index)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let targets: Vec<String> = mine.iter().map(|&i| flows[i].target()).collect();
            let words = lab.probe(w.name, &targets);
            for (&i, word) in mine.iter().zip(&words) {
                kernel[i] = arrived(word);
            }
        }
        for (flow, &arrived) in flows.iter().zip(&kernel) {
            let (out_ok, out_text) = explain(&lab, flow, true);
            let (in_ok, in_text) = explain(&lab, flow, false);
            let expected = out_ok && in_ok;
            assert_eq!(
                arrived,
                expected,
                "seed {seed}, scenario {round}: {} -> {} {}: the kernel {} but explain says {}\n\
                 --- outbound ---\n{out_text}\n--- inbound ---\n{in_text}\n--- scenario ---\n{description}",
                WORKLOADS[flow.from].name,
                WORKLOADS[flow.to].name,
                flow.target(),
                if arrived {
                    "delivered it"
                } else {
                    "dropped it"
                },
                if expected { "allow" } else { "deny" },
            );
            checked += 1;
            delivered += usize::from(arrived);
        }
    }
    assert!(checked >= 200, "only {checked} flows checked");
    // Both verdicts must be represented (at least 5% each; the generator aims at about a
    // third delivered), or the comparison says little.
    let dropped = checked - delivered;
    assert!(
        delivered * 20 >= checked && dropped * 20 >= checked,
        "seed {seed}: {delivered} delivered, {dropped} dropped: too one-sided to compare"
    );
    eprintln!(
        "{checked} flows ({delivered} delivered, {dropped} dropped): the kernel agreed with calicoctl policy explain on every one"
    );
}
