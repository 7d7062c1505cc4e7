//! calico-node as it runs on a host: inside a test-made namespace (with etcd on its loopback and
//! an interface holding the default route), with real Felix and real BIRD.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use calico_linux::Netns;
use calico_testkit::{EtcdServer, NetNs, require_tool};

struct Running {
    child: Child,
}

impl Drop for Running {
    /// SIGTERM first, so calico-node stops its BIRD and Felix (SIGKILL would leave them running
    /// in the test's namespace); SIGKILL if it has not ended within 10 s.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// calico-node in `host` with `args` and `env`, its run directory `run_dir` and its output in
/// `run_dir/node.log`.
fn spawn_node(host: &NetNs, run_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
    let log_file = std::fs::File::create(run_dir.join("node.log")).unwrap();
    let child = Netns::named(host.name())
        .command(env!("CARGO_BIN_EXE_calico-node"))
        .args(args)
        .arg("--run-dir")
        .arg(run_dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    Running { child }
}

/// Waits (up to 30 s) until `check` finds something, and returns it; a timeout shows
/// calico-node's log.
fn until_found(what: &str, log: &Path, mut check: impl FnMut() -> Option<String>) -> String {
    let mut found = None;
    calico_testkit::eventually(what, Duration::from_secs(30), || {
        found = check();
        match found {
            Some(_) => Ok(()),
            None => Err(format!(
                "calico-node's log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )),
        }
    });
    found.expect("eventually returns once check found something")
}

fn get(etcd: &EtcdServer, key: &str) -> Option<String> {
    let out = etcd.etcdctl(&["get", key, "--print-value-only"]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The pid of a process named `name` in the namespace.
fn pid_of(ns: &NetNs, name: &str) -> Option<i32> {
    ns.processes()
        .into_iter()
        .find_map(|(pid, comm)| (comm == name).then_some(pid))
}

#[test]
fn registers_supervises_felix_and_bird_and_keeps_a_config_bird_rejects_out() {
    for tool in ["bird", "birdc", "ip", "iptables", "ipset"] {
        require_tool(tool);
    }
    let felix = PathBuf::from(env!("CARGO_BIN_EXE_calico-node")).with_file_name("calico-felix");
    assert!(
        felix.is_file(),
        "{} is missing: cargo build -p calico-felix",
        felix.display()
    );
    let host = NetNs::new("node-host");
    // The interface with the default route: its address is the one to detect.
    host.run_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
        ],
        "",
    );
    host.run_ok("ip", &["addr", "add", "10.98.0.5/24", "dev", "eth0"], "");
    host.run_ok("ip", &["link", "set", "eth0", "up"], "");
    host.run_ok("ip", &["link", "set", "peer0", "up"], "");
    host.run_ok("ip", &["route", "add", "default", "via", "10.98.0.1"], "");
    let etcd = EtcdServer::start_in_netns(host.name());
    let put = etcd.etcdctl(&["put", "/calico/v1/Ready", "true"]);
    assert!(put.status.success());
    let run_dir = tempfile::tempdir().unwrap();
    let log = run_dir.path().join("node.log");
    let args = [
        "--hostname",
        "node-a",
        "--ip",
        "auto",
        "--ip6",
        "fd00:98::5",
        "--as",
        "64700",
        "--etcd-endpoints",
        &etcd.endpoint(),
    ];
    let mut node = spawn_node(
        &host,
        run_dir.path(),
        &args,
        &[("FELIX_LOGFILEPATH", "none")],
    );

    // Registration: the detected address, the given IPv6 address and AS number.
    let ip = until_found("registration", &log, || {
        get(&etcd, "/calico/bgp/v1/host/node-a/ip_addr_v4")
    });
    assert_eq!(ip, "10.98.0.5");
    assert_eq!(
        get(&etcd, "/calico/bgp/v1/host/node-a/ip_addr_v6").as_deref(),
        Some("fd00:98::5")
    );
    assert_eq!(
        get(&etcd, "/calico/bgp/v1/host/node-a/as_num").as_deref(),
        Some("64700")
    );
    // Felix runs (it reports its status) and so does BIRD, with the rendered configuration.
    until_found("Felix's status", &log, || {
        get(&etcd, "/calico/felix/v1/host/node-a/status")
    });
    let socket = run_dir.path().join("bird.ctl");
    let birdc = |args: &[&str]| {
        let out = host.run(
            "birdc",
            &[&["-s", socket.to_str().unwrap()][..], args].concat(),
            "",
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    until_found("BIRD answering", &log, || {
        birdc(&["show", "status"])
            .contains("Daemon is up")
            .then_some(String::new())
    });
    let config = std::fs::read_to_string(run_dir.path().join("bird.conf")).unwrap();
    assert!(
        config.contains("router id 10.98.0.5;") && config.contains("as 64700"),
        "{config}"
    );

    // A peer BIRD refuses (a link-local neighbor needs an interface): the running configuration
    // stays, and the log says why.
    let bad = r#"{"ip": "fe80::1", "as_num": 64701}"#;
    etcd.etcdctl(&["put", "/calico/bgp/v1/global/peer_v6/fe80::1", bad]);
    until_found("the rejection in the log", &log, || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("BIRD rejects the new configuration")
            .then_some(text)
    });
    let config = std::fs::read_to_string(run_dir.path().join("bird.conf")).unwrap();
    assert!(!config.contains("fe80::1"), "{config}");
    // Fixing it: the next configuration is installed and BIRD reloads it.
    etcd.etcdctl(&["del", "/calico/bgp/v1/global/peer_v6/fe80::1"]);
    etcd.etcdctl(&[
        "put",
        "/calico/bgp/v1/global/peer_v4/10.98.0.9",
        r#"{"ip": "10.98.0.9", "as_num": 64701}"#,
    ]);
    until_found("the new peer in BIRD", &log, || {
        birdc(&["show", "protocols"])
            .contains("Global_10_98_0_9")
            .then_some(String::new())
    });

    // Felix and BIRD killed: calico-node starts them again.
    for name in ["calico-felix", "bird"] {
        let old = pid_of(&host, name).unwrap_or_else(|| panic!("{name} is not running"));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(old),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        until_found(&format!("{name} restarted"), &log, || {
            pid_of(&host, name)
                .filter(|pid| *pid != old)
                .map(|pid| pid.to_string())
        });
    }
    until_found("BIRD answering again", &log, || {
        birdc(&["show", "protocols"])
            .contains("Global_10_98_0_9")
            .then_some(String::new())
    });

    // calico-node killed with SIGKILL cannot stop its children: Felix and BIRD outlive it. The
    // next calico-node stops them and runs one of each (a second BIRD would find the BGP port
    // taken, and the first would never hear of a new configuration).
    let felix_before = pid_of(&host, "calico-felix").expect("Felix runs");
    let bird_before = pid_of(&host, "bird").expect("BIRD runs");
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    assert_eq!(
        pid_of(&host, "bird"),
        Some(bird_before),
        "BIRD outlives calico-node"
    );
    node = spawn_node(
        &host,
        run_dir.path(),
        &args,
        &[("FELIX_LOGFILEPATH", "none")],
    );
    until_found("one new Felix and one new BIRD", &log, || {
        let processes = host.processes();
        let running = |name: &str| -> Vec<i32> {
            processes
                .iter()
                .filter(|(_, comm)| comm == name)
                .map(|(pid, _)| *pid)
                .collect()
        };
        let (felix, bird) = (running("calico-felix"), running("bird"));
        (felix.len() == 1 && bird.len() == 1 && felix[0] != felix_before && bird[0] != bird_before)
            .then_some(String::new())
    });
    until_found("the new BIRD answering with the peer", &log, || {
        birdc(&["show", "protocols"])
            .contains("Global_10_98_0_9")
            .then_some(String::new())
    });

    // SIGTERM stops Felix and BIRD with calico-node.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(node.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .ok();
    let _ = node.child.wait();
    until_found("no processes left", &log, || {
        let left: Vec<String> = host
            .processes()
            .into_iter()
            .map(|(_, comm)| comm)
            .filter(|c| c != "etcd")
            .collect();
        left.is_empty().then_some(String::new())
    });
    drop(node);
}

/// Starts calico-node (without Felix) for `hostname` in `ns`, logging to `log`.
fn start_node(
    ns: &NetNs,
    etcd: &EtcdServer,
    hostname: &str,
    run_dir: &Path,
    log: &Path,
) -> Running {
    let log_file = std::fs::File::create(log).unwrap();
    let child = Netns::named(ns.name())
        .command(env!("CARGO_BIN_EXE_calico-node"))
        .args(["--hostname", hostname, "--ip", "auto", "--felix", "none"])
        .arg("--etcd-endpoints")
        .arg(etcd.endpoint())
        .arg("--run-dir")
        .arg(run_dir)
        .env("CALICO_NODE_LOG", "info,calico_node=debug")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    Running { child }
}

/// Stops calico-node with SIGTERM and waits for it.
fn stop_node(mut node: Running) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(node.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .ok();
    let _ = node.child.wait();
}

fn log_contains(log: &Path, text: &str) -> Option<String> {
    let log = std::fs::read_to_string(log).unwrap_or_default();
    log.contains(text).then_some(log)
}

/// A key's modification revision.
fn mod_revision(etcd: &EtcdServer, key: &str) -> Option<i64> {
    let out = etcd.etcdctl(&["get", key, "-w", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    json["kvs"][0]["mod_revision"].as_i64()
}

/// The handle's record: block → count.
fn handle_blocks(etcd: &EtcdServer, handle: &str) -> Option<serde_json::Value> {
    let text = get(etcd, &format!("/calico/ipam/v2/handle/{handle}"))?;
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    Some(json["block"].clone())
}

#[test]
fn writes_the_vxlan_tunnel_endpoint_when_a_pool_has_vxlan_and_keeps_its_address() {
    use calico_model::tunnel::VxlanTunnel;
    use ipnet::{IpNet, Ipv4Net};
    use std::net::IpAddr;

    for tool in ["bird", "birdc", "ip"] {
        require_tool(tool);
    }
    let host = NetNs::new("node-vxlan");
    host.run_ok(
        "ip",
        &[
            "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
        ],
        "",
    );
    host.run_ok("ip", &["addr", "add", "10.97.0.5/24", "dev", "eth0"], "");
    host.run_ok("ip", &["link", "set", "eth0", "up"], "");
    host.run_ok("ip", &["link", "set", "peer0", "up"], "");
    host.run_ok("ip", &["route", "add", "default", "via", "10.97.0.1"], "");
    let etcd = EtcdServer::start_in_netns(host.name());
    // A pool without VXLAN: no record, no address.
    let plain = r#"{"cidr": "10.66.0.0/16"}"#;
    assert!(
        etcd.etcdctl(&["put", "/calico/v1/ipam/v4/pool/10.66.0.0-16", plain])
            .status
            .success()
    );
    let name = "node-v";
    let key = "/calico/v1/host/node-v/vxlan_tunnel";
    let handle = "vxlan-tunnel-addr-node-v";
    let run_dir = tempfile::tempdir().unwrap();
    let log = run_dir.path().join("node.log");
    let node = start_node(&host, &etcd, name, run_dir.path(), &log);
    until_found("the pass without VXLAN", &log, || {
        log_contains(&log, "no pool has VXLAN")
    });
    assert_eq!(get(&etcd, key), None);
    assert_eq!(handle_blocks(&etcd, handle), None);

    // A VXLAN pool: the record appears, with an address of that pool held by the handle.
    let pool = r#"{"cidr": "10.65.0.0/16", "vxlan_mode": "always"}"#;
    etcd.etcdctl(&["put", "/calico/v1/ipam/v4/pool/10.65.0.0-16", pool]);
    let text = until_found("the VXLAN tunnel record", &log, || get(&etcd, key));
    let tunnel: VxlanTunnel = calico_model::from_json(&text).unwrap();
    let vxlan_pool: Ipv4Net = "10.65.0.0/16".parse().unwrap();
    assert!(vxlan_pool.contains(&tunnel.address), "{text}");
    assert_eq!(
        tunnel.parent_address,
        "10.97.0.5/24".parse().unwrap(),
        "{text}"
    );
    assert_eq!(tunnel.mac, VxlanTunnel::mac_for(name), "{text}");
    let held = |etcd: &EtcdServer| -> Vec<(IpNet, u64)> {
        let blocks = handle_blocks(etcd, handle).unwrap_or_default();
        blocks
            .as_object()
            .into_iter()
            .flatten()
            .map(|(cidr, n)| (cidr.parse().unwrap(), n.as_u64().unwrap()))
            .collect()
    };
    let blocks = held(&etcd);
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert!(
        blocks[0].0.contains(&IpAddr::V4(tunnel.address)) && blocks[0].1 == 1,
        "handle {handle} holds {blocks:?}, not {}",
        tunnel.address
    );
    let revision = mod_revision(&etcd, key).unwrap();

    // A restart leaves the record as it is: same address, not even rewritten.
    stop_node(node);
    let log = run_dir.path().join("node-2.log");
    let node = start_node(&host, &etcd, name, run_dir.path(), &log);
    until_found("the up-to-date pass", &log, || {
        log_contains(&log, "the VXLAN tunnel endpoint is up to date")
    });
    assert_eq!(mod_revision(&etcd, key), Some(revision));
    assert_eq!(held(&etcd), blocks);

    // The record lost: it comes back with the handle's address, nothing more is assigned.
    etcd.etcdctl(&["del", key]);
    let again = until_found("the record rewritten", &log, || get(&etcd, key));
    let again: VxlanTunnel = calico_model::from_json(&again).unwrap();
    assert_eq!(again, tunnel);
    assert_eq!(held(&etcd), blocks);

    // No pool has VXLAN any more: the record goes and the address is released.
    let never = r#"{"cidr": "10.65.0.0/16", "vxlan_mode": "never"}"#;
    etcd.etcdctl(&["put", "/calico/v1/ipam/v4/pool/10.65.0.0-16", never]);
    until_found("the record removed", &log, || {
        (get(&etcd, key).is_none() && handle_blocks(&etcd, handle).is_none())
            .then_some(String::new())
    });
    stop_node(node);
}

/// etcd is down when calico-node starts: it waits with the shared backoff (one warning per
/// attempt naming the endpoint) instead of giving up, and registers once etcd answers.
#[test]
fn waits_for_etcd_then_registers() {
    for tool in ["bird", "birdc", "ip"] {
        require_tool(tool);
    }
    let host = NetNs::new("node-wait");
    host.run_ok("ip", &["link", "set", "lo", "up"], "");
    let mut etcd = EtcdServer::start_in_netns(host.name());
    etcd.put("/calico/v1/Ready", "true");
    etcd.stop();
    let run_dir = tempfile::tempdir().unwrap();
    let log = run_dir.path().join("node.log");
    let args = [
        "--hostname",
        "node-w",
        "--ip",
        "10.98.1.5",
        "--felix",
        "none",
    ];
    let endpoint = etcd.endpoint();
    let mut node = spawn_node(
        &host,
        run_dir.path(),
        &args,
        &[("ETCD_ENDPOINTS", &endpoint)],
    );
    until_found("three warnings naming the endpoint", &log, || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let warnings = text
            .lines()
            .filter(|line| line.contains("retrying in") && line.contains(&etcd.endpoint()))
            .count();
        (warnings >= 3).then_some(text)
    });
    assert!(
        node.child.try_wait().unwrap().is_none(),
        "calico-node exited while etcd was down:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    etcd.restart();
    let ip = until_found("registration once etcd answers", &log, || {
        get(&etcd, "/calico/bgp/v1/host/node-w/ip_addr_v4")
    });
    assert_eq!(ip, "10.98.1.5");
}
