//! `calico-lab supervise -- FELIX...` (hidden): runs a host's Felix, starting it again when it
//! exits cleanly; ends with Felix's status otherwise. Runs before any async runtime starts.

use calico_lab::supervise;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// The exit code to end with.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    supervise::run(&args.command)
}
