//! `calico-flows` starts and stops as every daemon does (`calico_daemon::Daemon`): a log
//! filter in `CALICO_FLOWS_LOG` that does not parse stops it before it listens, naming the
//! variable; otherwise it logs the address it bound (`listen=`) and SIGTERM ends it with exit 0.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use calico_testkit::{bound_address, eventually};

const FLOWS: &str = env!("CARGO_BIN_EXE_calico-flows");

/// The aggregator on a loopback port the kernel picks, its stderr in a temp file; killed on
/// drop if it is still running.
struct Running {
    child: Child,
    dir: tempfile::TempDir,
}

impl Running {
    fn start(log_filter: &str) -> Running {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("flows.log")).expect("log file");
        let child = Command::new(FLOWS)
            .args(["--listen", "127.0.0.1:0", "--store-dir"])
            .arg(dir.path().join("store"))
            .env("CALICO_FLOWS_LOG", log_filter)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("calico-flows starts");
        Running { child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("flows.log")).unwrap_or_default()
    }

    /// Its exit status, once it has exited by itself.
    fn exited(&mut self) -> ExitStatus {
        let mut status = None;
        eventually("calico-flows to exit", Duration::from_secs(20), || {
            status = self.child.try_wait().map_err(|e| e.to_string())?;
            status
                .map(|_| ())
                .ok_or_else(|| format!("still running; log:\n{}", self.log()))
        });
        status.expect("exited")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_log_filter_that_does_not_parse_stops_it_before_it_listens() {
    let mut flows = Running::start("info,=[");
    let status = flows.exited();
    let log = flows.log();
    assert_eq!(status.code(), Some(1), "log:\n{log}");
    assert!(
        log.contains("calico-flows: CALICO_FLOWS_LOG=\"info,=[\": "),
        "the variable is named: {log}"
    );
    assert!(!log.contains("listen="), "it never listened: {log}");
}

#[test]
fn it_logs_the_address_it_bound_and_sigterm_stops_it() {
    let mut flows = Running::start("warn,calico_flows=info");
    let address = bound_address(&flows.dir.path().join("flows.log"), Duration::from_secs(20));
    eventually(
        "calico-flows accepting connections",
        Duration::from_secs(20),
        || {
            std::net::TcpStream::connect(&address)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    );
    let sent = Command::new("kill")
        .args(["-TERM", &flows.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let status = flows.exited();
    let log = flows.log();
    assert!(status.success(), "{status}; log:\n{log}");
    assert!(
        log.contains("stopping: every record accepted is in the store"),
        "{log}"
    );
    // Plain text to a file: no colour codes.
    assert!(!log.contains('\u{1b}'), "{log:?}");
}
