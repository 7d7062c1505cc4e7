//! A real etcd for tests: free loopback ports, a temporary data directory, stop and restart on
//! the same ports and data, killed and cleaned up on `Drop`.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{free_port, require_tool};

/// How long etcd may take to answer its health check.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// How often a fresh pair of ports is tried when etcd cannot bind (another process took one).
const PORT_ATTEMPTS: usize = 3;

/// TLS material for [`EtcdServer::start_tls`]: PEM files for the server and the CA that signed
/// the clients' certificates.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: PathBuf,
}

/// A running etcd.
#[derive(Debug)]
pub struct EtcdServer {
    dir: TempDir,
    client_port: u16,
    peer_port: u16,
    tls: Option<ServerTls>,
    /// The network namespace etcd runs in (its loopback), if not the test's own.
    netns: Option<String>,
    child: Option<Child>,
}

impl EtcdServer {
    /// Starts etcd on free loopback ports and waits until it is healthy.
    pub fn start() -> EtcdServer {
        EtcdServer::start_with(None, None)
    }

    /// Starts etcd serving https with client certificate authentication.
    pub fn start_tls(tls: ServerTls) -> EtcdServer {
        EtcdServer::start_with(Some(tls), None)
    }

    /// Starts etcd inside a network namespace, on its loopback: reachable by processes in that
    /// namespace (use [`EtcdServer::etcdctl`] to reach it from the test).
    pub fn start_in_netns(netns: &str) -> EtcdServer {
        EtcdServer::start_with(None, Some(netns.to_owned()))
    }

    fn start_with(tls: Option<ServerTls>, netns: Option<String>) -> EtcdServer {
        require_tool("etcd");
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let mut server = EtcdServer {
                dir: tempfile::tempdir().expect("cannot create a temporary directory"),
                client_port: free_port(),
                peer_port: free_port(),
                tls: tls.clone(),
                netns: netns.clone(),
                child: None,
            };
            match server.launch() {
                Ok(()) => return server,
                Err(error) => last_error = error,
            }
        }
        panic!("etcd did not start after {PORT_ATTEMPTS} attempts: {last_error}");
    }

    /// The client URL, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// Kills etcd (as a crash would) and waits for it to exit. The data directory is kept.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports with the same data, and waits until it is healthy.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(error) = self.launch() {
            panic!("etcd did not restart: {error}");
        }
    }

    /// Whether the process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| child.try_wait().ok().flatten().is_none())
    }

    fn launch(&mut self) -> Result<(), String> {
        let log_path = self.dir.path().join("etcd.log");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = match &self.netns {
            None => Command::new("etcd"),
            Some(ns) => crate::netns::command_in(ns, "etcd"),
        };
        command
            .arg("--name=test")
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={}", self.endpoint()))
            .arg(format!("--advertise-client-urls={}", self.endpoint()))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.cert_file.display()))
                .arg(format!("--key-file={}", tls.key_file.display()))
                .arg(format!(
                    "--trusted-ca-file={}",
                    tls.client_ca_file.display()
                ))
                .arg("--client-cert-auth");
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run etcd: {e}"))?;
        self.child = Some(child);
        self.wait_until_listening()
            .map_err(|reason| format!("{reason}\n--- etcd log ---\n{}", self.log_tail()))
    }

    /// Polls the client port until etcd accepts connections (and, over plain http, reports
    /// itself healthy), or fails when etcd exits or the deadline passes.
    fn wait_until_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        while Instant::now() < deadline {
            if !self.is_running() {
                self.child = None;
                return Err("etcd exited during startup".to_owned());
            }
            if self.answers_health() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        Err(format!("etcd was not healthy within {STARTUP_DEADLINE:?}"))
    }

    fn answers_health(&self) -> bool {
        if self.netns.is_some() {
            return self.etcdctl(&["endpoint", "health"]).status.success();
        }
        let addr = ("127.0.0.1", self.client_port);
        let Ok(mut stream) = TcpStream::connect(addr) else {
            return false;
        };
        if self.tls.is_some() {
            return true; // listening is all we can check without a TLS client here
        }
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        let mut response = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut response).is_ok()
            && response.contains("\"health\":\"true\"")
    }

    /// `etcdctl put KEY VALUE`; panics with etcdctl's error if it fails.
    pub fn put(&self, key: &str, value: &str) {
        let out = self.etcdctl(&["put", key, value]);
        assert!(
            out.status.success(),
            "etcdctl put {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `etcdctl` (v3 API) against this etcd, inside its namespace if it has one.
    pub fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        require_tool("etcdctl");
        let endpoint = format!("--endpoints={}", self.endpoint());
        let mut command = match &self.netns {
            None => Command::new("etcdctl"),
            Some(ns) => crate::netns::command_in(ns, "etcdctl"),
        };
        command
            .env("ETCDCTL_API", "3")
            .arg(endpoint)
            .args(args)
            .output()
            .expect("etcdctl runs")
    }

    /// The last lines etcd logged, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}
