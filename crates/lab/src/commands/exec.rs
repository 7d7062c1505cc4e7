//! `calico-lab exec WORKLOAD -- COMMAND...`: runs a command inside a workload's namespace and
//! ends with its exit status.

use anyhow::Context;
use calico_lab::{Lab, sh};

#[derive(Debug, clap::Args)]
pub struct Args {
    workload: String,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let lab = Lab::load(name)?;
    let w = lab.workload(&args.workload)?;
    let (program, rest) = args.command.split_first().context("no command given")?;
    let status = sh::command_in(&w.netns, program)
        .args(rest)
        .status()
        .context("cannot run ip netns exec")?;
    std::process::exit(status.code().unwrap_or(1));
}
