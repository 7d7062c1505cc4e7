//! Shared test fixtures. Everything here is for tests only (a dev-dependency), and a missing
//! prerequisite fails the test with a message naming it and how to install it.
//!
//! - [`EtcdServer`]: a real etcd on free loopback ports with a temporary data directory, that
//!   can be stopped and restarted mid-test and is killed and removed on `Drop`.
//! - [`require_tool`]: fail loudly when a tool the test needs is not installed.
//! - [`free_port`]: a loopback TCP port nobody listens on.
//! - [`NetNs`]: a network namespace for one test, removed on `Drop`.
//! - [`Tails`]: median, p99 and maximum of a benchmark's samples.
//! - [`Dockerd`]: a real dockerd in a namespace with its state in one directory, a busybox
//!   image, and containers, networks and daemon removed on `Drop`; [`NsProcess`] and
//!   [`PluginSocket`] for the daemons and plugins beside it.

mod docker;
mod etcd;
pub mod etcd_v2;
pub mod http;
mod netns;
mod stats;
mod tls;
pub mod webdriver;

use std::net::TcpListener;
use std::path::Path;

pub use docker::{BUSYBOX_IMAGE, Dockerd, NsProcess, PluginSocket};
pub use etcd::{EtcdServer, ServerTls};
pub use netns::{NetNs, processes_in_netns};
pub use stats::Tails;
pub use tls::Pki;

/// The Debian package that provides each tool the tests use.
const PACKAGES: &[(&str, &str)] = &[
    ("etcd", "etcd-server"),
    ("etcdctl", "etcd-client"),
    ("openssl", "openssl"),
    ("ip", "iproute2"),
    ("bird", "bird2"),
    ("birdc", "bird2"),
    ("iptables", "iptables"),
    ("ipset", "ipset"),
    ("nft", "nftables"),
    ("iptables-restore", "iptables"),
    ("ip6tables-restore", "iptables"),
    ("iptables-save", "iptables"),
    ("nsenter", "util-linux"),
    ("podman", "podman"),
    ("runc", "runc"),
    ("conntrack", "conntrack"),
    ("dockerd", "docker.io"),
    ("docker", "docker.io"),
    ("busybox", "busybox-static"),
    ("/usr/lib/cni/host-local", "containernetworking-plugins"),
    ("/usr/lib/cni/ptp", "containernetworking-plugins"),
];

/// Panics, naming the package to install, unless `name` is an executable on `PATH`.
pub fn require_tool(name: &str) {
    if find_on_path(name) {
        return;
    }
    let package = PACKAGES
        .iter()
        .find(|(tool, _)| *tool == name)
        .map_or(name, |(_, package)| package);
    panic!(
        "required tool `{name}` is not installed: run scripts/setup-test-deps.sh \
         (or apt-get install -y {package})"
    );
}

fn find_on_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(name)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `command` with `stdin` as its input and collects its output; panics if it cannot start.
pub fn output_with_stdin(command: &mut std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    // A command that exits without reading its input is not an error here.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{command:?} did not finish: {e}"))
}

/// A loopback TCP port that was free a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot bind a loopback port")
}

/// Polls `check` every 100 ms for up to `within`; panics with `what` and the last reason it
/// gave if it never succeeds.
pub fn eventually(
    what: &str,
    within: std::time::Duration,
    mut check: impl FnMut() -> Result<(), String>,
) {
    let deadline = std::time::Instant::now() + within;
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if std::time::Instant::now() > deadline => {
                panic!("timed out after {within:?} waiting for {what}: {why}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "required tool `no-such-tool-xyz` is not installed")]
    fn a_missing_tool_fails_naming_it() {
        require_tool("no-such-tool-xyz");
    }

    #[test]
    fn a_present_tool_passes() {
        require_tool("sh");
    }
}
