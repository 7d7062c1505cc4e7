//! The soak's established flows and what they saw: one long TCP flow from a workload on each
//! host to a workload on the next host (`calico-lab flow --json` inside the client), a monitor
//! of the routes those flows need (every host's main table over netlink: when a host had no route
//! to the other end via that end's host, a BGP route withdrawal window), and the attribution of
//! each lost echo to a window or not.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;

use anyhow::{Context, bail};
use serde::Serialize;

use calico_linux::{Netlink, Netns, RouteEvent, RouteEvents};
use ipnet::IpNet;

use crate::probe::{FlowReport, LateEcho, unix_ms};
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

/// A host's main routing table as the monitor knows it: destination → gateway (`None`: no
/// gateway, e.g. a blackhole or a device route).
type Table = BTreeMap<IpNet, Option<IpAddr>>;

/// Whether `table` sends `address` via `gateway`: its longest matching route does.
fn routes_via(table: &Table, address: IpAddr, gateway: IpAddr) -> bool {
    table
        .iter()
        .filter(|(net, _)| net.contains(&address))
        .max_by_key(|(net, _)| net.prefix_len())
        .is_some_and(|(_, via)| *via == Some(gateway))
}

/// A host's main table now, both families.
async fn table_of(netns: &str) -> anyhow::Result<Table> {
    let netlink = Netlink::connect(&Netns::named(netns))?;
    let routes = netlink.main_routes().await?;
    Ok(routes
        .into_iter()
        .map(|r| (r.destination, r.gateway))
        .collect())
}

/// Follows every host's main routing table over netlink (`calico_linux::RouteEvents`, one
/// subscription per host), and keeps, for each flow, when one of its hosts did not route the
/// other end via that end's host: a BGP route withdrawal window, to the moment the kernel said
/// so.
#[derive(Debug)]
pub struct RouteMonitor {
    /// One task per host forwarding its route changes; aborted on `finish`.
    monitors: Vec<tokio::task::JoinHandle<()>>,
    thread: std::thread::JoinHandle<Vec<Window>>,
}

impl RouteMonitor {
    pub async fn start(lab: &Lab, flows: &[Flow]) -> anyhow::Result<RouteMonitor> {
        // (the host that routes, the address, the gateway it must go through)
        let mut watched: Vec<(usize, IpAddr, IpAddr)> = Vec::new();
        let index = |name: &str| lab.hosts.iter().position(|h| h.name == name);
        for flow in flows {
            let client = index(&flow.client.host).context("the flow's client host")?;
            let server = index(&flow.server.host).context("the flow's server host")?;
            let to = flow.to.ip();
            let back = first_of_family(&flow.client, to)?;
            let gateway = |host: usize| match to {
                IpAddr::V4(_) => IpAddr::V4(lab.hosts[host].ip),
                IpAddr::V6(_) => IpAddr::V6(lab.hosts[host].ip6),
            };
            watched.push((client, to, gateway(server)));
            watched.push((server, back, gateway(client)));
        }
        let (sender, changes) = std::sync::mpsc::channel::<(u64, usize, RouteEvent)>();
        let mut monitors = Vec::new();
        for (i, host) in lab.hosts.iter().enumerate() {
            let mut events = RouteEvents::subscribe(&Netns::named(host.netns.as_str()))
                .with_context(|| format!("cannot follow the routes of {}", host.name))?;
            let sender = sender.clone();
            monitors.push(tokio::spawn(async move {
                while let Some(event) = events.next().await {
                    if sender.send((unix_ms(), i, event)).is_err() {
                        return;
                    }
                }
            }));
        }
        drop(sender);
        // The tables after the subscriptions started: a change in between is applied twice,
        // which does no harm.
        let mut tables = Vec::new();
        for host in &lab.hosts {
            tables.push(table_of(&host.netns).await?);
        }
        let names: Vec<String> = lab.hosts.iter().map(|h| h.name.clone()).collect();
        let thread = std::thread::spawn(move || {
            let mut open: Vec<Option<u64>> = vec![None; watched.len()];
            let mut windows = Vec::new();
            let mut judge = |tables: &[Table], now: u64, windows: &mut Vec<Window>| {
                for (w, &(host, address, gateway)) in watched.iter().enumerate() {
                    match (routes_via(&tables[host], address, gateway), open[w]) {
                        (false, None) => open[w] = Some(now),
                        (true, Some(from_ms)) => {
                            open[w] = None;
                            windows.push(Window {
                                host: names[host].clone(),
                                address,
                                from_ms,
                                to_ms: now,
                            });
                        }
                        _ => {}
                    }
                }
            };
            judge(&tables, unix_ms(), &mut windows);
            for (at, host, change) in changes {
                apply(&mut tables[host], change);
                judge(&tables, at, &mut windows);
            }
            // The monitors were stopped: whatever is still open ends now.
            let now = unix_ms();
            for (w, from) in open.iter().enumerate() {
                if let Some(from_ms) = *from {
                    windows.push(Window {
                        host: names[watched[w].0].clone(),
                        address: watched[w].1,
                        from_ms,
                        to_ms: now,
                    });
                }
            }
            windows
        });
        Ok(RouteMonitor { monitors, thread })
    }

    /// Stops following; every window seen (one still open ends now).
    pub fn finish(self) -> Vec<Window> {
        // Each task owns a sender: once all are gone the judge sees the end of the changes.
        for monitor in &self.monitors {
            monitor.abort();
        }
        self.thread.join().unwrap_or_default()
    }
}

/// A change of the main table, applied to what the monitor knows of it.
fn apply(table: &mut Table, change: RouteEvent) {
    match change {
        RouteEvent::Added(route) => table.insert(route.destination, route.gateway),
        RouteEvent::Deleted { destination } => table.remove(&destination),
    };
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

/// How long before and after a window an echo still counts as in it: TCP sends a segment
/// again only after its timeout (200 ms at least), and the monitor's clock reads a change a
/// little after the kernel made it.
pub const WINDOW_MARGIN_MS: u64 = 500;

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
    use calico_linux::MainRoute;

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
    fn route_changes_are_applied_and_the_longest_match_decides() {
        let mut table = Table::new();
        table.insert(
            "0.0.0.0/0".parse().unwrap(),
            Some("10.99.0.1".parse().unwrap()),
        );
        let (address, host3) = (
            "10.65.213.5".parse().unwrap(),
            "10.99.0.13".parse().unwrap(),
        );
        assert!(
            !routes_via(&table, address, host3),
            "only the default route"
        );
        let block = MainRoute {
            destination: "10.65.213.0/26".parse().unwrap(),
            gateway: Some(host3),
        };
        apply(&mut table, RouteEvent::Added(block));
        assert!(routes_via(&table, address, host3));
        let hole = MainRoute {
            destination: "10.65.213.4/30".parse().unwrap(),
            gateway: None,
        };
        apply(&mut table, RouteEvent::Added(hole));
        assert!(
            !routes_via(&table, address, host3),
            "a longer blackhole wins"
        );
        let destination = hole.destination;
        apply(&mut table, RouteEvent::Deleted { destination });
        assert!(
            routes_via(&table, address, host3),
            "withdrawn: the block again"
        );
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
                echo(14_300, 200, 1),  // just after it, within the margin
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
