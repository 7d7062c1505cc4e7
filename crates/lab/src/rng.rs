//! A small seedable generator (SplitMix64) for the lab's random plans and test inputs: the same
//! seed gives the same sequence on every machine and with every library version, so a run can
//! be replayed from the seed it printed.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for one part (`stream`) of one seed's run.
    pub fn derive(seed: u64, stream: u64) -> Rng {
        let mut mixer = Rng(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        Rng(mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// Uniform in `[low, high]`, to the millisecond.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let (low, high) = (low.as_millis() as u64, high.as_millis() as u64);
        let span = high.saturating_sub(low) + 1;
        Duration::from_millis(low + self.next_u64() % span)
    }

    /// Half to one and a half times `mean`.
    pub fn around(&mut self, mean: Duration) -> Duration {
        self.between(mean / 2, mean * 3 / 2)
    }
}
