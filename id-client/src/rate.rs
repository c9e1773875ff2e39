//! Consumption-rate estimate used for block sizing and runway.

use std::time::Duration;
use tokio::time::Instant;

/// An exponentially weighted moving average of IDs consumed per second, updated from
/// cumulative counts sampled at irregular times.
#[derive(Debug)]
pub(crate) struct RateEstimator {
    half_life: Duration,
    rate: f64,
    last_count: u64,
    last_at: Instant,
}

impl RateEstimator {
    pub(crate) fn new(half_life: Duration, now: Instant) -> Self {
        Self {
            half_life,
            rate: 0.0,
            last_count: 0,
            last_at: now,
        }
    }

    /// Folds in the cumulative `count` observed at `now`.
    pub(crate) fn observe(&mut self, count: u64, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_at).as_secs_f64();
        if elapsed < 0.05 {
            return;
        }
        let instant_rate = count.saturating_sub(self.last_count) as f64 / elapsed;
        let weight = 0.5f64.powf(elapsed / self.half_life.as_secs_f64());
        self.rate = self.rate * weight + instant_rate * (1.0 - weight);
        self.last_count = count;
        self.last_at = now;
    }

    /// IDs per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_converges_to_a_steady_consumption() {
        let start = Instant::now();
        let mut est = RateEstimator::new(Duration::from_secs(10), start);
        for s in 1..=120u64 {
            est.observe(s * 100, start + Duration::from_secs(s));
        }
        assert!((est.rate() - 100.0).abs() < 1.0, "rate {}", est.rate());
        // Consumption stops: the estimate decays towards zero.
        for s in 121..=240u64 {
            est.observe(12_000, start + Duration::from_secs(s));
        }
        assert!(est.rate() < 1.0, "rate {}", est.rate());
    }
}
