//! `calico-lab serve` (hidden): the echo server every workload runs.

use calico_lab::probe;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_delimiter = ',')]
    ports: Vec<u16>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    probe::serve(&args.ports).await
}
