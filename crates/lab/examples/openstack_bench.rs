//! OpenStack benchmarks on an `up --openstack` lab (docs/benchmarks.md, "OpenStack"):
//!
//! 1. **Enforcement latency**, 200 ports: from a Neutron API call returning to the compute
//!    host's kernel allowing (or refusing) new TCP connections, for a security group rule added
//!    and deleted, a port created (its VM reachable) and deleted, and a port's group membership
//!    changed (added to a group that lets it in, and removed again); first with calico-neutron
//!    driven by the ML2 driver's notifications, then polling every 500 ms (the baseline), on
//!    the same lab. A prober in VM `a` (host1) connects every few milliseconds to an echo
//!    server in VM `b` (host2) or in a VM made for the round (host1); the time is when the
//!    first new connection got through (or the first one failed).
//! 2. **Scale**, 1,000 ports in 200 security groups with 2,000 rules (bound to hosts that are
//!    not the lab's, so only calico-neutron and Neutron work): start-up sync, a minute of steady
//!    state and one rule added, in each mode: time, Neutron requests (from neutron-server's
//!    access log: calico-neutron's come from the fabric address) and calico-neutron's memory.
//!
//! Run as root after building the binaries in the same profile (`$OPENSTACK_BENCH_ROUNDS`
//! rounds of each latency, default 60; `$OPENSTACK_BENCH_PARTS=latency` or `scale` for one
//! part):
//! `cargo build --release -p calico-lab -p calico-felix -p calico-node -p calico-neutron --bins --examples && target/release/examples/openstack_bench`

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use calico_lab::Lab;
use calico_lab::openstack::{self, vm::Vm};
use calico_openstack::client::Client;
use calico_testkit::Tails;
use serde_json::{Value, json};

mod common;
use common::{Down, lab, lab_bin};

const NAME: &str = "osbench";
const PORTS: usize = 200;
const SERVER_PORT: u16 = 7000;
const SCALE_PORTS: usize = 1000;
const SCALE_GROUPS: usize = 200;
const RULES_PER_GROUP: usize = 10;
/// How long a probe keeps trying.
const PROBE_DEADLINE_MS: u64 = 30_000;

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as i128
}

/// `probe open|closed ADDR` (run inside a VM's namespace by the benchmark itself): connects
/// every 2 ms with a 10 ms timeout; prints the time (ns) the first connection got through, or
/// the start of the first attempt that failed.
fn probe(args: &[String]) {
    let open = args[0] == "open";
    let to: SocketAddr = args[1].parse().expect("an address");
    let end = Instant::now() + Duration::from_millis(PROBE_DEADLINE_MS);
    while Instant::now() < end {
        let started = now_ns();
        let connected = std::net::TcpStream::connect_timeout(&to, Duration::from_millis(10));
        if connected.is_ok() == open {
            println!("{}", if open { now_ns() } else { started });
            return;
        }
        drop(connected);
        std::thread::sleep(Duration::from_millis(2));
    }
    std::process::exit(1);
}

/// A probe running in `netns`, started before the change it times.
struct Probe(Child);

impl Probe {
    fn start(netns: &str, open: bool, to: &str) -> Probe {
        let me = std::env::current_exe().expect("own path");
        let child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(me)
            .args(["probe", if open { "open" } else { "closed" }, to])
            .stdout(Stdio::piped())
            .spawn()
            .expect("probe starts");
        // Trying by the time the change is made.
        std::thread::sleep(Duration::from_millis(150));
        Probe(child)
    }

    /// Milliseconds from `since` (ns) to what the probe saw; 0 when it saw it before `since`
    /// (the change can be enforced before the API call has returned).
    fn since(self, since: i128) -> f64 {
        let out = self.0.wait_with_output().expect("probe output");
        assert!(
            out.status.success(),
            "the probe gave up after {PROBE_DEADLINE_MS} ms"
        );
        let seen: i128 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a time");
        ((seen - since).max(0) as f64) / 1e6
    }
}

/// Neutron through the lab's relay, as the admin; one runtime for the benchmark's calls.
struct Api {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.runtime
            .block_on(self.client.call(method, path, body.as_ref()))
            .unwrap_or_else(|e| panic!("neutron {method} {path}: {e}"))
    }

    /// The call, and the time (ns) it returned.
    fn timed(&self, method: &str, path: &str, body: Option<Value>) -> (Value, i128) {
        let answer = self.call(method, path, body);
        (answer, now_ns())
    }

    fn create(&self, singular: &str, fields: Value) -> Value {
        let path = format!("/v2.0/{}s", singular.replace('_', "-"));
        self.call("POST", &path, Some(json!({ singular: fields })))[singular].clone()
    }

    /// Bulk creation, `per` objects a request.
    fn create_many(&self, plural: &str, objects: Vec<Value>, per: usize) -> Vec<Value> {
        let path = format!("/v2.0/{}", plural.replace('_', "-"));
        let mut made = Vec::new();
        for chunk in objects.chunks(per) {
            let answer = self.call("POST", &path, Some(json!({ plural: chunk })));
            made.extend(answer[plural].as_array().cloned().unwrap_or_default());
        }
        made
    }
}

fn id(object: &Value) -> String {
    object["id"].as_str().expect("an id").to_owned()
}

fn vm(name: &str) -> Vm {
    let state = Lab::load(NAME).expect("the lab");
    let openstack = state.openstack.expect("an OpenStack lab");
    openstack
        .vms
        .into_iter()
        .find(|v| v.name == name)
        .expect("the VM")
}

/// `ip ARGS`, which must work.
fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("ip runs");
    assert!(status.success(), "ip {args:?}");
}

/// The echo server in a namespace (killed when the namespace's processes are).
fn serve(netns: &str) -> Child {
    Command::new("ip")
        .args(["netns", "exec", netns])
        .arg(lab_bin())
        .args(["serve", "--ports", &SERVER_PORT.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("echo server starts")
}

/// `etcdctl ARGS` against the lab's etcd (through its relay): stdout.
fn etcdctl(args: &[&str]) -> String {
    let state = Lab::load(NAME).expect("the lab");
    let endpoints = state.client_endpoints().join(",");
    let out = Command::new("etcdctl")
        .args(["--endpoints", &endpoints])
        .args(args)
        .output()
        .expect("etcdctl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Latency samples (ms) per operation, in one mode.
#[derive(Default)]
struct Latencies {
    rule_add: Vec<f64>,
    rule_delete: Vec<f64>,
    port_create: Vec<f64>,
    port_delete: Vec<f64>,
    member_add: Vec<f64>,
    member_remove: Vec<f64>,
}

/// The groups and VMs the latency rounds use.
struct Setup {
    closed: String,
    open: String,
    network: String,
    a: Vm,
    b: Vm,
}

fn setup(api: &Api) -> Setup {
    let open = api.create("security_group", json!({"name": "bench-open"}));
    api.create(
        "security_group_rule",
        json!({"security_group_id": id(&open), "direction": "ingress", "ethertype": "IPv4",
               "protocol": "tcp", "port_range_min": SERVER_PORT, "port_range_max": SERVER_PORT}),
    );
    let closed = api.create("security_group", json!({"name": "bench-closed"}));
    lab(NAME, &["vm", "boot", "--host", "host1", "--name", "a"]);
    lab(
        NAME,
        &[
            "vm",
            "boot",
            "--host",
            "host2",
            "--name",
            "b",
            "--security-group",
            "bench-closed",
        ],
    );
    let (a, b) = (vm("a"), vm("b"));
    let state = Lab::load(NAME).expect("the lab");
    let network = state.openstack.expect("openstack").network;
    // The other ports: bound to the lab's hosts in a group of their own (no VM behind them).
    let filler = api.create("security_group", json!({"name": "bench-filler"}));
    let ports: Vec<Value> = (0..PORTS - 2)
        .map(|n| {
            json!({"network_id": network, "device_owner": "compute:nova",
                   "device_id": format!("filler-{n}"), "binding:host_id": format!("host{}", 1 + n % 2),
                   "security_groups": [id(&filler)]})
        })
        .collect();
    api.create_many("ports", ports, 20);
    std::mem::forget(serve(&b.netns));
    Setup {
        closed: id(&closed),
        open: id(&open),
        network,
        a,
        b,
    }
}

/// Waits until etcd has an OpenStack endpoint for each of the lab's ports and Felix applied.
fn settle(count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = etcdctl(&["get", "/calico/v1/host/", "--prefix", "--keys-only"]);
        let endpoints = out
            .lines()
            .filter(|l| l.contains("/workload/openstack/"))
            .count();
        if endpoints >= count {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{endpoints} of {count} endpoints in etcd"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    lab(NAME, &["wait"]);
}

fn latency_rounds(api: &Api, setup: &Setup, rounds: usize) -> Latencies {
    let mut l = Latencies::default();
    let to_b = format!("{}:{SERVER_PORT}", setup.b.ip);
    let a = &setup.a.netns;
    for round in 0..rounds {
        // A rule letting the echo port into b's group, then deleted.
        let rule = json!({"security_group_rule": {"security_group_id": setup.closed,
            "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
            "port_range_min": SERVER_PORT, "port_range_max": SERVER_PORT}});
        let probe = Probe::start(a, true, &to_b);
        let (made, at) = api.timed("POST", "/v2.0/security-group-rules", Some(rule));
        l.rule_add.push(probe.since(at));
        let rule_id = id(&made["security_group_rule"]);
        let probe = Probe::start(a, false, &to_b);
        let (_, at) = api.timed(
            "DELETE",
            &format!("/v2.0/security-group-rules/{rule_id}"),
            None,
        );
        l.rule_delete.push(probe.since(at));

        // b's port added to the open group, then taken out again.
        let path = format!("/v2.0/ports/{}", setup.b.port);
        let groups = |g: Vec<&String>| Some(json!({"port": {"security_groups": g}}));
        let probe = Probe::start(a, true, &to_b);
        let (_, at) = api.timed("PUT", &path, groups(vec![&setup.closed, &setup.open]));
        l.member_add.push(probe.since(at));
        let probe = Probe::start(a, false, &to_b);
        let (_, at) = api.timed("PUT", &path, groups(vec![&setup.closed]));
        l.member_remove.push(probe.since(at));

        // A port made for a VM on host1 (plugged as soon as the call returns), then deleted.
        let (create, delete) = port_round(api, setup, round);
        l.port_create.push(create);
        l.port_delete.push(delete);
    }
    l
}

/// One port's life: the VM's namespace and echo server ready first, the port created (with
/// its address and MAC), the TAP named and up at once (Nova's plug), reachable from `a`;
/// then the port deleted, unreachable.
fn port_round(api: &Api, setup: &Setup, round: usize) -> (f64, f64) {
    let netns = format!("{NAME}.bench-c");
    let mac = format!("fa:16:3e:be:{:02x}:{:02x}", round / 256, round % 256);
    let address = free_address(api, &setup.network);
    ip(&["netns", "add", &netns]);
    let host = Lab::load(NAME).expect("lab").hosts[0].netns.clone();
    ip(&[
        "-n", &host, "link", "add", "benchtmp", "type", "veth", "peer", "name", "eth0", "netns",
        &netns,
    ]);
    ip(&["-n", &netns, "link", "set", "eth0", "address", &mac]);
    ip(&["-n", &netns, "link", "set", "eth0", "up"]);
    ip(&["-n", &netns, "link", "set", "lo", "up"]);
    ip(&[
        "-n",
        &netns,
        "addr",
        "add",
        &format!("{address}/24"),
        "dev",
        "eth0",
    ]);
    ip(&[
        "-n",
        &netns,
        "route",
        "add",
        "default",
        "via",
        openstack::GATEWAY,
    ]);
    let mut server = serve(&netns);
    std::thread::sleep(Duration::from_millis(200));
    let to = format!("{address}:{SERVER_PORT}");
    let port = json!({"port": {"network_id": setup.network, "device_owner": "compute:nova",
        "device_id": format!("bench-c-{round}"), "binding:host_id": "host1",
        "mac_address": mac, "security_groups": [setup.open],
        "fixed_ips": [{"subnet_id": subnet_v4(api, &setup.network), "ip_address": address}]}});
    let probe = Probe::start(&setup.a.netns, true, &to);
    let (made, at) = api.timed("POST", "/v2.0/ports", Some(port));
    let port_id = id(&made["port"]);
    let tap = format!("tap{}", &port_id[..11]);
    ip(&["-n", &host, "link", "set", "benchtmp", "name", &tap]);
    ip(&["-n", &host, "link", "set", &tap, "up"]);
    let create = probe.since(at);
    let probe = Probe::start(&setup.a.netns, false, &to);
    let (_, at) = api.timed("DELETE", &format!("/v2.0/ports/{port_id}"), None);
    let delete = probe.since(at);
    let _ = server.kill();
    let _ = server.wait();
    ip(&["netns", "del", &netns]);
    (create, delete)
}

/// An IPv4 address of the lab's subnet that no port has (Neutron gave the other ports theirs
/// from anywhere in its allocation pool), from the top down.
fn free_address(api: &Api, network: &str) -> String {
    let ports = api.call(
        "GET",
        &format!("/v2.0/ports?network_id={network}&fields=fixed_ips"),
        None,
    );
    let used: std::collections::BTreeSet<String> = ports["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["fixed_ips"].as_array().cloned().unwrap_or_default())
        .filter_map(|ip| ip["ip_address"].as_str().map(str::to_owned))
        .collect();
    (2..=254)
        .rev()
        .map(|host| format!("10.28.0.{host}"))
        .find(|a| !used.contains(a) && a != openstack::GATEWAY)
        .expect("a free address in the lab's /24")
}

fn subnet_v4(api: &Api, network: &str) -> String {
    let subnets = api.call(
        "GET",
        &format!("/v2.0/subnets?network_id={network}&ip_version=4"),
        None,
    );
    id(&subnets["subnets"][0])
}

fn row(name: &str, samples: &[f64]) -> String {
    let t = Tails::of(samples.iter().copied()).expect("samples");
    format!(
        "| {name} | {} | {:.0} | {:.0} | {:.0} |",
        samples.len(),
        t.median,
        t.p99,
        t.max
    )
}

fn print_latencies(mode: &str, l: &Latencies) {
    println!("\n{mode}: enforcement latency (ms), API call returned → kernel");
    println!("| change | samples | median | p99 | max |\n| --- | --- | --- | --- | --- |");
    for (name, samples) in [
        ("rule added (connections allowed)", &l.rule_add),
        ("rule deleted (new connections refused)", &l.rule_delete),
        ("port created (VM reachable)", &l.port_create),
        ("port deleted (VM unreachable)", &l.port_delete),
        ("port added to a group (allowed)", &l.member_add),
        ("port taken out of a group (refused)", &l.member_remove),
    ] {
        println!("{}", row(name, samples));
    }
}

/// calico-neutron's pid (in the fabric, not its supervisor).
fn calico_neutron_pid() -> i32 {
    let fabric = Lab::fabric_netns(NAME);
    calico_lab::topology::netns_pids(&fabric)
        .into_iter()
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let first = cmdline.split(|&b| b == 0).next().unwrap_or_default();
            first.ends_with(b"/calico-neutron")
        })
        .expect("calico-neutron runs")
}

fn rss_mib(pid: i32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// CPU seconds a process has used.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, r)| r)
        .unwrap_or("")
        .split(' ')
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// neutron-server's access log lines of requests from the fabric's own address (calico-neutron).
fn neutron_requests() -> usize {
    let state = Lab::load(NAME).expect("lab");
    let log = std::fs::read_to_string(openstack::server_log(&state)).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("neutron.wsgi") && l.contains("] 10.99.0.1 \""))
        .count()
}

/// Restarts calico-neutron in `mode` and waits for its first resync; its pid.
fn restart(mode: &str) -> i32 {
    let state = Lab::load(NAME).expect("lab");
    let log = state.log_path("calico-neutron");
    let before = std::fs::read_to_string(&log).unwrap_or_default().len();
    lab(
        NAME,
        &[
            "restart-neutron",
            "--calico-neutron",
            "--",
            "--change-source",
            mode,
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let new = &text[before.min(text.len())..];
        if new.contains("resync done")
            || (mode == "polling" && new.contains("etcd updated from neutron"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "calico-neutron did not sync in 300 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    calico_neutron_pid()
}

fn latency(api: &Api, rounds: usize) {
    let setup = setup(api);
    settle(PORTS);
    for mode in ["notifications", "polling"] {
        restart(mode);
        settle(PORTS);
        let started = Instant::now();
        let l = latency_rounds(api, &setup, rounds);
        eprintln!("{mode}: {rounds} rounds in {:?}", started.elapsed());
        print_latencies(mode, &l);
    }
}

/// Scale: 200 groups of 10 rules, 1,000 ports; per mode: start-up, a minute of steady state,
/// one rule added.
/// `others`: the ports already there (the latency part's).
fn scale(api: &Api, others: usize) {
    let made = Instant::now();
    // A network of its own: 1,000 ports do not fit in the lab's /24.
    let network = id(&api.create("network", json!({"name": "bench-scale"})));
    api.create(
        "subnet",
        json!({"network_id": network, "ip_version": 4, "cidr": "10.40.0.0/20", "name": "bench-scale-v4"}),
    );
    let groups: Vec<Value> = (0..SCALE_GROUPS)
        .map(|n| json!({"name": format!("scale-{n}")}))
        .collect();
    let groups: Vec<String> = api
        .create_many("security_groups", groups, 50)
        .iter()
        .map(id)
        .collect();
    // One request per group: Neutron takes a bulk of rules only for one group at a time.
    for (n, group) in groups.iter().enumerate() {
        let mut rules = Vec::new();
        for r in 0..RULES_PER_GROUP {
            let mut rule = json!({"security_group_id": group, "direction": "ingress", "ethertype": "IPv4",
                "protocol": "tcp", "port_range_min": 1000 + r, "port_range_max": 1000 + r});
            if r == 0 {
                rule["remote_group_id"] = json!(groups[(n + 1) % groups.len()]);
            }
            rules.push(rule);
        }
        api.create_many("security_group_rules", rules, RULES_PER_GROUP);
    }
    let ports: Vec<Value> = (0..SCALE_PORTS)
        .map(|n| {
            json!({"network_id": network, "device_owner": "compute:nova",
                   "device_id": format!("scale-vm-{n}"), "binding:host_id": format!("scale-host{}", n % 20),
                   "security_groups": [groups[n % groups.len()]]})
        })
        .collect();
    api.create_many("ports", ports, 50);
    eprintln!(
        "made {SCALE_PORTS} ports, {SCALE_GROUPS} groups, {} rules in {:?}",
        SCALE_GROUPS * RULES_PER_GROUP,
        made.elapsed()
    );
    println!(
        "\nscale: {SCALE_PORTS} ports (and {others} others), {SCALE_GROUPS} groups, {} rules",
        SCALE_GROUPS * RULES_PER_GROUP
    );
    println!(
        "| mode | start-up sync | its requests | RSS after it | steady minute: requests, CPU | one rule added as the minute ends (the next resync reading): to etcd, requests | one rule added 10 s later: to etcd, requests | RSS at the end |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for mode in ["notifications", "polling"] {
        let requests = neutron_requests();
        let started = Instant::now();
        let pid = restart(mode);
        let startup = started.elapsed();
        let startup_requests = neutron_requests() - requests;
        let rss = rss_mib(pid);
        let (requests, cpu) = (neutron_requests(), cpu_seconds(pid));
        std::thread::sleep(Duration::from_secs(60));
        let steady = neutron_requests() - requests;
        let steady_cpu = cpu_seconds(pid) - cpu;
        // The resync interval is 60 s: the next resync starts as the minute ends.
        let requests = neutron_requests();
        let (to_etcd, change_requests) = one_rule(api, &groups[7], requests);
        std::thread::sleep(Duration::from_secs(10));
        let requests = neutron_requests();
        let (quiet_to_etcd, quiet_requests) = one_rule(api, &groups[8], requests);
        println!(
            "| {mode} | {:.1} s | {startup_requests} | {rss:.0} MiB | {steady}, {steady_cpu:.1} s | {to_etcd:.0} ms, {change_requests} | {quiet_to_etcd:.0} ms, {quiet_requests} | {:.0} MiB |",
            startup.as_secs_f64(),
            rss_mib(pid)
        );
    }
}

/// Lifts Neutron's per-project quotas (10 security groups, 100 rules, 500 ports by default)
/// for the admin's project, which owns everything the benchmark makes.
fn unlimited_quotas(api: &Api) {
    let state = Lab::load(NAME).expect("lab");
    let network = state.openstack.expect("openstack").network;
    let project =
        api.call("GET", &format!("/v2.0/networks/{network}"), None)["network"]["project_id"]
            .as_str()
            .expect("the network's project")
            .to_owned();
    api.call(
        "PUT",
        &format!("/v2.0/quotas/{project}"),
        Some(
            json!({"quota": {"security_group": -1, "security_group_rule": -1, "port": -1,
                              "network": -1, "subnet": -1}}),
        ),
    );
}

/// Adds a rule to `group`; the time until its profile in etcd has it, and calico-neutron's
/// Neutron requests meanwhile (counted from `before`).
fn one_rule(api: &Api, group: &str, before: usize) -> (f64, usize) {
    let key = format!("/calico/v1/policy/profile/openstack-sg-{group}/rules");
    let started = Instant::now();
    api.create(
        "security_group_rule",
        json!({"security_group_id": group, "direction": "ingress", "ethertype": "IPv4",
               "protocol": "udp", "port_range_min": 5353 + (before % 100), "port_range_max": 5353 + (before % 100)}),
    );
    let wanted = format!("\"dst_ports\":[{}]", 5353 + (before % 100));
    loop {
        let value = etcdctl(&["get", &key, "--print-value-only"]);
        if value.contains(&wanted) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the rule did not reach etcd"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    (
        started.elapsed().as_secs_f64() * 1e3,
        neutron_requests() - before,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("probe") {
        return probe(&args[1..]);
    }
    let rounds: usize = std::env::var("OPENSTACK_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let parts = std::env::var("OPENSTACK_BENCH_PARTS").unwrap_or_else(|_| "latency,scale".into());
    let _ = Command::new(lab_bin())
        .args(["--lab", NAME, "down"])
        .output();
    lab(NAME, &["up", "--hosts", "2", "--openstack", "--no-flows"]);
    let _down = Down(NAME.to_owned());
    let state = Lab::load(NAME).expect("the lab");
    let api = Api {
        client: state
            .openstack
            .as_ref()
            .expect("openstack")
            .client()
            .expect("client")
            // Bulk creations of dozens of ports take longer than the default 10 s here.
            .with_timeout(Duration::from_secs(300)),
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime"),
    };
    unlimited_quotas(&api);
    if parts.contains("latency") {
        latency(&api, rounds);
    }
    if parts.contains("scale") {
        scale(&api, if parts.contains("latency") { PORTS } else { 0 });
    }
}
