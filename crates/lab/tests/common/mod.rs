//! A lab for one test: brought up through the `calico-lab` binary under a unique name, driven
//! through its command line and etcdctl, and taken down on drop (also when the test fails).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use calico_lab::{Lab, sh};
use calico_testkit::require_tool;

pub mod firewall;
pub mod guarded;
pub mod openstack;

pub use firewall::Backend;

pub const BIN: &str = env!("CARGO_BIN_EXE_calico-lab");

pub struct TestLab {
    pub name: String,
    /// The firewall backend its Felixes run (as started: a test that switches it knows).
    pub backend: Backend,
}

impl TestLab {
    /// `calico-lab up --hosts N` with extra Felix settings (`Name=Value`), on the backend
    /// `CALICO_TEST_BACKEND` asks for unless they name `NFTablesMode`.
    pub fn up(hosts: u32, felix_config: &[&str]) -> TestLab {
        let mut extra = Vec::new();
        for setting in felix_config {
            extra.extend(["--felix-config", setting]);
        }
        TestLab::up_with(hosts, &extra)
    }

    /// `calico-lab up --hosts N` with extra arguments, on the backend `CALICO_TEST_BACKEND`
    /// asks for (see `firewall.rs`) unless they name `NFTablesMode`; checks that every host
    /// runs it.
    pub fn up_with(hosts: u32, extra: &[&str]) -> TestLab {
        TestLab::up_on_env_backend(hosts, extra, false)
    }

    /// As [`TestLab::up_with`], with the flow aggregator and every Felix's flow logs on
    /// (`calico-lab up` without `--no-flows`).
    pub fn up_with_flows(hosts: u32, extra: &[&str]) -> TestLab {
        TestLab::up_on_env_backend(hosts, extra, true)
    }

    fn up_on_env_backend(hosts: u32, extra: &[&str], flows: bool) -> TestLab {
        let mut extra = extra.to_vec();
        if firewall::named_mode(&extra).is_none() && Backend::from_env() == Backend::Nftables {
            extra.extend(["--felix-config", "NFTablesMode=Enabled"]);
        }
        let lab = TestLab::start(hosts, &extra, flows);
        lab.assert_backend(lab.backend);
        lab
    }

    /// `calico-lab up --hosts N` with exactly these arguments, whatever `CALICO_TEST_BACKEND`
    /// says: for a test that sets `NFTablesMode` in etcd (an environment variable would
    /// override it).
    pub fn up_as_given(hosts: u32, extra: &[&str]) -> TestLab {
        TestLab::start(hosts, extra, false)
    }

    /// `calico-lab up`: without the flow aggregator (`--no-flows`) unless `flows`, so that a
    /// test's lab has only what it asks for.
    fn start(hosts: u32, extra: &[&str], flows: bool) -> TestLab {
        for tool in [
            "bird",
            "birdc",
            "ip",
            "etcd",
            "etcdctl",
            "iptables",
            "ipset",
            "ping",
            "conntrack",
        ] {
            require_tool(tool);
        }
        for (binary, package) in [
            ("calico-felix", "calico-felix"),
            ("calico-node", "calico-node"),
            ("calico", "calico-cni"),
            ("calico-ipam", "calico-cni"),
        ] {
            let path = PathBuf::from(BIN).with_file_name(binary);
            assert!(
                path.is_file(),
                "{} is missing: build it first (cargo build -p {package}; scripts/test.sh does)",
                path.display()
            );
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}n{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let backend =
            firewall::named_mode(extra).map_or(Backend::Iptables, |mode| Backend::of_mode(&mode));
        if backend == Backend::Nftables {
            require_tool("nft");
        }
        let lab = TestLab { name, backend };
        let hosts = hosts.to_string();
        let mut args = vec!["up", "--hosts", &hosts];
        if !flows {
            args.push("--no-flows");
        }
        args.extend_from_slice(extra);
        lab.ok(&args);
        lab
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(["--lab", &self.name])
            .args(args)
            .output()
            .expect("calico-lab runs")
    }

    /// Runs a calico-lab command; panics with its output (and the Felix logs) if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        if !out.status.success() {
            panic!(
                "calico-lab {args:?} failed: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.felix_logs()
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn state(&self) -> Lab {
        Lab::load(&self.name).expect("lab state")
    }

    pub fn felix_logs(&self) -> String {
        let lab = match Lab::load(&self.name) {
            Ok(lab) => lab,
            Err(_) => return String::new(),
        };
        let mut all = String::new();
        for host in &lab.hosts {
            let log = std::fs::read_to_string(lab.log_path(&format!("felix-{}", host.name)))
                .unwrap_or_default();
            let lines: Vec<&str> = log.lines().filter(|l| !l.contains(" config ")).collect();
            let tail = lines[lines.len().saturating_sub(25)..].join("\n");
            all.push_str(&format!("--- felix on {} ---\n{tail}\n", host.name));
        }
        all
    }

    /// Adds a workload: `--ip`, then `--profile`s and `--label`s.
    pub fn workload(&self, host: &str, name: &str, ip: &str, profiles: &[&str], labels: &[&str]) {
        let mut args = vec!["workload", "add", "--host", host, "--name", name];
        args.extend(if ip.contains(':') {
            ["--ip6", ip]
        } else {
            ["--ip", ip]
        });
        for p in profiles {
            args.extend(["--profile", p]);
        }
        for l in labels {
            args.extend(["--label", l]);
        }
        self.ok(&args);
    }

    pub fn etcdctl(&self, args: &[&str]) -> Output {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.state().client_endpoint])
            .args(args)
            .output()
            .expect("etcdctl runs")
    }

    pub fn put(&self, key: &str, value: &str) {
        let out = self.etcdctl(&["put", key, value]);
        assert!(
            out.status.success(),
            "etcdctl put {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn del(&self, key: &str) {
        let out = self.etcdctl(&["del", key]);
        assert!(
            out.status.success(),
            "etcdctl del {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until every Felix has programmed everything written so far.
    pub fn wait(&self) {
        self.ok(&["wait"]);
    }

    /// Probes from inside `from`; one word per target (`ok`, `refused`, `blocked`). What looks
    /// blocked is tried again with a longer timeout, so that a slow moment of a loaded machine
    /// is not mistaken for a drop.
    pub fn probe(&self, from: &str, targets: &[String]) -> Vec<String> {
        self.probe_at(&["exec", from, "--"], targets)
    }

    /// Probes from one of the lab's namespaces (`host1`, `fabric`, ...), as [`TestLab::probe`].
    pub fn probe_in(&self, node: &str, targets: &[String]) -> Vec<String> {
        let netns = self.netns(node);
        self.probe_at(&["netns-exec", &netns], targets)
    }

    fn probe_at(&self, runner: &[&str], targets: &[String]) -> Vec<String> {
        let mut words = self.probe_once(runner, targets, 700);
        let again: Vec<usize> = (0..words.len())
            .filter(|&i| words[i] == "blocked")
            .collect();
        if !again.is_empty() {
            let retry: Vec<String> = again.iter().map(|&i| targets[i].clone()).collect();
            for (i, word) in again.into_iter().zip(self.probe_once(runner, &retry, 1500)) {
                words[i] = word;
            }
        }
        words
    }

    /// One probe from inside workload `from`, not retried (unlike [`TestLab::probe`]).
    pub fn probe_single(&self, from: &str, targets: &[String], timeout_ms: u32) -> Vec<String> {
        self.probe_once(&["exec", from, "--"], targets, timeout_ms)
    }

    /// `runner` is `exec W --` (a workload) or `netns-exec NETNS` (any namespace).
    fn probe_once(&self, runner: &[&str], targets: &[String], timeout_ms: u32) -> Vec<String> {
        let timeout = timeout_ms.to_string();
        let mut args = vec![BIN, "probe", "--timeout-ms", &timeout];
        args.extend(targets.iter().map(String::as_str));
        let out = match runner {
            ["netns-exec", netns] => {
                let out = sh::command_in(netns, args[0])
                    .args(&args[1..])
                    .output()
                    .expect("ip netns exec runs");
                assert!(
                    out.status.success(),
                    "probe in {netns} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
            _ => {
                let mut all = runner.to_vec();
                all.extend(args);
                self.ok(&all)
            }
        };
        let words: Vec<String> = out
            .lines()
            .filter_map(|l| l.rsplit_once(' ').map(|(_, w)| w.to_owned()))
            .collect();
        assert_eq!(words.len(), targets.len(), "probe output:\n{out}");
        words
    }

    /// Starts `calico-lab flow --json` inside workload `from`: one TCP connection to `to` kept
    /// busy for `seconds`, an echo every `every_ms` (each may take `patience_ms`). Wait for it
    /// with `wait_with_output`; it fails if an echo did not come back. [`flow_report`] reads
    /// what it saw.
    pub fn start_flow(
        &self,
        from: &str,
        to: &str,
        seconds: u32,
        every_ms: u32,
        patience_ms: u32,
    ) -> std::process::Child {
        let (seconds, every, patience) = (
            seconds.to_string(),
            every_ms.to_string(),
            patience_ms.to_string(),
        );
        Command::new(BIN)
            .args([
                "--lab", &self.name, "exec", from, "--", BIN, "flow", to, "--json",
            ])
            .args([
                "--seconds",
                &seconds,
                "--every-ms",
                &every,
                "--patience-ms",
                &patience,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("calico-lab flow starts")
    }

    /// The name of one of the lab's namespaces (`host1`, `fabric`, `host1.w1`).
    pub fn netns(&self, node: &str) -> String {
        format!("{}.{node}", self.name)
    }

    /// Echo servers (TCP and UDP) on `ports` in one of the lab's namespaces, listening on every
    /// address; stopped when the guard is dropped.
    pub fn serve_in(&self, node: &str, ports: &[u16]) -> Background {
        let netns = self.netns(node);
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        let child = sh::command_in(&netns, BIN)
            .args(["serve", "--ports", &list.join(",")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("ip netns exec runs");
        let server = Background(child);
        for port in ports {
            let filter = format!("sport = :{port}");
            calico_testkit::eventually(
                &format!("the echo server on port {port} in {netns}"),
                std::time::Duration::from_secs(10),
                || {
                    let out = sh::command_in(&netns, "ss")
                        .args(["-Hltn", &filter])
                        .output()
                        .map_err(|e| e.to_string())?;
                    match out.stdout.is_empty() {
                        true => Err("not listening yet".to_owned()),
                        false => Ok(()),
                    }
                },
            );
        }
        server
    }

    /// Whether a TCP connection from `from` to `ip:port` gets through (connected or refused).
    pub fn tcp(&self, from: &str, ip: &str, port: u16) -> bool {
        arrived(&self.probe(from, &[tcp(ip, port)])[0])
    }

    pub fn ping(&self, from: &str, ip: &str) -> bool {
        arrived(&self.probe(from, &[format!("icmp:{ip}")])[0])
    }

    pub fn udp(&self, from: &str, ip: &str, port: u16) -> bool {
        let target = if ip.contains(':') {
            format!("udp:[{ip}]:{port}")
        } else {
            format!("udp:{ip}:{port}")
        };
        arrived(&self.probe(from, &[target])[0])
    }

    /// Runs a command in the host's namespace.
    pub fn in_host(&self, host: &str, program: &str, args: &[&str]) -> Output {
        let netns = format!("{}.{host}", self.name);
        sh::command_in(&netns, program)
            .args(args)
            .output()
            .expect("ip netns exec runs")
    }
}

/// The report of a finished [`TestLab::start_flow`]; fails with its output when there is none.
pub fn flow_report(out: &Output) -> calico_lab::probe::FlowReport {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "no report from the flow ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A process started by a test, killed when dropped (also when the test fails).
pub struct Background(pub std::process::Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn tcp(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("tcp:[{ip}]:{port}")
    } else {
        format!("tcp:{ip}:{port}")
    }
}

pub fn arrived(word: &str) -> bool {
    matches!(word, "ok" | "refused")
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let out = self.cli(&["down"]);
        if !out.status.success() {
            eprintln!(
                "calico-lab down failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

pub const OPEN: &str =
    r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
