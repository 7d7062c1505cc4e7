//! `calico-flows`: the flow aggregator. Parses its flags, logs its effective settings, opens
//! its store and fills its window back from it, serves until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use calico_daemon::{Daemon, Shutdown};
use calico_flows::ingest::BatchLimits;
use calico_flows::store::StoreSettings;
use calico_flows::{Aggregator, Limits, Settings, serve};
use clap::Parser;

/// The flow aggregator: every Felix sends it flow records; it keeps them on disk (--store-dir,
/// answering a batch once it is durable) and a bounded window of them in memory, and serves
/// queries, a live stream, filter hints, Prometheus metrics (/metrics) and the web console (/).
/// It needs no etcd.
#[derive(Debug, Parser)]
#[command(name = "calico-flows", version)]
struct Args {
    /// The address Felix, calicoctl and browsers connect to
    #[arg(long, env = "CALICO_FLOWS_LISTEN", default_value = "0.0.0.0:7480")]
    listen: SocketAddr,
    /// Flows (one key in one bucket) kept at most; the oldest are evicted first
    #[arg(long, env = "CALICO_FLOWS_MAX_FLOWS", default_value_t = 100_000)]
    max_flows: usize,
    /// Heap the flows kept may take, counted as allocated (bytes, or with KiB, MiB, GiB); the
    /// oldest are evicted first. Batches being read and queries come on top
    #[arg(long, env = "CALICO_FLOWS_MAX_MEMORY", default_value = "256MiB", value_parser = parse_size)]
    max_memory: usize,
    /// Seconds a flow is kept in memory after it ended (0: until a cap pushes it out); queries
    /// that start before what memory holds read the store
    #[arg(long, env = "CALICO_FLOWS_RETENTION", default_value_t = 3600)]
    retention: u64,
    /// The directory of the store (flows.redb): every record accepted is kept there across
    /// restarts. One aggregator per directory
    #[arg(
        long,
        env = "CALICO_FLOWS_STORE_DIR",
        default_value = "/var/lib/calico-flows"
    )]
    store_dir: PathBuf,
    /// How long the store keeps a batch after it arrived (seconds, or with s, m, h, d); the
    /// oldest leave first. With --store-max-size, whichever is reached first
    #[arg(long, env = "CALICO_FLOWS_STORE_RETENTION", default_value = "24h", value_parser = parse_duration)]
    store_retention: u64,
    /// Bytes of records the store keeps at most (bytes, or with KiB, MiB, GiB); the oldest
    /// batches leave first
    #[arg(long, env = "CALICO_FLOWS_STORE_MAX_SIZE", default_value = "2GiB", value_parser = parse_size)]
    store_max_size: usize,
    /// Keep no store: records live in memory only and a restart loses them
    #[arg(long, env = "CALICO_FLOWS_MEMORY_ONLY")]
    memory_only: bool,
    /// Seconds per aggregation bucket: records of one flow starting in the same bucket are summed
    /// (Felix's FlowLogsFlushInterval)
    #[arg(long, env = "CALICO_FLOWS_BUCKET", default_value_t = 15)]
    bucket: u64,
    /// The largest batch body (bytes, or with KiB, MiB, GiB)
    #[arg(long, env = "CALICO_FLOWS_MAX_BATCH_BYTES", default_value = "8MiB", value_parser = parse_size)]
    max_batch_bytes: usize,
    /// Records taken from one batch; the rest are refused by index
    #[arg(long, env = "CALICO_FLOWS_MAX_BATCH_RECORDS", default_value_t = 10_000)]
    max_batch_records: usize,
    /// Seconds a record may end after this host's clock
    #[arg(long, env = "CALICO_FLOWS_MAX_CLOCK_SKEW", default_value_t = 300)]
    max_clock_skew: u64,
    /// Require `Authorization: Bearer TOKEN` on batches (every Felix must send the same token)
    #[arg(long, env = "CALICO_FLOWS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Records a live-stream subscriber may fall behind before it misses some (it is told)
    #[arg(long, env = "CALICO_FLOWS_STREAM_BUFFER", default_value_t = 4096)]
    stream_buffer: usize,
}

/// Batches are checked on the one blocking thread, so the flows the window keeps are all
/// allocated from one malloc arena: glibc gives each thread an arena of its own that keeps what
/// it freed, and checking on many threads kept about 9 MiB more resident with a 32 MiB window
/// (docs/observability.md, "Memory figures"). The window takes batches one at a time anyway.
const CHECKING_THREADS: usize = 1;

fn main() -> ExitCode {
    let args = Args::parse();
    // Logs to stderr (colour only on a terminal), a filter that does not parse refused by name.
    Daemon::new("calico-flows")
        .log_variable("CALICO_FLOWS_LOG")
        .blocking_threads(CHECKING_THREADS)
        .run(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let settings = settings(&args)?;
    let shutdown = Shutdown::listen().context("listening for SIGTERM and SIGINT")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}: cannot listen", args.listen))?;
    // The address bound, not the one asked for: with port 0 the kernel picks the port.
    let bound = listener
        .local_addr()
        .with_context(|| format!("--listen {}: no local address", args.listen))?;
    tracing::info!(
        listen = %bound,
        max_flows = args.max_flows,
        max_memory = args.max_memory,
        retention = args.retention,
        bucket = args.bucket,
        max_batch_bytes = args.max_batch_bytes,
        max_batch_records = args.max_batch_records,
        max_clock_skew = args.max_clock_skew,
        token = args.token.is_some(),
        store = %store_shown(&args),
        store_retention = args.store_retention,
        store_max_size = args.store_max_size,
        "serving flows and the console"
    );
    let aggregator = tokio::task::block_in_place(|| Aggregator::open(settings))
        .with_context(|| format!("--store-dir {}", args.store_dir.display()))?;
    tokio::select! {
        served = serve(listener, aggregator) => served.context("serving")?,
        () = shutdown.wait() => match args.memory_only {
            true => tracing::info!("stopping: the flows held in memory are dropped"),
            false => tracing::info!("stopping: every record accepted is in the store"),
        },
    }
    Ok(())
}

fn store_shown(args: &Args) -> String {
    match args.memory_only {
        true => "none (--memory-only)".to_owned(),
        false => args.store_dir.join(STORE_FILE).display().to_string(),
    }
}

/// The store's file in `--store-dir`.
const STORE_FILE: &str = "flows.redb";

fn settings(args: &Args) -> anyhow::Result<Settings> {
    for (flag, value) in [
        ("--max-flows", args.max_flows),
        ("--max-memory", args.max_memory),
        ("--bucket", args.bucket as usize),
        ("--max-batch-bytes", args.max_batch_bytes),
        ("--max-batch-records", args.max_batch_records),
        ("--stream-buffer", args.stream_buffer),
        ("--store-max-size", args.store_max_size),
    ] {
        anyhow::ensure!(value > 0, "{flag} 0: must be at least 1");
    }
    Ok(Settings {
        limits: Limits {
            max_flows: args.max_flows,
            max_memory: args.max_memory,
            retention: args.retention,
            bucket: args.bucket,
        },
        batch: BatchLimits {
            max_records: args.max_batch_records,
            max_skew: args.max_clock_skew,
        },
        max_batch_bytes: args.max_batch_bytes,
        token: args.token.clone().filter(|t| !t.is_empty()),
        default_limit: 1000,
        max_limit: 10_000,
        stream_buffer: args.stream_buffer,
        store: (!args.memory_only).then(|| StoreSettings {
            path: args.store_dir.join(STORE_FILE),
            retention: args.store_retention,
            max_bytes: args.store_max_size as u64,
        }),
    })
}

/// A duration in seconds: `86400`, `90s`, `30m`, `24h`, `7d`.
fn parse_duration(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let scale: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("unknown unit {unit:?}: expected s, m, h or d")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a duration like 24h"))
}

/// A size in bytes: `1048576`, `512KiB`, `256MiB`, `1GiB`.
fn parse_size(text: &str) -> Result<usize, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let scale: usize = match unit {
        "" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown unit {unit:?}: expected bytes, KiB, MiB or GiB"
            ));
        }
    };
    number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a size like 256MiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(
            parse_size("12MB")
                .unwrap_err()
                .contains("unknown unit \"MB\"")
        );
        assert!(parse_size("MiB").unwrap_err().contains("is not a size"));
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("86400"), Ok(86_400));
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("30m"), Ok(1800));
        assert_eq!(parse_duration("7d"), Ok(7 * 86_400));
        assert!(
            parse_duration("1w")
                .unwrap_err()
                .contains("unknown unit \"w\"")
        );
        assert!(
            parse_duration("h")
                .unwrap_err()
                .contains("is not a duration")
        );
    }

    #[test]
    fn zero_limits_are_refused_by_flag() {
        let args = Args::parse_from(["calico-flows", "--bucket", "0"]);
        let error = settings(&args).unwrap_err().to_string();
        assert_eq!(error, "--bucket 0: must be at least 1");
    }
}
