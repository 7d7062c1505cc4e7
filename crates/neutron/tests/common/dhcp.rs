//! The DHCP tests' compute host: the agent process, a VM namespace plugged by a TAP-named
//! veth with its DHCP clients (busybox udhcpc, ISC dhclient), dnsmasq found by namespace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_testkit::{NetNs, processes_in_netns};
use serde_json::Value;

pub const HOST: &str = "compute1";
pub const DNSMASQ: &str = "/usr/sbin/dnsmasq";
pub const BUSYBOX: &str = "/usr/bin/busybox";
pub const DHCLIENT: &str = "/sbin/dhclient";
/// The agent's interface (holding the gateway addresses).
pub const INTERFACE: &str = "ns-calico";

/// What the VM's DHCP client hears; the script writes the variables udhcpc gives it and applies
/// the address and default route as a VM's would.
pub const SCRIPT: &str = r#"#!/bin/sh
case "$1" in
  bound|renew)
    env | grep -E '^(ip|mask|router|dns|staticroutes|lease|hostname|domain)=' | sort > "$LEASE_FILE"
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    ip route replace default via "$router" dev "$interface"
    ;;
esac
exit 0
"#;

/// The agent process. On `Drop`, if still running, it is stopped as an operator would
/// (SIGTERM: it stops its dnsmasq), SIGKILL after 10 s, and then any dnsmasq still serving its
/// state directory is killed too: a test leaves no process behind.
pub struct Agent {
    pub child: Child,
    log: PathBuf,
    state: PathBuf,
}

impl Agent {
    pub fn start(host_ns: &str, neutron: &str, etcd: &str, state: &Path, log: &Path) -> Agent {
        Agent::start_as(HOST, host_ns, neutron, etcd, state, log)
    }

    /// [`Agent::start`] for compute host `host`.
    pub fn start_as(
        host: &str,
        host_ns: &str,
        neutron: &str,
        etcd: &str,
        state: &Path,
        log: &Path,
    ) -> Agent {
        let file = std::fs::File::create(log).expect("agent log");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                host_ns,
                env!("CARGO_BIN_EXE_calico-dhcp-agent"),
            ])
            .args([
                "--host",
                host,
                "--neutron-url",
                neutron,
                "--etcd-endpoints",
                etcd,
            ])
            .arg("--state-dir")
            .arg(state)
            .args(["--interface", INTERFACE, "--dnsmasq", DNSMASQ])
            .args(["--neutron-poll-interval", "1s", "--lease-time", "1h"])
            .args(["--auth-strategy", "noauth"])
            .env("CALICO_DHCP_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("calico-dhcp-agent starts");
        Agent {
            child,
            log: log.to_owned(),
            state: state.to_owned(),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, as in a crash: the agent cannot stop its dnsmasq.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!(
            "calico-dhcp-agent did not stop within 10 s of SIGTERM:\n{}",
            self.log()
        );
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Killed by the test already ([`Agent::kill`]): its dnsmasq is left for the next agent
        // the test starts (a [`DnsmasqGuard`] ends it if the test fails first).
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
            kill_dnsmasq_under(&self.state);
        }
    }
}

/// Ends, when dropped, every dnsmasq serving a state directory under its directory (the
/// test's): what the agents the test killed left, pass or fail. Declare it after the
/// directory (locals drop in reverse order).
pub struct DnsmasqGuard(pub PathBuf);

impl Drop for DnsmasqGuard {
    fn drop(&mut self) {
        kill_dnsmasq_under(&self.0);
    }
}

fn kill_dnsmasq_under(dir: &Path) {
    for pid in dnsmasq_under(dir) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// The live dnsmasq processes (not zombies) serving a state directory under `dir`: found by
/// their `--dhcp-hostsfile`, wherever they run and whoever their parent is now.
pub fn dnsmasq_under(dir: &Path) -> Vec<i32> {
    let flag = format!("--dhcp-hostsfile={}", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            comm.trim() == "dnsmasq"
                && running(*pid)
                && cmdline.split('\0').any(|arg| arg.starts_with(&flag))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether `pid` has not exited (a zombie its new parent has not reaped yet has).
fn running(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// Fails naming them if dnsmasq processes of the state directories under `dir` are left.
pub fn assert_no_dnsmasq_left(dir: &Path) {
    let left = dnsmasq_under(dir);
    let lines: Vec<String> = left
        .iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            )
        })
        .collect();
    kill_dnsmasq_under(dir);
    assert!(
        left.is_empty(),
        "dnsmasq left running after the test's agents were stopped:\n{}",
        lines.join("\n")
    );
}

/// Kills what is left in a namespace (dnsmasq, if the agent could not stop it) before it goes:
/// declare it after the namespace (locals drop in reverse order) and, in a struct, before it
/// (fields drop in order).
pub struct Reaper(pub String);

impl Drop for Reaper {
    fn drop(&mut self) {
        for (pid, _) in processes_in_netns(&self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A VM: a namespace whose `eth0` (the port's MAC) is the peer of `tap<11 chars>` on the host.
pub struct Vm {
    pub ns: NetNs,
    pub tap: String,
    pub mac: String,
}

impl Vm {
    pub fn plug(host: &NetNs, port: &Value) -> Vm {
        let ns = NetNs::new("dhcp-vm");
        let id = port["id"].as_str().expect("port id");
        let tap = format!("tap{}", &id[..11]);
        let mac = port["mac_address"].as_str().expect("mac").to_owned();
        host.run_ok(
            "ip",
            &[
                "link",
                "add",
                &tap,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns.name(),
            ],
            "",
        );
        host.run_ok("ip", &["link", "set", &tap, "up"], "");
        ns.run_ok("ip", &["link", "set", "eth0", "address", &mac], "");
        ns.run_ok("ip", &["link", "set", "eth0", "up"], "");
        Vm { ns, tap, mac }
    }

    /// One DHCP exchange (up to 3 discovers a second apart): the lease's variables, or the
    /// client's output when it got none.
    pub fn dhcp(&self, dir: &Path) -> Result<String, String> {
        let lease = dir.join(format!("{}.lease", self.ns.name()));
        let _ = std::fs::remove_file(&lease);
        let script = dir.join("udhcpc.script");
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", self.ns.name(), BUSYBOX])
            .args([
                "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "3", "-T", "1",
            ])
            .args(["-O", "staticroutes", "-s"])
            .arg(&script)
            .env("LEASE_FILE", &lease);
        let out = command.output().expect("udhcpc runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        match (out.status.success(), std::fs::read_to_string(&lease)) {
            (true, Ok(vars)) => Ok(vars),
            _ => Err(text),
        }
    }

    /// One DHCPv6 exchange with ISC dhclient (`-1`: one try): its lease database (which
    /// names the address and options it was given), or its log. The client backgrounds itself
    /// once bound; it is stopped here.
    pub fn dhcp6(&self, dir: &Path) -> Result<String, String> {
        let name = self.ns.name();
        let leases = dir.join(format!("{name}.leases6"));
        let (pid, log) = (
            dir.join(format!("{name}.pid6")),
            dir.join(format!("{name}.log6")),
        );
        let _ = std::fs::remove_file(&leases);
        let log_file = std::fs::File::create(&log).expect("dhclient log");
        let status = Command::new("timeout")
            .args([
                "15", "ip", "netns", "exec", name, DHCLIENT, "-6", "-1", "-v",
            ])
            .args(["-sf", "/bin/true", "-lf"])
            .arg(&leases)
            .arg("-pf")
            .arg(&pid)
            .arg("eth0")
            .stdout(Stdio::null())
            .stderr(log_file)
            .status()
            .expect("dhclient runs");
        // Read before the client stops: it rewrites the file as it goes.
        let lease = std::fs::read_to_string(&leases).unwrap_or_default();
        let _ = Command::new("ip")
            .args(["netns", "exec", name, DHCLIENT, "-6", "-x", "-pf"])
            .arg(&pid)
            .output();
        match status.success() && lease.contains("iaaddr") {
            true => Ok(lease),
            false => Err(std::fs::read_to_string(&log).unwrap_or_default()),
        }
    }
}

/// The pid of the dnsmasq in `ns`, if one runs (an exited one that its new parent has not
/// reaped yet does not count).
pub fn dnsmasq_pid(ns: &str) -> Option<i32> {
    let pids: Vec<i32> = processes_in_netns(ns)
        .into_iter()
        .filter(|(pid, name)| name == "dnsmasq" && running(*pid))
        .map(|(pid, _)| pid)
        .collect();
    assert!(pids.len() <= 1, "more than one dnsmasq in {ns}: {pids:?}");
    pids.first().copied()
}

pub fn require(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing (package {package}): run scripts/setup-neutron.sh as root"
    );
}

pub fn id(object: &Value) -> String {
    object["id"].as_str().expect("an id").to_owned()
}
