//! How long and how often each measurement runs.

use std::time::Duration;

/// Durations, repetitions and sizes of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Repetitions of every measured point (the report shows the median and spread).
    pub reps: usize,
    /// Length of each redirect measurement.
    pub redirect: Duration,
    /// Length of each steady cache-hit measurement: at least the node's rollups flush interval
    /// (30 s by default), so that each window holds one flush, as a node's every 30 s does.
    pub steady: Duration,
    /// Rounds of the steady measurement (ceiling, node, node with analytics off).
    pub steady_rounds: usize,
    /// Length of each create measurement (after `warmup`).
    pub create: Duration,
    /// Unmeasured lead-in of each create measurement.
    pub warmup: Duration,
    /// Links behind the redirect measurements.
    pub links: u64,
    /// Cached-link counts at which node memory is measured (besides 0).
    pub memory_points: Vec<u64>,
    /// Fractions of the node's cache-hit peak offered (to it and the ceiling) by the open-loop
    /// runs.
    pub open_fractions: Vec<f64>,
    /// Items per `BatchCreateLinks` call.
    pub batch: usize,
    /// Block size (min = max) of the rollover runs.
    pub rollover_block: u64,
}

impl Settings {
    /// The full run (about 14 minutes on 2 cores) or the smoke run (under 2 minutes).
    pub fn new(quick: bool) -> Settings {
        if quick {
            Settings {
                reps: 1,
                redirect: Duration::from_secs(1),
                steady: Duration::from_secs(2),
                steady_rounds: 1,
                create: Duration::from_secs(1),
                warmup: Duration::from_millis(200),
                links: 20_000,
                memory_points: vec![10_000, 100_000],
                open_fractions: vec![0.5],
                batch: 100,
                rollover_block: 200,
            }
        } else {
            Settings {
                reps: 3,
                redirect: Duration::from_secs(5),
                steady: Duration::from_secs(30),
                steady_rounds: 2,
                create: Duration::from_secs(4),
                warmup: Duration::from_millis(500),
                links: 100_000,
                memory_points: vec![100_000, 1_000_000],
                open_fractions: vec![0.1, 0.25, 0.5, 0.75, 0.9],
                batch: 100,
                rollover_block: 200,
            }
        }
    }

    /// Concurrency levels of the create runs.
    pub fn clients(&self) -> [usize; 3] {
        [1, 16, 64]
    }
}
