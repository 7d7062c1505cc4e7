#![allow(dead_code)] // each benchmark uses a part
//! What the Felix benchmarks share: the release `calico-felix` run inside a namespace, and its
//! memory and CPU read from `/proc`.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// A running Felix inside a namespace, killed on drop; its log kept in a temp dir.
pub struct Felix {
    child: Child,
    /// When it was spawned.
    pub spawned: Instant,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Felix {
    /// Felix for host `host` on `etcd`, logging to its temp dir, with `env` added (`FELIX_…`).
    pub fn start(netns: &str, host: &str, etcd: &str, env: &[(&str, String)]) -> Felix {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("felix.log");
        let out = File::create(&log).expect("log file");
        let spawned = Instant::now();
        // `ip netns exec` execs Felix in place: the child's pid is Felix's.
        let child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(felix_bin())
            .env("FELIX_ETCDENDPOINTS", etcd)
            .env("FELIX_FELIXHOSTNAME", host)
            .env("FELIX_LOGFILEPATH", "none")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("calico-felix starts");
        Felix {
            child,
            spawned,
            log,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops Felix with `signal` (`KILL`, `TERM`) and waits for it to go; its log.
    pub fn stop(mut self, signal: &str) -> String {
        let pid = self.pid().to_string();
        let status = Command::new("kill").args(["-s", signal, &pid]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -s {signal} {pid}");
        let _ = self.child.wait();
        self.log()
    }
}

impl Drop for Felix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// calico-felix: `$CALICO_FELIX_BIN`, else the one of this build profile.
pub fn felix_bin() -> PathBuf {
    std::env::var_os("CALICO_FELIX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let me = std::env::current_exe().expect("own path");
            me.parent()
                .and_then(|p| p.parent())
                .expect("target dir")
                .join("calico-felix")
        })
}

/// A process's resident memory in MiB (`VmRSS`).
pub fn rss_mib(pid: u32) -> f64 {
    try_rss_mib(pid).expect("the process runs, with VmRSS in /proc/<pid>/status")
}

/// [`rss_mib`] of a process that may have gone.
pub fn try_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(kib / 1024.0)
}

/// A process's CPU time in seconds, its own (user + system) and its waited-for children's;
/// `/proc` counts in USER_HZ, 100 on Linux.
pub fn cpu_secs(pid: u32) -> (f64, f64) {
    try_cpu_secs(pid).expect("the process runs")
}

/// [`cpu_secs`] of a process that may have gone.
pub fn try_cpu_secs(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<f64> = after.split(' ').map(|v| v.parse().unwrap_or(0.0)).collect();
    Some(((f[11] + f[12]) / 100.0, (f[13] + f[14]) / 100.0))
}

/// The firewall backend a benchmark runs Felix on (Felix's `NFTablesMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `NFTablesMode=Disabled`: iptables and ipset (Felix's default; the baseline rows).
    Iptables,
    /// `NFTablesMode=Enabled`: one `inet calico` table programmed over netlink.
    Nftables,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables",
            Backend::Nftables => "nftables",
        }
    }

    /// Felix's environment for this backend (`FELIX_NFTABLESMODE`).
    pub fn felix_env(self) -> (&'static str, String) {
        let mode = match self {
            Backend::Iptables => "Disabled",
            Backend::Nftables => "Enabled",
        };
        ("FELIX_NFTABLESMODE", mode.to_owned())
    }

    /// Both backends, iptables first, or those named (comma-separated) in `$var`.
    pub fn chosen(var: &str) -> Vec<Backend> {
        let only = std::env::var(var).unwrap_or_default();
        let all = [Backend::Iptables, Backend::Nftables];
        if only.is_empty() {
            return all.to_vec();
        }
        for name in only.split(',') {
            assert!(
                all.iter().any(|b| b.name() == name),
                "{var}={only:?}: {name:?} is not a backend (iptables, nftables)"
            );
        }
        all.into_iter()
            .filter(|b| only.split(',').any(|n| n == b.name()))
            .collect()
    }
}

/// The port the benchmarks' Felix serves Prometheus metrics on (inside its namespace).
pub const METRICS_PORT: u16 = 9091;

/// Runs `ip` with `stdin` (a batch), panicking with its stderr if it fails.
pub fn ip(args: &[&str], stdin: &str) {
    let out = calico_testkit::output_with_stdin(Command::new("ip").args(args), stdin);
    assert!(
        out.status.success(),
        "ip {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `GET /metrics` from Felix (in this thread's namespace); `None` while it does not answer.
pub async fn scrape() -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = ("127.0.0.1", METRICS_PORT);
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = "GET /metrics HTTP/1.1\r\nHost: felix\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    Some(response)
}

/// The value of the sample `name` (with its labels, if any) in a scrape.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
