//! Seeing what gets through: probes from inside workloads, the connectivity matrix, and
//! reading what Felix says it has programmed (its metrics).

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use calico_http::{Request, send_on};
use calico_linux::{Netns, in_netns};

use crate::probe::{Outcome, Target};
use crate::sh;
use crate::state::{Lab, Workload};

/// The port Felix serves Prometheus metrics on in the lab's hosts.
pub const METRICS_PORT: u16 = 9091;

/// Runs `calico-lab probe` inside `from`; the outcomes in the order of `targets`.
pub async fn probe_from(
    lab: &Lab,
    from: &str,
    targets: &[Target],
    wait: Duration,
) -> anyhow::Result<Vec<Outcome>> {
    let workload = lab.workload(from)?;
    let me = std::env::var_os("CALICO_LAB_BIN")
        .map(std::path::PathBuf::from)
        .map_or_else(std::env::current_exe, Ok)?;
    let out = tokio::process::Command::from(sh::command_in(&workload.netns, me))
        .args(["probe", "--timeout-ms", &wait.as_millis().to_string()])
        .args(targets.iter().map(Target::to_string))
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "probe from {from} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let outcomes: Vec<Outcome> = text
        .lines()
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, w)| Outcome::parse(w)))
        .collect();
    if outcomes.len() != targets.len() {
        bail!(
            "probe from {from} printed {} results for {} targets:\n{text}",
            outcomes.len(),
            targets.len()
        );
    }
    Ok(outcomes)
}

/// For each (from, to) pair of different workloads: ping and TCP to `port` on `to`'s first
/// address.
pub type Matrix = Vec<(String, String, Outcome, Outcome)>;

pub async fn matrix(lab: &Lab, port: u16, wait: Duration) -> anyhow::Result<Matrix> {
    let mut tasks = Vec::new();
    for from in &lab.workloads {
        let peers: Vec<&Workload> = lab
            .workloads
            .iter()
            .filter(|w| w.name != from.name)
            .collect();
        let mut targets = Vec::new();
        for to in &peers {
            let address = to.ips[0];
            targets.push(Target::Icmp(address));
            targets.push(Target::Tcp((address, port).into()));
        }
        let names: Vec<String> = peers.iter().map(|w| w.name.clone()).collect();
        let (lab, from) = (lab.clone(), from.name.clone());
        tasks.push(tokio::spawn(async move {
            let outcomes = probe_from(&lab, &from, &targets, wait).await?;
            let rows: Matrix = names
                .into_iter()
                .zip(outcomes.chunks(2))
                .map(|(to, o)| (from.clone(), to, o[0], o[1]))
                .collect();
            anyhow::Ok(rows)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    Ok(all)
}

/// The matrix as a table: rows are sources, columns destinations, cells `ping/tcp`.
pub fn render(lab: &Lab, matrix: &Matrix, port: u16) -> String {
    let names: Vec<&str> = lab.workloads.iter().map(|w| w.name.as_str()).collect();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(4).max(9) + 2;
    let mut out = format!("from \\ to (ping/tcp:{port}; ok = answered, -- = dropped)\n");
    let _ = write!(out, "{:width$}", "");
    for name in &names {
        let _ = write!(out, "{name:width$}");
    }
    out.push('\n');
    for from in &names {
        let _ = write!(out, "{from:width$}");
        for to in &names {
            let cell = matrix
                .iter()
                .find(|(f, t, _, _)| f == from && t == to)
                .map_or_else(
                    || "·".to_owned(),
                    |(_, _, ping, tcp)| format!("{}/{}", word(*ping), word(*tcp)),
                );
            let _ = write!(out, "{cell:width$}");
        }
        out.push('\n');
    }
    out
}

fn word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Refused => "rst",
        Outcome::Blocked => "--",
        Outcome::Unreachable => "unr",
    }
}

/// Reads `felix_applied_revision` from the Felix metrics inside a host namespace.
pub async fn applied_revision(netns: &str) -> anyhow::Result<i64> {
    let metrics = fetch_in_netns(netns, METRICS_PORT, "/metrics").await?;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("felix_applied_revision "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as i64)
        .context("no felix_applied_revision in Felix's metrics")
}

/// An HTTP GET to 127.0.0.1:`port` inside a namespace; the body of a 200 answer.
pub async fn fetch_in_netns(netns: &str, port: u16, path: &str) -> anyhow::Result<String> {
    // Only the connection is made inside the namespace; the socket stays there.
    let connect = || std::net::TcpStream::connect(("127.0.0.1", port));
    let stream = in_netns(&Netns::named(netns), connect)
        .with_context(|| format!("nothing listens on 127.0.0.1:{port} in {netns}"))?;
    stream.set_nonblocking(true)?;
    let stream = tokio::net::TcpStream::from_std(stream)?;
    let authority = format!("127.0.0.1:{port}");
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        send_on(stream, &authority, Request::get(path)),
    )
    .await
    .with_context(|| format!("{authority} in {netns}: no answer to GET {path} within 5s"))?
    .with_context(|| format!("GET {path} in {netns}"))?;
    if answer.status != 200 {
        bail!(
            "GET {path} on {authority} in {netns}: status {}: {}",
            answer.status,
            answer.body.trim()
        );
    }
    Ok(answer.body)
}
