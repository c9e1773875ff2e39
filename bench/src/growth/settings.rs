//! The growth group's settings: table sizes, shared_buffers values, layouts, durations, and
//! the counts (`200k`, `10M`) they are written in.

use super::Layout;
use anyhow::bail;
use std::time::Duration;

/// Sizes, settings and durations of a run.
#[derive(Debug, Clone)]
pub struct GrowthSettings {
    /// Links table sizes to measure at, ascending.
    pub sizes: Vec<u64>,
    /// `shared_buffers` values, the first the default.
    pub shared_buffers: Vec<String>,
    /// Layouts to measure.
    pub layouts: Vec<Layout>,
    /// Longest a layout's loading may take in all.
    pub load_budget: Duration,
    /// Concurrent create clients.
    pub clients: usize,
    /// Items per `BatchCreateLinks` call.
    pub batch: usize,
    /// Unmeasured lead-in of each create run.
    pub warmup: Duration,
    /// Measured length of each create run.
    pub create: Duration,
    /// Create runs of each transport per point (alternated).
    pub reps: usize,
    /// Codes requested per cache-miss measurement.
    pub misses: usize,
    /// Connections of the cache-miss measurement.
    pub miss_connections: usize,
    /// Requests per second of the fixed-rate cache-miss run: below what the smallest machine
    /// answers at 50M rows (about 8k/s on 2 cores), so a miss does not wait behind others.
    pub miss_rate: f64,
    /// Links per `shortener preload` run.
    pub chunk: u64,
}

impl GrowthSettings {
    /// The full run (0 / 10M / 50M rows) or the smoke run (0 / 200k / 1M), with `sizes`,
    /// `shared_buffers` and `layouts` overriding the defaults when given.
    pub fn new(
        quick: bool,
        sizes: Option<Vec<u64>>,
        shared_buffers: Vec<String>,
        layouts: Vec<Layout>,
        load_minutes: u64,
    ) -> anyhow::Result<GrowthSettings> {
        let mut sizes = sizes.unwrap_or_else(|| {
            if quick {
                vec![0, 200_000, 1_000_000]
            } else {
                vec![0, 10_000_000, 50_000_000]
            }
        });
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.is_empty() || shared_buffers.is_empty() || layouts.is_empty() {
            bail!("growth needs at least one size, one shared_buffers value and one layout");
        }
        for sb in &shared_buffers {
            let digits = sb.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let unit = &sb[digits.len()..];
            if digits.is_empty()
                || !digits.bytes().all(|b| b.is_ascii_digit())
                || !["", "kB", "MB", "GB"].contains(&unit)
            {
                bail!("shared_buffers {sb:?}: give a number with kB, MB or GB");
            }
        }
        let mut layouts_seen = layouts;
        layouts_seen.dedup();
        let (warmup, create, reps, misses) = if quick {
            (Duration::from_millis(200), Duration::from_secs(1), 1, 1000)
        } else {
            (Duration::from_secs(1), Duration::from_secs(4), 2, 5000)
        };
        Ok(GrowthSettings {
            sizes,
            shared_buffers,
            layouts: layouts_seen,
            load_budget: Duration::from_secs(load_minutes * 60),
            clients: 64,
            batch: 100,
            warmup,
            create,
            reps,
            misses,
            miss_connections: 16,
            miss_rate: 1000.0,
            chunk: 1_000_000,
        })
    }

    /// Links preloaded before the first point: the codes of the four cache-miss measurements
    /// (cold, after prewarming, at a fixed rate, straight to PostgreSQL) at the smallest size
    /// (each code is requested once only).
    pub fn probe(&self) -> u64 {
        (4 * self.misses * self.shared_buffers.len()) as u64
    }
}

/// Parses a count like `50000000`, `200k` or `10M`.
pub fn parse_count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a count (like 0, 200k or 10M)"))
}

/// A count for tables: `0`, `200k`, `10M`, `1.5M`.
pub fn count_label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        let m = n as f64 / 1e6;
        if n.is_multiple_of(1_000_000) {
            format!("{m:.0}M")
        } else {
            format!("{m:.1}M")
        }
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_and_print_with_their_suffixes() {
        assert_eq!(parse_count("0"), Ok(0));
        assert_eq!(parse_count("200k"), Ok(200_000));
        assert_eq!(parse_count("10M"), Ok(10_000_000));
        assert_eq!(parse_count(" 50m "), Ok(50_000_000));
        assert!(parse_count("ten").is_err());
        assert!(parse_count("99999999999999999999M").is_err());
        for (n, label) in [
            (0, "0"),
            (2000, "2k"),
            (200_000, "200k"),
            (1_000_000, "1M"),
            (1_500_000, "1.5M"),
            (50_000_000, "50M"),
            (1234, "1234"),
        ] {
            assert_eq!(count_label(n), label);
        }
    }

    #[test]
    fn shared_buffers_must_be_a_size() {
        let make = |sb: &str| {
            GrowthSettings::new(true, None, vec![sb.into()], vec![Layout::Code], 1).map(|s| s.sizes)
        };
        assert_eq!(make("128MB").unwrap(), vec![0, 200_000, 1_000_000]);
        assert!(make("2GB").is_ok());
        assert!(make("2GB'; DROP").is_err());
        assert!(make("lots").is_err());
    }
}
