//! What a lab host's Felix runs under: it starts Felix again when Felix exits cleanly, as
//! Felix 1.x's init system did (and `calico-node` does on a real host): Felix exits with status 0
//! to apply a configuration change that needs a restart. Any other end (a crash, a kill) ends
//! the supervisor too, with Felix's status, so the lab sees a dead Felix as before.
//!
//! The supervisor and Felix share one process group: `restart-felix` kills the group.

use std::process::Command;

use anyhow::Context;

/// Runs `command` until it ends other than cleanly; returns the exit code to end with.
pub fn run(command: &[String]) -> anyhow::Result<i32> {
    let (program, args) = command.split_first().context("nothing to supervise")?;
    loop {
        let status = Command::new(program)
            .args(args)
            .status()
            .with_context(|| format!("cannot start {program}"))?;
        if !status.success() {
            eprintln!("calico-lab supervise: {program} ended ({status}); not restarting it");
            return Ok(status.code().unwrap_or(1));
        }
        eprintln!("calico-lab supervise: {program} exited cleanly (a restart); starting it again");
    }
}
