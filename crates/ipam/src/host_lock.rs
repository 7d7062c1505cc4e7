//! The per-host IPAM lock: one file (`/var/run/calico/ipam.lock` by default, as Calico's CNI
//! plugin) that every process assigning or releasing for this host holds around its IPAM call.
//!
//! ```text
//! CNI run A ─ lock ─ read block ─ txn ─ unlock
//! CNI run B ─ lock ······························· read block ─ txn ─ unlock
//! ```
//!
//! Without it, the CNI runs of one host (one process per pod) read the host's block at the same
//! time and all but one lose the transaction, read again and retry with a back-off: the more
//! pods start at once, the more rounds each needs. Held in turn, each reads and writes once.
//! Correctness never depends on it: every write still compares what it read, so a process that
//! does not take the lock (another host, `calicoctl`) is as safe as before.
//!
//! It is an advisory `flock(2)` on an open file: the kernel releases it when the holder closes
//! the file or dies (a crashed CNI run leaves no stale lock). Two opens conflict even within one
//! process, so each [`HostLock::acquire`] is a holder of its own.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::IpamError;

/// Where Calico's CNI plugin keeps the lock.
pub const DEFAULT_LOCK_FILE: &str = "/var/run/calico/ipam.lock";

/// How long a holder waits for the lock before giving up (the CNI plugin's default).
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(60);

/// The lock file of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLock {
    path: PathBuf,
    wait: Duration,
}

/// The lock, held until dropped.
#[derive(Debug)]
pub struct HostLockGuard {
    // Closing the file releases the lock.
    _file: File,
}

impl Default for HostLock {
    fn default() -> HostLock {
        HostLock::new(DEFAULT_LOCK_FILE)
    }
}

impl HostLock {
    /// The lock at `path`, waited for at most [`DEFAULT_LOCK_WAIT`].
    pub fn new(path: impl Into<PathBuf>) -> HostLock {
        HostLock {
            path: path.into(),
            wait: DEFAULT_LOCK_WAIT,
        }
    }

    /// The same lock, waited for at most `wait`.
    pub fn waiting(self, wait: Duration) -> HostLock {
        HostLock { wait, ..self }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the lock, waiting while another holder has it; creates the file (and its
    /// directory) when missing. An error names the file and why.
    pub async fn acquire(&self) -> Result<HostLockGuard, IpamError> {
        let file = self.open()?;
        let waited = tokio::task::spawn_blocking(move || file.lock().map(|()| file));
        match tokio::time::timeout(self.wait, waited).await {
            Ok(Ok(Ok(file))) => Ok(HostLockGuard { _file: file }),
            Ok(Ok(Err(e))) => Err(self.error(format!("cannot lock it: {e}"))),
            Ok(Err(e)) => Err(self.error(format!("the wait for it failed: {e}"))),
            // The waiting thread still takes the lock if it comes free, and lets go of it at
            // once: its result (the file) is dropped with nobody to receive it.
            Err(_) => Err(IpamError::Lock {
                path: self.path.clone(),
                reason: format!(
                    "another process has held it for over {} s",
                    self.wait.as_secs_f64()
                ),
                busy: true,
            }),
        }
    }

    /// Takes the lock if nobody holds it; `None` when somebody does.
    pub fn try_acquire(&self) -> Result<Option<HostLockGuard>, IpamError> {
        let file = self.open()?;
        match file.try_lock() {
            Ok(()) => Ok(Some(HostLockGuard { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(self.error(format!("cannot lock it: {e}"))),
        }
    }

    fn open(&self) -> Result<File, IpamError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                self.error(format!(
                    "cannot create its directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)
            .map_err(|e| self.error(format!("cannot open it: {e}")))
    }

    fn error(&self, reason: String) -> IpamError {
        IpamError::Lock {
            path: self.path.clone(),
            reason,
            busy: false,
        }
    }
}
