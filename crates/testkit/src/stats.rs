//! The figures a benchmark reports of a set of samples: the median and the tail.

/// Median, 99th percentile and maximum of some samples (nearest rank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tails {
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

impl Tails {
    /// `None` for no samples.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Tails> {
        let mut sorted: Vec<f64> = samples.into_iter().collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Some(Tails {
            median: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        })
    }

    /// Each figure divided by the baseline's.
    pub fn ratio(&self, baseline: &Tails) -> Tails {
        Tails {
            median: self.median / baseline.median,
            p99: self.p99 / baseline.p99,
            max: self.max / baseline.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_a_hundred_samples_is_their_top_one() {
        let tails = Tails::of((1..=100).rev().map(f64::from)).unwrap();
        assert_eq!((tails.median, tails.p99, tails.max), (51.0, 99.0, 100.0));
        assert_eq!(Tails::of([4.0]).unwrap().p99, 4.0);
        assert!(Tails::of([]).is_none());
        assert_eq!(tails.ratio(&tails).max, 1.0);
    }
}
