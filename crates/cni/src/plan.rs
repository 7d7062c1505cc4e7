//! The `calico` plugin's commands as data, pure: ADD is a plan of steps, each with its undo,
//! made from the request, the configuration and what the steps before it returned; DEL is
//! that undo read back from what exists; CHECK compares what exists with what the steps make
//! (`check`). The executor (`execute`) is the one part with effects.
//!
//! | ADD step | does | its undo (a failed ADD) | DEL's undo, from what it finds | crash point after |
//! | --- | --- | --- | --- | --- |
//! | [`Step::Claim`] | IPAM ADD under the call's handle | [`Undo::Release`] | [`Undo::Release`], and [`Undo::ReleaseLegacy`] for the old handle's addresses | `ipam` |
//! | [`Step::Plumb`] | the veth, addresses and routes: `calico_plumbing`'s plan | [`Undo::Unplumb`]: the plan's undo list | [`Undo::RemoveContainerSide`] (its source rules, the interface), [`Undo::DeleteHostSide`] | `veth` |
//! | [`Step::Write`] | the network's profile (if absent) and the workload endpoint | [`Undo::DeleteEndpoint`] (the profile is the network's: it stays) | [`Undo::DeleteEndpoint`] at the revision read | `endpoint` |
//!
//! Between the claim and the plumbing the executor reads where the new attachment's routes go
//! ([`Next::ReadPlacement`]): the kernel's plan depends on the routes already in the container.
//! Kubernetes reuses a pod's name (so its endpoint and veth) for the next container: DEL
//! removes the host side and the endpoint only when their addresses are this container's.

use std::net::IpAddr;

use calico_linux::Netns;
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::profile::network_default;
use calico_model::{Key, MacAddr, Validate, to_json};
use calico_plumbing::routes::SourceRule;
use calico_plumbing::{self as plumbing, Attachment, PlumbPlan, RoutePlacement};
use ipnet::IpNet;
use serde_json::{Value, json};

use crate::config::NetConf;
use crate::fault;
use crate::runtime_config::Requested;
use crate::spec::{CniError, CniResult, Env, Interface, IpConfig, RouteConfig, code};
use crate::workload::{Workload, handle_id};

/// What one call is about, from its environment and configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub workload: Workload,
    /// The IPAM handle of this interface (`<network>.<container>[.<ifname>]`).
    pub handle: String,
    /// The handle before `.<ifname>` was part of it (every interface used eth0's).
    pub legacy_handle: String,
    /// `CNI_NETNS` (empty on a DEL after the container is gone) and `CNI_IFNAME`.
    pub netns: String,
    pub ifname: String,
    /// The network's name: its profile's too.
    pub network: String,
    pub mtu: Option<u32>,
    /// `ipam.type`, as errors name it.
    pub ipam_type: String,
    pub dns: Value,
}

impl Request {
    pub fn new(env: &Env, conf: &NetConf, workload: Workload) -> Result<Request, CniError> {
        Ok(Request {
            handle: handle_id(&conf.name, &env.container_id, &env.ifname),
            legacy_handle: handle_id(&conf.name, &env.container_id, "eth0"),
            netns: env.netns.clone(),
            ifname: env.ifname.clone(),
            network: conf.name.clone(),
            mtu: conf.mtu,
            ipam_type: conf.ipam()?.plugin_type.clone(),
            dns: conf.dns.clone().unwrap_or_else(|| json!({})),
            workload,
        })
    }

    /// The endpoint's key, as the datastore spells it.
    pub fn key(&self) -> String {
        self.workload.key().to_string()
    }
}

/// A key and the value to write there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    pub key: String,
    pub value: String,
}

/// One step of ADD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// IPAM ADD: `calico-ipam` in this process, any other IPAM plugin as a child.
    Claim,
    /// The kernel side, by `calico_plumbing`'s executor (which undoes its own steps when one
    /// fails).
    Plumb(PlumbPlan),
    /// The network's profile, each key only if absent (an existing one is the operator's), and
    /// the workload endpoint, written together.
    Write { profile: [Put; 2], endpoint: Put },
}

/// What undoes a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// Deletes the workload endpoint; on DEL only at the revision read, so that a newer
    /// container's write stays.
    DeleteEndpoint { key: String, revision: Option<i64> },
    /// `calico_plumbing`'s undo list, in its order (best effort).
    Unplumb(Vec<plumbing::Undo>),
    /// DEL: the container side's source rules (they do not go with the link), then the
    /// interface, which takes its addresses and routes along.
    RemoveContainerSide {
        netns: Netns,
        ifname: String,
        rules: Vec<SourceRule>,
    },
    /// DEL: the host side (and so the pair), if it is still there.
    DeleteHostSide { veth: String },
    /// IPAM DEL of the call's handle.
    Release,
    /// DEL: this interface's addresses held by the legacy handle, one by one.
    ReleaseLegacy { addresses: Vec<IpAddr> },
}

impl Undo {
    /// Whether it acts on the kernel (DEL runs those on a thread of their own).
    pub fn in_kernel(&self) -> bool {
        matches!(
            self,
            Undo::Unplumb(_) | Undo::RemoveContainerSide { .. } | Undo::DeleteHostSide { .. }
        )
    }
}

/// What an undo does, as a failed undo's log line names it.
impl std::fmt::Display for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undo::DeleteEndpoint { key, .. } => write!(f, "deleting {key}"),
            Undo::Unplumb(_) => f.write_str("unplugging"),
            Undo::RemoveContainerSide { netns, ifname, .. } => {
                write!(f, "removing {ifname} in {netns}")
            }
            Undo::DeleteHostSide { veth } => write!(f, "deleting {veth}"),
            Undo::Release => f.write_str("IPAM DEL"),
            Undo::ReleaseLegacy { addresses } => {
                write!(f, "releasing {addresses:?} of the legacy handle")
            }
        }
    }
}

/// A step of ADD, what undoes it, and where a crash test may abort once it is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub step: Step,
    pub undo: Undo,
    /// Whether the undo is owed even when the step fails: a write whose answer was lost may
    /// still have landed (and deleting what is not there is harmless).
    pub undo_if_failed: bool,
    pub crash_point: fault::Step,
}

impl Planned {
    /// The undo owed once the step has run, done or failed.
    pub fn owed(&self, done: bool) -> Option<Undo> {
        (done || self.undo_if_failed).then(|| self.undo.clone())
    }
}

/// What a step returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The addresses IPAM assigned.
    Claimed(Vec<IpAddr>),
    Plumbed(Ends),
    Written,
}

/// The MACs of both ends, once plugged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ends {
    pub host: Option<MacAddr>,
    pub container: Option<MacAddr>,
}

/// What ADD has learnt so far: the outcomes of its steps and what it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub claimed: Option<Vec<IpAddr>>,
    pub placement: Option<RoutePlacement>,
    pub plumbed: Option<Ends>,
    pub written: bool,
}

impl Progress {
    pub fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Claimed(addresses) => self.claimed = Some(addresses),
            Outcome::Plumbed(ends) => self.plumbed = Some(ends),
            Outcome::Written => self.written = true,
        }
    }
}

/// What ADD does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Do(Planned),
    /// Read where routes for these addresses go in the container (`routes::placement_in`).
    ReadPlacement {
        addresses: Vec<IpAddr>,
    },
    /// All done: the CNI result.
    Done(CniResult),
}

/// `CNI_NETNS` does not exist (code 3).
pub fn unknown_container(netns: &str) -> CniError {
    CniError::new(
        code::UNKNOWN_CONTAINER,
        format!("CNI_NETNS {netns}: no such namespace"),
    )
}

/// Before ADD's first step: a repeated ADD must not touch the interface (and addresses) the
/// first one made.
pub fn not_added_yet(request: &Request, interface_exists: bool) -> Result<(), CniError> {
    if !interface_exists {
        return Ok(());
    }
    Err(CniError::new(
        code::KERNEL,
        format!(
            "{} already exists in {}: a repeated ADD? DEL the container first",
            request.ifname, request.netns
        ),
    ))
}

/// ADD's next step, from the request and what is done and read so far; an error is a step
/// that cannot be made (the executor then undoes what is done).
pub fn next(
    request: &Request,
    requested: &Requested,
    progress: &Progress,
) -> Result<Next, CniError> {
    let Some(addresses) = &progress.claimed else {
        return Ok(Next::Do(Planned {
            step: Step::Claim,
            undo: Undo::Release,
            undo_if_failed: false,
            crash_point: fault::Step::Ipam,
        }));
    };
    honoured(request, requested, addresses)?;
    let Some(placement) = progress.placement else {
        let addresses = addresses.clone();
        return Ok(Next::ReadPlacement { addresses });
    };
    let Some(ends) = &progress.plumbed else {
        let plan = plumbing::plan(&attachment(request, requested, addresses, placement));
        return Ok(Next::Do(Planned {
            undo: Undo::Unplumb(plan.undo_list()),
            step: Step::Plumb(plan),
            undo_if_failed: false,
            crash_point: fault::Step::Veth,
        }));
    };
    if !progress.written {
        return Ok(Next::Do(Planned {
            step: write(request, addresses, ends)?,
            undo: Undo::DeleteEndpoint {
                key: request.key(),
                revision: None,
            },
            undo_if_failed: true,
            crash_point: fault::Step::Endpoint,
        }));
    }
    Ok(Next::Done(result(request, addresses, ends)))
}

/// Whether the IPAM plugin assigned exactly the static addresses asked for (`calico-ipam`
/// does; another IPAM plugin might not read `runtimeConfig.ips` or `CNI_ARGS` `IP=`).
fn honoured(request: &Request, requested: &Requested, assigned: &[IpAddr]) -> Result<(), CniError> {
    let same = requested.ips.len() == assigned.len()
        && requested.ips.iter().all(|ip| assigned.contains(ip));
    if requested.ips.is_empty() || same {
        return Ok(());
    }
    let list = |ips: &[IpAddr]| {
        ips.iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    Err(CniError::new(
        code::IPAM,
        format!(
            "IPAM plugin {} assigned {} but the runtime asked for {} (runtimeConfig.ips or \
             CNI_ARGS IP=): it does not take static addresses",
            request.ipam_type,
            list(assigned),
            list(&requested.ips)
        ),
    ))
}

/// What the kernel side gets: the veth made straight into `CNI_NETNS`, the addresses, and
/// routes placed after every default route already in the container.
fn attachment(
    request: &Request,
    requested: &Requested,
    addresses: &[IpAddr],
    placement: RoutePlacement,
) -> Attachment {
    Attachment {
        host: request.workload.veth_name(),
        container: request.ifname.clone(),
        netns: Netns::at_path(&request.netns),
        addresses: addresses.to_vec(),
        mtu: request.mtu,
        mac: requested.mac,
        routes: placement,
    }
}

/// The network's profile (Calico's classic default: tagged with the network name, inbound
/// allowed from that tag, outbound allowed) and the workload endpoint (seed 004: active, the
/// host side's name, the container side's MAC, the addresses, the network's profile).
fn write(request: &Request, addresses: &[IpAddr], ends: &Ends) -> Result<Step, CniError> {
    let name = request.network.clone();
    let (tags, rules) = network_default(&name);
    let endpoint = WorkloadEndpoint {
        mac: ends.container,
        ..WorkloadEndpoint::active(&request.workload.veth_name(), &[&name], addresses)
    };
    let endpoint = put(request.workload.key(), &endpoint)?;
    let tags = put(
        Key::ProfileTags {
            profile: name.clone(),
        },
        &tags,
    )?;
    let rules = put(Key::ProfileRules { profile: name }, &rules)?;
    Ok(Step::Write {
        profile: [tags, rules],
        endpoint,
    })
}

/// A value for `key`, as the model writes it; a value the model refuses is the plugin's bug or
/// bad configuration, named with the key and field.
fn put<T: serde::Serialize + Validate + Clone>(key: Key, value: &T) -> Result<Put, CniError> {
    let value =
        to_json(value).map_err(|e| CniError::new(code::INVALID_CONFIG, format!("{key}: {e}")))?;
    Ok(Put {
        key: key.to_string(),
        value,
    })
}

/// ADD's result: both ends, the addresses on the container side, a default route per family.
fn result(request: &Request, addresses: &[IpAddr], ends: &Ends) -> CniResult {
    let defaults = [
        ("0.0.0.0/0", addresses.iter().any(IpAddr::is_ipv4)),
        ("::/0", addresses.iter().any(IpAddr::is_ipv6)),
    ];
    CniResult {
        interfaces: vec![
            Interface {
                name: request.workload.veth_name(),
                mac: ends.host.map(|m| m.to_string()),
                sandbox: None,
            },
            Interface {
                name: request.ifname.clone(),
                mac: ends.container.map(|m| m.to_string()),
                sandbox: Some(request.netns.clone()),
            },
        ],
        ips: addresses
            .iter()
            .map(|ip| IpConfig {
                address: IpNet::from(*ip),
                gateway: None,
                interface: Some(1),
            })
            .collect(),
        routes: defaults
            .into_iter()
            .filter(|(_, wanted)| *wanted)
            .map(|(dst, _)| RouteConfig {
                dst: dst.parse().expect("valid"),
                gw: None,
            })
            .collect(),
        dns: request.dns.clone(),
    }
}

/// What DEL found of an ADD.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The source rules from the container side's addresses, when the namespace exists and
    /// has the interface.
    pub container: Option<Vec<SourceRule>>,
    /// Whether the host side (the call's veth name) exists.
    pub host_side: bool,
    /// What the datastore holds; `None` when it could not be read (then whose the host side
    /// and the addresses are is unknown: only the container side goes).
    pub stored: Option<Stored>,
}

/// The workload endpoint as DEL read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The endpoint's revision, if there is one.
    pub revision: Option<i64>,
    /// Its addresses, each with the handle that holds it in Calico IPAM (if any).
    pub holders: Vec<(IpAddr, Option<String>)>,
}

/// DEL's undo, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelPlan {
    pub undo: Vec<Undo>,
    /// An address of the endpoint is another handle's: a newer container of the same workload
    /// owns the endpoint and the host side, which stay.
    pub newer: bool,
}

/// DEL: the undo of ADD's steps, last first, for what exists. The container side goes
/// whoever owns the endpoint; the call's handle is released whatever it holds (releasing frees
/// only what is this handle's).
pub fn del_plan(request: &Request, found: &Found) -> DelPlan {
    let mut plan = DelPlan::default();
    let Some(stored) = &found.stored else {
        plan.undo.extend(remove_container_side(request, found));
        return plan;
    };
    let mut legacy = Vec::new();
    for (address, holder) in &stored.holders {
        match holder.as_deref() {
            Some(h) if h == request.handle => {}
            Some(h) if h == request.legacy_handle => legacy.push(*address),
            Some(_) => plan.newer = true,
            None => {}
        }
    }
    if !plan.newer
        && let Some(revision) = stored.revision
    {
        let key = request.key();
        let revision = Some(revision);
        plan.undo.push(Undo::DeleteEndpoint { key, revision });
    }
    plan.undo.extend(remove_container_side(request, found));
    if !plan.newer && found.host_side {
        let veth = request.workload.veth_name();
        plan.undo.push(Undo::DeleteHostSide { veth });
    }
    plan.undo.push(Undo::Release);
    if !plan.newer && !legacy.is_empty() {
        plan.undo.push(Undo::ReleaseLegacy { addresses: legacy });
    }
    plan
}

fn remove_container_side(request: &Request, found: &Found) -> Option<Undo> {
    let rules = found.container.clone()?;
    Some(Undo::RemoveContainerSide {
        netns: Netns::at_path(&request.netns),
        ifname: request.ifname.clone(),
        rules,
    })
}

#[cfg(test)]
mod tests;
