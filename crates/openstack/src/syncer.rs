//! The sync's state between passes and its three ways of bringing etcd up to date:
//!
//! | step | reads from Neutron | writes |
//! | --- | --- | --- |
//! | [`Syncer::full`] (a resync) | every port, subnet and group, paginated | the difference from what etcd holds, read back |
//! | [`Syncer::pass`] (polling) | ids and revisions of everything; when they changed, a full read | the difference from what the last pass wrote (or from etcd on a resync) |
//! | [`Syncer::apply`] (notifications) | each changed object by id (and a subnet a port names that is not known yet) | the difference for the keys those objects touch |
//!
//! The model of Neutron (`model::Model`) and what was written (`model::Written`) are kept by
//! all three, so the modes can follow one another; after any failure the next step is a
//! resync (`written` is dropped), which reads etcd again.

use std::collections::BTreeSet;

use calico_datastore::Datastore;

use crate::client::Client;
use crate::desired::Desired;
use crate::error::{SyncError, TranslateError};
use crate::model::{Change, Model, Touched, Written, report};
use crate::neutron::{Revisions, Snapshot};
use crate::sync::{Plan, execute, plan, read_owned};

/// What one step did, for the log and the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub plan: Plan,
    /// Requests sent to Neutron by this step.
    pub requests: u64,
    /// Ports Neutron has (as last read).
    pub ports: usize,
}

/// The sync's state between steps.
pub struct Syncer {
    neutron: Client,
    store: Box<dyn Datastore>,
    /// Neutron's revisions when the last polling pass read it.
    revisions: Option<Revisions>,
    model: Model,
    /// What etcd holds of the owned keys after the last successful step; `None`: read etcd.
    written: Option<Written>,
    /// The ports whose endpoints use the open profile (port security off).
    open_ports: BTreeSet<String>,
    /// What was left out at the last full read, so each problem is logged when it appears.
    reported: BTreeSet<String>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer")
            .field("neutron", &self.neutron)
            .field("keys", &self.written.as_ref().map(|w| w.keys.len()))
            .finish()
    }
}

impl Syncer {
    pub fn new(neutron: Client, store: Box<dyn Datastore>) -> Syncer {
        Syncer {
            neutron,
            store,
            revisions: None,
            model: Model::default(),
            written: None,
            open_ports: BTreeSet::new(),
            reported: BTreeSet::new(),
        }
    }

    pub fn neutron(&self) -> &Client {
        &self.neutron
    }

    /// Whether the next step must be a resync (at start, after a failure).
    pub fn needs_resync(&self) -> bool {
        self.written.is_none()
    }

    /// A resync: everything read from Neutron, compared with etcd itself, the difference
    /// written (so drift both ways is repaired).
    pub async fn full(&mut self) -> Result<Outcome, SyncError> {
        let before = self.neutron.requests();
        let snapshot = self.neutron.snapshot().await?;
        self.full_from(snapshot, &BTreeSet::new(), before).await
    }

    /// The rest of a resync whose read of Neutron (`snapshot`, read with a clone of
    /// [`Syncer::neutron`]) ran while `changed` were applied: those objects are read again
    /// first, so that what is written is never older than what they wrote. `requests_before`:
    /// the request count when the read began.
    pub async fn full_from(
        &mut self,
        snapshot: Snapshot,
        changed: &BTreeSet<Change>,
        requests_before: u64,
    ) -> Result<Outcome, SyncError> {
        let plan = self.write_all(snapshot, changed, true).await?;
        Ok(Outcome {
            plan,
            requests: self.neutron.requests() - requests_before,
            ports: self.model.ports(),
        })
    }

    /// One polling pass: when Neutron's revisions changed (or `resync`), a full read, written
    /// against what the last pass wrote (or etcd on a resync). `None` when nothing changed.
    pub async fn pass(&mut self, resync: bool) -> Result<Option<Plan>, SyncError> {
        let revisions = self.neutron.revisions().await?;
        let resync = resync || self.written.is_none();
        if !resync && self.revisions.as_ref() == Some(&revisions) {
            return Ok(None);
        }
        let snapshot = self.neutron.snapshot().await?;
        let plan = self.write_all(snapshot, &BTreeSet::new(), resync).await?;
        self.revisions = Some(revisions);
        Ok(Some(plan))
    }

    /// Handles the changed objects: each read by id, the keys they touch written.
    pub async fn apply(&mut self, changes: &BTreeSet<Change>) -> Result<Outcome, SyncError> {
        if self.written.is_none() {
            return self.full().await;
        }
        let before = self.neutron.requests();
        let touched = read_changes(&self.neutron, &mut self.model, changes).await?;
        let Some(written) = self.written.as_mut() else {
            return self.full().await;
        };
        let old = written.of(&touched);
        let desired = self.model.desired(&touched, &mut self.open_ports);
        report(&desired);
        let plan = plan(&desired.keys, &old);
        if let Err(e) = execute(self.store.as_ref(), &plan).await {
            self.written = None;
            return Err(e);
        }
        if let Some(written) = self.written.as_mut() {
            written.update(&old, &desired.keys);
        }
        log(&plan, false);
        Ok(Outcome {
            plan,
            requests: self.neutron.requests() - before,
            ports: self.model.ports(),
        })
    }

    /// Translates a full read, with the objects of `changed` read again into it, and writes
    /// it: against etcd on a resync, else against what was written before.
    async fn write_all(
        &mut self,
        snapshot: Snapshot,
        changed: &BTreeSet<Change>,
        resync: bool,
    ) -> Result<Plan, SyncError> {
        let left_out = snapshot.left_out.clone();
        let mut model = Model::from_snapshot(snapshot);
        read_changes(&self.neutron, &mut model, changed).await?;
        let all = model.everything();
        let mut open_ports = BTreeSet::new();
        let mut desired = model.desired(&all, &mut open_ports);
        desired.left_out.splice(0..0, left_out);
        self.report(&desired, resync);
        let resync = resync || self.written.is_none();
        let known = match self.written.take() {
            Some(written) if !resync => written.keys,
            _ => read_owned(self.store.as_ref()).await?,
        };
        let plan = plan(&desired.keys, &known);
        execute(self.store.as_ref(), &plan).await?;
        log(&plan, resync);
        self.written = Some(Written::new(desired.keys));
        self.model = model;
        self.open_ports = open_ports;
        Ok(plan)
    }

    /// Logs what was left out and what was written with a caveat: new ones always, all of
    /// them again on a resync.
    fn report(&mut self, desired: &Desired, resync: bool) {
        let mut now = BTreeSet::new();
        let all = desired.left_out.iter().map(|e| (e, false));
        for (error, caveat) in all.chain(desired.caveats.iter().map(|e| (e, true))) {
            let line = format!("{caveat} {error}");
            if resync || !self.reported.contains(&line) {
                match caveat {
                    true => TranslateError::log_caveat(error),
                    false => error.log(),
                }
            }
            now.insert(line);
        }
        self.reported = now;
    }
}

/// Reads each changed object into `model`; the objects whose keys that touches.
async fn read_changes(
    neutron: &Client,
    model: &mut Model,
    changes: &BTreeSet<Change>,
) -> Result<Touched, SyncError> {
    let mut touched = Touched::default();
    for change in changes {
        match change {
            Change::Port(id) => {
                let port = neutron.port(id).await?;
                if let Some(port) = &port {
                    for subnet in model.unknown_subnets(port) {
                        let read = neutron.subnet(&subnet).await?;
                        model.set_subnet(&subnet, read);
                    }
                }
                model.set_port(id, port);
                touched.ports.insert(id.clone());
            }
            Change::Subnet(id) => {
                let subnet = neutron.subnet(id).await?;
                model.set_subnet(id, subnet);
                touched.ports.extend(model.ports_in_subnet(id));
            }
            Change::SecurityGroup(id) => {
                let group = neutron.security_group(id).await?;
                model.set_group(id, group);
                touched.groups.insert(id.clone());
            }
        }
    }
    Ok(touched)
}

fn log(plan: &Plan, resync: bool) {
    if plan.is_empty() {
        return;
    }
    let (puts, deletes) = plan.count();
    tracing::info!(puts, deletes, resync, "etcd updated from neutron");
    for op in &plan.ops {
        tracing::debug!(?op, "written");
    }
}
