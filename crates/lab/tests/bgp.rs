//! BGP with real BIRD on lab hosts: calico-node on each host registers it, renders BIRD's
//! configuration and runs BIRD; workloads on different hosts reach each other only through
//! the routes BGP spreads (the lab has no static routes).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use calico_testkit::eventually;
use common::{BIN, OPEN, TestLab};

/// How long a BGP change may take to show.
const WAIT: Duration = Duration::from_secs(30);

fn routes(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "ip", &["route"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The blocks a host has affinity to, as `10.65.x.y/26`.
fn blocks_of(lab: &TestLab, host: &str) -> Vec<String> {
    let prefix = format!("/calico/ipam/v2/host/{host}/ipv4/block/");
    let out = lab.etcdctl(&["get", &prefix, "--prefix", "--keys-only"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|cidr| cidr.replacen('-', "/", 1))
        .collect()
}

fn calicoctl(lab: &TestLab, args: &[&str]) -> String {
    let out = Command::new(PathBuf::from(BIN).with_file_name("calicoctl"))
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `calicoctl node status` inside a host (it reads that host's BIRD socket).
fn node_status(lab: &TestLab, host: &str) -> String {
    try_node_status(lab, host).unwrap_or_else(|error| panic!("node status on {host}: {error}"))
}

/// `calicoctl node status`, or its error (while BIRD is down).
fn try_node_status(lab: &TestLab, host: &str) -> Result<String, String> {
    let socket = lab.state().dir.join(host).join("bird.ctl");
    let ctl = PathBuf::from(BIN).with_file_name("calicoctl");
    let out = lab.in_host(
        host,
        ctl.to_str().unwrap(),
        &["node", "status", "--bird-socket", socket.to_str().unwrap()],
    );
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// The pid of a process named `name` inside a host's namespace.
fn pid_in(lab: &TestLab, host: &str, name: &str) -> Option<i32> {
    calico_testkit::processes_in_netns(&format!("{}.{host}", lab.name))
        .into_iter()
        .find_map(|(pid, comm)| (comm == name).then_some(pid))
}

fn all_reach(lab: &TestLab, workloads: &[(&str, &str)]) {
    for (from, _) in workloads {
        for (to, ip) in workloads.iter().filter(|(to, _)| to != from) {
            assert!(lab.ping(from, ip), "{from} cannot ping {to} ({ip})");
        }
    }
}

/// w1, w2, w3 on host1, host2, host3, with an open profile.
const WORKLOADS: [(&str, &str); 3] = [
    ("w1", "10.65.1.1"),
    ("w2", "10.65.2.1"),
    ("w3", "10.65.3.1"),
];

/// A 3-host lab (`calico-lab up` with `extra`) with [`WORKLOADS`], programmed and routed.
fn three_hosts(extra: &[&str]) -> TestLab {
    let lab = TestLab::up_with(3, extra);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    for (n, (name, ip)) in WORKLOADS.iter().enumerate() {
        lab.workload(&format!("host{}", n + 1), name, ip, &["open"], &[]);
    }
    lab.wait();
    lab
}

#[test]
fn mesh_block_routes_borrowed_addresses_route_reflection_and_a_stopped_host() {
    let lab = three_hosts(&[]);
    let workloads = WORKLOADS;
    // One route per block, learned over BGP; the own block is a blackhole.
    let on1 = routes(&lab, "host1");
    for block in blocks_of(&lab, "host2") {
        assert!(
            on1.contains(&format!("{block} via 10.99.0.12 dev eth0 proto bird")),
            "{on1}"
        );
    }
    assert!(on1.contains("blackhole 10.65.1.0/26 proto bird"), "{on1}");
    assert!(
        !on1.contains("10.65.2.1 via"),
        "a workload inside a block travels as the block: {on1}"
    );
    all_reach(&lab, &workloads);
    // Two peers, over IPv4 and IPv6 (the IPv6 sessions may still be connecting).
    eventually("host1's four mesh sessions are established", WAIT, || {
        let status = node_status(&lab, "host1");
        let sessions = status.matches(" mesh ").count();
        if sessions == 4 && status.matches("Established").count() == 4 {
            Ok(())
        } else {
            Err(status)
        }
    });
    let list = calicoctl(&lab, &["node", "list"]);
    assert!(
        list.contains("host3") && list.contains("10.99.0.13") && list.contains("mesh: on"),
        "{list}"
    );

    // A workload on host2 with an address of host1's block (borrowed) travels as a /32.
    lab.workload("host2", "borrower", "10.65.1.7", &["open"], &[]);
    lab.wait();
    let on1 = routes(&lab, "host1");
    assert!(
        on1.contains("10.65.1.7 via 10.99.0.12 dev eth0 proto bird"),
        "{on1}"
    );
    assert!(
        lab.ping("w1", "10.65.1.7"),
        "w1 cannot reach the borrowed address on host2"
    );
    assert!(
        lab.ping("w3", "10.65.1.7"),
        "w3 cannot reach the borrowed address on host2"
    );

    // Turning the mesh off with host1 as route reflector keeps everyone connected: host2 and
    // host3 now hear each other's routes through host1.
    lab.put("/calico/bgp/v1/host/host1/rr_cluster_id", "1.0.0.1");
    lab.put("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#);
    eventually("host2 peers only with the reflector", WAIT, || {
        let status = node_status(&lab, "host2");
        let only_rr = !status.contains("10.99.0.13") && !status.contains(" mesh ");
        if only_rr && status.matches("Established").count() == 2 {
            Ok(())
        } else {
            Err(status)
        }
    });
    lab.wait();
    all_reach(&lab, &workloads);
    assert!(
        lab.ping("w3", "10.65.1.7"),
        "w3 cannot reach the borrowed address via the reflector"
    );

    // Stopping host3's calico-node (and with it BIRD) withdraws host3's routes elsewhere.
    let node = pid_in(&lab, "host3", "calico-node").expect("calico-node runs on host3");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(node),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let block3 = blocks_of(&lab, "host3");
    eventually("host1 forgets host3's block", WAIT, || {
        let on1 = routes(&lab, "host1");
        match block3.iter().find(|b| on1.contains(b.as_str())) {
            Some(b) => Err(format!("{b} still routed:\n{on1}")),
            None => Ok(()),
        }
    });
    assert!(
        !lab.ping("w1", "10.65.3.1"),
        "host3's workload is still reachable without a route"
    );
}

#[test]
fn route_reflectors_without_the_mesh_and_bird_restarted_after_a_kill() {
    let lab = three_hosts(&["--no-mesh", "--route-reflector", "host1"]);
    let workloads = WORKLOADS;
    // host2 and host3 peer only with the reflector, which reflects their routes to each other.
    let status = node_status(&lab, "host2");
    assert!(
        status.contains("10.99.0.11") && status.contains(" rr "),
        "{status}"
    );
    assert!(
        !status.contains("10.99.0.13"),
        "clients do not peer with each other:\n{status}"
    );
    let on2 = routes(&lab, "host2");
    for block in blocks_of(&lab, "host3") {
        assert!(
            on2.contains(&format!("{block} via 10.99.0.13")),
            "reflected with host3 as next hop: {on2}"
        );
    }
    all_reach(&lab, &workloads);

    // BIRD killed on host2: calico-node starts it again (graceful restart) and no route
    // goes away meanwhile, on host2's peers (the reflector and, through it, host3) nor in
    // host2's own kernel.
    let (block2, block3) = (blocks_of(&lab, "host2"), blocks_of(&lab, "host3"));
    let missing = || -> Option<String> {
        for (host, blocks) in [("host1", &block2), ("host3", &block2), ("host2", &block3)] {
            let table = routes(&lab, host);
            if let Some(block) = blocks.iter().find(|b| !table.contains(b.as_str())) {
                return Some(format!("{host} lost its route to {block}:\n{table}"));
            }
        }
        None
    };
    assert_eq!(missing(), None);
    let bird = pid_in(&lab, "host2", "bird").expect("BIRD runs on host2");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bird),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let restarted = std::time::Instant::now() + WAIT;
    loop {
        if let Some(lost) = missing() {
            panic!("a BIRD restart withdrew a route: {lost}");
        }
        let status = try_node_status(&lab, "host2").unwrap_or_else(|error| error);
        let back = pid_in(&lab, "host2", "bird").is_some_and(|pid| pid != bird)
            && status.contains("Established");
        if back {
            break;
        }
        assert!(
            std::time::Instant::now() < restarted,
            "BIRD on host2 did not come back:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // After recovery (End-of-RIB from every peer) the routes are still there.
    lab.wait();
    assert_eq!(missing(), None);
    all_reach(&lab, &workloads);

    // The mesh switched back on, without reflectors: still connected.
    lab.del("/calico/bgp/v1/host/host1/rr_cluster_id");
    lab.put("/calico/bgp/v1/global/node_mesh", r#"{"enabled": true}"#);
    eventually("host2 meshes with host3", WAIT, || {
        let status = node_status(&lab, "host2");
        if status.contains("10.99.0.13") && status.matches("Established").count() == 4 {
            Ok(())
        } else {
            Err(status)
        }
    });
    lab.wait();
    all_reach(&lab, &workloads);
}
