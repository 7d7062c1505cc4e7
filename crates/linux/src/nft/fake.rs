//! [`FakeNft`]: nf_tables in memory, for tests without root. A batch is checked as the encoder
//! checks it, then applied to a copy of the table one operation at a time with the kernel's
//! refusals; the differential test in `tests/nft.rs` runs random batches against both and
//! asserts they agree on what is refused (and at which operation) and on the table left.
//!
//! | refused | errno |
//! | --- | --- |
//! | anything in a missing table; a rule in a missing chain; a jump, goto, lookup or vmap to a missing chain or set; deleting or flushing what is missing; deleting an element that is not there | `ENOENT` |
//! | a chain of the same name with another hook, type or priority (or a hook on a regular chain); a set of the same name of another kind; a map element of the same key with another verdict; an interval overlapping another | `EEXIST` |
//! | deleting a chain a rule or map element jumps to; deleting a set a rule uses | `EBUSY` |
//! | a jump to a base chain; a nat chain on forward or at priority -200 or below; NAT a base chain cannot run (its type or hook), in it or reached from it through jumps and maps | `EOPNOTSUPP` |
//! | jumps 16 deep below a base chain, which is how kernel 6.18 finds a loop | `EMLINK` |
//!
//! When: the kernel refuses most of these as it takes each operation, and reports the first.
//! What a base chain reaches (NAT statements, depth, loops) it validates once, at commit, and
//! only when nothing else was refused; then it replays the batch validating after every rule
//! and element, and names the first that leaves the table invalid. A loop among chains no base
//! chain reaches is not refused, as in the kernel.
//!
//! Protocol . port intervals behave like the kernel's pipapo backend: an interval is refused
//! when its first or last port falls inside an older interval of the protocol (not when it only
//! contains one), and a delete removes the oldest interval holding the deleted first port.
//!
//! A [`FakeNft`] is a handle: clones (and [`FakeNft::on_table`]) share one kernel.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::socket::KernelError;
use super::{Batch, NfTables, NftError, Op, Table, TableSnapshot, encode, summary};

mod state;
#[cfg(test)]
mod tests;

use state::{Refusal, State, apply_op};

/// An in-memory nf_tables, one table per handle.
#[derive(Debug, Clone)]
pub struct FakeNft {
    table: Table,
    kernel: Arc<Mutex<Kernel>>,
}

#[derive(Debug, Default)]
struct Kernel {
    tables: BTreeMap<String, State>,
    /// How many of the next applies fail as a broken socket would.
    failures: usize,
    /// Every batch applied, in order.
    applied: Vec<Batch>,
}

impl FakeNft {
    /// An empty kernel, and a handle on `table` in it.
    pub fn new(table: Table) -> FakeNft {
        FakeNft {
            table,
            kernel: Arc::default(),
        }
    }

    /// A handle on another table of the same kernel.
    pub fn on_table(&self, table: Table) -> FakeNft {
        FakeNft {
            table,
            kernel: self.kernel.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Kernel> {
        self.kernel.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the next apply fail as if the socket broke, changing nothing.
    pub fn fail_next(&self) {
        self.lock().failures += 1;
    }

    /// Every batch applied successfully so far (on any table), in order.
    pub fn applied(&self) -> Vec<Batch> {
        self.lock().applied.clone()
    }

    /// The table now, or `None` without it.
    pub fn snapshot(&self) -> Option<TableSnapshot> {
        self.lock()
            .tables
            .get(&self.table.name)
            .map(State::snapshot)
    }
}

impl NfTables for FakeNft {
    fn apply(&self, batch: &Batch) -> Result<(), NftError> {
        let mut kernel = self.lock();
        if kernel.failures > 0 {
            kernel.failures -= 1;
            return Err(NftError::Socket {
                netns: "the fake kernel".into(),
                reason: "sending the batch: injected failure".into(),
            });
        }
        if batch.is_empty() {
            return Ok(());
        }
        let name = self.table.name.clone();
        // The encoder's checks, with the kinds of the sets as they are.
        if let Err(reason) = super::check::name("table", &name) {
            return Err(NftError::Invalid {
                index: 0,
                op: format!("table {}", self.table),
                reason,
            });
        }
        let before = kernel.tables.get(&name);
        let kind = |set: &str| before.and_then(|s| s.kind(set));
        encode::batch(&self.table, batch, 0, &kind)?;
        super::elements::open_nets(batch, &mut |set| {
            Ok(before.map(|s| s.elements(set)).unwrap_or_default())
        })?;
        let refused = |index: usize, (errno, detail): Refusal| NftError::Refused {
            index,
            op: summary(&batch.ops[index]),
            reason: KernelError {
                errno: errno as i32,
                message: Some(detail),
            }
            .reason(),
        };
        let start = before.cloned();
        let mut table = start.clone();
        // Each operation with the checks the kernel makes as it takes it; the first refusal
        // is the one reported.
        for (index, op) in batch.ops.iter().enumerate() {
            apply_op(&mut table, op).map_err(|r| refused(index, r))?;
        }
        // Then the table is validated from its base chains at commit. When that fails, the
        // kernel replays the batch validating after each rule and element, and names the
        // first that leaves the table invalid.
        if table.as_ref().is_some_and(|t| t.validate().is_err()) {
            let mut replay = start;
            for (index, op) in batch.ops.iter().enumerate() {
                apply_op(&mut replay, op).map_err(|r| refused(index, r))?;
                if matches!(op, Op::AddRule { .. } | Op::AddElements { .. })
                    && let Some(Err(r)) = replay.as_ref().map(State::validate)
                {
                    return Err(refused(index, r));
                }
            }
        }
        match table {
            Some(table) => kernel.tables.insert(name, table),
            None => kernel.tables.remove(&name),
        };
        kernel.applied.push(batch.clone());
        Ok(())
    }

    fn read(&self) -> Result<Option<TableSnapshot>, NftError> {
        Ok(self.snapshot())
    }

    fn table(&self) -> &Table {
        &self.table
    }

    fn handle(&self) -> Box<dyn NfTables> {
        Box::new(self.clone())
    }
}
