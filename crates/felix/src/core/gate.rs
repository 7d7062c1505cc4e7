//! The gate that holds programming until the datastore snapshot is in and `/calico/v1/Ready`
//! is `true`, and says why it waits.
//!
//! | snapshot in | Ready | programming | log |
//! | --- | --- | --- | --- |
//! | no | – | waits | – |
//! | yes | not `true` | waits (the dataplane stays as it is) | `wait-for-ready` at once, then every 10 s |
//! | yes | `true` | first time: a full sync; after a wait: the changes meanwhile | `datastore is ready` |

/// Heartbeats between two "wait-for-ready" lines.
const READY_LOG_EVERY: u32 = 10;

/// Whether programming may go on.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// The snapshot is in (the first `InSync`).
    in_sync: bool,
    /// `/calico/v1/Ready` is `true`.
    ready_flag: bool,
    /// Both hold.
    open: bool,
    /// The gate has been open once: programming has started.
    started: bool,
    /// Heartbeats since "wait-for-ready" was last logged, while waiting.
    waiting: Option<u32>,
    /// The revision of the last datastore update received.
    revision: i64,
}

impl Gate {
    pub(super) fn is_open(&self) -> bool {
        self.open
    }

    pub(super) fn started(&self) -> bool {
        self.started
    }

    pub(super) fn revision(&self) -> i64 {
        self.revision
    }

    /// An update of this revision was received.
    pub(super) fn received(&mut self, revision: i64) {
        self.revision = self.revision.max(revision);
    }

    /// Everything up to `revision` is in.
    pub(super) fn in_sync(&mut self, revision: i64) {
        self.received(revision);
        self.in_sync = true;
    }

    /// `/calico/v1/Ready` changed.
    pub(super) fn ready_flag(&mut self, ready: bool) {
        self.ready_flag = ready;
    }

    /// Opens or closes the gate after a batch; true when it opened for the first time.
    pub(super) fn settle(&mut self) -> bool {
        let open = self.in_sync && self.ready_flag;
        let was = std::mem::replace(&mut self.open, open);
        match (was, open) {
            (false, true) if self.started => {
                tracing::info!("/calico/v1/Ready is true again: programming resumes");
            }
            (false, true) => tracing::info!("datastore is ready"),
            (true, false) => tracing::warn!(
                "/calico/v1/Ready is no longer true: the dataplane stays as it is until it is \
                 true again (wait-for-ready)"
            ),
            (false, false) if self.in_sync && self.waiting.is_none() => log_waiting(),
            _ => {}
        }
        self.waiting = (!open && self.in_sync).then(|| self.waiting.unwrap_or(0));
        let first = open && !self.started;
        self.started |= open;
        first
    }

    /// While waiting, says so every [`READY_LOG_EVERY`] heartbeats.
    pub(super) fn heartbeat(&mut self) {
        if let Some(beats) = &mut self.waiting {
            *beats += 1;
            if *beats >= READY_LOG_EVERY {
                log_waiting();
                *beats = 0;
            }
        }
    }
}

fn log_waiting() {
    tracing::info!("wait-for-ready: /calico/v1/Ready is not true yet");
}
