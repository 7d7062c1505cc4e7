//! Random inputs for the differential test (`tests/differential.rs`): six dual-stack workloads on
//! two hosts, scenarios of profiles and tiered policies written to etcd, and flows between the
//! workloads. Everything comes from a seed, so a failure is replayed by its seed alone: a
//! scenario rewrites every key it uses, and a scenario's flows come from their own stream, so
//! asking for more flows per scenario draws a superset of the same flows from the same policies.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::process::{Command, Output};

pub use calico_lab::rng::Rng;
use calico_lab::state::SERVED_PORTS;
use calico_lab::{Lab, sh};
use serde_json::{Value, json};

use crate::common::TestLab;

pub struct Workload {
    pub name: &'static str,
    pub host: &'static str,
    pub ip: &'static str,
    pub ip6: &'static str,
}

const fn workload(
    name: &'static str,
    host: &'static str,
    ip: &'static str,
    ip6: &'static str,
) -> Workload {
    Workload {
        name,
        host,
        ip,
        ip6,
    }
}

/// Three workloads per host: flows within a host and across the fabric.
pub const WORKLOADS: [Workload; 6] = [
    workload("wa", "host1", "10.65.1.1", "fd00:65::1:1"),
    workload("wb", "host1", "10.65.1.2", "fd00:65::1:2"),
    workload("wc", "host1", "10.65.1.3", "fd00:65::1:3"),
    workload("wd", "host2", "10.65.2.1", "fd00:65::2:1"),
    workload("we", "host2", "10.65.2.2", "fd00:65::2:2"),
    workload("wf", "host2", "10.65.2.3", "fd00:65::2:3"),
];

/// TCP ports nothing listens on: the connection is refused, so the SYN did arrive. (Not UDP:
/// its "refused" is an ICMP error, which the kernel rate-limits, so it may never come.)
const CLOSED_TCP_PORTS: [u16; 2] = [22, 3000];
const RULE_PORTS: [u16; 7] = [80, 443, 5432, 6379, 8080, 22, 3000];
const PORT_RANGES: [&str; 3] = ["400:6000", "1:100", "3000:8080"];

const SELECTORS: [&str; 8] = [
    "role == \"a\"",
    "role == \"b\"",
    "role != \"a\"",
    "has(env)",
    "env == \"x\" || role == \"c\"",
    "role in {\"a\", \"c\"}",
    "!has(role)",
    "all()",
];

const NETS: [&str; 6] = [
    "10.65.1.0/24",
    "10.65.2.0/24",
    "10.65.1.2/31",
    "fd00:65::1:0/112",
    "fd00:65::2:0/112",
    "fd00:65::/64",
];

/// etcd reached from inside the lab's fabric namespace, where it listens. (Through the lab's
/// relay each request waits about 40 ms more: the relay's sockets leave Nagle's algorithm on,
/// so the second half of a gRPC request waits for the delayed ACK of the first. Two
/// `calicoctl policy explain` per flow made that most of the run.)
pub struct Fabric {
    netns: String,
    endpoints: String,
}

impl Fabric {
    pub fn of(lab: &TestLab) -> Fabric {
        let state = lab.state();
        Fabric {
            netns: Lab::fabric_netns(&state.name),
            endpoints: state.etcd_endpoints(),
        }
    }

    /// A command run in the fabric, given the endpoints the way calicoctl and etcdctl read them.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = sh::command_in(&self.netns, program);
        command
            .env("ETCD_ENDPOINTS", &self.endpoints)
            .env("ETCDCTL_API", "3")
            .env("ETCDCTL_ENDPOINTS", &self.endpoints);
        command
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        let out = self
            .command("etcdctl")
            .args(args)
            .output()
            .expect("etcdctl runs");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn put(&self, key: &str, value: &str) {
        self.etcdctl(&["put", key, value]);
    }

    pub fn del(&self, key: &str) {
        self.etcdctl(&["del", key]);
    }
}

/// One workload's endpoint as plugged in: its key and JSON, rewritten by every scenario.
pub struct Endpoint {
    pub key: String,
    json: Value,
}

/// Adds the workloads (dual-stack, no labels, profile `p1`); every scenario rewrites them.
pub fn plug_in(lab: &TestLab, fabric: &Fabric) -> Vec<Endpoint> {
    let state = |lab: &TestLab, name| lab.state().workload(name).unwrap().key.clone();
    WORKLOADS
        .iter()
        .map(|w| {
            let args = ["workload", "add", "--host", w.host, "--name", w.name];
            let addresses = ["--ip", w.ip, "--ip6", w.ip6, "--profile", "p1"];
            lab.ok(&[&args[..], &addresses[..]].concat());
            let key = state(lab, w.name);
            let out = fabric.etcdctl(&["get", &key, "--print-value-only"]);
            let json = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("endpoint {key}: {e}"));
            Endpoint { key, json }
        })
        .collect()
}

fn protocol_match(rng: &mut Rng, rule: &mut serde_json::Map<String, Value>) {
    let (protocol, icmp_type) = match rng.below(8) {
        0 | 1 => return,
        2 => ("udp", None),
        3 => ("icmp", Some(*rng.pick(&[8, 0]))),
        4 => ("icmpv6", Some(*rng.pick(&[128, 129]))),
        _ => ("tcp", None),
    };
    let key = if rng.chance(10) {
        "!protocol"
    } else {
        "protocol"
    };
    rule.insert(key.into(), json!(protocol));
    if key == "!protocol" {
        return;
    }
    match icmp_type {
        Some(t) if rng.chance(50) => {
            rule.insert("icmp_type".into(), json!(t));
            if rng.chance(30) {
                rule.insert("icmp_code".into(), json!(0));
            }
        }
        Some(_) => {}
        None if rng.chance(70) => {
            let ports: Vec<Value> = match rng.below(4) {
                0 => vec![json!(*rng.pick(&RULE_PORTS))],
                1 => vec![json!(*rng.pick(&RULE_PORTS)), json!(*rng.pick(&RULE_PORTS))],
                _ => vec![json!(*rng.pick(&PORT_RANGES))],
            };
            let key = if rng.chance(80) {
                "dst_ports"
            } else {
                "!dst_ports"
            };
            rule.insert(key.into(), json!(ports));
        }
        None => {}
    }
}

/// A match on one end: `src` or `dst`.
fn end_match(rng: &mut Rng, rule: &mut serde_json::Map<String, Value>, end: &str) {
    let not = if rng.chance(25) { "!" } else { "" };
    let (field, value) = match rng.below(3) {
        0 => ("selector", json!(rng.pick(&SELECTORS))),
        1 => ("tag", json!(rng.pick(&["t1", "t2"]))),
        _ => ("net", json!(rng.pick(&NETS))),
    };
    rule.insert(format!("{not}{end}_{field}"), value);
}

fn rule(rng: &mut Rng, actions: &[&str]) -> Value {
    let mut rule = serde_json::Map::new();
    protocol_match(rng, &mut rule);
    if rng.chance(55) {
        end_match(rng, &mut rule, "src");
    }
    if rng.chance(20) {
        end_match(rng, &mut rule, "dst");
    }
    // A log rule matches and carries on: the next rule decides.
    let action = if rng.chance(5) {
        "log"
    } else {
        rng.pick(actions)
    };
    rule.insert("action".into(), json!(action));
    Value::Object(rule)
}

fn rules(rng: &mut Rng, actions: &[&str], max: usize) -> Vec<Value> {
    (0..rng.below(max + 1))
        .map(|_| rule(rng, actions))
        .collect()
}

/// What a scenario holds beyond profiles and the two tiers `ta` and `tb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// Also the tier [`KEYED_TIER`], first, of several policies whose inbound rules all name a
    /// protocol and (mostly) ports: the policies the nftables backend dispatches by verdict
    /// map (`crates/dataplane/src/nft/tiers.rs`).
    Keyed,
}

/// The tier of a [`Kind::Keyed`] scenario (a plain one deletes it).
pub const KEYED_TIER: &str = "tk";
/// Its policies: `k0`, `k1`, …
const KEYED_POLICIES: usize = 7;

/// Selectors that match most workloads, so that most endpoints get several of the keyed
/// policies in a row.
const BROAD_SELECTORS: [&str; 5] = ["all()", "all()", "has(role)", "role != \"a\"", "!has(env)"];

/// Writes one random scenario: profiles, two tiers of policies (three for [`Kind::Keyed`]),
/// the endpoints' labels and profiles. Returns its description (every key written) for
/// failure messages. A plain scenario draws exactly what it drew before keyed ones existed,
/// so a seed's plain scenarios stay as they were.
pub fn write(fabric: &Fabric, rng: &mut Rng, endpoints: &mut [Endpoint], kind: Kind) -> String {
    let mut text = String::new();
    let put = |text: &mut String, key: &str, value: String| {
        let _ = writeln!(text, "{key} {value}");
        fabric.put(key, &value);
    };
    // Profiles: tags and rules (inbound mostly restrictive, outbound mostly open).
    for profile in ["p1", "p2", "p3"] {
        let tags: Vec<&str> = ["t1", "t2"]
            .into_iter()
            .filter(|_| rng.chance(40))
            .collect();
        let key = format!("/calico/v1/policy/profile/{profile}/tags");
        put(&mut text, &key, json!(tags).to_string());
        let mut inbound = rules(rng, &["allow", "deny"], 3);
        if rng.chance(70) {
            inbound.push(json!({"action": "allow"}));
        }
        let outbound = if rng.chance(85) {
            vec![json!({"action": "allow"})]
        } else {
            rules(rng, &["allow", "deny"], 2)
        };
        let key = format!("/calico/v1/policy/profile/{profile}/rules");
        let value = json!({"inbound_rules": inbound, "outbound_rules": outbound});
        put(&mut text, &key, value.to_string());
    }
    for (tier, order) in [("ta", 10), ("tb", 20)] {
        tier_policies(fabric, rng, &mut text, tier, order);
    }
    for (w, endpoint) in WORKLOADS.iter().zip(endpoints) {
        let (labels, profiles) = identity(rng);
        endpoint.json["labels"] = labels.clone();
        endpoint.json["profile_ids"] = json!(profiles);
        fabric.put(&endpoint.key, &endpoint.json.to_string());
        let _ = writeln!(text, "{} labels {labels} profiles {profiles:?}", w.name);
    }
    match kind {
        Kind::Plain => delete_keyed_tier(fabric, &mut text),
        Kind::Keyed => keyed_tier(fabric, rng, &mut text),
    }
    text
}

fn delete_keyed_tier(fabric: &Fabric, text: &mut String) {
    for k in 0..KEYED_POLICIES {
        fabric.del(&format!("/calico/v1/policy/tier/{KEYED_TIER}/policy/k{k}"));
    }
    fabric.del(&format!("/calico/v1/policy/tier/{KEYED_TIER}/metadata"));
    let _ = writeln!(text, "(no tier {KEYED_TIER})");
}

/// The tier [`KEYED_TIER`], before `ta`: policies in a fixed order whose inbound rules name a
/// protocol and mostly ports (overlapping ports and ranges among them); now and then one with
/// a rule of any kind (when it matches any protocol, it splits the policies around it into
/// two runs) or one without inbound rules (it takes no part). Outbound rules are few and end
/// in next-tier.
fn keyed_tier(fabric: &Fabric, rng: &mut Rng, text: &mut String) {
    let key = format!("/calico/v1/policy/tier/{KEYED_TIER}/metadata");
    let value = json!({"order": 5}).to_string();
    let _ = writeln!(text, "{key} {value}");
    fabric.put(&key, &value);
    for k in 0..KEYED_POLICIES {
        let inbound: Vec<Value> = match rng.below(10) {
            0 => vec![],
            1 => vec![rule(rng, &["allow", "deny", "next-tier"])],
            _ => (0..1 + rng.below(3)).map(|_| keyed_rule(rng)).collect(),
        };
        let mut outbound = rules(rng, &["allow", "deny"], 1);
        outbound.push(json!({"action": "next-tier"}));
        let value = json!({
            "selector": rng.pick(&BROAD_SELECTORS),
            "order": k,
            "inbound_rules": inbound,
            "outbound_rules": outbound,
        });
        let key = format!("/calico/v1/policy/tier/{KEYED_TIER}/policy/k{k}");
        let _ = writeln!(text, "{key} {value}");
        fabric.put(&key, &value.to_string());
    }
}

/// A rule that names a protocol, and for TCP and UDP mostly destination ports; sometimes a
/// source match too. Its action lets about half of what it matches on to the next tier.
fn keyed_rule(rng: &mut Rng) -> Value {
    let mut rule = serde_json::Map::new();
    let protocol = *rng.pick(&["tcp", "tcp", "tcp", "udp", "udp", "icmp", "icmpv6"]);
    rule.insert("protocol".into(), json!(protocol));
    if matches!(protocol, "tcp" | "udp") && rng.chance(85) {
        let ports: Vec<Value> = match rng.below(3) {
            0 => vec![json!(*rng.pick(&RULE_PORTS))],
            1 => vec![json!(*rng.pick(&RULE_PORTS)), json!(*rng.pick(&RULE_PORTS))],
            _ => vec![json!(*rng.pick(&PORT_RANGES))],
        };
        rule.insert("dst_ports".into(), json!(ports));
    }
    if rng.chance(25) {
        end_match(rng, &mut rule, "src");
    }
    let action = *rng.pick(&["allow", "allow", "deny", "next-tier", "next-tier"]);
    rule.insert("action".into(), json!(action));
    Value::Object(rule)
}

/// A tier with a policy or two, often ending in next-tier, or one that drops most of what it
/// sees.
fn tier_policies(fabric: &Fabric, rng: &mut Rng, text: &mut String, tier: &str, order: u32) {
    let key = format!("/calico/v1/policy/tier/{tier}/metadata");
    let value = json!({"order": order}).to_string();
    let _ = writeln!(text, "{key} {value}");
    fabric.put(&key, &value);
    for policy in ["x", "y"] {
        let key = format!("/calico/v1/policy/tier/{tier}/policy/{policy}");
        if rng.chance(30) {
            fabric.del(&key);
            let _ = writeln!(text, "(deleted {key})");
            continue;
        }
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
        let _ = writeln!(text, "{key} {value}");
        fabric.put(&key, &value.to_string());
    }
}

/// An endpoint's labels and profiles.
fn identity(rng: &mut Rng) -> (Value, Vec<&'static str>) {
    let mut labels = serde_json::Map::new();
    if rng.chance(80) {
        labels.insert("role".into(), json!(rng.pick(&["a", "b", "c"])));
    }
    if rng.chance(50) {
        labels.insert("env".into(), json!(rng.pick(&["x", "y"])));
    }
    let profiles = match rng.below(10) {
        0 => vec![],
        1 => vec!["p1", "p2"],
        _ => vec![*rng.pick(&["p1", "p2", "p3"])],
    };
    (Value::Object(labels), profiles)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
}

/// One packet to send: from a workload to another, over IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    pub from: usize,
    pub to: usize,
    pub v6: bool,
    pub protocol: Protocol,
    /// 0 for ICMP.
    pub port: u16,
}

impl Flow {
    pub fn src(&self) -> &'static str {
        self.address(self.from)
    }
    pub fn dst(&self) -> &'static str {
        self.address(self.to)
    }
    fn address(&self, index: usize) -> &'static str {
        let w = &WORKLOADS[index];
        if self.v6 { w.ip6 } else { w.ip }
    }

    /// The protocol as `calicoctl policy explain --protocol` takes it.
    pub fn protocol_name(&self) -> &'static str {
        match (self.protocol, self.v6) {
            (Protocol::Tcp, _) => "tcp",
            (Protocol::Udp, _) => "udp",
            (Protocol::Icmp, false) => "icmp",
            (Protocol::Icmp, true) => "icmpv6",
        }
    }

    /// The probe's target (`tcp:IP:PORT`, `udp:[IP6]:PORT`, `icmp:IP`): ICMP is an echo request.
    pub fn target(&self) -> String {
        let dst = self.dst();
        match (self.protocol, self.v6) {
            (Protocol::Icmp, _) => format!("icmp:{dst}"),
            (_, false) => format!("{}:{dst}:{}", self.protocol_name(), self.port),
            (_, true) => format!("{}:[{dst}]:{}", self.protocol_name(), self.port),
        }
    }

    fn random(rng: &mut Rng) -> Flow {
        let from = rng.below(WORKLOADS.len());
        let to = (from + 1 + rng.below(WORKLOADS.len() - 1)) % WORKLOADS.len();
        let (protocol, port) = match rng.below(20) {
            0..=8 if rng.chance(80) => (Protocol::Tcp, *rng.pick(SERVED_PORTS)),
            0..=8 => (Protocol::Tcp, *rng.pick(&CLOSED_TCP_PORTS)),
            9..=14 => (Protocol::Udp, *rng.pick(SERVED_PORTS)),
            _ => (Protocol::Icmp, 0),
        };
        Flow {
            from,
            to,
            v6: rng.chance(35),
            protocol,
            port,
        }
    }
}

/// How many different flows there are: the most one scenario can have.
pub fn distinct_flows() -> usize {
    let pairs = WORKLOADS.len() * (WORKLOADS.len() - 1);
    let per_family = 2 * SERVED_PORTS.len() + CLOSED_TCP_PORTS.len() + 1;
    pairs * 2 * per_family
}

/// `count` different random flows (at most [`distinct_flows`]).
pub fn flows(rng: &mut Rng, count: usize) -> Vec<Flow> {
    let mut seen = HashSet::new();
    let mut flows = Vec::new();
    while flows.len() < count.min(distinct_flows()) {
        let flow = Flow::random(rng);
        if seen.insert(flow) {
            flows.push(flow);
        }
    }
    flows
}
