//! Running the tools the lab drives (`ip`, `sysctl`, ...), with errors that say what ran and
//! what it printed.

use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// Runs `program args` and returns its stdout; fails with its stderr.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program} (is it installed?)"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip args...`.
pub fn ip(args: &[&str]) -> anyhow::Result<String> {
    run("ip", args)
}

/// `ip netns exec <ns> program args...`.
pub fn in_ns(ns: &str, program: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all)
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
