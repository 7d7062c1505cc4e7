//! `calico-lab flow ADDR` (run inside a workload): keeps a TCP connection to an echo server
//! busy; fails if an echo did not come back.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::bail;
use calico_lab::probe;

#[derive(Debug, clap::Args)]
pub struct Args {
    to: SocketAddr,
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    #[arg(long, default_value_t = 50)]
    every_ms: u64,
    /// How long one echo may take before the flow counts as cut.
    #[arg(long, default_value_t = 3000)]
    patience_ms: u64,
    /// An echo slower than this counts as late (listed with `--json`).
    #[arg(long, default_value_t = 1000)]
    late_ms: u64,
    /// Prints the whole report as JSON (with every late echo) instead of one line.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let ms = Duration::from_millis;
    let pace = probe::FlowPace {
        every: ms(args.every_ms),
        patience: ms(args.patience_ms),
        late: ms(args.late_ms),
    };
    let report = probe::flow(args.to, Duration::from_secs(args.seconds), pace).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "sent {} echoed {} max_gap_ms {}",
            report.sent, report.echoed, report.max_gap_ms
        );
    }
    if report.echoed < report.sent {
        bail!(
            "the flow to {} was cut after {} echoes: {}",
            args.to,
            report.echoed,
            report.cut.as_deref().unwrap_or("an echo did not come back")
        );
    }
    Ok(())
}
