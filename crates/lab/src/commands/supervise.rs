//! `calico-lab supervise [--restart POLICY] -- PROGRAM...` (hidden): runs one of the lab's
//! services and starts it again when it ends, as the policy says (see `calico_lab::supervise`).
//! Runs before the command line's async runtime starts, on a small runtime of its own.

use calico_lab::supervise::{self, Restart};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `on-clean-exit` (Felix: a restart it asked for) or `always` (as systemd's
    /// `Restart=always`).
    #[arg(long, default_value_t = Restart::OnCleanExit)]
    restart: Restart,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// The exit code to end with.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    supervise::run(&args.command, args.restart)
}
