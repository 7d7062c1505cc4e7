//! `calico-lab check`: the connectivity matrix between all workloads.

use std::time::Duration;

use calico_lab::{Lab, check};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 80)]
    port: u16,
    /// How long to wait for an answer, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let lab = Lab::load(name)?;
    let wait = Duration::from_millis(args.timeout_ms);
    let matrix = check::matrix(&lab, args.port, wait).await?;
    print!("{}", check::render(&lab, &matrix, args.port));
    Ok(())
}
