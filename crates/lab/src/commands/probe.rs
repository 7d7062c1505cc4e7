//! `calico-lab probe TARGET...` (run inside a workload): `<target> ok|refused|blocked`.

use std::time::Duration;

use calico_lab::{Target, probe};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// tcp:IP:PORT, udp:IP:PORT or icmp:IP.
    targets: Vec<String>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let targets: Vec<Target> = args
        .targets
        .iter()
        .map(|t| t.parse())
        .collect::<Result<_, _>>()?;
    let outcomes = probe::probe_all(&targets, Duration::from_millis(args.timeout_ms)).await;
    for (target, outcome) in targets.iter().zip(outcomes) {
        println!("{target} {outcome}");
    }
    Ok(())
}
