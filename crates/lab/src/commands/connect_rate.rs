//! `calico-lab connect-rate ADDR` (run inside a workload): new TCP connections per second to a
//! workload's echo server, printed as a number; the system benchmark's connection setup rate.

use std::net::SocketAddr;
use std::time::Duration;

use calico_lab::probe;

#[derive(Debug, clap::Args)]
pub struct Args {
    to: SocketAddr,
    /// How long to keep connecting.
    #[arg(long, default_value_t = 3)]
    secs: u64,
    /// Connections in flight at a time (at least 1).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    parallel: u16,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let rate = probe::connect_rate(
        args.to,
        Duration::from_secs(args.secs),
        args.parallel.into(),
    )
    .await?;
    println!("{rate:.0}");
    Ok(())
}
