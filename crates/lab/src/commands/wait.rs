//! `calico-lab wait`: until every Felix has programmed everything written so far.

use std::time::Duration;

use calico_lab::{Lab, ready};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let lab = Lab::load(name)?;
    let revision = ready::wait_programmed(&lab, Duration::from_secs(args.timeout_secs)).await?;
    println!("every Felix has programmed revision {revision}");
    Ok(())
}
