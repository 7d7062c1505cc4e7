//! Waiting by polling, never a fixed sleep: a condition is looked at again until it holds or
//! its deadline passes, and a timeout says what it waited for and the last reason it saw.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;

/// How often a condition is looked at again.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Polls `check` until it yields a value or `limit` passes.
pub async fn poll<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check()? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// When to give up, and the limit it came from (for messages).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    pub fn after(limit: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// Where a condition stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// Not yet, and why (shown if the wait times out).
    Waiting(String),
}

/// Polls `check` until it is done. At the deadline it fails with `what`, the last reason and
/// the log to read; an error from `check` (a process that exited) ends the wait at once.
pub async fn until(
    deadline: Deadline,
    what: &str,
    log: &Path,
    mut check: impl AsyncFnMut() -> anyhow::Result<Progress>,
) -> anyhow::Result<()> {
    loop {
        let reason = match check().await? {
            Progress::Done => return Ok(()),
            Progress::Waiting(reason) => reason,
        };
        if deadline.passed() {
            bail!(
                "timed out after {:?} waiting for {what}: {reason}; see {}",
                deadline.limit,
                log.display()
            );
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
