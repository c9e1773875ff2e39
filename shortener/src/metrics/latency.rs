//! A latency histogram that request paths record into without a lock.
//!
//! prometheus-client's `Histogram` takes a write lock for every observation, so every worker
//! thread of a many-core node would queue on one lock per redirect. Here each thread adds to its
//! own cache-line-aligned shard of atomic counts (two relaxed adds per observation), and a scrape
//! sums the shards.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds of the finite buckets: 50 µs doubling up to ~1.6 s.
const BUCKETS: usize = 16;
const FIRST_BOUND: Duration = Duration::from_micros(50);

/// Shards per histogram: threads beyond this share shards (still correct, just contended).
const SHARDS: usize = 16;

/// One thread's counts: per bucket (the last one unbounded) and the sum of observed
/// nanoseconds. Aligned so that two threads' shards never share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    buckets: [AtomicU64; BUCKETS + 1],
    sum_nanos: AtomicU64,
}

/// A latency histogram (cheap to clone; clones share their counts).
#[derive(Clone)]
pub struct LatencyHistogram {
    shards: Arc<[Shard; SHARDS]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            shards: Arc::new(std::array::from_fn(|_| Shard::default())),
        }
    }
}

/// The bucket of an observation of `nanos`: the first whose bound it does not pass, the last
/// (unbounded) past every bound. Bounds double from the first, so it is the number of doublings
/// of the first bound needed to reach `nanos`, read off the bits of the quotient rounded up
/// rather than found by comparing with each bound in turn (this runs on every redirect).
fn bucket_of(nanos: u64) -> usize {
    const FIRST: u64 = FIRST_BOUND.as_nanos() as u64;
    let multiples = nanos.div_ceil(FIRST);
    if multiples <= 1 {
        return 0;
    }
    let doublings = (u64::BITS - (multiples - 1).leading_zeros()) as usize;
    doublings.min(BUCKETS)
}

/// The shard of the calling thread: threads are numbered in the order they first record.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|index| *index)
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let shard = &self.shards[shard_index()];
        shard.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        shard.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Per-bucket counts (upper bound in seconds, the last `f64::MAX` for `+Inf`), their total
    /// and the sum of observations in seconds, summed over the shards.
    fn snapshot(&self) -> (Vec<(f64, u64)>, u64, f64) {
        // The bounds as prometheus-client's own histograms print them (the series this
        // histogram replaced), so dashboards keep their `le` labels.
        let mut buckets: Vec<(f64, u64)> =
            exponential_buckets(FIRST_BOUND.as_secs_f64(), 2.0, BUCKETS as u16)
                .chain(std::iter::once(f64::MAX))
                .map(|bound| (bound, 0))
                .collect();
        let mut sum_nanos = 0u128;
        for shard in self.shards.iter() {
            for (slot, count) in buckets.iter_mut().zip(&shard.buckets) {
                slot.1 += count.load(Ordering::Relaxed);
            }
            sum_nanos += u128::from(shard.sum_nanos.load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        (buckets, count, sum_nanos as f64 / 1e9)
    }
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (_, count, sum) = self.snapshot();
        f.debug_struct("LatencyHistogram")
            .field("count", &count)
            .field("sum_seconds", &sum)
            .finish()
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (buckets, count, sum) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    /// The upper bound of finite bucket `i`.
    fn bound(i: usize) -> Duration {
        FIRST_BOUND * (1u32 << i)
    }

    fn exposition(histogram: &LatencyHistogram) -> String {
        let mut registry = Registry::default();
        registry.register("latency", "test", histogram.clone());
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        text
    }

    #[test]
    fn observations_land_in_cumulative_buckets_with_their_sum() {
        let histogram = LatencyHistogram::default();
        // On a bound, just above it, far above the last bound, and zero.
        for micros in [50, 51, 100, 3_000_000, 0] {
            histogram.observe(Duration::from_micros(micros));
        }
        let text = exposition(&histogram);
        for line in [
            "latency_bucket{le=\"0.00005\"} 2",
            "latency_bucket{le=\"0.0001\"} 4",
            "latency_bucket{le=\"0.8192\"} 4",
            "latency_bucket{le=\"1.6384\"} 4",
            "latency_bucket{le=\"+Inf\"} 5",
            "latency_count 5",
            "latency_sum 3.000201",
            "# TYPE latency histogram",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }

    #[test]
    fn an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_pass() {
        // Each bound, a nanosecond either side of it, and values far past the last.
        let mut samples = vec![0, 1, u64::MAX, u64::MAX / 2, 10_000_000_000_000];
        for i in 0..BUCKETS {
            let at = u64::try_from(bound(i).as_nanos()).expect("bound");
            samples.extend([at - 1, at, at + 1, at + at / 3]);
        }
        for nanos in samples {
            let elapsed = Duration::from_nanos(nanos);
            let first = (0..BUCKETS)
                .find(|&i| elapsed <= bound(i))
                .unwrap_or(BUCKETS);
            assert_eq!(bucket_of(nanos), first, "{nanos} ns");
        }
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let histogram = LatencyHistogram::default();
        std::thread::scope(|scope| {
            for thread in 0..(SHARDS + 4) {
                let histogram = histogram.clone();
                scope.spawn(move || {
                    for i in 0..1000 {
                        histogram.observe(Duration::from_micros((thread * 1000 + i) as u64));
                    }
                });
            }
        });
        let (buckets, count, sum) = histogram.snapshot();
        let n = (SHARDS + 4) * 1000;
        assert_eq!(count, n as u64);
        assert_eq!(buckets.iter().map(|(_, c)| c).sum::<u64>(), n as u64);
        // The sum of 0..n microseconds.
        let expected = (n * (n - 1) / 2) as f64 / 1e6;
        assert!((sum - expected).abs() < 1e-6, "{sum} != {expected}");
    }
}
