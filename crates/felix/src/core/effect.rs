//! What the agent's core asks for, as data. The loop (`agent.rs`) carries each effect out with
//! the real datastore and kernel and feeds the result back as an [`Input`](super::Input);
//! tests answer them instead. A new kind of work (flow logs, say) is one more variant here
//! and one more arm in the executor.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use calico_calc::{Changes, EndpointKey};
use calico_dataplane::BackendKind;
use calico_model::status::{EndpointOperState, FelixStatus};

use crate::config::Config;
use crate::encap::EncapPlans;
use crate::firewall::Work;
use crate::flowlogs::FlowNames;

/// One effect.
#[derive(Debug)]
pub enum Effect {
    /// Read Felix's configuration in etcd again → [`Input::ConfigRead`](super::Input).
    ReadConfig,
    /// Run the timers with these periods from now on (a live configuration change).
    Retime {
        refresh: Duration,
        route_refresh: Duration,
    },
    /// Build the firewall backend this configuration asks for and let it take over →
    /// [`Input::BackendReplaced`](super::Input).
    ReplaceBackend(Box<Config>),
    /// Stop, for the supervisor to start Felix again: these parameters changed and apply only
    /// at start. The dataplane stays as it is.
    Exit {
        restart: Vec<&'static str>,
    },
    /// Read the host's interfaces and their addresses →
    /// [`Input::InterfaceAddresses`](super::Input).
    ReadInterfaceAddresses,
    /// Program the firewall for the desired state → [`Input::Firewall`](super::Input).
    ProgramFirewall(Work),
    /// Read the kernel's firewall for the drift check, off the update path →
    /// [`Input::DriftRead`](super::Input), later.
    ReadDrift,
    /// Make routes, neighbours and interface settings match the desired state →
    /// [`Input::Routes`](super::Input).
    SyncRoutes,
    /// Apply the VXLAN and IPIP plans → [`Input::Encap`](super::Input).
    SyncEncap(Box<EncapPlans>),
    /// Make etcd hold these endpoint statuses (only what changed is written) →
    /// [`Input::StatusesWritten`](super::Input).
    WriteEndpointStatuses(BTreeMap<EndpointKey, EndpointOperState>),
    /// Write Felix's status key with a lease of `ttl` →
    /// [`Input::FelixStatusWritten`](super::Input).
    WriteFelixStatus {
        status: FelixStatus,
        ttl: Duration,
    },
    /// Report now: a report tick came before the datastore was ready →
    /// [`Input::Tick`](super::Input) `Report` with the time.
    ReportNow,
    /// Flow logs: decode with these names and addresses from now on.
    FlowNames(Box<FlowNames>),
    /// Readiness: in sync with the datastore and everything programmed (or not any more).
    Ready(bool),
    /// Liveness: the loop is running.
    Alive,
    Metric(Metric),
}

/// A change of a Prometheus metric (`metrics.rs` records it).
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// Datastore updates (puts and deletes) received.
    Updates(u64),
    /// A complete snapshot from the datastore (start-up, lost history).
    Resync,
    /// A kernel operation failed, by tool (`iptables`, `ipset`, `nftables`, `netlink`, …).
    Failed(&'static str),
    /// A full sync of the firewall took this long.
    FullSync(Duration),
    /// A batch of changes took this long.
    Applied(Duration),
    /// The drift check found and fixed drift.
    Repaired,
    /// Everything is programmed up to this datastore revision, for this many local endpoints.
    Programmed { revision: i64, endpoints: usize },
    /// This backend programs the firewall.
    Backend(BackendKind),
}

impl fmt::Display for Effect {
    /// One line, for the debug log and step-by-step tests.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Effect::ReadConfig => write!(f, "read config"),
            Effect::Retime {
                refresh,
                route_refresh,
            } => write!(
                f,
                "retime: refresh {refresh:?}, route refresh {route_refresh:?}"
            ),
            Effect::ReplaceBackend(config) => {
                write!(
                    f,
                    "replace backend: NFTablesMode={:?}",
                    config.nftables_mode
                )
            }
            Effect::Exit { restart } => write!(f, "exit for a restart: {}", restart.join(", ")),
            Effect::ReadInterfaceAddresses => write!(f, "read interface addresses"),
            Effect::ProgramFirewall(work) => write_work(f, work),
            Effect::ReadDrift => write!(f, "read firewall for drift"),
            Effect::SyncRoutes => write!(f, "sync routes"),
            Effect::SyncEncap(_) => write!(f, "sync encapsulation"),
            Effect::WriteEndpointStatuses(statuses) => {
                write!(f, "write endpoint statuses:")?;
                for (key, state) in statuses {
                    write!(f, " {key} {state:?}")?;
                }
                Ok(())
            }
            Effect::WriteFelixStatus { status, ttl } => write!(
                f,
                "write felix status: first_update {}, dataplane {}, ttl {ttl:?}",
                status.first_update,
                status.dataplane.as_deref().unwrap_or("-")
            ),
            Effect::ReportNow => write!(f, "report now"),
            Effect::FlowNames(names) => write!(
                f,
                "flow names: {} addresses, {} endpoints",
                names.owners.len(),
                names.endpoints.len()
            ),
            Effect::Ready(ready) => write!(f, "ready {ready}"),
            Effect::Alive => write!(f, "alive"),
            Effect::Metric(metric) => write!(f, "metric {metric:?}"),
        }
    }
}

fn write_work(f: &mut fmt::Formatter<'_>, work: &Work) -> fmt::Result {
    match work {
        Work::FullSync => write!(f, "firewall: full sync"),
        Work::Apply(changes) => write!(f, "firewall: apply {}", summary(changes)),
        Work::RepairDrift(_) => write!(f, "firewall: repair drift"),
    }
}

/// `endpoints 1, profiles 2`: how many of each kind changed.
fn summary(changes: &Changes) -> String {
    let counts = [
        ("endpoints", changes.endpoints.len()),
        ("policies", changes.policies.len()),
        ("profiles", changes.profiles.len()),
        ("ipsets", changes.ipsets.len()),
        ("pools", usize::from(changes.pools)),
    ];
    let parts: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    parts.join(", ")
}
