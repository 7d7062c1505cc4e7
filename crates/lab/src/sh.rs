//! Running the tools the lab drives (`ip`, `sysctl`, ...), with errors that say what ran and
//! what it printed. The lab's one door to `calico_linux::Netns`, which owns entering a namespace
//! and feeding a child's stdin: tools that finish go through `Netns::run`; processes that need
//! their own environment, stream their output or outlive the call get a [`command_in`]
//! (`Netns::command`).

use std::ffi::OsStr;
use std::process::{Command, Output};

use anyhow::{Context, bail};
use calico_linux::Netns;

/// Runs `program args` and returns its stdout; fails with its stderr.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    Ok(Netns::current().run(program, args, "")?)
}

/// `ip args...`.
pub fn ip(args: &[&str]) -> anyhow::Result<String> {
    run("ip", args)
}

/// Runs `program args` inside the named namespace and returns its stdout; fails with its
/// stderr.
pub fn in_ns(ns: &str, program: &str, args: &[&str]) -> anyhow::Result<String> {
    Netns::named(ns)
        .run(program, args, "")
        .with_context(|| format!("in namespace {ns}"))
}

/// A command that runs `program` inside the named namespace (`Netns::command`): add
/// arguments, environment and stdio, then spawn it.
pub fn command_in(ns: &str, program: impl AsRef<OsStr>) -> Command {
    Netns::named(ns).command(program)
}

/// Runs `command` with `input` on stdin and collects its output, whatever its exit status.
pub fn output_with_stdin(command: &mut Command, input: &str) -> anyhow::Result<Output> {
    calico_linux::output_with_input(command, input.as_bytes())
        .with_context(|| format!("cannot run {:?}", command.get_program()))
}

/// Sets a sysctl inside a namespace (`net.ipv4.ip_forward=1`).
pub fn sysctl(ns: &str, setting: &str) -> anyhow::Result<()> {
    in_ns(ns, "sysctl", &["-q", "-w", setting]).map(drop)
}

/// The network namespaces that exist.
pub fn namespaces() -> anyhow::Result<Vec<String>> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// Fails with a clear message when a tool the lab needs is missing.
pub fn require(tools: &[&str]) -> anyhow::Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in tools {
        if !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()) {
            bail!("{tool} is not installed; run scripts/setup-test-deps.sh (as root)");
        }
    }
    Ok(())
}

/// `ip` with the words of one line (no argument of which contains a space).
pub fn ipl(line: &str) -> anyhow::Result<String> {
    ip(&line.split_whitespace().collect::<Vec<_>>())
}
