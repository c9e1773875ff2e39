//! What each structure that grows with traffic holds, in bytes, beside its configured bound:
//! `shortener_memory_bytes{structure}` and `shortener_memory_budget_bytes{structure}`.
//!
//! A part registers a structure once, when the node is wired: its name, a closure that tells
//! the bytes it holds now (read at scrape time, so the hot path pays nothing), and its budget.
//! Most figures are estimates (entries times what one entry costs); each part's `///` says how
//! its own is made. The sum of the budgets plus the idle process is what a node's resident
//! memory is sized against (README, "Sizing").

use super::{Sample, Samples};
use std::sync::{Mutex, PoisonError};

/// Reads the bytes a structure holds now.
pub type BytesInUse = Box<dyn Fn() -> u64 + Send + Sync>;

/// A structure that tells what it holds and its bound itself (the redirect caches).
pub trait Footprint: Send + Sync {
    /// Bytes it holds now.
    fn bytes(&self) -> u64;
    /// Bytes it is configured to hold at most.
    fn budget(&self) -> u64;
}

struct Structure {
    name: &'static str,
    bytes: BytesInUse,
    budget: u64,
}

/// The structures of a node whose memory is bounded and accounted.
#[derive(Default)]
pub struct MemoryGauges {
    structures: Mutex<Vec<Structure>>,
}

impl MemoryGauges {
    /// Accounts the structure `name`: `bytes` tells what it holds now, `budget` is its
    /// configured bound in bytes. A name registered again replaces the earlier one.
    pub fn register(
        &self,
        name: &'static str,
        budget: u64,
        bytes: impl Fn() -> u64 + Send + Sync + 'static,
    ) {
        let mut structures = self.lock();
        structures.retain(|s| s.name != name);
        structures.push(Structure {
            name,
            bytes: Box::new(bytes),
            budget,
        });
    }

    /// Accounts the structure `name` that tells its own bytes and budget.
    pub fn register_footprint(&self, name: &'static str, footprint: std::sync::Arc<dyn Footprint>) {
        let budget = footprint.budget();
        self.register(name, budget, move || footprint.bytes());
    }

    /// Each structure's name, bytes in use now and budget, in the order registered.
    pub fn read(&self) -> Vec<(&'static str, u64, u64)> {
        self.lock()
            .iter()
            .map(|s| (s.name, (s.bytes)(), s.budget))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Structure>> {
        self.structures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Sample for MemoryGauges {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let read = self.read();
        out.gauges(
            "shortener_memory_bytes",
            "Bytes a structure that grows with traffic holds now (an estimate where the README says so)",
            read.iter()
                .map(|&(name, bytes, _)| ([("structure", name)], bytes as f64)),
        )?;
        out.gauges(
            "shortener_memory_budget_bytes",
            "The configured bound of a structure that grows with traffic, in bytes",
            read.iter()
                .map(|&(name, _, budget)| ([("structure", name)], budget as f64)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Metrics, Sources};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn each_structure_reports_its_bytes_at_scrape_time_beside_its_budget() {
        let gauges = Arc::new(MemoryGauges::default());
        let held = Arc::new(AtomicU64::new(100));
        let reads = Arc::clone(&held);
        gauges.register("spent_clients", 4096, move || reads.load(Ordering::Relaxed));
        gauges.register("domain_cache", 10, || 3);
        let metrics = Metrics::new(Sources::new(vec![Arc::clone(&gauges) as _]));
        let text = metrics.render();
        assert!(
            text.contains("# TYPE shortener_memory_bytes gauge"),
            "{text}"
        );
        assert!(
            text.contains("shortener_memory_bytes{structure=\"spent_clients\"} 100.0"),
            "{text}"
        );
        assert!(
            text.contains("shortener_memory_budget_bytes{structure=\"spent_clients\"} 4096.0"),
            "{text}"
        );
        held.store(2048, Ordering::Relaxed);
        let text = metrics.render();
        assert!(
            text.contains("shortener_memory_bytes{structure=\"spent_clients\"} 2048.0"),
            "the gauge moves with the structure:\n{text}"
        );
        // Registered again: replaced, not listed twice.
        gauges.register("domain_cache", 20, || 5);
        assert_eq!(
            gauges.read(),
            [("spent_clients", 2048, 4096), ("domain_cache", 5, 20)]
        );
    }
}
