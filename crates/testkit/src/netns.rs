//! A network namespace for one test, removed on `Drop` (also when the test fails).

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::require_tool;

/// A fresh network namespace with a unique name.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates `<prefix>-<pid>-<n>`. Needs root and `ip` (iproute2).
    pub fn new(prefix: &str) -> NetNs {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        require_tool("ip");
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("ip runs");
        assert!(
            out.status.success(),
            "cannot create network namespace {name} (tests need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let netns = NetNs { name };
        // Loopback up, so processes inside can talk to each other on 127.0.0.1.
        let up = Command::new("ip")
            .args(["-n", &netns.name, "link", "set", "lo", "up"])
            .output()
            .expect("ip runs");
        assert!(up.status.success(), "cannot bring lo up in {}", netns.name);
        netns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The processes in the namespace: pid and command name.
    pub fn processes(&self) -> Vec<(i32, String)> {
        processes_in_netns(&self.name)
    }

    /// Runs a command inside the namespace, with `stdin` as its input.
    pub fn run(&self, program: &str, args: &[&str], stdin: &str) -> Output {
        require_tool(program);
        let mut command = command_in(&self.name, program);
        command.args(args);
        crate::output_with_stdin(&mut command, stdin)
    }

    /// Runs a command inside the namespace and panics with its stderr if it fails.
    pub fn run_ok(&self, program: &str, args: &[&str], stdin: &str) -> String {
        let out = self.run(program, args, stdin);
        assert!(
            out.status.success(),
            "{program} {args:?} failed in {}: {}\ninput:\n{stdin}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// A command that runs `program` inside the named namespace (`ip netns exec`): the testkit's
/// one place that builds it (the testkit cannot use `calico_linux::Netns`, whose tests use the
/// testkit).
pub fn command_in(netns: &str, program: &str) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", netns, program]);
    command
}

/// The processes in the named namespace (`ip netns pids`): pid and command name.
pub fn processes_in_netns(name: &str) -> Vec<(i32, String)> {
    let out = Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|pid| {
            let pid: i32 = pid.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some((pid, comm.trim().to_owned()))
        })
        .collect()
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
