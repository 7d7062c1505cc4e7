//! How everything that retries waits: exponential backoff with jitter.

use std::time::{Duration, Instant};

/// Exponential backoff from 100 ms, doubling, never longer than [`Backoff::MAX`], each delay
/// shortened by a random part of up to half (so a thousand agents that lost etcd together do not
/// come back in step).
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The longest wait between two attempts.
    pub const MAX: Duration = Duration::from_secs(2);
    const FIRST: Duration = Duration::from_millis(100);

    /// The wait before the next attempt: between half and all of 100 ms × 2^failures, capped at
    /// [`Backoff::MAX`].
    pub fn next_delay(&mut self) -> Duration {
        let full = Self::FIRST
            .saturating_mul(1 << self.failures.min(10))
            .min(Self::MAX);
        self.failures = self.failures.saturating_add(1);
        full.mul_f64(0.5 + jitter() / 2.0)
    }

    /// Sleeps for [`Backoff::next_delay`].
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }

    /// After a success: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// How many failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// A number in [0, 1) that differs between processes and calls.
pub(crate) fn jitter() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    let bits = RandomState::new().hash_one(Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A number below `n` (0 when `n` is 0) that differs between processes and calls.
pub(crate) fn random_below(n: usize) -> usize {
    ((jitter() * n as f64) as usize).min(n.saturating_sub(1))
}
