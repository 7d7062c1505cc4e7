//! `calico-lab wait-open ADDR` (run inside a workload): connects until it works, then prints
//! the time (ns since the Unix epoch).

use std::net::SocketAddr;
use std::time::Duration;

use calico_lab::probe;

#[derive(Debug, clap::Args)]
pub struct Args {
    to: SocketAddr,
    #[arg(long, default_value_t = 5)]
    attempt_ms: u64,
    #[arg(long, default_value_t = 30_000)]
    deadline_ms: u64,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let ms = Duration::from_millis;
    let opened = probe::first_open(args.to, ms(args.attempt_ms), ms(args.deadline_ms)).await?;
    println!("{opened}");
    Ok(())
}
