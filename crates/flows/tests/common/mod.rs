//! The real `calico-flows` binary on a free loopback port, a small HTTP/1.1 client over
//! `std::net` (so a test can send exactly the bytes it means, hostile ones included), and
//! record builders.

#![allow(dead_code)] // each test file uses part of this

pub mod webdriver;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use calico_testkit::{eventually, free_port};
use serde_json::{Value, json};

pub const FLOWS: &str = env!("CARGO_BIN_EXE_calico-flows");

/// `calico-flows` on 127.0.0.1, killed on drop; its log in a temp dir.
pub struct Flows {
    child: Child,
    pub address: String,
    dir: tempfile::TempDir,
}

impl Flows {
    pub fn start(args: &[&str]) -> Flows {
        Flows::start_on(free_port(), args)
    }

    pub fn start_on(port: u16, args: &[&str]) -> Flows {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("flows.log")).expect("log file");
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(FLOWS)
            .args(["--listen", &address])
            .args(args)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("calico-flows starts");
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

pub fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// One request on its own connection; panics if the server cannot be reached.
pub fn http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    try_http(address, method, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} {path} at {address}: {e}"))
}

pub fn try_http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut connection = Connection::open(address)?;
    connection.request(method, path, headers, body, true)
}

/// One kept-alive HTTP/1.1 connection: several requests in a row.
pub struct Connection {
    address: String,
    reader: BufReader<TcpStream>,
}

impl Connection {
    pub fn open(address: &str) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Connection {
            address: address.to_owned(),
            reader: BufReader::new(stream),
        })
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        close: bool,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        if close {
            head.push_str("Connection: close\r\n");
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes())?;
        // A server may answer before reading a large body (413): a broken pipe is then fine.
        let _ = stream.write_all(body);
        self.response()
    }

    fn response(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.contains("chunked"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                if size == 0 {
                    break;
                }
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        } else {
            self.reader.read_to_end(&mut body)?;
        }
        Ok((status, body))
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
