//! The executor of the `calico` plugin's plans (`plan`): runs ADD's steps in order, with the
//! fault-injection points (`fault`) between them, undoes what is done when one fails, and runs
//! DEL's undo. Every effect of ADD and DEL is here or in what it calls.
//!
//! ```text
//! ADD: read (interface ∥ etcd) → loop { plan::next → step | read placement } → result
//!                                         └ failure: the undo of what is done, last first
//! DEL: read (container side ∥ endpoint + holders) → plan::del_plan
//!        → kernel undo on a thread of its own ∥ datastore undo
//! ```

use std::path::Path;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::Ipam;
use calico_linux::{Netlink, Netns};
use calico_plumbing::{self as plumbing, routes};
use serde_json::Value;

use crate::config::NetConf;
use crate::delegate::{self, IpamPlugin};
use crate::fault::crash_point;
use crate::ipam_plugin::{self, connect, ipam_error};
use crate::plan::{self, Ends, Next, Outcome, Planned, Progress, Request, Step, Undo};
use crate::read;
use crate::runtime_config::Requested;
use crate::spec::{CniError, CniResult, Env, code};

/// One call: what the runtime passed, what it asks for and where its IPAM runs.
#[derive(Debug)]
pub struct Call<'a> {
    pub env: &'a Env,
    pub conf: &'a NetConf,
    pub stdin: &'a [u8],
    pub request: Request,
    pub ipam: IpamPlugin,
}

impl Call<'_> {
    /// IPAM ADD: in this process through `store`, or by the IPAM plugin.
    async fn ipam_add(&self, store: &Arc<dyn Datastore>) -> Result<CniResult, CniError> {
        let plugin = match &self.ipam {
            IpamPlugin::InProcess => {
                return ipam_plugin::add(&Ipam::new(store.clone()), self.env, self.conf).await;
            }
            IpamPlugin::Exec(plugin) => plugin.clone(),
        };
        let (path, stdin) = (self.env.path.clone(), self.stdin.to_vec());
        tokio::task::spawn_blocking(move || delegate::ipam_add(&plugin, &path, &stdin))
            .await
            .map_err(ipam_call_failed)?
    }

    /// IPAM DEL: in this process through `store`, or by the IPAM plugin.
    async fn ipam_del(&self, store: &Arc<dyn Datastore>) -> Result<(), CniError> {
        let plugin = match &self.ipam {
            IpamPlugin::InProcess => {
                return ipam_plugin::del(&Ipam::new(store.clone()), self.env, self.conf).await;
            }
            IpamPlugin::Exec(plugin) => plugin.clone(),
        };
        let (path, stdin) = (self.env.path.clone(), self.stdin.to_vec());
        tokio::task::spawn_blocking(move || delegate::call(&plugin, &path, "DEL", &stdin))
            .await
            .map_err(ipam_call_failed)?
            .map(|_| ())
    }
}

fn ipam_call_failed(e: tokio::task::JoinError) -> CniError {
    CniError::new(code::IO_FAILURE, format!("the IPAM call failed: {e}"))
}

/// ADD: the plan's steps in order; on failure, the undo of those done (best effort).
pub async fn add(call: &Call<'_>) -> Result<Value, CniError> {
    let (env, conf, request) = (call.env, call.conf, &call.request);
    let requested = conf.requested(env)?;
    if !Path::new(&env.netns).exists() {
        return Err(plan::unknown_container(&env.netns));
    }
    let netns = Netns::at_path(&env.netns);
    let (exists, store) = tokio::join!(read::has_interface(&netns, &env.ifname), connect(conf));
    plan::not_added_yet(request, exists?)?;
    let mut executor = Executor {
        call,
        store: store?,
        done: Vec::new(),
    };
    match executor.add(&requested).await {
        Ok(result) => Ok(result.to_json(&conf.cni_version)),
        Err(error) => {
            tracing::warn!("ADD failed, undoing it: {error}");
            for undo in executor.done.iter().rev() {
                if let Err(e) = executor.undo(undo).await {
                    tracing::error!("undo: {undo} failed: {e}");
                }
            }
            Err(error)
        }
    }
}

/// Runs steps and undo on one datastore connection.
struct Executor<'c, 'a> {
    call: &'c Call<'a>,
    store: Arc<dyn Datastore>,
    /// The undo of each step done (or tried, when it may have landed), in the order done.
    done: Vec<Undo>,
}

impl Executor<'_, '_> {
    async fn add(&mut self, requested: &Requested) -> Result<CniResult, CniError> {
        let request = &self.call.request;
        let mut progress = Progress::default();
        loop {
            match plan::next(request, requested, &progress)? {
                Next::Do(planned) => progress.record(self.apply(planned).await?),
                Next::ReadPlacement { addresses } => {
                    let netns = Netns::at_path(&request.netns);
                    progress.placement = Some(routes::placement_in(&netns, &addresses).await?);
                }
                Next::Done(result) => return Ok(result),
            }
        }
    }

    /// One step, the undo it owes, then the crash point after it.
    async fn apply(&mut self, planned: Planned) -> Result<Outcome, CniError> {
        let outcome = self.run(&planned.step).await;
        self.done.extend(planned.owed(outcome.is_ok()));
        let outcome = outcome?;
        crash_point(self.call.env.abort_after, planned.crash_point);
        Ok(outcome)
    }

    async fn run(&self, step: &Step) -> Result<Outcome, CniError> {
        let conf = self.call.conf;
        match step {
            Step::Claim => {
                let assigned = self.call.ipam_add(&self.store).await?;
                let addresses = assigned.ips.iter().map(|ip| ip.address.addr()).collect();
                Ok(Outcome::Claimed(addresses))
            }
            Step::Plumb(plan) => {
                let plumbed = plumbing::execute(plan).await?;
                Ok(Outcome::Plumbed(Ends {
                    host: plumbed.host.mac.map(calico_model::MacAddr),
                    container: plumbed.container.mac.map(calico_model::MacAddr),
                }))
            }
            Step::Write { profile, endpoint } => {
                let store = self.store.as_ref();
                let [tags, rules] = profile;
                tokio::try_join!(
                    store.put_if_absent(&tags.key, &tags.value),
                    store.put_if_absent(&rules.key, &rules.value),
                    store.put(&endpoint.key, &endpoint.value),
                )
                .map_err(|e| conf.etcd_error(e))?;
                Ok(Outcome::Written)
            }
        }
    }

    /// One undo; those on the kernel by [`undo_in_kernel`].
    async fn undo(&self, undo: &Undo) -> Result<(), CniError> {
        let conf = self.call.conf;
        match undo {
            Undo::DeleteEndpoint { key, revision } => {
                let deleted = match revision {
                    Some(revision) => self.store.compare_and_delete(key, *revision).await,
                    None => self.store.delete(key).await,
                };
                deleted.map(|_| ()).map_err(|e| conf.etcd_error(e))
            }
            Undo::Release => self.call.ipam_del(&self.store).await,
            Undo::ReleaseLegacy { addresses } => {
                let _held = ipam_plugin::host_lock(conf).await?;
                let ipam = Ipam::new(self.store.clone());
                let freed = ipam.release_ips(addresses).await.map_err(ipam_error)?;
                let legacy = &self.call.request.legacy_handle;
                tracing::info!(?freed, %legacy, "released this interface's addresses of the old handle");
                Ok(())
            }
            kernel => undo_in_kernel(kernel).await,
        }
    }
}

/// DEL: reads what exists, and runs the undo of what it finds. It tries everything: the
/// container side goes whether etcd answers or not, and the first error is returned once all
/// has run. The kernel tears a veth down inside the netlink request (tens of milliseconds),
/// which would stall this thread's runtime: the kernel's undo runs on a thread of its own,
/// while the datastore's runs here.
pub async fn del(call: &Call<'_>) -> Result<(), CniError> {
    let (env, request) = (call.env, &call.request);
    let veth = request.workload.veth_name();
    let (kernel, stored) = tokio::join!(
        read::kernel(&env.netns, &env.ifname, &veth),
        read::stored(call.conf, request)
    );
    // What could not be read is left alone (and its error returned at the end).
    let (container, host_side) = kernel.as_ref().cloned().unwrap_or_default();
    let found = plan::Found {
        container,
        host_side,
        stored: stored.as_ref().ok().map(|(_, stored)| stored.clone()),
    };
    let plan = plan::del_plan(request, &found);
    if plan.newer {
        let key = request.key();
        tracing::info!(%key, "the endpoint belongs to a newer container; leaving it");
    }
    let (in_kernel, datastore): (Vec<Undo>, Vec<Undo>) =
        plan.undo.into_iter().partition(Undo::in_kernel);
    let in_datastore = async {
        let Ok((store, _)) = &stored else {
            return Ok(());
        };
        let executor = Executor {
            call,
            store: store.clone(),
            done: Vec::new(),
        };
        let mut first = Ok(());
        for undo in &datastore {
            let outcome = executor.undo(undo).await;
            first = first.and(outcome);
        }
        first
    };
    let (undone, datastore) = tokio::join!(undo_in_kernel_apart(in_kernel), in_datastore);
    stored?;
    datastore?;
    kernel?;
    undone
}

/// The kernel's undo, in order, on a thread and runtime of its own; it stops at the first
/// failure (the host side goes only once the container side has).
async fn undo_in_kernel_apart(list: Vec<Undo>) -> Result<(), CniError> {
    if list.is_empty() {
        return Ok(());
    }
    let apart = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot start: {e}")))?;
        runtime.block_on(async {
            for undo in &list {
                undo_in_kernel(undo).await?;
            }
            Ok(())
        })
    });
    apart.await.map_err(|e| {
        CniError::new(
            code::IO_FAILURE,
            format!("the interface removal failed: {e}"),
        )
    })?
}

/// An undo on the kernel.
async fn undo_in_kernel(undo: &Undo) -> Result<(), CniError> {
    match undo {
        Undo::Unplumb(list) => plumbing::undo(list).await,
        Undo::RemoveContainerSide {
            netns,
            ifname,
            rules,
        } => {
            let container = Netlink::connect(netns)?;
            for rule in rules {
                routes::delete_rule(&container, rule).await?;
            }
            container.delete_link(ifname).await?;
        }
        Undo::DeleteHostSide { veth } => {
            Netlink::connect(&Netns::current())?
                .delete_link(veth)
                .await?;
        }
        Undo::DeleteEndpoint { .. } | Undo::Release | Undo::ReleaseLegacy { .. } => {
            unreachable!("{undo:?} is the datastore's")
        }
    }
    Ok(())
}
