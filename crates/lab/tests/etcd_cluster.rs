//! A lab on a 3-member etcd cluster: the leader killed while policies are written and a
//! workload is added (writes carry on, nothing acknowledged is lost, no agent exits), and the
//! quorum lost (the dataplane stays as it was, writes fail naming the endpoints, everything
//! resyncs when the members return).

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use calico_lab::processes::pid_alive;
use calico_testkit::eventually;
use common::{BIN, TestLab};

const POLICY: &str = r#"{"selector": "all()", "order": 10, "inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

/// What the host's firewall shows of a programmed policy: its rule's comment (the same on
/// both backends).
fn programmed(name: &str) -> String {
    format!("policy default/{name} inbound rule 1")
}

fn policy_key(name: &str) -> String {
    format!("/calico/v1/policy/tier/default/policy/{name}")
}

/// A cluster lab with w1 on host1 and w2 on host2.
fn cluster_lab() -> TestLab {
    let lab = TestLab::up_with(2, &["--etcd-members", "3"]);
    lab.workload("host1", "w1", "10.65.0.2", &[], &[]);
    lab.workload("host2", "w2", "10.65.0.3", &[], &[]);
    lab
}

/// Every Felix (the process under its supervisor) and calico-node: they must never exit.
fn agent_pids(lab: &TestLab) -> Vec<i32> {
    let state = lab.state();
    let mut pids = Vec::new();
    for host in &state.hosts {
        let supervisor = host.felix_pid.expect("felix runs");
        let children =
            std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children"))
                .expect("felix's supervisor runs");
        pids.extend(
            children
                .split_whitespace()
                .map(|p| p.parse::<i32>().unwrap()),
        );
        pids.push(host.node_pid.expect("calico-node runs"));
    }
    assert_eq!(
        pids.len(),
        4,
        "felix and calico-node on two hosts: {pids:?}"
    );
    pids
}

fn assert_alive(pids: &[i32]) {
    let dead: Vec<&i32> = pids.iter().filter(|&&p| !pid_alive(p)).collect();
    assert!(dead.is_empty(), "agents exited: {dead:?} of {pids:?}");
}

/// The leader, from `calico-lab etcd status`.
fn leader(lab: &TestLab) -> Option<String> {
    let out = lab.ok(&["etcd", "status"]);
    out.lines()
        .find(|l| l.ends_with(" leader"))
        .map(|l| l.split(' ').next().unwrap().to_owned())
}

fn assert_programmed(lab: &TestLab, policies: &[String]) {
    for host in ["host1", "host2"] {
        let rules = lab.firewall(host);
        let missing: Vec<&String> = policies
            .iter()
            .filter(|p| !rules.contains(&programmed(p)))
            .collect();
        assert!(
            missing.is_empty(),
            "{host}: acknowledged policies not programmed: {missing:?}"
        );
    }
}

fn calicoctl(lab: &TestLab, args: &[&str]) -> std::process::Output {
    std::process::Command::new(PathBuf::from(BIN).with_file_name("calicoctl"))
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(args)
        .output()
        .expect("calicoctl runs")
}

/// Writes policies `p0`, `p1`, … until told to stop, each retried until etcd acknowledges it.
struct Writer {
    acked: Arc<Mutex<Vec<String>>>,
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(lab: &TestLab) -> Writer {
        let endpoints = lab.state().client_endpoint;
        let (acked, failures) = (Arc::default(), Arc::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (a, f, s) = (Arc::clone(&acked), Arc::clone(&failures), Arc::clone(&stop));
        let thread = std::thread::spawn(move || write_policies(&endpoints, &a, &f, &s));
        Writer {
            acked,
            failures,
            stop,
            thread: Some(thread),
        }
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    fn finish(mut self) -> (Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("writer");
        let acked = self.acked.lock().unwrap().clone();
        let failures = self.failures.lock().unwrap().clone();
        (acked, failures)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn write_policies(
    endpoints: &str,
    acked: &Mutex<Vec<String>>,
    failures: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let deadline = Instant::now() + Duration::from_secs(40);
    for n in 0.. {
        let name = format!("p{n}");
        loop {
            if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                return;
            }
            let out = std::process::Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", endpoints, "--command-timeout=3s"])
                .args(["put", &policy_key(&name), POLICY])
                .output()
                .expect("etcdctl runs");
            if out.status.success() {
                acked.lock().unwrap().push(name);
                break;
            }
            let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            failures.lock().unwrap().push(format!("{name}: {why}"));
        }
    }
}

#[test]
fn leader_killed_while_writing_loses_nothing() {
    let lab = cluster_lab();
    let agents = agent_pids(&lab);
    let writer = Writer::start(&lab);
    eventually("5 policies written", Duration::from_secs(20), || {
        (writer.acked() >= 5).then_some(()).ok_or("fewer".into())
    });
    let old = leader(&lab).expect("a leader");
    lab.ok(&["etcd", "stop", &old]);
    let at_kill = writer.acked();
    // A workload added while the cluster elects a new leader (CNI, IPAM, the endpoint). The
    // CNI plugin does not retry an election's "leader changed": like a runtime, try again.
    let add = [
        "workload",
        "add",
        "--host",
        "host1",
        "--name",
        "w3",
        "--ip",
        "10.65.0.4",
    ];
    let mut add_failures = Vec::new();
    eventually("w3 added", Duration::from_secs(30), || {
        let out = lab.cli(&add);
        match out.status.success() {
            true => Ok(()),
            false => {
                add_failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
                Err(add_failures.last().unwrap().clone())
            }
        }
    });
    eprintln!(
        "workload add failed {} times first: {add_failures:?}",
        add_failures.len()
    );
    eventually("a new leader", Duration::from_secs(20), || {
        match leader(&lab) {
            Some(new) if new != old => Ok(()),
            other => Err(format!("leader {other:?}")),
        }
    });
    eventually("10 more policies written", Duration::from_secs(20), || {
        (writer.acked() >= at_kill + 10)
            .then_some(())
            .ok_or(format!("{} of {}", writer.acked(), at_kill + 10))
    });
    let (acked, failures) = writer.finish();
    eprintln!(
        "leader {old} killed after {at_kill} writes; {} acknowledged, {} attempts failed: {failures:?}",
        acked.len(),
        failures.len()
    );
    lab.wait();
    assert_programmed(&lab, &acked);
    assert!(lab.tcp("w3", "10.65.0.3", 80), "w3 reaches w2 on host2");
    assert!(lab.tcp("w2", "10.65.0.4", 80), "w2 reaches w3");
    assert_alive(&agents);
}

#[test]
fn quorum_lost_keeps_the_dataplane_and_resyncs() {
    let lab = cluster_lab();
    let agents = agent_pids(&lab);
    lab.put(&policy_key("before"), POLICY);
    lab.wait();
    let before = lab.firewall("host1");
    let leader = leader(&lab).expect("a leader");
    let stopped: Vec<String> = ["etcd1", "etcd2", "etcd3"]
        .iter()
        .filter(|m| **m != leader)
        .map(|m| m.to_string())
        .collect();
    for member in &stopped {
        lab.ok(&["etcd", "stop", member]);
    }
    let out = calicoctl(&lab, &["put", &policy_key("lost"), POLICY]);
    let error = String::from_utf8_lossy(&out.stderr);
    eprintln!("calicoctl without quorum: {error}");
    assert!(!out.status.success(), "a write without quorum must fail");
    assert!(
        error.contains(&lab.state().client_endpoint),
        "the error names the endpoints: {error}"
    );
    // Felix has lost etcd for several seconds now: its dataplane has not moved.
    let observed = Instant::now();
    while observed.elapsed() < Duration::from_secs(3) {
        assert_eq!(
            lab.firewall("host1"),
            before,
            "dataplane changed without quorum"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    for member in &stopped {
        lab.ok(&["etcd", "start", member]);
    }
    eventually(
        "a write after quorum returns",
        Duration::from_secs(30),
        || {
            let out = calicoctl(&lab, &["put", &policy_key("after"), POLICY]);
            match out.status.success() {
                true => Ok(()),
                false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            }
        },
    );
    lab.wait();
    assert_programmed(&lab, &["before".to_owned(), "after".to_owned()]);
    assert!(!lab.firewall("host1").contains(&programmed("lost")));
    assert_alive(&agents);
}
