//! An in-memory datastore with etcd's semantics: one revision counter, per-key mod revisions,
//! an event history that can be compacted, and watches that resync. For unit tests of code
//! above the datastore, and to run the shared suite without etcd. Tests can also simulate an
//! outage ([`MemoryDatastore::set_reachable`]) and a compaction ([`MemoryDatastore::compact`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use tokio::sync::broadcast;

use crate::watch::{self, Break, ChangeStream, Source, Start, Watch, WatchEvent};
use crate::{Compare, Datastore, DatastoreError, Expect, KvPair, TxnOp};

/// How many batches a slow watcher may fall behind before it resyncs.
const NOTICE_CAPACITY: usize = 4096;

/// A cheaply cloneable handle; clones share the same store.
#[derive(Clone)]
pub struct MemoryDatastore {
    state: Arc<Mutex<State>>,
    notices: broadcast::Sender<Notice>,
}

struct State {
    revision: i64,
    entries: BTreeMap<String, Entry>,
    /// Every change after `compacted`, in revision order.
    history: Vec<WatchEvent>,
    compacted: i64,
    reachable: bool,
}

struct Entry {
    value: String,
    mod_revision: i64,
}

/// What live watchers hear.
#[derive(Clone)]
enum Notice {
    Changes(Vec<WatchEvent>),
    /// The store became unreachable: every live watch breaks.
    Outage,
}

impl std::fmt::Debug for MemoryDatastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryDatastore")
            .field("revision", &state.revision)
            .field("keys", &state.entries.len())
            .finish()
    }
}

impl Default for MemoryDatastore {
    fn default() -> Self {
        MemoryDatastore::new()
    }
}

impl MemoryDatastore {
    pub fn new() -> MemoryDatastore {
        let (notices, _) = broadcast::channel(NOTICE_CAPACITY);
        MemoryDatastore {
            state: Arc::new(Mutex::new(State {
                revision: 1,
                entries: BTreeMap::new(),
                history: Vec::new(),
                compacted: 0,
                reachable: true,
            })),
            notices,
        }
    }

    /// Simulates losing (`false`) or regaining (`true`) the connection: while unreachable every
    /// operation fails with [`DatastoreError::Unreachable`] and watches break and retry.
    pub fn set_reachable(&self, reachable: bool) {
        self.lock().reachable = reachable;
        if !reachable {
            let _ = self.notices.send(Notice::Outage);
        }
    }

    /// Forgets the history up to the current revision, as etcd's compaction does. Works while
    /// unreachable too (another client may compact while this one is cut off).
    pub fn compact(&self) {
        let mut state = self.lock();
        state.compacted = state.revision;
        state.history.clear();
    }

    /// The current store revision.
    pub fn revision(&self) -> i64 {
        self.lock().revision
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Locks the state, failing as an unreachable etcd would.
    fn reach(&self) -> Result<MutexGuard<'_, State>, DatastoreError> {
        let state = self.lock();
        if !state.reachable {
            return Err(DatastoreError::Unreachable {
                endpoints: "memory".to_owned(),
                reason: "simulated outage".to_owned(),
            });
        }
        Ok(state)
    }

    /// Applies writes under one new revision and tells the watchers.
    fn commit(&self, state: &mut State, ops: &[TxnOp]) -> i64 {
        let revision = state.revision + 1;
        let mut events = Vec::new();
        for op in ops {
            match op {
                TxnOp::Put { key, value } => {
                    state.entries.insert(
                        key.clone(),
                        Entry {
                            value: value.clone(),
                            mod_revision: revision,
                        },
                    );
                    events.push(WatchEvent::Put(pair(key, value, revision)));
                }
                TxnOp::Delete { key } => {
                    if state.entries.remove(key).is_some() {
                        events.push(WatchEvent::Delete {
                            key: key.clone(),
                            mod_revision: revision,
                        });
                    }
                }
            }
        }
        if events.is_empty() {
            return state.revision; // like etcd: deleting nothing is not a write
        }
        state.revision = revision;
        state.history.extend(events.iter().cloned());
        let _ = self.notices.send(Notice::Changes(events));
        revision
    }
}

fn pair(key: &str, value: &str, mod_revision: i64) -> KvPair {
    KvPair {
        key: key.to_owned(),
        value: value.to_owned(),
        mod_revision,
    }
}

fn holds(state: &State, compare: &Compare) -> bool {
    let current = state.entries.get(&compare.key).map(|e| e.mod_revision);
    match compare.expect {
        Expect::Absent => current.is_none(),
        Expect::ModRevision(revision) => current == Some(revision),
    }
}

fn event_key(event: &WatchEvent) -> &str {
    match event {
        WatchEvent::Put(pair) => &pair.key,
        WatchEvent::Delete { key, .. } => key,
        WatchEvent::InSync { .. } => "",
    }
}

fn event_revision(event: &WatchEvent) -> i64 {
    match event {
        WatchEvent::Put(pair) => pair.mod_revision,
        WatchEvent::Delete { mod_revision, .. } => *mod_revision,
        WatchEvent::InSync { revision } => *revision,
    }
}

#[async_trait]
impl Datastore for MemoryDatastore {
    async fn get(&self, key: &str) -> Result<Option<KvPair>, DatastoreError> {
        let state = self.reach()?;
        Ok(state
            .entries
            .get(key)
            .map(|e| pair(key, &e.value, e.mod_revision)))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<KvPair>, DatastoreError> {
        Ok(self.snapshot(prefix).await?.0)
    }

    async fn put(&self, key: &str, value: &str) -> Result<i64, DatastoreError> {
        let mut state = self.reach()?;
        let op = TxnOp::Put {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        Ok(self.commit(&mut state, &[op]))
    }

    async fn delete(&self, key: &str) -> Result<bool, DatastoreError> {
        let mut state = self.reach()?;
        let existed = state.entries.contains_key(key);
        let op = TxnOp::Delete {
            key: key.to_owned(),
        };
        self.commit(&mut state, &[op]);
        Ok(existed)
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<u64, DatastoreError> {
        let mut state = self.reach()?;
        let ops: Vec<TxnOp> = state
            .entries
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, _)| TxnOp::Delete { key: key.clone() })
            .collect();
        self.commit(&mut state, &ops);
        Ok(ops.len() as u64)
    }

    async fn transaction(
        &self,
        compares: &[Compare],
        ops: &[TxnOp],
    ) -> Result<bool, DatastoreError> {
        let mut state = self.reach()?;
        if !compares.iter().all(|c| holds(&state, c)) {
            return Ok(false);
        }
        self.commit(&mut state, ops);
        Ok(true)
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, DatastoreError> {
        drop(self.reach()?);
        Ok(watch::spawn(self.clone(), prefix, Start::Snapshot))
    }

    async fn resume_watch(
        &self,
        prefix: &str,
        known: Vec<KvPair>,
        revision: i64,
    ) -> Result<Watch, DatastoreError> {
        drop(self.reach()?);
        Ok(watch::spawn(
            self.clone(),
            prefix,
            Start::Resume { known, revision },
        ))
    }
}

#[async_trait]
impl Source for MemoryDatastore {
    async fn snapshot(&self, prefix: &str) -> Result<(Vec<KvPair>, i64), DatastoreError> {
        let state = self.reach()?;
        let pairs = state
            .entries
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, e)| pair(key, &e.value, e.mod_revision))
            .collect();
        Ok((pairs, state.revision))
    }

    async fn changes(&self, prefix: &str, from: i64) -> Result<ChangeStream, Break> {
        // Subscribing and reading the history under one lock: no change falls in between.
        let state = self.reach().map_err(|e| Break::Lost(e.to_string()))?;
        if from <= state.compacted {
            return Err(Break::Compacted);
        }
        let under = |event: &WatchEvent| event_key(event).starts_with(prefix);
        let past: Vec<WatchEvent> = state
            .history
            .iter()
            .filter(|e| event_revision(e) >= from && under(e))
            .cloned()
            .collect();
        let live = self.notices.subscribe();
        drop(state);
        let prefix = prefix.to_owned();
        let live = stream::unfold(live, move |mut live| {
            let prefix = prefix.clone();
            async move {
                let item = match live.recv().await {
                    Ok(Notice::Changes(events)) => Ok(events
                        .into_iter()
                        .filter(|e| event_key(e).starts_with(&prefix))
                        .collect::<Vec<_>>()),
                    Ok(Notice::Outage) => Err(Break::Lost("simulated outage".to_owned())),
                    Err(error) => Err(Break::Lost(format!("watcher fell behind: {error}"))),
                };
                Some((item, live))
            }
        })
        .filter(|item| futures::future::ready(!matches!(item, Ok(events) if events.is_empty())));
        Ok(stream::iter([Ok(past)]).chain(live).boxed())
    }
}
