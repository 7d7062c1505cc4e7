//! The real `calico-flows` binary on a free loopback port, a small HTTP/1.1 client over
//! `std::net` (so a test can send exactly the bytes it means, hostile ones included), and
//! record builders.

#![allow(dead_code)] // each test file uses part of this

#[allow(unused_imports)]
pub use calico_testkit::http::{Connection, http, json_of, try_http};
#[allow(unused_imports)]
pub use calico_testkit::webdriver;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_testkit::{bound_address_of, eventually};
use serde_json::{Value, json};

pub const FLOWS: &str = env!("CARGO_BIN_EXE_calico-flows");

/// `calico-flows` on 127.0.0.1, killed on drop; its log in a temp dir.
pub struct Flows {
    child: Child,
    pub address: String,
    dir: tempfile::TempDir,
}

impl Flows {
    /// On a port the aggregator picks itself (port 0), read back from its log.
    pub fn start(args: &[&str]) -> Flows {
        Flows::launch("127.0.0.1:0", args)
    }

    /// On a given port (a test that restarts the aggregator where its clients look for it:
    /// the port from `calico_testkit::free_port`, reserved for this test process).
    pub fn start_on(port: u16, args: &[&str]) -> Flows {
        Flows::launch(&format!("127.0.0.1:{port}"), args)
    }

    fn launch(listen: &str, args: &[&str]) -> Flows {
        let dir = tempfile::tempdir().expect("temp dir");
        let log_path = dir.path().join("flows.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        // A store of its own in the temp dir, unless the test names one (or none).
        let store = dir.path().join("store");
        let own_store = !args
            .iter()
            .any(|a| *a == "--store-dir" || *a == "--memory-only");
        let mut child = Command::new(FLOWS)
            .args(["--listen", listen])
            .args(if own_store {
                vec!["--store-dir".as_ref(), store.as_os_str()]
            } else {
                vec![]
            })
            .args(args)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("calico-flows starts");
        let address = bound_address_of(&mut child, &log_path, Duration::from_secs(20));
        let flows = Flows {
            child,
            address,
            dir,
        };
        eventually(
            "calico-flows serving /health",
            Duration::from_secs(20),
            || match try_http(&flows.address, "GET", "/health", &[], b"") {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}; log:\n{}", flows.log())),
            },
        );
        flows
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("flows.log")).unwrap_or_default()
    }

    /// Kills it with SIGKILL (what `Child::kill` sends): nothing is flushed or closed.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// POSTs a batch body; the status and the answer as JSON.
    pub fn post(&self, body: &[u8]) -> (u16, Value) {
        let (status, answer) = http(&self.address, "POST", "/api/v1/flows", &[], body);
        (status, json_of(&answer))
    }

    pub fn get(&self, path: &str) -> Value {
        let (status, answer) = http(&self.address, "GET", path, &[], b"");
        assert_eq!(
            status,
            200,
            "GET {path}: {}",
            String::from_utf8_lossy(&answer)
        );
        json_of(&answer)
    }

    /// One metric's value from /metrics (`name{labels}` exactly as exposed), 0 if absent.
    pub fn metric(&self, series: &str) -> f64 {
        let (_, text) = http(&self.address, "GET", "/metrics", &[], b"");
        let text = String::from_utf8(text).expect("metrics are text");
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for Flows {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A workload endpoint of `host` named `workload`.
pub fn wep(host: &str, workload: &str, profile: &str) -> Value {
    json!({
        "kind": "wep",
        "key": format!("/calico/v1/host/{host}/workload/k8s/{workload}/endpoint/eth0"),
        "profiles": [profile],
    })
}

/// An ingress TCP flow into `dst` (reported by its host, `h2`), decided by `policy` rule
/// `rule_index` of tier default, ending `ago` seconds before now.
pub fn ingress(
    src: Value,
    dst_workload: &str,
    verdict: &str,
    policy: &str,
    rule: u32,
    ago: u64,
) -> Value {
    let end = now() - ago;
    json!({
        "reporter": "h2",
        "start_time": end - 15,
        "end_time": end,
        "source": src,
        "destination": wep("h2", dst_workload, "db"),
        "protocol": "tcp",
        "dst_port": 5432,
        "direction": "ingress",
        "action": verdict,
        "policies": {"enforced": [
            {"kind": "policy", "tier": "default", "name": policy, "rule_index": rule, "action": verdict}
        ]},
        "packets_in": 3, "bytes_in": 180,
        "packets_out": if verdict == "allow" { 2 } else { 0 },
        "bytes_out": if verdict == "allow" { 120 } else { 0 },
        "connections_started": 1
    })
}

pub fn batch(records: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({ "records": records })).unwrap()
}

/// The resident set of a process, in KiB (from /proc).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}
