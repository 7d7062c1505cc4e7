//! `calico-lab soak`: kills, partitions, etcd member restarts and churn on a lab that is up,
//! with established flows running; then checks that nothing was lost or left behind.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use calico_lab::soak::{self, schedule::Rates};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long the chaos lasts, in seconds.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// The plan's seed (the same seed gives the same plan); by default drawn from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// The mean time between two kills (of Felix, calico-node or BIRD), in seconds.
    #[arg(long, default_value_t = 5.0)]
    kill_every: f64,
    /// The mean time between two partitions, in seconds.
    #[arg(long, default_value_t = 60.0)]
    partition_every: f64,
    /// The longest partition, in seconds (at least 5).
    #[arg(long, default_value_t = 60.0)]
    max_partition: f64,
    /// The mean time between two etcd member restarts, in seconds (needs 3 or more members).
    #[arg(long, default_value_t = 45.0)]
    member_every: f64,
    /// The mean time between two workload or policy changes, in seconds.
    #[arg(long, default_value_t = 2.0)]
    churn_every: f64,
    /// Random flows checked against `calicoctl policy explain` at the end.
    #[arg(long, default_value_t = 40)]
    samples: usize,
    /// Writes the whole report (every event, window and late echo) here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Seconds as a duration; `what` names the option in the error.
fn seconds(value: f64, what: &str, at_least: f64) -> anyhow::Result<Duration> {
    if !value.is_finite() || value < at_least || value > 86_400.0 {
        bail!("--{what} {value}: give seconds from {at_least} to 86400");
    }
    Ok(Duration::from_secs_f64(value))
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let seed = match args.seed {
        Some(seed) => seed,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64,
    };
    if args.seconds < 10 {
        bail!("--seconds {}: the soak lasts at least 10 s", args.seconds);
    }
    let mut rates = Rates::standard(seed, Duration::from_secs(args.seconds), 0, 0);
    rates.kill_every = seconds(args.kill_every, "kill-every", 0.5)?;
    rates.partition_every = seconds(args.partition_every, "partition-every", 1.0)?;
    rates.max_partition = seconds(args.max_partition, "max-partition", 5.0)?;
    rates.min_partition = rates.min_partition.min(rates.max_partition);
    rates.member_every = seconds(args.member_every, "member-every", 1.0)?;
    rates.churn_every = seconds(args.churn_every, "churn-every", 0.2)?;
    let say = |line: &str| eprintln!("soak: {line}");
    let report = soak::run(name, rates, args.samples, &say).await?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("{}", report.summary());
    let failures = report.failures();
    if !failures.is_empty() {
        for failure in &failures {
            println!("FAILED: {failure}");
        }
        bail!(
            "the soak found {} problem(s); replay it with --seed {seed}",
            failures.len()
        );
    }
    Ok(())
}
