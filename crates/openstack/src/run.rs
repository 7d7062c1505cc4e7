//! `calico-neutron`'s loop, in either mode:
//!
//! ```text
//!  notifications (default)                          polling (the baseline)
//!  datagram ─► Listener ─► changes (deduplicated)   every poll interval: revisions changed?
//!                  │ Syncer::apply: read each        └─► Syncer::pass: read all, write the
//!                  │ object, write its keys              difference
//!  every resync interval, at start, after a failure or a full queue: Syncer::full (both modes;
//!  with notifications, those that arrive while it reads are applied meanwhile)
//! ```
//!
//! Failures (Neutron or etcd away): nothing more is written, a warning, and a resync after the
//! shared backoff; notifications that arrive meanwhile are kept and handled after it.

use std::collections::BTreeSet;
use std::time::Duration;

use calico_datastore::Backoff;
use tokio::time::{Instant, sleep_until};

use crate::model::Change;
use crate::notify::Listener;
use crate::syncer::Syncer;

/// How calico-neutron learns that Neutron changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChangeSource {
    /// The ML2 driver's notification of each change, as it commits.
    Notifications,
    /// Ids and revisions of everything read every poll interval.
    Polling,
}

/// Runs polling passes until `shutdown` resolves: one every `poll`, a resync every `resync`,
/// and after a failure the next attempt after a backoff.
pub async fn polling(
    mut syncer: Syncer,
    poll: Duration,
    resync: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Backoff::default();
    let mut next_resync = Instant::now();
    loop {
        let now = Instant::now();
        let full = now >= next_resync;
        let before = syncer.neutron().requests();
        let delay = match syncer.pass(full).await {
            Ok(plan) => {
                recovered(&mut backoff);
                if full {
                    tracing::info!(
                        requests = syncer.neutron().requests() - before,
                        writes = plan.map_or(0, |p| p.ops.len()),
                        took = ?now.elapsed(),
                        "resync done"
                    );
                    next_resync = Instant::now() + resync;
                }
                poll
            }
            Err(error) => {
                let delay = backoff.next_delay();
                error.log(delay);
                delay
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Handles the driver's notifications as they arrive, with a resync every `resync` (and at
/// start, and after a failure or lost notifications), until `shutdown` resolves.
pub async fn notified(
    mut syncer: Syncer,
    mut listener: Listener,
    resync: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Backoff::default();
    let mut next_resync = Instant::now();
    let mut pending: BTreeSet<Change> = BTreeSet::new();
    let mut resyncs = 0u64;
    loop {
        while let Some(change) = listener.try_recv() {
            pending.insert(change);
        }
        if listener.overflowed() {
            tracing::warn!(
                "notifications arrived faster than they were handled and some were lost; resyncing"
            );
            next_resync = Instant::now();
        }
        let now = Instant::now();
        if now >= next_resync || (syncer.needs_resync() && backoff.failures() == 0) {
            let result = if syncer.needs_resync() {
                syncer.full().await
            } else {
                resync_alongside(&mut syncer, &mut listener, &mut pending).await
            };
            match result {
                Ok(outcome) => {
                    recovered(&mut backoff);
                    if resyncs > 0 && !outcome.plan.is_empty() {
                        tracing::warn!(
                            keys = outcome.plan.ops.len(),
                            "the resync found keys that differed from Neutron: changes no \
                             notification announced (is neutron-server's [calico_rs] \
                             notify_socket this --notify-socket?), or keys changed behind \
                             calico-neutron's back"
                        );
                    }
                    tracing::info!(
                        requests = outcome.requests,
                        ports = outcome.ports,
                        writes = outcome.plan.ops.len(),
                        took = ?now.elapsed(),
                        "resync done"
                    );
                    resyncs += 1;
                    next_resync = Instant::now() + resync;
                }
                Err(error) => next_resync = failed(&mut backoff, &error),
            }
            continue;
        }
        if !pending.is_empty() {
            let changes = std::mem::take(&mut pending);
            match syncer.apply(&changes).await {
                Ok(outcome) => {
                    recovered(&mut backoff);
                    tracing::debug!(
                        changes = changes.len(),
                        requests = outcome.requests,
                        writes = outcome.plan.ops.len(),
                        took = ?now.elapsed(),
                        "changes applied"
                    );
                }
                Err(error) => {
                    // Kept for after the resync: the objects are read again then.
                    pending.extend(changes);
                    next_resync = failed(&mut backoff, &error);
                }
            }
            continue;
        }
        tokio::select! {
            () = &mut shutdown => return,
            change = listener.recv() => {
                if let Some(change) = change {
                    pending.insert(change);
                }
            }
            () = sleep_until(next_resync) => {}
        }
    }
}

/// A periodic resync that does not hold notifications up: reading all of Neutron takes
/// seconds in a large cloud, so the changes notified meanwhile are applied as they come (the
/// read paused while each is written), and read once more into the snapshot before it is
/// written, so the resync never writes an object older than what a notification wrote. A
/// failure keeps the changes not yet applied in `pending`.
async fn resync_alongside(
    syncer: &mut Syncer,
    listener: &mut Listener,
    pending: &mut BTreeSet<Change>,
) -> Result<crate::syncer::Outcome, crate::SyncError> {
    let reader = syncer.neutron().clone();
    let before = reader.requests();
    let read = reader.snapshot();
    tokio::pin!(read);
    let mut applied = BTreeSet::new();
    let snapshot = loop {
        while let Some(change) = listener.try_recv() {
            pending.insert(change);
        }
        if !pending.is_empty() {
            let changes = std::mem::take(pending);
            if let Err(error) = syncer.apply(&changes).await {
                pending.extend(changes);
                return Err(error);
            }
            applied.extend(changes);
            continue;
        }
        tokio::select! {
            snapshot = &mut read => break snapshot?,
            change = listener.recv() => {
                if let Some(change) = change {
                    pending.insert(change);
                }
            }
        }
    };
    let outcome = syncer.full_from(snapshot, &applied, before).await;
    if outcome.is_err() {
        // Read again after the next resync, which the failure brings.
        pending.extend(applied);
    }
    outcome
}

fn recovered(backoff: &mut Backoff) {
    if backoff.failures() > 0 {
        tracing::info!("neutron and etcd reachable again");
    }
    backoff.reset();
}

/// Logs the failure; when to resync.
fn failed(backoff: &mut Backoff, error: &crate::SyncError) -> Instant {
    let delay = backoff.next_delay();
    error.log(delay);
    Instant::now() + delay
}
