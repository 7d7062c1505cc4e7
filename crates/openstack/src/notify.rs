//! The ML2 driver's change notifications: one unix datagram per committed change,
//! `{"kind": "port"|"subnet"|"security_group", "id": "<id>"}`, sent by `calico_rs` from its
//! post-commit hooks and Neutron's security group callbacks to `[calico_rs] notify_socket`.
//!
//! ```text
//!  neutron-server (calico_rs) ── datagram ──► socket ──► reader task ── bounded queue ──► sync loop
//!                                                          (parse; full queue: overflow → resync)
//! ```
//!
//! A notification carries a kind and an id only: calico-neutron reads that object from
//! Neutron's API itself, so a forged or stale one costs a read, never a wrong key. The socket is
//! writable by every local user (neutron-server usually runs as its own user) for that reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Deserialize;
use tokio::net::UnixDatagram;
use tokio::sync::mpsc;

use crate::model::Change;

/// Where calico-neutron listens and the driver sends, unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/calico/neutron-notify.sock";
/// Notifications queued between the reader and the sync loop.
const QUEUE: usize = 8192;

#[derive(Deserialize)]
struct Message {
    kind: String,
    id: String,
}

/// A datagram's change, or why it is not one.
pub fn parse(datagram: &[u8]) -> Result<Change, String> {
    let message: Message = serde_json::from_slice(datagram).map_err(|e| e.to_string())?;
    if message.id.is_empty() || message.id.contains('/') {
        return Err(format!("id {:?}: not a Neutron id", message.id));
    }
    match message.kind.as_str() {
        "port" => Ok(Change::Port(message.id)),
        "subnet" => Ok(Change::Subnet(message.id)),
        "security_group" => Ok(Change::SecurityGroup(message.id)),
        other => Err(format!(
            "kind {other:?}: expected port, subnet or security_group"
        )),
    }
}

/// The socket, read by a task of its own; removed on drop.
#[derive(Debug)]
pub struct Listener {
    path: PathBuf,
    changes: mpsc::Receiver<Change>,
    overflow: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Binds `path` (a stale socket there is replaced; its directory is made) and starts
    /// reading. The error names the path.
    pub fn bind(path: &Path) -> Result<Listener, String> {
        let fail = |e: std::io::Error| format!("--notify-socket {}: {e}", path.display());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) => {
                std::fs::remove_file(path).map_err(fail)?;
            }
            Ok(_) => {
                return Err(format!(
                    "--notify-socket {}: exists and is not a socket",
                    path.display()
                ));
            }
            Err(_) => {}
        }
        let socket = UnixDatagram::bind(path).map_err(fail)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(fail)?;
        let (sender, changes) = mpsc::channel(QUEUE);
        let overflow = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let reader = tokio::spawn(read(socket, sender, overflow.clone(), received.clone()));
        Ok(Listener {
            path: path.to_owned(),
            changes,
            overflow,
            received,
            reader,
        })
    }

    /// The next change (waits).
    pub async fn recv(&mut self) -> Option<Change> {
        self.changes.recv().await
    }

    /// A change already queued, if any.
    pub fn try_recv(&mut self) -> Option<Change> {
        self.changes.try_recv().ok()
    }

    /// Whether notifications were dropped since the last call (the queue was full): then only
    /// a resync knows what changed.
    pub fn overflowed(&self) -> bool {
        self.overflow.swap(false, Ordering::Relaxed)
    }

    /// Notifications received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.reader.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn read(
    socket: UnixDatagram,
    sender: mpsc::Sender<Change>,
    overflow: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 4096];
    let mut bad = 0u64;
    loop {
        let Ok(size) = socket.recv(&mut buffer).await else {
            continue;
        };
        received.fetch_add(1, Ordering::Relaxed);
        match parse(&buffer[..size]) {
            Ok(change) => {
                if sender.try_send(change).is_err() {
                    overflow.store(true, Ordering::Relaxed);
                }
            }
            Err(reason) => {
                bad += 1;
                // The first few, then one in a thousand: a broken sender cannot flood the log.
                if bad <= 10 || bad.is_multiple_of(1000) {
                    let text = String::from_utf8_lossy(&buffer[..size.min(200)]);
                    tracing::warn!(bad, "notification {text:?} ignored: {reason}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_s_datagrams_parse_and_others_say_why_not() {
        assert_eq!(
            parse(br#"{"kind": "port", "id": "ab-1"}"#),
            Ok(Change::Port("ab-1".into()))
        );
        assert_eq!(
            parse(br#"{"kind": "security_group", "id": "g"}"#),
            Ok(Change::SecurityGroup("g".into()))
        );
        let error = parse(br#"{"kind": "router", "id": "r"}"#).unwrap_err();
        assert!(error.contains("kind \"router\""), "{error}");
        let error = parse(br#"{"kind": "port", "id": "../x"}"#).unwrap_err();
        assert!(error.contains("not a Neutron id"), "{error}");
        assert!(parse(b"port 1").is_err());
    }

    #[tokio::test]
    async fn a_datagram_sent_to_the_socket_arrives_as_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/notify.sock");
        let mut listener = Listener::bind(&path).unwrap();
        let sender = std::os::unix::net::UnixDatagram::unbound().unwrap();
        sender
            .send_to(br#"{"kind": "subnet", "id": "s1"}"#, &path)
            .unwrap();
        assert_eq!(listener.recv().await, Some(Change::Subnet("s1".into())));
        assert_eq!(listener.received(), 1);
        // A second listener replaces a stale socket; a regular file is refused.
        drop(listener);
        std::fs::write(&path, "x").unwrap();
        let error = Listener::bind(&path).unwrap_err();
        assert!(error.contains("not a socket"), "{error}");
    }
}
