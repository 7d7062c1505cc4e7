//! `calico-fanout`: one etcd watch per prefix, served to many agents (docs/scale.md).
//!
//! ```text
//!   etcd ──watch──► Feed (per prefix): keys, revision, recent changes, encoded snapshot
//!                     │ snapshot (encoded once per revision, shared by every reader)
//!                     │ changes  (recent ones from memory, then live through a broadcast)
//!                     ▼
//!   agents ──TCP──► serve: one request per connection (calico_datastore::fanout protocol)
//! ```
//!
//! A feed serves snapshots only while its own watch is in sync. When that watch had to resync
//! (etcd lost and back, or its history compacted) the feed drops every change stream and its
//! recent changes: agents then take a new snapshot, as they would from etcd.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use calico_datastore::fanout::{Answer, Change, Request};
use calico_datastore::{Watch, WatchEvent};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};

/// How many live changes a reader may fall behind before its stream is closed (it then
/// resyncs from a snapshot).
const LAG: usize = 16_384;

/// One watched prefix and what it serves.
#[derive(Debug)]
pub struct Feed {
    prefix: String,
    keep: usize,
    state: Mutex<State>,
    /// Whether the feed is in sync (snapshots wait for it).
    ready: watch::Sender<bool>,
}

#[derive(Debug)]
struct State {
    in_sync: bool,
    /// The highest revision applied.
    revision: i64,
    keys: BTreeMap<String, (String, i64)>,
    /// Every change with a revision above `base`, oldest first.
    recent: VecDeque<Change>,
    base: i64,
    /// Whether `base` is a sync's revision (a snapshot there is whole) rather than the
    /// revision of changes forgotten (a snapshot there may hold part of it).
    base_from_sync: bool,
    /// The snapshot answer, encoded; `None` after any change.
    encoded: Option<Arc<Vec<u8>>>,
    live: broadcast::Sender<Arc<Change>>,
}

/// What one feed has served, for the log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub snapshots: u64,
    pub encodings: u64,
    pub streams: u64,
}

impl Feed {
    /// A feed of `prefix` keeping the last `keep` changes in memory.
    pub fn new(prefix: &str, keep: usize) -> Arc<Feed> {
        Arc::new(Feed {
            prefix: prefix.to_owned(),
            keep: keep.max(1),
            state: Mutex::new(State {
                in_sync: false,
                revision: 0,
                keys: BTreeMap::new(),
                recent: VecDeque::new(),
                base: 0,
                base_from_sync: false,
                encoded: None,
                live: broadcast::channel(LAG).0,
            }),
            ready: watch::channel(false).0,
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies the upstream watch's events until it ends (it does not on its own).
    pub async fn follow(self: Arc<Self>, mut upstream: Watch) {
        while let Some(event) = upstream.next().await {
            self.apply(event);
        }
    }

    /// Applies one upstream event.
    pub fn apply(&self, event: WatchEvent) {
        let mut state = self.state();
        let change = match event {
            WatchEvent::InSync { revision } => {
                state.revision = state.revision.max(revision);
                if !state.in_sync {
                    // The first sync, or the end of a resync: history starts here.
                    state.in_sync = true;
                    state.base = state.revision;
                    state.base_from_sync = true;
                    state.recent.clear();
                    self.ready.send_replace(true);
                    tracing::info!(prefix = %self.prefix, revision, keys = state.keys.len(), "in sync");
                }
                return;
            }
            WatchEvent::Put(pair) => Change::Put(pair.key, pair.value, pair.mod_revision),
            WatchEvent::Delete { key, mod_revision } => Change::Delete(key, mod_revision),
        };
        state.encoded = None;
        if state.in_sync && change.revision() < state.revision {
            // Only a resync delivers a change older than one already applied: until its end
            // the keys are not one revision's state, so no snapshot, and no stream goes on.
            tracing::info!(prefix = %self.prefix, "upstream resync: closing every change stream");
            state.in_sync = false;
            state.recent.clear();
            state.live = broadcast::channel(LAG).0;
            self.ready.send_replace(false);
        }
        state.revision = state.revision.max(change.revision());
        match &change {
            Change::Put(key, value, revision) => {
                state.keys.insert(key.clone(), (value.clone(), *revision));
            }
            Change::Delete(key, _) => {
                state.keys.remove(key);
            }
        }
        if !state.in_sync {
            return;
        }
        if state.recent.len() >= self.keep {
            // Forget the oldest revision whole: the kept changes are then every change above it.
            let oldest = state.recent.front().map_or(0, Change::revision);
            while state.recent.front().is_some_and(|c| c.revision() == oldest) {
                state.recent.pop_front();
            }
            state.base = state.base.max(oldest);
            state.base_from_sync = false;
        }
        state.recent.push_back(change.clone());
        // No reader is not an error: the change is in `recent` for the next one.
        let _ = state.live.send(Arc::new(change));
    }

    /// The snapshot answer (header and put lines) of the keys under `prefix` (the feed's or
    /// one below it), once the feed is in sync; the feed's whole snapshot is encoded once per
    /// revision and shared.
    pub async fn snapshot(&self, prefix: &str, served: &Mutex<Served>) -> Arc<Vec<u8>> {
        let mut ready = self.ready.subscribe();
        loop {
            {
                let mut state = self.state();
                if state.in_sync {
                    let mut served = served.lock().unwrap_or_else(|p| p.into_inner());
                    served.snapshots += 1;
                    if prefix == self.prefix
                        && let Some(encoded) = &state.encoded
                    {
                        return encoded.clone();
                    }
                    served.encodings += 1;
                    if prefix != self.prefix {
                        let below = state.keys.range(prefix.to_owned()..);
                        let below = below.take_while(|(key, _)| key.starts_with(prefix));
                        return Arc::new(encode_snapshot(state.revision, below));
                    }
                    let encoded = Arc::new(encode_snapshot(state.revision, state.keys.iter()));
                    state.encoded = Some(encoded.clone());
                    return encoded;
                }
            }
            if ready.changed().await.is_err() {
                // The feed is gone: the process is stopping.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The changes under `prefix` a reader at revision `from - 1` still needs, and the live
    /// ones after them (all of the feed's: the caller filters); `None` when they are no longer
    /// kept (or the feed is resyncing).
    pub fn subscribe(
        &self,
        prefix: &str,
        from: i64,
    ) -> Option<(Vec<Change>, broadcast::Receiver<Arc<Change>>)> {
        let state = self.state();
        // From one revision earlier: a snapshot may hold part of that revision.
        let at = from - 1;
        let kept = at > state.base || (at == state.base && state.base_from_sync);
        if !state.in_sync || !kept {
            return None;
        }
        let backlog = state
            .recent
            .iter()
            .filter(|change| change.revision() >= at && change.key().starts_with(prefix))
            .cloned()
            .collect();
        Some((backlog, state.live.subscribe()))
    }

    /// Keys and revision, for tests and the log.
    pub fn summary(&self) -> (usize, i64, bool) {
        let state = self.state();
        (state.keys.len(), state.revision, state.in_sync)
    }
}

fn encode_snapshot<'a>(
    revision: i64,
    keys: impl Iterator<Item = (&'a String, &'a (String, i64))>,
) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count = 0;
    for (key, (value, mod_revision)) in keys {
        line(
            &mut body,
            &Change::Put(key.clone(), value.clone(), *mod_revision),
        );
        count += 1;
    }
    let mut out = Vec::with_capacity(body.len() + 64);
    line(&mut out, &Answer::Snapshot { revision, count });
    out.extend_from_slice(&body);
    out
}

fn line(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    serde_json::to_writer(&mut *out, value).expect("protocol lines serialize");
    out.push(b'\n');
}

/// Accepts agents on `listener` forever, one task per connection.
pub async fn serve(listener: TcpListener, feeds: Vec<Arc<Feed>>, served: Arc<Mutex<Served>>) {
    let feeds = Arc::new(feeds);
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let feeds = feeds.clone();
                let served = served.clone();
                tokio::spawn(async move {
                    if let Err(error) = answer(stream, &feeds, &served).await {
                        tracing::debug!(%error, "connection ended");
                    }
                });
            }
            Err(error) => {
                // Out of file descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(
    stream: TcpStream,
    feeds: &[Arc<Feed>],
    served: &Mutex<Served>,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut out = BufWriter::with_capacity(256 << 10, write);
    let mut request = String::new();
    BufReader::new(read).read_line(&mut request).await?;
    let request: Request = match serde_json::from_str(request.trim_end()) {
        Ok(request) => request,
        Err(e) => {
            let error = format!("not a request: {e}");
            return send(&mut out, &Answer::Error { error }).await;
        }
    };
    let prefix = match &request {
        Request::Snapshot { snapshot } => snapshot,
        Request::Changes { changes, .. } => changes,
    };
    let Some(feed) = feeds.iter().find(|feed| prefix.starts_with(&feed.prefix)) else {
        let served: Vec<&str> = feeds.iter().map(|f| f.prefix.as_str()).collect();
        let error = format!("{prefix:?} is not served (served: {})", served.join(", "));
        return send(&mut out, &Answer::Error { error }).await;
    };
    match request {
        Request::Snapshot { .. } => {
            let encoded = feed.snapshot(prefix, served).await;
            out.write_all(&encoded).await?;
            out.flush().await
        }
        Request::Changes { from, .. } => {
            let Some((backlog, mut live)) = feed.subscribe(prefix, from) else {
                return send(&mut out, &Answer::Compacted { compacted: true }).await;
            };
            served.lock().unwrap_or_else(|p| p.into_inner()).streams += 1;
            let mut buffer = Vec::new();
            line(&mut buffer, &Answer::Following { following: true });
            for change in &backlog {
                line(&mut buffer, change);
            }
            out.write_all(&buffer).await?;
            out.flush().await?;
            loop {
                buffer.clear();
                let under = |change: &Change| change.key().starts_with(prefix.as_str());
                match live.recv().await {
                    Ok(change) if under(&change) => line(&mut buffer, &*change),
                    Ok(_) => continue,
                    // Too far behind, or the feed resyncs: the reader takes a snapshot.
                    Err(_) => return Ok(()),
                }
                // Whatever else is already waiting goes in the same write.
                while let Ok(change) = live.try_recv() {
                    if under(&change) {
                        line(&mut buffer, &*change);
                    }
                }
                out.write_all(&buffer).await?;
                out.flush().await?;
            }
        }
    }
}

async fn send(out: &mut (impl AsyncWrite + Unpin), answer: &Answer) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    line(&mut buffer, answer);
    out.write_all(&buffer).await?;
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use calico_datastore::KvPair;

    fn put(key: &str, value: &str, revision: i64) -> WatchEvent {
        WatchEvent::Put(KvPair {
            key: key.to_owned(),
            value: value.to_owned(),
            mod_revision: revision,
        })
    }

    #[test]
    fn changes_are_served_from_one_revision_before_the_reader() {
        let feed = Feed::new("/p/", 100);
        feed.apply(put("/p/a", "1", 5));
        assert!(feed.subscribe("/p/", 6).is_none(), "not in sync yet");
        feed.apply(WatchEvent::InSync { revision: 7 });
        feed.apply(put("/p/b", "1", 8));
        feed.apply(put("/p/c", "1", 8));
        feed.apply(put("/p/a", "2", 9));
        // A reader whose snapshot is at 8 may have part of 8: it gets 8 again, and 9.
        let (backlog, _) = feed.subscribe("/p/", 9).unwrap();
        let revisions: Vec<i64> = backlog.iter().map(Change::revision).collect();
        assert_eq!(revisions, [8, 8, 9]);
        // A reader at 7 (the sync) gets everything since.
        assert_eq!(feed.subscribe("/p/", 8).unwrap().0.len(), 3);
        // Older than the feed's first sync: a snapshot is needed.
        assert!(feed.subscribe("/p/", 7).is_none());
    }

    #[test]
    fn old_changes_are_forgotten_and_readers_behind_them_resync() {
        let feed = Feed::new("/p/", 2);
        feed.apply(WatchEvent::InSync { revision: 1 });
        for revision in 2..=5 {
            feed.apply(put("/p/a", &revision.to_string(), revision));
        }
        // Kept: 4 and 5. A reader at 3 would need 3 again: gone.
        assert!(feed.subscribe("/p/", 4).is_none());
        assert_eq!(feed.subscribe("/p/", 5).unwrap().0.len(), 2);
    }

    #[tokio::test]
    async fn a_resync_upstream_stops_snapshots_and_streams_until_it_ends() {
        let feed = Feed::new("/p/", 100);
        let served = Mutex::new(Served::default());
        feed.apply(WatchEvent::InSync { revision: 1 });
        feed.apply(put("/p/a", "1", 10));
        let (_, mut live) = feed.subscribe("/p/", 11).unwrap();
        let first = feed.snapshot("/p/", &served).await;
        assert_eq!(
            feed.snapshot("/p/", &served).await,
            first,
            "encoded once, shared"
        );
        assert_eq!(served.lock().unwrap().encodings, 1);
        // Upstream resynced: a key changed while it was away, at a revision below 10.
        feed.apply(put("/p/b", "1", 7));
        assert!(
            feed.subscribe("/p/", 11).is_none(),
            "no stream during a resync"
        );
        assert!(
            tokio::time::timeout(
                std::time::Duration::from_millis(50),
                feed.snapshot("/p/", &served)
            )
            .await
            .is_err(),
            "no snapshot during a resync"
        );
        feed.apply(WatchEvent::InSync { revision: 12 });
        let snapshot = String::from_utf8(feed.snapshot("/p/", &served).await.to_vec()).unwrap();
        assert!(
            snapshot.starts_with(r#"{"revision":12,"count":2}"#),
            "{snapshot}"
        );
        assert!(snapshot.contains(r#"{"put":["/p/b","1",7]}"#), "{snapshot}");
        // The stream opened before the resync ends: its reader takes the new snapshot.
        loop {
            match live.try_recv() {
                Err(broadcast::error::TryRecvError::Closed) => break,
                Ok(_) => {}
                Err(other) => panic!("the old stream should be closed, got {other:?}"),
            }
        }
    }
}
