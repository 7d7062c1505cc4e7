//! The real flow aggregator, `calico-flows` (built beside `calicoctl`), on a free loopback
//! port, fed records by HTTP posts as Felix's sender posts them; and record builders.
#![allow(dead_code)] // each test binary uses a different part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_testkit::{bound_address_of, eventually};
use serde_json::{Value, json};

/// `calico-flows`, killed on drop; its log in a temp dir.
pub struct Aggregator {
    child: Child,
    pub address: String,
    dir: tempfile::TempDir,
}

impl Aggregator {
    pub fn start(args: &[&str]) -> Aggregator {
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_calicoctl")).with_file_name("calico-flows");
        assert!(
            binary.is_file(),
            "{} is missing: build it first (cargo build -p calico-flows; scripts/test.sh does)",
            binary.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let log_path = dir.path().join("flows.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        // Port 0: the aggregator picks a port nobody holds and logs it.
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .arg("--store-dir")
            .arg(dir.path().join("store"))
            .args(args)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("calico-flows starts");
        let address = bound_address_of(&mut child, &log_path, Duration::from_secs(20));
        let aggregator = Aggregator {
            child,
            address,
            dir,
        };
        eventually(
            "calico-flows serving /health",
            Duration::from_secs(20),
            || match request(&aggregator.address, "GET", "/health", b"") {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}; log:\n{}", aggregator.log())),
            },
        );
        aggregator
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("flows.log")).unwrap_or_default()
    }

    /// Waits until `n` live-stream subscribers are connected (the aggregator's gauge).
    pub fn wait_for_subscribers(&self, n: u32) {
        let series = format!("calico_flows_stream_subscribers {n}");
        eventually(&series, Duration::from_secs(20), || {
            match request(&self.address, "GET", "/metrics", b"") {
                Ok((200, body)) if String::from_utf8_lossy(&body).contains(&series) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
    }

    /// Posts records as one batch; every one must be accepted.
    #[track_caller]
    pub fn post(&self, records: &[Value]) {
        let body = serde_json::to_vec(&json!({ "records": records })).unwrap();
        let (status, answer) =
            request(&self.address, "POST", "/api/v1/flows", &body).expect("POST to calico-flows");
        let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["accepted"], json!(records.len()), "{answer}");
    }
}

impl Drop for Aggregator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on its own connection: the status and the body.
fn request(
    address: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {text:?}")))?;
    let start = text.find("\r\n\r\n").map_or(answer.len(), |i| i + 4);
    let mut body = answer[start..].to_vec();
    if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Ok((status, body))
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&body[..end]).unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 4 + size..];
    }
    out
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn wep_key(host: &str, workload: &str) -> String {
    format!("/calico/v1/host/{host}/workload/k8s/{workload}/endpoint/eth0")
}

/// A workload endpoint side.
pub fn wep(host: &str, workload: &str, profile: &str) -> Value {
    json!({"kind": "wep", "key": wep_key(host, workload), "profiles": [profile]})
}

/// An ingress TCP flow from `src` into `dst_workload` on host `h2` (reported by h2), port
/// `port`, decided by `step` (a trail step as JSON), ending `ago` seconds before now.
pub fn ingress(src: Value, dst_workload: &str, port: u16, step: Value, ago: u64) -> Value {
    let end = now() - ago;
    let action = match step["action"].as_str() {
        Some("deny") => "deny",
        _ => "allow",
    };
    json!({
        "reporter": "h2", "start_time": end - 15, "end_time": end,
        "source": src, "destination": wep("h2", dst_workload, "open"),
        "protocol": "tcp", "dst_port": port, "direction": "ingress", "action": action,
        "policies": {"enforced": [step]},
        "packets_in": 3, "bytes_in": 180, "packets_out": 0, "bytes_out": 0,
        "connections_started": 1
    })
}

/// A step of a tiered policy's rule (0-based index).
pub fn policy_step(tier: &str, name: &str, rule_index: u32, action: &str) -> Value {
    json!({"kind": "policy", "tier": tier, "name": name, "rule_index": rule_index, "action": action})
}

/// A step of a profile's rule.
pub fn profile_step(name: &str, rule_index: u32, action: &str) -> Value {
    json!({"kind": "profile", "name": name, "rule_index": rule_index, "action": action})
}
