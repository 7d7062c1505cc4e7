//! Applying the desired state to a kernel through nf_tables: the same three moves as the
//! iptables driver (`crate::iptables::driver`), each one transaction.
//!
//! - [`NftDataplane::sync`] (start-up, after a failure): reads the table, renders everything,
//!   and writes only what is not already as rendered (a restart with everything in place
//!   writes nothing).
//! - [`NftDataplane::apply`]: one batch of the calculator's changes, as one transaction that
//!   names only the chains, rules, sets, elements and map entries the changes touched.
//! - [`NftDataplane::reader`] / [`NftDataplane::repair_drift`]: the periodic check reads the
//!   table on another thread, then rewrites what drifted; what was written after the read
//!   began is left to the next check.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use calico_calc::{Changes, DesiredState};
use calico_linux::nft::{Batch, NfTables, NftError, Op, Table, TableFamily, TableSnapshot};

use super::plan::{self, Counts};
use super::ruleset::{NftRenderer, Ruleset};
use crate::firewall::config::RenderConfig;
use crate::iptables::driver::{Repairs, Written};

/// The table Felix owns.
pub fn calico_table() -> Table {
    Table {
        family: TableFamily::Inet,
        name: "calico".to_owned(),
    }
}

/// What was last written, by write generation, so a drift check can tell a change it raced
/// with from drift.
#[derive(Debug, Default)]
struct Ledger {
    generation: u64,
    /// Chains and sets by the generation they were last written (or deleted) in.
    written: HashMap<String, u64>,
}

impl Ledger {
    fn wrote(&mut self, batch: &Batch) {
        self.generation += 1;
        for op in &batch.ops {
            let name = match op {
                Op::AddChain(spec) => &spec.name,
                Op::FlushChain(name) | Op::DeleteChain(name) | Op::DeleteSet(name) => name,
                Op::AddRule { chain, .. } => chain,
                Op::AddSet(spec) => &spec.name,
                Op::FlushSet(name) => name,
                Op::AddElements { set, .. } | Op::DeleteElements { set, .. } => set,
                Op::AddTable | Op::DeleteTable => continue,
            };
            if self.written.get(name) != Some(&self.generation) {
                self.written.insert(name.clone(), self.generation);
            }
        }
    }
}

/// A read of the kernel's table, to run on another thread.
#[derive(Debug)]
pub struct NftReader {
    nft: Box<dyn NfTables>,
    generation: u64,
}

impl NftReader {
    pub fn read(self) -> Result<NftSnapshot, NftError> {
        Ok(NftSnapshot {
            table: self.nft.read()?,
            generation: self.generation,
        })
    }
}

/// The table as a drift check read it, and the write generation the read began after.
#[derive(Debug)]
pub struct NftSnapshot {
    pub table: Option<TableSnapshot>,
    generation: u64,
}

/// The nf_tables dataplane of one network namespace.
#[derive(Debug)]
pub struct NftDataplane {
    nft: Box<dyn NfTables>,
    renderer: NftRenderer,
    ledger: Ledger,
    written: Arc<Written>,
}

impl NftDataplane {
    /// The dataplane behind any implementation of the nf_tables seam (tests use
    /// [`calico_linux::fake::FakeNft`]).
    pub fn with_kernel(nft: Box<dyn NfTables>, config: RenderConfig) -> NftDataplane {
        NftDataplane {
            nft,
            renderer: NftRenderer::new(config),
            ledger: Ledger::default(),
            written: Arc::default(),
        }
    }

    /// Counts what this dataplane writes into `written` (shared with the reporter).
    pub fn counting_into(mut self, written: Arc<Written>) -> NftDataplane {
        self.written = written;
        self
    }

    /// The table as last rendered.
    pub fn ruleset(&self) -> &Ruleset {
        self.renderer.ruleset()
    }

    fn write(&mut self, batch: &Batch) -> Result<(), NftError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.ledger.wrote(batch);
        let chains = batch
            .ops
            .iter()
            .filter(|op| matches!(op, Op::AddChain(_) | Op::FlushChain(_) | Op::DeleteChain(_)))
            .count();
        self.written
            .chains
            .fetch_add(chains as u64, Ordering::Relaxed);
        self.written
            .nft_ops
            .fetch_add(batch.ops.len() as u64, Ordering::Relaxed);
        self.nft.apply(batch)
    }

    /// Makes the table match `state`, writing only what differs.
    pub fn sync(&mut self, state: &DesiredState) -> Result<Repairs, NftError> {
        let snapshot = self.nft.read()?;
        self.renderer.render_all(state);
        let (batch, counts) =
            plan::reconcile(snapshot.as_ref(), self.renderer.ruleset(), |_| false);
        self.write(&batch)?;
        Ok(Repairs {
            written_chains: counts.chains.len(),
            written_sets: counts.sets.len(),
            stale_chains: counts.stale_chains,
            stale_sets: counts.stale_sets,
            ..Repairs::default()
        })
    }

    /// Applies one batch of changes as one transaction.
    pub fn apply(&mut self, state: &DesiredState, changes: &Changes) -> Result<(), NftError> {
        let delta = self.renderer.render_changes(state, changes);
        let (batch, _) = plan::changes(&delta, self.renderer.ruleset());
        self.write(&batch)
    }

    /// A reader of the table for the periodic drift check.
    pub fn reader(&self) -> NftReader {
        NftReader {
            nft: self.nft.handle(),
            generation: self.ledger.generation,
        }
    }

    /// Rewrites what drifted since `snapshot` was read. Must follow a [`NftDataplane::sync`].
    pub fn repair_drift(
        &mut self,
        snapshot: &NftSnapshot,
        state: &DesiredState,
    ) -> Result<Repairs, NftError> {
        let _ = state;
        let recent = |name: &str| {
            self.ledger
                .written
                .get(name)
                .is_some_and(|g| *g > snapshot.generation)
        };
        let (batch, counts) =
            plan::reconcile(snapshot.table.as_ref(), self.renderer.ruleset(), recent);
        let repairs = repairs_of(counts);
        self.write(&batch)?;
        Ok(repairs)
    }
}

fn repairs_of(counts: Counts) -> Repairs {
    Repairs {
        drifted_chains: counts.chains,
        drifted_sets: counts.sets,
        stale_chains: counts.stale_chains,
        stale_sets: counts.stale_sets,
        ..Repairs::default()
    }
}
