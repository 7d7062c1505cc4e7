//! The datastore: one [`Datastore`] trait over string keys and values, with an etcd v3 backend
//! ([`EtcdDatastore`]) and an in-memory backend ([`MemoryDatastore`]) of identical semantics.
//!
//! Writes carry etcd's revisions, so callers can compare-and-swap; a [`Watch`] delivers a
//! snapshot, then live changes, and after a compaction or a lost connection resynchronises and
//! emits exactly the differences (see docs/datastore.md).

mod backoff;
mod error;
mod etcd;
pub mod fanout;
mod memory;
mod settings;
mod watch;

use async_trait::async_trait;

pub use backoff::Backoff;
pub use error::DatastoreError;
pub use etcd::DEFAULT_ENDPOINTS;
pub use etcd::{EtcdConfig, EtcdDatastore};
pub use fanout::FanoutClient;
pub use memory::MemoryDatastore;
pub use settings::{EtcdArgs, connect_retrying, split_endpoints};
pub use watch::{Watch, WatchEvent};

/// A key, its value and the revision that last changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvPair {
    pub key: String,
    pub value: String,
    pub mod_revision: i64,
}

/// What a transaction expects of a key before it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The key does not exist.
    Absent,
    /// The key exists and was last changed at this revision.
    ModRevision(i64),
}

/// One condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: String,
    pub expect: Expect,
}

/// One write of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    Put { key: String, value: String },
    Delete { key: String },
}

/// The operations every backend offers, with etcd's semantics: one revision counter for the
/// whole store, bumped once per successful write or transaction.
#[async_trait]
pub trait Datastore: Send + Sync {
    /// The value at `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<KvPair>, DatastoreError>;

    /// Every key starting with `prefix`, sorted by key.
    async fn list(&self, prefix: &str) -> Result<Vec<KvPair>, DatastoreError>;

    /// Writes `value` at `key`; returns the new revision.
    async fn put(&self, key: &str, value: &str) -> Result<i64, DatastoreError>;

    /// Writes `value` at `key` so that it vanishes `ttl` after the write unless written again
    /// (etcd: a lease per write). A backend without expiry writes it for good and says so in
    /// its documentation; returns the new revision.
    async fn put_with_ttl(
        &self,
        key: &str,
        value: &str,
        ttl: std::time::Duration,
    ) -> Result<i64, DatastoreError> {
        let _ = ttl;
        self.put(key, value).await
    }

    /// Writes only if the key does not exist; returns whether it wrote.
    async fn put_if_absent(&self, key: &str, value: &str) -> Result<bool, DatastoreError> {
        let compare = Compare {
            key: key.to_owned(),
            expect: Expect::Absent,
        };
        self.transaction(&[compare], &[put_op(key, value)]).await
    }

    /// Deletes `key`; returns whether it existed.
    async fn delete(&self, key: &str) -> Result<bool, DatastoreError>;

    /// Deletes every key starting with `prefix`; returns how many there were.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64, DatastoreError>;

    /// Writes only if the key is as expected; returns whether it wrote.
    async fn compare_and_swap(
        &self,
        key: &str,
        expect: Expect,
        value: &str,
    ) -> Result<bool, DatastoreError> {
        let compare = Compare {
            key: key.to_owned(),
            expect,
        };
        self.transaction(&[compare], &[put_op(key, value)]).await
    }

    /// Deletes only if the key was last changed at `mod_revision`; returns whether it deleted.
    async fn compare_and_delete(
        &self,
        key: &str,
        mod_revision: i64,
    ) -> Result<bool, DatastoreError> {
        let compare = Compare {
            key: key.to_owned(),
            expect: Expect::ModRevision(mod_revision),
        };
        let delete = TxnOp::Delete {
            key: key.to_owned(),
        };
        self.transaction(&[compare], &[delete]).await
    }

    /// Applies all `ops` atomically if every compare holds; returns whether it did.
    async fn transaction(
        &self,
        compares: &[Compare],
        ops: &[TxnOp],
    ) -> Result<bool, DatastoreError>;

    /// Watches every key under `prefix`: a snapshot, `InSync`, then live changes.
    async fn watch(&self, prefix: &str) -> Result<Watch, DatastoreError>;

    /// Resumes a watch after `revision` for a consumer that already holds `known` (the state at
    /// that revision): the changes since then, or, when history was compacted, the differences
    /// between `known` and the current state followed by `InSync`.
    async fn resume_watch(
        &self,
        prefix: &str,
        known: Vec<KvPair>,
        revision: i64,
    ) -> Result<Watch, DatastoreError>;
}

fn put_op(key: &str, value: &str) -> TxnOp {
    TxnOp::Put {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}
