//! The soak's established flows and what they saw: one long TCP flow from a workload on each
//! host to a workload on the next host (`calico-lab flow --json` inside the client), a monitor
//! of the routes those flows need (when a host had no BGP route to the other end: a route
//! withdrawal window), and the attribution of each lost echo to a window or not.

use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use crate::probe::{FlowReport, LateEcho, unix_ms};
use crate::ready;
use crate::sh;
use crate::state::{Lab, Workload};

/// One established flow: from `client` to `server`'s echo server.
#[derive(Debug, Clone)]
pub struct Flow {
    pub client: Workload,
    pub server: Workload,
    pub to: SocketAddr,
}

/// A flow's process, running for the whole soak.
#[derive(Debug)]
pub struct RunningFlow {
    pub flow: Flow,
    child: tokio::process::Child,
}

/// How the flows pace their echoes: one every 50 ms; an echo may take up to two minutes
/// (TCP keeps sending again through a partition or a route withdrawal); one slower than
/// 500 ms is listed even without a retransmission.
const EVERY_MS: &str = "50";
const PATIENCE_MS: &str = "120000";
const LATE_MS: &str = "500";

/// Starts `calico-lab flow` inside each client for `seconds`.
pub fn start(flows: &[Flow], seconds: u64) -> anyhow::Result<Vec<RunningFlow>> {
    let me = std::env::current_exe().context("cannot find calico-lab itself")?;
    flows
        .iter()
        .map(|flow| {
            let child = tokio::process::Command::from(sh::command_in(&flow.client.netns, &me))
                .args(["flow", &flow.to.to_string(), "--json"])
                .args(["--seconds", &seconds.to_string(), "--every-ms", EVERY_MS])
                .args(["--patience-ms", PATIENCE_MS, "--late-ms", LATE_MS])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("cannot start the flow from {}", flow.client.name))?;
            Ok(RunningFlow {
                flow: flow.clone(),
                child,
            })
        })
        .collect()
}

impl RunningFlow {
    /// Waits for the flow to end; its report.
    pub async fn finish(self) -> anyhow::Result<(Flow, FlowReport)> {
        let out = self.child.wait_with_output().await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().find(|l| l.starts_with('{')) else {
            bail!(
                "the flow from {} to {} printed no report: {}",
                self.flow.client.name,
                self.flow.server.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        };
        let report = serde_json::from_str(line)
            .with_context(|| format!("the flow's report does not read: {line}"))?;
        Ok((self.flow, report))
    }
}

/// A time when `host` did not route `address` (a workload on another host) the way the lab
/// expects: from and to, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Window {
    pub host: String,
    pub address: IpAddr,
    pub from_ms: u64,
    pub to_ms: u64,
}

/// Polls, every [`MONITOR_EVERY`], whether each flow's hosts route the other end.
#[derive(Debug)]
pub struct RouteMonitor {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Window>>,
}

pub const MONITOR_EVERY: Duration = Duration::from_millis(200);

impl RouteMonitor {
    pub fn start(lab: &Lab, flows: &[Flow]) -> anyhow::Result<RouteMonitor> {
        // (the host that routes, the host that owns the address, the address)
        let mut watched = Vec::new();
        for flow in flows {
            let client = lab.host(&flow.client.host)?.clone();
            let server = lab.host(&flow.server.host)?.clone();
            watched.push((client.clone(), server.clone(), flow.to.ip()));
            let back = first_of_family(&flow.client, flow.to.ip())?;
            watched.push((server, client, back));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut open: Vec<Option<u64>> = vec![None; watched.len()];
            let mut windows = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                for (i, (host, owner, address)) in watched.iter().enumerate() {
                    let now = unix_ms();
                    match (ready::routes_now(host, owner, *address), open[i]) {
                        (false, None) => open[i] = Some(now),
                        (true, Some(from_ms)) => {
                            open[i] = None;
                            windows.push(Window {
                                host: host.name.clone(),
                                address: *address,
                                from_ms,
                                to_ms: now,
                            });
                        }
                        _ => {}
                    }
                }
                std::thread::sleep(MONITOR_EVERY);
            }
            let now = unix_ms();
            for (i, from) in open.iter().enumerate() {
                if let Some(from_ms) = from {
                    windows.push(Window {
                        host: watched[i].0.name.clone(),
                        address: watched[i].2,
                        from_ms: *from_ms,
                        to_ms: now,
                    });
                }
            }
            windows
        });
        Ok(RouteMonitor { stop, thread })
    }

    /// Stops polling; every window seen (one still open ends now).
    pub fn finish(self) -> Vec<Window> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// The workload's first address of the same family as `like`.
fn first_of_family(w: &Workload, like: IpAddr) -> anyhow::Result<IpAddr> {
    w.ips
        .iter()
        .copied()
        .find(|ip| ip.is_ipv4() == like.is_ipv4())
        .with_context(|| format!("workload {} has no address like {like}", w.name))
}

/// What one flow saw, judged.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub from: String,
    pub to: String,
    pub target: String,
    pub sent: u32,
    pub echoed: u32,
    pub max_gap_ms: u128,
    /// Why it ended early, if it did.
    pub cut: Option<String>,
    /// Echoes that lost a segment while one of the flow's routes was withdrawn.
    pub lost_in_bgp_windows: usize,
    /// Echoes that lost a segment at any other time: lost to our restarts.
    pub lost_outside: Vec<LateEcho>,
    /// Echoes slower than the threshold without a lost segment (a busy machine).
    pub slow: usize,
}

/// How long before and after a window an echo still counts as in it: the monitor sees a
/// route only every [`MONITOR_EVERY`], and TCP sends again only after its timeout.
pub const WINDOW_MARGIN_MS: u64 = 1000;

/// Judges a flow: each echo that lost a segment either overlaps a window of one of the
/// flow's routes (either direction) or counts as lost to our restarts.
pub fn summarize(flow: &Flow, report: &FlowReport, windows: &[Window]) -> FlowSummary {
    let relevant: Vec<&Window> = windows
        .iter()
        .filter(|w| {
            (w.host == flow.client.host && w.address == flow.to.ip())
                || (w.host == flow.server.host && flow.client.ips.contains(&w.address))
        })
        .collect();
    let in_window = |echo: &LateEcho| {
        let (from, to) = (echo.sent_at_ms, echo.sent_at_ms + echo.took_ms);
        relevant.iter().any(|w| {
            from <= w.to_ms + WINDOW_MARGIN_MS && w.from_ms.saturating_sub(WINDOW_MARGIN_MS) <= to
        })
    };
    let lost: Vec<&LateEcho> = report.late.iter().filter(|e| e.retransmits > 0).collect();
    FlowSummary {
        from: flow.client.name.clone(),
        to: flow.server.name.clone(),
        target: flow.to.to_string(),
        sent: report.sent,
        echoed: report.echoed,
        max_gap_ms: report.max_gap_ms,
        cut: report.cut.clone(),
        lost_in_bgp_windows: lost.iter().filter(|e| in_window(e)).count(),
        lost_outside: lost
            .into_iter()
            .filter(|e| !in_window(e))
            .copied()
            .collect(),
        slow: report.late.iter().filter(|e| e.retransmits == 0).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(name: &str, host: &str, ip: &str) -> Workload {
        Workload {
            name: name.to_owned(),
            host: host.to_owned(),
            netns: String::new(),
            interface: String::new(),
            ips: vec![ip.parse().unwrap()],
            key: String::new(),
        }
    }

    fn echo(sent_at_ms: u64, took_ms: u64, retransmits: u64) -> LateEcho {
        LateEcho {
            sent_at_ms,
            took_ms,
            retransmits,
        }
    }

    #[test]
    fn lost_echoes_are_blamed_on_a_window_only_when_they_overlap_one_of_the_flows_routes() {
        let flow = Flow {
            client: workload("c", "host1", "10.65.0.1"),
            server: workload("s", "host2", "10.65.1.1"),
            to: "10.65.1.1:80".parse().unwrap(),
        };
        let window = |host: &str, address: &str, from_ms, to_ms| Window {
            host: host.to_owned(),
            address: address.parse().unwrap(),
            from_ms,
            to_ms,
        };
        let windows = [
            // host1 lost its route to the server: the flow's.
            window("host1", "10.65.1.1", 10_000, 14_000),
            // host2 lost its route back to the client: the flow's too.
            window("host2", "10.65.0.1", 50_000, 51_000),
            // host3 lost a route: not this flow's.
            window("host3", "10.65.1.1", 90_000, 95_000),
        ];
        let report = FlowReport {
            sent: 100,
            echoed: 100,
            max_gap_ms: 3000,
            late: vec![
                echo(13_500, 3000, 3), // inside the first window
                echo(14_800, 200, 1),  // just after it, within the margin
                echo(49_500, 300, 1),  // just before the second
                echo(92_000, 400, 2),  // during host3's window only: ours
                echo(120_000, 700, 0), // slow, nothing lost
                echo(130_000, 250, 1), // no window at all: ours
            ],
            cut: None,
        };
        let summary = summarize(&flow, &report, &windows);
        assert_eq!(summary.lost_in_bgp_windows, 3);
        let outside: Vec<u64> = summary.lost_outside.iter().map(|e| e.sent_at_ms).collect();
        assert_eq!(outside, [92_000, 130_000]);
        assert_eq!(summary.slow, 1);
    }
}
