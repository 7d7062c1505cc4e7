//! `calico-lab soak`: chaos, measured, on a lab that is up. Established TCP flows run from a
//! workload on each host to one on the next host for the whole soak while a plan drawn from a
//! seed ([`schedule`]) kills Felix, calico-node and BIRD with SIGKILL, cuts hosts off from
//! etcd, stops etcd members, plugs churn workloads in and out and edits their policy. Then
//! everything is brought back, the lab settles, and the checks of [`verify`] run.
//!
//! ```text
//!  set-up: profiles soak-flow / soak-churn, tier soak; two flow workloads per host
//!  flows (calico-lab flow --json, one per host) ──────────────────────────────► reports
//!  route monitor (every host's main table over netlink: the flows' routes) ──────────► windows
//!  plan: kill / start / partition / heal / member stop / start / add / remove / edit
//!  end: all back ─► leader ─► every Felix programmed, every route there ─► checks
//! ```
//!
//! An echo that lost a segment (TCP sent it again) while one of its flow's routes was
//! withdrawn is counted against BGP; any other lost echo is lost to our restarts and fails
//! the soak, as does a cut flow, a sampled flow where the kernel and `policy explain`
//! disagree, a host whose routes differ from its endpoints, an unclean `calicoctl ipam check`
//! or anything left behind.

pub mod flows;
pub mod schedule;
pub mod verify;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use calico_datastore::{Datastore, EtcdDatastore};
use calico_model::Key;
use serde::Serialize;

use crate::etcd::{self, connect};
use crate::members;
use crate::processes::{self, stop_pids};
use crate::ready;
use crate::sh;
use crate::state::Lab;
use crate::topology::netns_pids;
use crate::workloads::{self, WorkloadSpec};
use flows::{Flow, FlowSummary, RouteMonitor, Window};
use schedule::{Action, Process, Rates, Step};

/// How long the end may take to settle: every Felix in sync, every route there.
const SETTLE_LIMIT: Duration = Duration::from_secs(180);
/// At most this many churn workloads at once (an add beyond it removes one instead).
const MAX_CHURN: usize = 8;
/// The port the flows use (every workload's echo server serves it).
const FLOW_PORT: u16 = 80;
const CHURN_APPS: [&str; 3] = ["a", "b", "c"];

/// What the soak did and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub seed: u64,
    /// When the plan's clock started (milliseconds since the Unix epoch; the flows' echoes
    /// and the windows are in the same clock).
    pub started_at_ms: u64,
    pub duration_s: f64,
    pub hosts: usize,
    pub etcd_members: usize,
    /// Kills done, by process (a BIRD that calico-node was still starting is not counted).
    pub kills: BTreeMap<Process, u32>,
    pub kills_total: u32,
    pub partitions: u32,
    pub partition_max_s: f64,
    pub member_restarts: u32,
    /// Of the member restarts, those of the leader.
    pub leader_restarts: u32,
    pub workloads_added: u32,
    pub workloads_removed: u32,
    pub policy_edits: u32,
    /// Changes that failed during the chaos (a CNI call while etcd elected a leader, say);
    /// a runtime would try again, and the soak does for removals.
    pub change_failures: Vec<String>,
    /// How late the plan's steps ran, at most (a slow CNI call delays the next step).
    pub step_lateness_max_ms: u64,
    pub flows: Vec<FlowSummary>,
    /// Times when a flow's host had no route to the other end (BGP withdrew it).
    pub bgp_windows: usize,
    pub bgp_window_max_ms: u64,
    pub bgp_window_total_ms: u64,
    pub windows: Vec<Window>,
    /// From the end of the chaos until every Felix had programmed everything and every route
    /// was there.
    pub settle_s: f64,
    pub sampled_flows: usize,
    pub mismatches: Vec<String>,
    pub route_problems: Vec<String>,
    pub ipam_clean: bool,
    pub ipam: String,
    pub leaks: Vec<String>,
    /// Every step, with its time from the start.
    pub events: Vec<String>,
}

impl Report {
    /// What fails the soak, in words; empty when it passed.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for flow in &self.flows {
            if let Some(cut) = &flow.cut {
                failures.push(format!(
                    "the flow {} -> {} was cut: {cut}",
                    flow.from, flow.to
                ));
            }
            if !flow.lost_outside.is_empty() {
                failures.push(format!(
                    "the flow {} -> {} lost {} echo(es) outside any route withdrawal: {:?}",
                    flow.from,
                    flow.to,
                    flow.lost_outside.len(),
                    flow.lost_outside
                ));
            }
        }
        failures.extend(self.mismatches.iter().map(|m| format!("mismatch: {m}")));
        failures.extend(self.route_problems.iter().cloned());
        if !self.ipam_clean {
            failures.push(format!("calicoctl ipam check: {}", self.ipam));
        }
        failures.extend(self.leaks.iter().map(|l| format!("left behind: {l}")));
        failures
    }

    /// The figures, for people.
    pub fn summary(&self) -> String {
        let lost_in: usize = self.flows.iter().map(|f| f.lost_in_bgp_windows).sum();
        let lost_out: usize = self.flows.iter().map(|f| f.lost_outside.len()).sum();
        let sent: u32 = self.flows.iter().map(|f| f.sent).sum();
        let echoed: u32 = self.flows.iter().map(|f| f.echoed).sum();
        let max_gap = self.flows.iter().map(|f| f.max_gap_ms).max().unwrap_or(0);
        let kills: Vec<String> = self
            .kills
            .iter()
            .map(|(p, n)| format!("{} {n}", process_name(*p)))
            .collect();
        format!(
            "soak seed {} over {:.0} s on {} hosts and {} etcd member(s)\n\
             kills: {} ({})\n\
             partitions: {} (longest {:.1} s); etcd member restarts: {} ({} of the leader)\n\
             churn: {} workloads added, {} removed, {} policy edits, {} failed changes\n\
             flows: {} echoes sent, {} echoed, longest wait {} ms; echoes that lost a segment: \
             {} in BGP route withdrawal windows, {} outside\n\
             BGP windows on the flows' routes: {} (longest {} ms, {} ms in all)\n\
             settled {:.1} s after the chaos; {} sampled flows, {} mismatches; {} route \
             problems; ipam check {}; {} leaks",
            self.seed,
            self.duration_s,
            self.hosts,
            self.etcd_members,
            self.kills_total,
            kills.join(", "),
            self.partitions,
            self.partition_max_s,
            self.member_restarts,
            self.leader_restarts,
            self.workloads_added,
            self.workloads_removed,
            self.policy_edits,
            self.change_failures.len(),
            sent,
            echoed,
            max_gap,
            lost_in,
            lost_out,
            self.bgp_windows,
            self.bgp_window_max_ms,
            self.bgp_window_total_ms,
            self.settle_s,
            self.sampled_flows,
            self.mismatches.len(),
            self.route_problems.len(),
            if self.ipam_clean {
                "clean"
            } else {
                "NOT clean"
            },
            self.leaks.len()
        )
    }
}

fn process_name(process: Process) -> &'static str {
    match process {
        Process::Felix => "calico-felix",
        Process::Node => "calico-node",
        Process::Bird => "bird",
    }
}

/// Runs the soak on lab `name` with `rates` (its hosts and members are the lab's) and checks
/// `samples` random flows at the end. `say` hears of each step as it happens.
pub async fn run(
    name: &str,
    mut rates: Rates,
    samples: usize,
    say: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<Report> {
    let lab = Lab::load(name)?;
    if lab.hosts.len() < 2 {
        bail!(
            "the soak needs a lab with at least 2 hosts (`calico-lab up --hosts 3 --etcd-members 3`)"
        );
    }
    if lab.subnets > 1 {
        bail!(
            "the soak expects its hosts on one subnet (routes via each other); lab {name:?} has {}",
            lab.subnets
        );
    }
    if lab.etcd.is_empty() {
        bail!("lab {name:?} was brought up by an older calico-lab; bring it up again");
    }
    if let Some(host) = lab
        .hosts
        .iter()
        .find(|h| h.node_pid.is_none() || h.felix_pid.is_none())
    {
        bail!(
            "{} runs no Felix or no calico-node; the soak kills both",
            host.name
        );
    }
    rates.hosts = lab.hosts.len();
    rates.members = lab.etcd.len();
    if rates.members < 3 {
        say(
            "the lab has fewer than 3 etcd members: no member will be stopped (it would take etcd away)",
        );
    }
    let store = connect(&lab).await?;
    let mut chaos = Chaos {
        lab,
        store,
        report: Report {
            seed: rates.seed,
            duration_s: rates.duration.as_secs_f64(),
            hosts: rates.hosts,
            etcd_members: rates.members,
            ..Report::default()
        },
        started: Instant::now(),
        partitioned: BTreeMap::new(),
        churn: Vec::new(),
        next_churn: 0,
        pending_removals: Vec::new(),
        node: processes::node_binary()?,
        felix: processes::felix_binary(None)?,
    };
    say("setting up: profiles, tier, two flow workloads per host");
    let flows = chaos.set_up().await?;
    let running = flows::start(&flows, rates.duration.as_secs() + 15)?;
    let monitor = RouteMonitor::start(&chaos.lab, &flows).await?;
    // Let every flow connect before the first fault.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let plan = schedule::plan(&rates);
    say(&format!("{} steps over {:?}", plan.len(), rates.duration));
    chaos.started = Instant::now();
    chaos.report.started_at_ms = crate::probe::unix_ms();
    for step in &plan {
        tokio::time::sleep_until((chaos.started + step.at).into()).await;
        let late = chaos.started.elapsed().saturating_sub(step.at);
        chaos.report.step_lateness_max_ms = chaos
            .report
            .step_lateness_max_ms
            .max(late.as_millis() as u64);
        let line = chaos.execute(step).await;
        say(&line);
        chaos.report.events.push(line);
    }
    tokio::time::sleep_until((chaos.started + rates.duration).into()).await;

    say("the chaos is over: bringing everything back");
    let ended = Instant::now();
    chaos.restore().await?;
    let limit = ready::Deadline::after(SETTLE_LIMIT);
    members::wait_for_leader(&chaos.lab, SETTLE_LIMIT).await?;
    chaos.retry_removals(limit).await?;
    ready::wait_programmed(&chaos.lab, SETTLE_LIMIT)
        .await
        .context("the lab did not settle after the chaos")?;
    chaos.report.settle_s = ended.elapsed().as_secs_f64();

    let windows = monitor.finish();
    say("waiting for the flows to end");
    for flow in running {
        let (flow, report) = flow.finish().await?;
        let summary = flows::summarize(&flow, &report, &windows);
        chaos.report.flows.push(summary);
    }
    let at = |ms: u64| ms.saturating_sub(chaos.report.started_at_ms) as f64 / 1000.0;
    for w in &windows {
        let line = format!(
            "{:7.1} s {} had no route to {} until {:.1} s",
            at(w.from_ms),
            w.host,
            w.address,
            at(w.to_ms)
        );
        chaos.report.events.push(line);
    }
    let lengths: Vec<u64> = windows.iter().map(|w| w.to_ms - w.from_ms).collect();
    chaos.report.bgp_windows = windows.len();
    chaos.report.bgp_window_max_ms = lengths.iter().copied().max().unwrap_or(0);
    chaos.report.bgp_window_total_ms = lengths.iter().sum();
    chaos.report.windows = windows;

    say("checking routes, sampled flows, IPAM and leftovers");
    let lab = &chaos.lab;
    chaos.report.route_problems = verify::routes(lab, &chaos.store).await?;
    let (sampled, mismatches) = verify::sampled_flows(lab, rates.seed, samples).await?;
    chaos.report.sampled_flows = sampled;
    chaos.report.mismatches = mismatches;
    let (clean, text) = verify::ipam(lab)?;
    chaos.report.ipam_clean = clean;
    chaos.report.ipam = text;
    chaos.report.leaks = verify::leaks(lab)?;
    Ok(chaos.report)
}

/// The soak's running state.
struct Chaos {
    lab: Lab,
    store: EtcdDatastore,
    report: Report,
    started: Instant,
    /// Hosts cut off from etcd, and since when.
    partitioned: BTreeMap<usize, Instant>,
    /// The churn workloads plugged in now.
    churn: Vec<String>,
    next_churn: u32,
    /// Churn workloads whose CNI DEL failed: tried again.
    pending_removals: Vec<String>,
    node: std::path::PathBuf,
    felix: std::path::PathBuf,
}

impl Chaos {
    /// The profiles and tier, and a flow client and server on each host; the flows (client on
    /// host N to the server on host N + 1).
    async fn set_up(&mut self) -> anyhow::Result<Vec<Flow>> {
        let allow_all =
            r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
        let churn = r#"{"inbound_rules": [{"action": "allow", "protocol": "tcp", "dst_ports": [80, 443]}, {"action": "allow", "protocol": "icmp"}], "outbound_rules": [{"action": "allow"}]}"#;
        let profile = |name: &str| Key::ProfileRules {
            profile: name.to_owned(),
        };
        etcd::put(&self.store, &profile("soak-flow"), allow_all).await?;
        etcd::put(&self.store, &profile("soak-churn"), churn).await?;
        let tier = Key::TierMetadata {
            tier: "soak".to_owned(),
        };
        etcd::put(&self.store, &tier, r#"{"order": 10}"#).await?;
        let hosts: Vec<String> = self.lab.hosts.iter().map(|h| h.name.clone()).collect();
        let mut pairs = Vec::new();
        for host in &hosts {
            let mut pair = Vec::new();
            for role in ["client", "server"] {
                let spec = WorkloadSpec {
                    host: host.clone(),
                    name: format!("soak-{role}-{host}"),
                    ips: Vec::new(),
                    profiles: vec!["soak-flow".to_owned()],
                    labels: [("role".to_owned(), "flow".to_owned())].into(),
                };
                pair.push(workloads::add_workload(&mut self.lab, &spec, ready::ADD_LIMIT).await?);
            }
            pairs.push(pair);
        }
        let mut flows = Vec::new();
        for (i, pair) in pairs.iter().enumerate() {
            let server = &pairs[(i + 1) % pairs.len()][1];
            let ip = server
                .ips
                .iter()
                .copied()
                .find(|ip| ip.is_ipv4())
                .with_context(|| format!("{} has no IPv4 address", server.name))?;
            flows.push(Flow {
                client: pair[0].clone(),
                server: server.clone(),
                to: SocketAddr::new(ip, FLOW_PORT),
            });
        }
        Ok(flows)
    }

    /// Does one step; a line for the log.
    async fn execute(&mut self, step: &Step) -> String {
        let at = format!("{:7.1} s", step.at.as_secs_f64());
        match self.act(step.action).await {
            Ok(what) => format!("{at} {what}"),
            Err(error) => {
                let text = format!("{at} {:?} failed: {error:#}", step.action);
                self.report.change_failures.push(text.clone());
                text
            }
        }
    }

    async fn act(&mut self, action: Action) -> anyhow::Result<String> {
        let host_name = |chaos: &Chaos, host: usize| chaos.lab.hosts[host].name.clone();
        match action {
            Action::Kill { host, process } => {
                let name = host_name(self, host);
                let killed = match process {
                    Process::Felix => {
                        processes::kill_felix(&mut self.lab, host);
                        true
                    }
                    Process::Node => match self.lab.hosts[host].node_pid.take() {
                        // calico-node alone: BIRD (its child) lives on, as after a crash.
                        Some(pid) => {
                            stop_pids(&[pid]);
                            true
                        }
                        None => false,
                    },
                    Process::Bird => match pid_named(&self.lab.hosts[host].netns, "bird") {
                        Some(pid) => {
                            stop_pids(&[pid]);
                            true
                        }
                        None => false,
                    },
                };
                self.lab.save()?;
                if !killed {
                    return Ok(format!(
                        "{} on {name} was not running",
                        process_name(process)
                    ));
                }
                *self.report.kills.entry(process).or_default() += 1;
                self.report.kills_total += 1;
                Ok(format!("killed {} on {name}", process_name(process)))
            }
            Action::Start { host, process } => {
                let pid = match process {
                    Process::Felix => {
                        processes::start_felix(&self.lab, &self.lab.hosts[host], &[], &self.felix)?
                    }
                    _ => processes::start_node(&self.lab, &self.lab.hosts[host], &self.node)?,
                };
                match process {
                    Process::Felix => self.lab.hosts[host].felix_pid = Some(pid),
                    _ => self.lab.hosts[host].node_pid = Some(pid),
                }
                self.lab.save()?;
                Ok(format!(
                    "started {} on {}",
                    process_name(process),
                    host_name(self, host)
                ))
            }
            Action::Partition { host } => {
                self.partition(host, true)?;
                self.partitioned.insert(host, Instant::now());
                self.report.partitions += 1;
                Ok(format!("cut {} off from etcd", host_name(self, host)))
            }
            Action::Heal { host } => {
                self.partition(host, false)?;
                if let Some(since) = self.partitioned.remove(&host) {
                    let lasted = since.elapsed().as_secs_f64();
                    self.report.partition_max_s = self.report.partition_max_s.max(lasted);
                }
                Ok(format!("{} reaches etcd again", host_name(self, host)))
            }
            Action::StopMember { member } => {
                let name = self.lab.etcd[member].name.clone();
                let leader = members::leader(&self.lab).ok();
                members::stop(&mut self.lab, &name)?;
                self.report.member_restarts += 1;
                let led = leader.as_deref() == Some(name.as_str());
                if led {
                    self.report.leader_restarts += 1;
                }
                Ok(format!(
                    "stopped etcd member {name}{}",
                    if led { " (the leader)" } else { "" }
                ))
            }
            Action::StartMember { member } => {
                let name = self.lab.etcd[member].name.clone();
                members::restart(&mut self.lab, &name)?;
                Ok(format!("started etcd member {name}"))
            }
            Action::AddWorkload { host } if self.churn.len() >= MAX_CHURN => {
                self.remove(host as u64).await
            }
            Action::AddWorkload { host } => self.add(host).await,
            Action::RemoveWorkload { pick } if self.churn.is_empty() => {
                let host = pick as usize % self.lab.hosts.len();
                match self.partitioned.contains_key(&host) {
                    true => self.edit_policy(pick).await,
                    false => self.add(host).await,
                }
            }
            Action::RemoveWorkload { pick } => self.remove(pick).await,
            Action::EditPolicy { pick } => self.edit_policy(pick).await,
        }
    }

    /// Cuts `host` off from every etcd member (`cut`), or lets it through again: a DROP rule
    /// in each member's namespace for the host's address and etcd's port.
    fn partition(&self, host: usize, cut: bool) -> anyhow::Result<()> {
        let ip = self.lab.hosts[host].ip.to_string();
        let port = crate::state::ETCD_PORT.to_string();
        let verb = if cut { "-I" } else { "-D" };
        for member in &self.lab.etcd {
            let args = [
                "-w",
                verb,
                "INPUT",
                "-s",
                &ip,
                "-p",
                "tcp",
                "--dport",
                &port,
                "-m",
                "comment",
                "--comment",
                verify::PARTITION_COMMENT,
                "-j",
                "DROP",
            ];
            sh::in_ns(&member.netns, "iptables", &args)?;
        }
        Ok(())
    }

    async fn add(&mut self, host: usize) -> anyhow::Result<String> {
        self.next_churn += 1;
        let app = CHURN_APPS[self.next_churn as usize % CHURN_APPS.len()];
        let spec = WorkloadSpec {
            host: self.lab.hosts[host].name.clone(),
            name: format!("soak-churn-{}", self.next_churn),
            ips: Vec::new(),
            profiles: vec!["soak-churn".to_owned()],
            labels: [
                ("role".to_owned(), "churn".to_owned()),
                ("app".to_owned(), app.to_owned()),
            ]
            .into(),
        };
        let (workload, _server) = workloads::plug_workload(&self.lab, &spec).await?;
        let line = format!(
            "added {} on {} ({})",
            workload.name,
            workload.host,
            workload
                .ips
                .iter()
                .map(|ip| ip.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.churn.push(workload.name.clone());
        self.lab.workloads.push(workload);
        self.lab.save()?;
        self.report.workloads_added += 1;
        Ok(line)
    }

    async fn remove(&mut self, pick: u64) -> anyhow::Result<String> {
        let name = self.churn.remove(pick as usize % self.churn.len());
        match workloads::delete_workload(&mut self.lab, &name).await {
            Ok(()) => {
                self.report.workloads_removed += 1;
                Ok(format!("removed {name}"))
            }
            Err(error) => {
                self.pending_removals.push(name.clone());
                Err(error.context(format!("removing {name} (tried again at the end)")))
            }
        }
    }

    /// Writes or deletes one of six churn policies (they select only churn workloads).
    async fn edit_policy(&mut self, pick: u64) -> anyhow::Result<String> {
        let index = pick % 6;
        let key = Key::Policy {
            tier: "soak".to_owned(),
            policy: format!("churn-{index}"),
        };
        self.report.policy_edits += 1;
        let app = CHURN_APPS[(pick / 6 % 3) as usize];
        let inbound = match pick / 18 % 5 {
            0 => {
                self.store.delete(&key.to_string()).await?;
                return Ok(format!("deleted policy churn-{index}"));
            }
            1 => {
                r#"[{"action": "allow", "protocol": "tcp", "dst_ports": [80], "src_selector": "role == 'flow'"}]"#
            }
            2 => {
                r#"[{"action": "deny", "protocol": "tcp", "dst_ports": [443]}, {"action": "allow"}]"#
            }
            3 => r#"[{"action": "allow", "protocol": "tcp", "dst_ports": [80, 443, 5432]}]"#,
            _ => r#"[{"action": "allow", "src_selector": "role == 'churn'"}]"#,
        };
        let value = format!(
            r#"{{"order": {}, "selector": "role == 'churn' && app == '{app}'", "inbound_rules": {inbound}, "outbound_rules": [{{"action": "allow"}}]}}"#,
            index * 10
        );
        etcd::put(&self.store, &key, &value).await?;
        Ok(format!("wrote policy churn-{index} for app {app}"))
    }

    /// Brings back whatever the plan left down (it ends with everything back; a failed step
    /// may not have).
    async fn restore(&mut self) -> anyhow::Result<()> {
        for host in self.partitioned.keys().copied().collect::<Vec<_>>() {
            self.act(Action::Heal { host }).await?;
        }
        for index in 0..self.lab.hosts.len() {
            let host = &self.lab.hosts[index];
            if !host.felix_pid.is_some_and(processes::pid_alive) {
                let pid = processes::start_felix(&self.lab, host, &[], &self.felix)?;
                self.lab.hosts[index].felix_pid = Some(pid);
            }
            let host = &self.lab.hosts[index];
            if !host.node_pid.is_some_and(processes::pid_alive) {
                let pid = processes::start_node(&self.lab, host, &self.node)?;
                self.lab.hosts[index].node_pid = Some(pid);
            }
        }
        let stopped: Vec<String> = self
            .lab
            .etcd
            .iter()
            .filter(|m| !m.pid.is_some_and(processes::pid_alive))
            .map(|m| m.name.clone())
            .collect();
        for name in stopped {
            members::restart(&mut self.lab, &name)?;
        }
        self.lab.save()
    }

    /// Removes the churn workloads whose removal failed, until it works or `limit` passes.
    async fn retry_removals(&mut self, limit: ready::Deadline) -> anyhow::Result<()> {
        while let Some(name) = self.pending_removals.pop() {
            loop {
                match workloads::delete_workload(&mut self.lab, &name).await {
                    Ok(()) => break,
                    Err(error) if limit.passed() => {
                        return Err(error.context(format!("removing {name} after the chaos")));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
            self.report.workloads_removed += 1;
        }
        Ok(())
    }
}

/// A process named `name` in the namespace.
fn pid_named(netns: &str, name: &str) -> Option<i32> {
    netns_pids(netns).into_iter().find(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
    })
}
