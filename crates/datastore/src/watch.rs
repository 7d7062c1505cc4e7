//! The watch engine both backends share: snapshot, follow changes, and on a compaction or a lost
//! connection resynchronise, emitting exactly the differences from what was delivered.
//!
//! A backend provides a [`Source`]: a consistent listing with its revision, and a stream of
//! changes from a revision on. The engine remembers the mod revision of every key it has
//! delivered, so a resync can tell new, changed and vanished keys apart, and a change it has
//! already delivered is never delivered twice.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::Stream;
use futures::stream::{BoxStream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::{DatastoreError, KvPair};

/// What a watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The key was created or changed (or, during a snapshot or resync, is there).
    Put(KvPair),
    /// The key was deleted (or, during a resync, vanished while the watch was not following).
    Delete { key: String, mod_revision: i64 },
    /// Everything up to `revision` has been delivered: sent after the initial snapshot and
    /// after each resync.
    InSync { revision: i64 },
}

/// Why a change stream stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Break {
    /// The revision to follow from is no longer in the history.
    Compacted,
    /// The connection or the stream was lost.
    Lost(String),
}

/// Batches of changes (each `Put` or `Delete`), in revision order.
pub(crate) type ChangeStream = BoxStream<'static, Result<Vec<WatchEvent>, Break>>;

/// What a backend provides to the engine.
#[async_trait]
pub(crate) trait Source: Send + Sync + 'static {
    /// Every key under `prefix` and the store revision of that listing.
    async fn snapshot(&self, prefix: &str) -> Result<(Vec<KvPair>, i64), DatastoreError>;

    /// The changes under `prefix` from revision `from` on.
    async fn changes(&self, prefix: &str, from: i64) -> Result<ChangeStream, Break>;
}

/// How a watch begins.
pub(crate) enum Start {
    Snapshot,
    Resume { known: Vec<KvPair>, revision: i64 },
}

/// A running watch. Events arrive in order; dropping the watch stops it.
pub struct Watch {
    events: mpsc::Receiver<WatchEvent>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("pending", &self.events.len())
            .finish()
    }
}

impl Watch {
    /// The next event; `None` only if the watch task ended, which it does not on its own.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.events.recv().await
    }
}

impl Stream for Watch {
    type Item = WatchEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        self.events.poll_recv(cx)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the engine for `prefix` on a task of the current runtime.
pub(crate) fn spawn<S: Source>(source: S, prefix: &str, start: Start) -> Watch {
    let (tx, events) = mpsc::channel(1024);
    let engine = Engine {
        source,
        prefix: prefix.to_owned(),
        known: BTreeMap::new(),
        tx,
    };
    Watch {
        events,
        task: tokio::spawn(engine.run(start)),
    }
}

/// The consumer dropped the watch.
struct Closed;

struct Engine<S> {
    source: S,
    prefix: String,
    /// Key → mod revision of everything delivered and not deleted since.
    known: BTreeMap<String, i64>,
    tx: mpsc::Sender<WatchEvent>,
}

impl<S: Source> Engine<S> {
    async fn run(mut self, start: Start) {
        let mut follow_from = match start {
            Start::Snapshot => None,
            Start::Resume { known, revision } => {
                self.known = known.into_iter().map(|p| (p.key, p.mod_revision)).collect();
                Some(revision)
            }
        };
        let mut backoff = Backoff::default();
        loop {
            let revision = match follow_from.take() {
                Some(revision) => revision,
                None => match self.resync().await {
                    Ok(revision) => revision,
                    Err(Stop::Closed) => return,
                    Err(Stop::Failed(error)) => {
                        tracing::warn!(prefix = %self.prefix, %error, "watch cannot list; retrying");
                        backoff.wait().await;
                        continue;
                    }
                },
            };
            let outcome = match self.source.changes(&self.prefix, revision + 1).await {
                Ok(stream) => {
                    backoff.reset();
                    self.follow(stream).await
                }
                Err(why) => Ok(why),
            };
            match outcome {
                Err(Closed) => return,
                Ok(Break::Compacted) => {
                    tracing::info!(prefix = %self.prefix, "watch revision compacted; resyncing");
                }
                Ok(Break::Lost(reason)) => {
                    tracing::warn!(prefix = %self.prefix, %reason, "watch lost; resyncing");
                    backoff.wait().await;
                }
            }
        }
    }

    /// Lists the prefix and delivers the differences from what was delivered, then `InSync`.
    async fn resync(&mut self) -> Result<i64, Stop> {
        let (pairs, revision) = self
            .source
            .snapshot(&self.prefix)
            .await
            .map_err(Stop::Failed)?;
        for event in differences(&self.known, pairs, revision) {
            self.deliver(event).await.map_err(|Closed| Stop::Closed)?;
        }
        self.send(WatchEvent::InSync { revision })
            .await
            .map_err(|Closed| Stop::Closed)?;
        Ok(revision)
    }

    /// Delivers changes until the stream breaks.
    async fn follow(&mut self, mut stream: ChangeStream) -> Result<Break, Closed> {
        while let Some(batch) = stream.next().await {
            match batch {
                Ok(events) => {
                    for event in events {
                        self.deliver(event).await?;
                    }
                }
                Err(why) => return Ok(why),
            }
        }
        Ok(Break::Lost("the watch stream ended".to_owned()))
    }

    /// Records and sends a change, unless it was delivered already.
    async fn deliver(&mut self, event: WatchEvent) -> Result<(), Closed> {
        let fresh = match &event {
            WatchEvent::Put(pair) => {
                self.known.insert(pair.key.clone(), pair.mod_revision) != Some(pair.mod_revision)
            }
            WatchEvent::Delete { key, .. } => self.known.remove(key).is_some(),
            WatchEvent::InSync { .. } => true,
        };
        if fresh {
            self.send(event).await?;
        }
        Ok(())
    }

    async fn send(&self, event: WatchEvent) -> Result<(), Closed> {
        self.tx.send(event).await.map_err(|_| Closed)
    }
}

enum Stop {
    Closed,
    Failed(DatastoreError),
}

/// The events that turn `known` into `current`: puts for new or changed keys, then deletes (at
/// the listing's revision) for keys that vanished.
pub(crate) fn differences(
    known: &BTreeMap<String, i64>,
    current: Vec<KvPair>,
    revision: i64,
) -> Vec<WatchEvent> {
    let present: std::collections::BTreeSet<&str> =
        current.iter().map(|p| p.key.as_str()).collect();
    let vanished: Vec<WatchEvent> = known
        .keys()
        .filter(|key| !present.contains(key.as_str()))
        .map(|key| WatchEvent::Delete {
            key: key.clone(),
            mod_revision: revision,
        })
        .collect();
    current
        .into_iter()
        .filter(|pair| known.get(&pair.key) != Some(&pair.mod_revision))
        .map(WatchEvent::Put)
        .chain(vanished)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(key: &str, rev: i64) -> KvPair {
        KvPair {
            key: key.to_owned(),
            value: format!("v{rev}"),
            mod_revision: rev,
        }
    }

    #[test]
    fn differences_are_new_changed_and_vanished_keys_only() {
        let known = BTreeMap::from([
            ("/a".to_owned(), 1),
            ("/b".to_owned(), 2),
            ("/c".to_owned(), 3),
        ]);
        let current = vec![pair("/a", 1), pair("/b", 7), pair("/d", 8)];
        let events = differences(&known, current, 9);
        assert_eq!(
            events,
            vec![
                WatchEvent::Put(pair("/b", 7)),
                WatchEvent::Put(pair("/d", 8)),
                WatchEvent::Delete {
                    key: "/c".to_owned(),
                    mod_revision: 9
                },
            ]
        );
    }
}
