//! Shared test fixtures. Everything here is for tests only (a dev-dependency), and a missing
//! prerequisite fails the test with a message naming it and how to install it.
//!
//! - [`EtcdServer`]: a real etcd on free loopback ports with a temporary data directory, that
//!   can be stopped and restarted mid-test and is killed and removed on `Drop`.
//! - [`require_tool`]: fail loudly when a tool the test needs is not installed.
//! - [`free_port`]: a loopback TCP port for a server that cannot bind port 0 itself, reserved
//!   machine-wide for this test process; [`refusing_port`]: a port that refuses every
//!   connection for as long as the test holds it.
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
mod ports;
mod stats;
mod tls;
pub mod webdriver;

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

/// A loopback TCP port for a server the test starts that cannot bind port 0 and report it
/// (etcd, chromedriver, Keystone, neutron-server). A port the kernel handed out for port 0 could
/// be taken again by any other process binding port 0 or connecting out before the server binds
/// it, so the port comes from below the kernel's ephemeral range (which port 0 and outgoing
/// connections never use), and it is reserved machine-wide by a lock file held until this test
/// process exits, so no other test process using this function gets it. It is free at the
/// moment of return; a server that binds it should still fail loudly if it cannot.
pub fn free_port() -> u16 {
    ports::reserve()
}

/// A loopback port that refuses every connection (a TCP socket bound to it but never
/// listening) for as long as the value lives: what a test needs to see "connection refused",
/// which a port that was merely free a moment ago does not promise.
pub fn refusing_port() -> RefusingPort {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("cannot make a TCP socket");
    socket
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("cannot bind a loopback port");
    let port = socket
        .local_addr()
        .ok()
        .and_then(|addr| addr.as_socket())
        .map(|addr| addr.port())
        .expect("a bound socket has a port");
    RefusingPort {
        _socket: socket,
        port,
    }
}

/// See [`refusing_port`]: the port stays refusing until this is dropped.
#[derive(Debug)]
pub struct RefusingPort {
    _socket: socket2::Socket,
    port: u16,
}

impl RefusingPort {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The address a server under test bound when it was given port 0, read from its log: the
/// first line with `listen=HOST:PORT` (as `calico-flows` and `calico-fanout` log it). Polls the
/// file for up to `within`; panics with the log if the line never comes.
pub fn bound_address(log: &Path, within: std::time::Duration) -> String {
    let mut found = None;
    eventually("the server's listen= line in its log", within, || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        found = text.lines().find_map(|line| {
            let rest = &line[line.find("listen=")? + "listen=".len()..];
            let address = rest.split_whitespace().next()?;
            address.parse::<std::net::SocketAddr>().ok()?;
            Some(address.to_owned())
        });
        found
            .is_some()
            .then_some(())
            .ok_or_else(|| format!("{}:\n{text}", log.display()))
    });
    found.expect("found above")
}

/// [`bound_address`] of a server the test just spawned with port 0; the server is killed
/// (and reaped) before the panic if the line never comes, so a failed start leaves nothing.
pub fn bound_address_of(
    child: &mut std::process::Child,
    log: &Path,
    within: std::time::Duration,
) -> String {
    std::panic::catch_unwind(|| bound_address(log, within)).unwrap_or_else(|panic| {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic)
    })
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
