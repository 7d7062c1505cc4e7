//! Watches served by `calico-fanout` instead of etcd: one process holds the etcd watch and
//! serves its snapshot and changes to every agent (docs/scale.md), so a thousand agents cost
//! etcd one watcher.
//!
//! The protocol is newline-delimited JSON over TCP; each connection makes one request, the
//! first line the client sends:
//!
//! ```text
//! → {"snapshot":"/calico/v1/"}
//! ← {"revision":812,"count":2}          then `count` lines of {"put":[key,value,mod_revision]}
//! → {"changes":"/calico/v1/","from":813}
//! ← {"following":true}                  then one line per change, for as long as it lasts:
//!                                       {"put":[key,value,mod_revision]} or {"delete":[key,revision]}
//! ← {"compacted":true}                  (instead: `from` is older than the changes kept)
//! ← {"error":"..."}                     (instead: e.g. a prefix the server does not serve)
//! ```
//!
//! A prefix is served when it is one the server watches or lies below one (`/calico/v1/policy/`
//! under `/calico/v1/`); only the watched prefixes' snapshots are encoded once and shared.
//!
//! The change stream starts one revision earlier than asked (at `from - 1`): a snapshot may
//! hold part of a transaction's revision, and the watch engine drops what it has already
//! delivered, so nothing of that revision is lost and nothing is delivered twice. The server
//! closes a stream whose reader falls too far behind, and every stream when its own etcd watch
//! had to resync; the engine then resyncs from a new snapshot, as it does with etcd.

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;

use crate::watch::{self, Break, ChangeStream, Source, Start, Watch, WatchEvent};
use crate::{DatastoreError, KvPair};

/// What a client asks for: the first line of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Request {
    /// Every key under the prefix, at one revision.
    Snapshot { snapshot: String },
    /// The changes under the prefix from revision `from` on.
    Changes { changes: String, from: i64 },
}

/// The first line of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    /// A snapshot follows: `count` put lines.
    Snapshot { revision: i64, count: usize },
    /// Changes follow.
    Following { following: bool },
    /// The changes asked for are no longer kept: take a snapshot.
    Compacted { compacted: bool },
    /// The request cannot be served.
    Error { error: String },
}

/// One key's change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Put(String, String, i64),
    Delete(String, i64),
}

impl Change {
    /// The key changed.
    pub fn key(&self) -> &str {
        match self {
            Change::Put(key, ..) | Change::Delete(key, _) => key,
        }
    }

    /// The revision of the change.
    pub fn revision(&self) -> i64 {
        match self {
            Change::Put(_, _, revision) | Change::Delete(_, revision) => *revision,
        }
    }
}

impl From<Change> for WatchEvent {
    fn from(change: Change) -> WatchEvent {
        match change {
            Change::Put(key, value, mod_revision) => WatchEvent::Put(KvPair {
                key,
                value,
                mod_revision,
            }),
            Change::Delete(key, mod_revision) => WatchEvent::Delete { key, mod_revision },
        }
    }
}

/// Watches through a `calico-fanout` at `address` (`host:port`).
#[derive(Debug, Clone)]
pub struct FanoutClient {
    address: String,
}

impl FanoutClient {
    pub fn new(address: impl Into<String>) -> FanoutClient {
        FanoutClient {
            address: address.into(),
        }
    }

    /// A watch of `prefix` as [`crate::Datastore::watch`] gives one: a snapshot, `InSync`,
    /// then the changes, resyncing on its own whenever the stream breaks.
    pub fn watch(&self, prefix: &str) -> Watch {
        watch::spawn(self.clone(), prefix, Start::Snapshot)
    }

    fn unreachable(&self, reason: impl std::fmt::Display) -> DatastoreError {
        DatastoreError::Unreachable {
            endpoints: format!("calico-fanout {}", self.address),
            reason: reason.to_string(),
        }
    }

    /// Connects, sends `request` and reads the first line of the answer.
    async fn ask(
        &self,
        request: &Request,
    ) -> Result<(Answer, Lines<BufReader<OwnedReadHalf>>), DatastoreError> {
        let stream = TcpStream::connect(&self.address)
            .await
            .map_err(|e| self.unreachable(e))?;
        let _ = stream.set_nodelay(true);
        let (read, mut write) = stream.into_split();
        let mut line = serde_json::to_vec(request).expect("a request serializes");
        line.push(b'\n');
        write
            .write_all(&line)
            .await
            .map_err(|e| self.unreachable(e))?;
        // One request per connection: the client's side is done (the server reads no more).
        drop(write);
        let mut lines = BufReader::with_capacity(256 << 10, read).lines();
        let first = self.line(&mut lines).await?;
        let answer = serde_json::from_str(&first)
            .map_err(|e| self.unreachable(format!("a first line that is not an answer: {e}")))?;
        Ok((answer, lines))
    }

    /// The next line; the end of the stream is an error.
    async fn line(
        &self,
        lines: &mut Lines<BufReader<OwnedReadHalf>>,
    ) -> Result<String, DatastoreError> {
        match lines.next_line().await {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(self.unreachable("the connection closed")),
            Err(e) => Err(self.unreachable(e)),
        }
    }
}

#[async_trait]
impl Source for FanoutClient {
    async fn snapshot(&self, prefix: &str) -> Result<(Vec<KvPair>, i64), DatastoreError> {
        let request = Request::Snapshot {
            snapshot: prefix.to_owned(),
        };
        let (answer, mut lines) = self.ask(&request).await?;
        let (revision, count) = match answer {
            Answer::Snapshot { revision, count } => (revision, count),
            Answer::Error { error } => return Err(self.unreachable(error)),
            other => return Err(self.unreachable(format!("unexpected answer {other:?}"))),
        };
        let mut pairs = Vec::with_capacity(count);
        for _ in 0..count {
            let line = self.line(&mut lines).await?;
            match serde_json::from_str(&line) {
                Ok(Change::Put(key, value, mod_revision)) => pairs.push(KvPair {
                    key,
                    value,
                    mod_revision,
                }),
                Ok(other) => {
                    return Err(self.unreachable(format!("{other:?} in a snapshot")));
                }
                Err(e) => return Err(self.unreachable(format!("a bad snapshot line: {e}"))),
            }
        }
        Ok((pairs, revision))
    }

    async fn changes(&self, prefix: &str, from: i64) -> Result<ChangeStream, Break> {
        let request = Request::Changes {
            changes: prefix.to_owned(),
            from,
        };
        let (answer, lines) = self
            .ask(&request)
            .await
            .map_err(|e| Break::Lost(e.to_string()))?;
        match answer {
            Answer::Following { .. } => {}
            Answer::Compacted { .. } => return Err(Break::Compacted),
            Answer::Error { error } => return Err(Break::Lost(error)),
            Answer::Snapshot { .. } => {
                return Err(Break::Lost(
                    "a snapshot where changes were asked".to_owned(),
                ));
            }
        }
        let address = self.address.clone();
        Ok(stream::unfold(Some(lines), move |lines| {
            let address = address.clone();
            async move {
                let mut lines = lines?;
                let item = match lines.next_line().await {
                    Ok(Some(line)) => match serde_json::from_str::<Change>(&line) {
                        Ok(change) => Ok(vec![WatchEvent::from(change)]),
                        Err(e) => Err(Break::Lost(format!(
                            "calico-fanout {address}: a bad change line: {e}"
                        ))),
                    },
                    Ok(None) => Err(Break::Lost(format!(
                        "calico-fanout {address} closed the stream"
                    ))),
                    Err(e) => Err(Break::Lost(format!("calico-fanout {address}: {e}"))),
                };
                let more = item.is_ok().then_some(lines);
                Some((item, more))
            }
        })
        .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_documented_json() {
        fn line(value: &impl Serialize) -> String {
            serde_json::to_string(value).unwrap()
        }
        assert_eq!(
            line(&Request::Snapshot {
                snapshot: "/calico/v1/".into()
            }),
            r#"{"snapshot":"/calico/v1/"}"#
        );
        assert_eq!(
            line(&Request::Changes {
                changes: "/calico/v1/".into(),
                from: 813
            }),
            r#"{"changes":"/calico/v1/","from":813}"#
        );
        assert_eq!(
            line(&Answer::Snapshot {
                revision: 812,
                count: 2
            }),
            r#"{"revision":812,"count":2}"#
        );
        assert_eq!(
            line(&Change::Put("/k".into(), "v".into(), 7)),
            r#"{"put":["/k","v",7]}"#
        );
        assert_eq!(
            line(&Change::Delete("/k".into(), 9)),
            r#"{"delete":["/k",9]}"#
        );
        let answer: Answer = serde_json::from_str(r#"{"compacted":true}"#).unwrap();
        assert_eq!(answer, Answer::Compacted { compacted: true });
        let answer: Answer = serde_json::from_str(r#"{"following":true}"#).unwrap();
        assert_eq!(answer, Answer::Following { following: true });
    }
}
