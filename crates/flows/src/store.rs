//! The store: every record the aggregator accepted, on disk (redb), so that a restart loses
//! nothing it acknowledged. One row per batch: the key is (arrival second, sequence), the value
//! the accepted records' JSON as Felix sent it, one per line, after a 4-byte record count.
//!
//! ```text
//!   POST handler ── Batch ──► mpsc (bounded) ──► writer thread: every batch waiting, one write
//!        ▲                                       transaction, retention trimmed, one commit
//!        └──────────── oneshot: durable ◄──────── (fsync) for the whole group
//!   replay at start, queries before the window ──► read transaction (a snapshot, no lock)
//! ```
//!
//! A batch is answered 2xx only once its commit returned: group commit, one fsync for every
//! batch that arrived while the previous commit ran. Retention is by time (the arrival second)
//! and by size (the bytes of the rows, oldest first), both checked in every commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// (arrival unix second, sequence) → count (u32 LE) then the records, one JSON text a line.
const BATCHES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("batches");
/// "bytes": the sum of the rows' values, and "next", kept in the same transactions as the rows.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const BYTES: &str = "bytes";
/// "next": the sequence of the next row (arrival seconds may repeat, or go back with the clock).
const NEXT: &str = "next";

/// Batches waiting for the writer; a POST past them waits for room (so rows waiting cost at
/// most this many bodies of memory, and as many again in the group being committed).
const QUEUE: usize = 8;

/// Where and how long records are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// The store's file (`flows.redb` in `--store-dir`).
    pub path: PathBuf,
    /// Seconds a batch is kept after it arrived (0: until the size cap pushes it out).
    pub retention: u64,
    /// Bytes of records kept at most; the oldest batches leave first.
    pub max_bytes: u64,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: cannot open the store: {source}")]
    Open {
        path: PathBuf,
        source: redb::DatabaseError,
    },
    #[error("the store: {0}")]
    Redb(#[from] redb::Error),
    #[error("the store's writer has stopped")]
    Stopped,
}

macro_rules! redb_from {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Redb(e.into()) }
        }
    )*};
}
redb_from!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// The accepted records of one batch, ready to be written.
#[derive(Debug)]
struct Job {
    arrived: u64,
    row: Vec<u8>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The store: the database, and the writer thread that alone writes to it.
#[derive(Debug)]
pub struct Store {
    db: Arc<Database>,
    queue: mpsc::Sender<Job>,
    settings: StoreSettings,
    _writer: JoinHandle<()>,
}

/// One row's value: the count, then each text followed by a newline.
pub fn row<'a>(texts: impl ExactSizeIterator<Item = &'a str>) -> Vec<u8> {
    let count = texts.len() as u32;
    let mut row = Vec::with_capacity(4 + 1024 * texts.len());
    row.extend_from_slice(&count.to_le_bytes());
    for text in texts {
        row.extend_from_slice(text.as_bytes());
        row.push(b'\n');
    }
    row
}

/// The records of a row (texts), and how many it holds.
fn records(value: &[u8]) -> (u64, impl Iterator<Item = &str>) {
    let count = value
        .get(..4)
        .map_or(0, |c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
    let texts = value
        .get(4..)
        .unwrap_or_default()
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| std::str::from_utf8(line).ok());
    (count.into(), texts)
}

impl Store {
    /// Opens (or creates) the store and starts its writer.
    pub fn open(settings: StoreSettings, metrics: &Metrics) -> Result<Store, StoreError> {
        let open_error = |source| StoreError::Open {
            path: settings.path.clone(),
            source,
        };
        if let Some(dir) = settings.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_error(redb::DatabaseError::Storage(e.into())))?;
        }
        // The page cache is the kernel's; redb's own cache only needs the pages a commit touches.
        let db = redb::Builder::new()
            .set_cache_size(32 << 20)
            .create(&settings.path)
            .map_err(open_error)?;
        let db = Arc::new(db);
        let txn = db.begin_write()?;
        txn.open_table(BATCHES)?;
        let (bytes, next) = {
            let meta = txn.open_table(META)?;
            let read = |name| meta.get(name).map(|v| v.map_or(0, |v| v.value()));
            (read(BYTES)?, read(NEXT)?)
        };
        txn.commit()?;
        metrics.store_bytes.set(bytes as i64);
        let (queue, jobs) = mpsc::channel(QUEUE);
        let writer = Writer {
            db: db.clone(),
            settings: settings.clone(),
            metrics: metrics.clone(),
            next,
        };
        let writer = std::thread::Builder::new()
            .name("flows-store".into())
            .spawn(move || writer.run(jobs))
            .map_err(|e| open_error(redb::DatabaseError::Storage(e.into())))?;
        Ok(Store {
            db,
            queue,
            settings,
            _writer: writer,
        })
    }

    pub fn settings(&self) -> &StoreSettings {
        &self.settings
    }

    pub fn path(&self) -> &Path {
        &self.settings.path
    }

    /// Writes a row; returns once it is durable (or why it is not).
    pub async fn append(&self, arrived: u64, row: Vec<u8>) -> Result<(), String> {
        let (done, durable) = oneshot::channel();
        let job = Job { arrived, row, done };
        if self.queue.send(job).await.is_err() {
            return Err(StoreError::Stopped.to_string());
        }
        durable
            .await
            .unwrap_or_else(|_| Err(StoreError::Stopped.to_string()))
    }

    /// Calls `each` with every record text of the batches that arrived at `from` or later, in
    /// arrival order, from one snapshot. Returns the records read.
    pub fn scan(&self, from: u64, mut each: impl FnMut(&str)) -> Result<u64, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(BATCHES)?;
        let mut read = 0;
        for row in table.range((from, 0)..)? {
            let (_, value) = row?;
            let (count, texts) = records(value.value());
            texts.for_each(&mut each);
            read += count;
        }
        Ok(read)
    }

    /// The arrival second of the oldest batch kept.
    pub fn oldest(&self) -> Result<Option<u64>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(BATCHES)?;
        Ok(table.first()?.map(|(k, _)| k.value().0))
    }
}

/// A row's key, its size and its record count.
type RowFacts = ((u64, u64), u64, u64);

/// The oldest row's key, size and record count.
fn oldest(batches: &redb::Table<'_, (u64, u64), &[u8]>) -> Result<Option<RowFacts>, StoreError> {
    let Some((key, value)) = batches.first()? else {
        return Ok(None);
    };
    let value = value.value();
    Ok(Some((key.value(), value.len() as u64, records(value).0)))
}

/// The thread that writes: jobs in, groups committed.
struct Writer {
    db: Arc<Database>,
    settings: StoreSettings,
    metrics: Metrics,
    next: u64,
}

impl Writer {
    fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        while let Some(first) = jobs.blocking_recv() {
            let mut group = vec![first];
            while let Ok(more) = jobs.try_recv() {
                group.push(more);
            }
            let outcome = self.commit(&group).map_err(|e| e.to_string());
            if let Err(error) = &outcome {
                tracing::error!(%error, batches = group.len(), "the store did not keep a group");
            }
            for job in group {
                // A POST whose client went away does not wait for the answer: nothing to do.
                let _ = job.done.send(outcome.clone());
            }
        }
    }

    /// One transaction: the group's rows, the retention, the size; one commit (fsync).
    fn commit(&mut self, group: &[Job]) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)
            .expect("no persistent savepoints are used");
        {
            let mut batches = txn.open_table(BATCHES)?;
            let mut meta = txn.open_table(META)?;
            let mut bytes = meta.get(BYTES)?.map_or(0, |v| v.value());
            let mut latest = 0;
            for job in group {
                batches.insert((job.arrived, self.next), job.row.as_slice())?;
                self.next += 1;
                bytes += job.row.len() as u64;
                latest = latest.max(job.arrived);
            }
            let horizon = match self.settings.retention {
                0 => 0,
                retention => latest.saturating_sub(retention),
            };
            while let Some((key, size, count)) = oldest(&batches)? {
                let cause = if key.0 < horizon {
                    "retention"
                } else if bytes > self.settings.max_bytes {
                    "max-size"
                } else {
                    break;
                };
                batches.remove(key)?;
                bytes -= size;
                self.metrics.store_removed(cause, count);
            }
            meta.insert(BYTES, bytes)?;
            meta.insert(NEXT, self.next)?;
            self.metrics.store_bytes.set(bytes as i64);
        }
        txn.commit()?;
        self.metrics.store_commits.inc();
        Ok(())
    }
}
