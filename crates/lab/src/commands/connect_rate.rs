//! `calico-lab connect-rate ADDR` (run inside a workload): new TCP connections per second to a
//! workload's echo server and how long each took (median, p99, max); the system benchmark's
//! connection setup rate. `--json` prints the same as one JSON object.

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
    /// Print `{"per_second", "connections", "median_ms", "p99_ms", "max_ms"}`.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let rate = probe::connect_rate(
        args.to,
        Duration::from_secs(args.secs),
        args.parallel.into(),
    )
    .await?;
    if args.json {
        println!("{}", serde_json::to_string(&rate)?);
    } else {
        println!(
            "{:.0} connections/s ({} in {} s); connect to echo: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            rate.per_second, rate.connections, args.secs, rate.median_ms, rate.p99_ms, rate.max_ms
        );
    }
    Ok(())
}
