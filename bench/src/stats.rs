//! Latency percentiles, and medians and spreads over repeated runs.

use std::time::Duration;

/// One measured run: a rate and its latency percentiles (milliseconds).
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    /// Completed operations per second (requests, creates or links).
    pub per_second: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Server CPU time per operation, in microseconds, when measured.
    pub cpu_us: Option<f64>,
    /// The load generator's own CPU time per operation (this process), in microseconds, when
    /// measured: on a machine where it shares cores with the database, a heavier client leaves
    /// the database less.
    pub client_cpu_us: Option<f64>,
    /// Operations that failed (non-2xx/3xx answers where success was expected, transport errors).
    pub errors: u64,
    /// Open loop only: how far behind its own schedule the generator fell at worst, in
    /// milliseconds (its thread was descheduled, or busy reading a burst of answers).
    pub behind_ms: Option<f64>,
}

impl Run {
    /// A run from raw latencies (microseconds) over `elapsed`; `ops` completed operations (may
    /// exceed the number of latencies when one call carries several operations).
    pub fn from_latencies(mut micros: Vec<u32>, ops: u64, elapsed: Duration, errors: u64) -> Run {
        micros.sort_unstable();
        Run {
            per_second: ops as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: percentile(&micros, 0.50),
            p99_ms: percentile(&micros, 0.99),
            p999_ms: percentile(&micros, 0.999),
            cpu_us: None,
            client_cpu_us: None,
            errors,
            behind_ms: None,
        }
    }
}

/// The `p` quantile of sorted microseconds, in milliseconds (NaN when empty).
pub fn percentile(sorted_micros: &[u32], p: f64) -> f64 {
    if sorted_micros.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted_micros.len() - 1) as f64 * p).round() as usize;
    f64::from(sorted_micros[index]) / 1000.0
}

/// Repeated runs of one configuration, summarised by their medians.
#[derive(Debug, Clone, Default)]
pub struct Repeated {
    /// The individual runs.
    pub runs: Vec<Run>,
}

/// The median of the finite `values` (NaN when there are none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl Repeated {
    /// Adds a run.
    pub fn push(&mut self, run: Run) {
        self.runs.push(run);
    }

    /// Median of a field over the runs.
    pub fn median(&self, field: impl Fn(&Run) -> f64) -> f64 {
        median(self.runs.iter().map(field).collect())
    }

    /// Median throughput.
    pub fn rate(&self) -> f64 {
        self.median(|r| r.per_second)
    }

    /// Median p50.
    pub fn p50(&self) -> f64 {
        self.median(|r| r.p50_ms)
    }

    /// Median p99.
    pub fn p99(&self) -> f64 {
        self.median(|r| r.p99_ms)
    }

    /// Median p99.9.
    pub fn p999(&self) -> f64 {
        self.median(|r| r.p999_ms)
    }

    /// Median server CPU per operation (µs), if measured.
    pub fn cpu_us(&self) -> f64 {
        self.median(|r| r.cpu_us.unwrap_or(f64::NAN))
    }

    /// Median load-generator CPU per operation (µs), if measured.
    pub fn client_cpu_us(&self) -> f64 {
        self.median(|r| r.client_cpu_us.unwrap_or(f64::NAN))
    }

    /// Errors over all runs.
    pub fn errors(&self) -> u64 {
        self.runs.iter().map(|r| r.errors).sum()
    }

    /// Half the min-max range of the throughput, relative to its median ("±x%").
    pub fn spread(&self) -> String {
        let rates: Vec<f64> = self.runs.iter().map(|r| r.per_second).collect();
        if rates.len() < 2 {
            return "n=1".into();
        }
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("±{:.0}%", (hi - lo) / 2.0 / self.rate() * 100.0)
    }
}

/// A rate for a table: `12.3k`, `850`, `1.2M`.
pub fn rate(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Milliseconds for a table.
pub fn ms(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A ratio for a table: `0.83×`.
pub fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}×")
    } else {
        "–".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians_pick_the_expected_values() {
        let micros: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&micros, 0.5), 0.501);
        assert_eq!(percentile(&micros, 0.99), 0.990);
        let mut r = Repeated::default();
        for v in [3.0, 1.0, 2.0] {
            r.push(Run {
                per_second: v,
                ..Run::default()
            });
        }
        assert_eq!(r.rate(), 2.0);
        assert_eq!(r.spread(), "±50%");
    }
}
