//! An etcd serving the v2 API (`--enable-v2`), as a Calico 1.4 cluster's datastore: for tests
//! of reading that datastore (`calicoctl datastore migrate --from-v2`). Free loopback ports, a
//! temporary data directory, killed on `Drop`; over https with client certificates from a
//! [`Pki`] if asked. Populate it with [`EtcdV2Server::set`], which runs the seeds' `etcdctl set`
//! through `ETCDCTL_API=2`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{Pki, free_port, require_tool};

const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// A running etcd with the v2 API enabled.
#[derive(Debug)]
pub struct EtcdV2Server {
    dir: TempDir,
    client_port: u16,
    /// etcdctl's `--ca-file`, `--cert-file`, `--key-file` when serving https.
    tls_args: Vec<String>,
    child: Child,
}

impl EtcdV2Server {
    /// Starts etcd with `--enable-v2` on free loopback ports and waits until v2 answers.
    pub fn start() -> EtcdV2Server {
        EtcdV2Server::start_with(None)
    }

    /// The same over https, with client certificate authentication against `pki`'s CA.
    pub fn start_tls(pki: &Pki) -> EtcdV2Server {
        EtcdV2Server::start_with(Some(pki))
    }

    fn start_with(pki: Option<&Pki>) -> EtcdV2Server {
        require_tool("etcd");
        let dir = tempfile::tempdir().expect("cannot create a temporary directory");
        let (client_port, peer_port) = (free_port(), free_port());
        let scheme = if pki.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("etcd log file");
        let mut command = Command::new("etcd");
        let mut tls_args = Vec::new();
        if let Some(pki) = pki {
            let server = pki.server_tls();
            command
                .arg(format!("--cert-file={}", server.cert_file.display()))
                .arg(format!("--key-file={}", server.key_file.display()))
                .arg(format!(
                    "--trusted-ca-file={}",
                    server.client_ca_file.display()
                ))
                .arg("--client-cert-auth");
            tls_args = vec![
                format!("--ca-file={}", pki.ca_cert().display()),
                format!("--cert-file={}", pki.client_cert().display()),
                format!("--key-file={}", pki.client_key().display()),
            ];
        }
        let child = command
            .arg("--name=v2")
            .arg("--enable-v2")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=v2={peer}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd log file"))
            .stderr(log)
            .spawn()
            .expect("cannot run etcd");
        let server = EtcdV2Server {
            dir,
            client_port,
            tls_args,
            child,
        };
        server.wait_for_v2();
        server
    }

    /// The client URL, e.g. `http://127.0.0.1:40123` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls_args.is_empty() {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// `ETCDCTL_API=2 etcdctl --endpoints URL ARGS...`.
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        require_tool("etcdctl");
        Command::new("etcdctl")
            .env("ETCDCTL_API", "2")
            .arg("--endpoints")
            .arg(self.endpoint())
            .args(&self.tls_args)
            .args(args)
            .output()
            .expect("etcdctl runs")
    }

    /// `etcdctl set KEY VALUE` (v2); panics with etcdctl's error if it fails.
    pub fn set(&self, key: &str, value: &str) {
        let out = self.etcdctl(&["set", key, value]);
        assert!(
            out.status.success(),
            "etcdctl set {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn wait_for_v2(&self) {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        while Instant::now() < deadline {
            if self.answers_v2() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        panic!("etcd --enable-v2 did not answer /v2/keys within {STARTUP_DEADLINE:?}:\n{log}");
    }

    fn answers_v2(&self) -> bool {
        if !self.tls_args.is_empty() {
            return self.etcdctl(&["ls", "/"]).status.success();
        }
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /v2/keys/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        let mut response = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut response).is_ok()
            && response.starts_with("HTTP/1.0 200")
    }
}

impl Drop for EtcdV2Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
