//! Memory held by the node's bounded structures, as one pair of gauge families:
//! `shortener_memory_bytes{structure}` (bytes in use) and
//! `shortener_memory_budget_bytes{structure}` (the bound it is configured to keep to).
//!
//! A structure registers itself once, at wiring ([`MemoryGauges::register`]); its figures are
//! read at scrape time, so registering costs the structure's hot path nothing.

use super::{Sample, Samples};
use std::sync::{Arc, PoisonError, RwLock};

/// A structure whose memory is bounded and accounted.
pub trait Footprint: Send + Sync {
    /// Bytes it holds now.
    fn bytes(&self) -> u64;
    /// Bytes it is configured to hold at most.
    fn budget(&self) -> u64;
}

/// The structures reported in the memory gauges, in the order they registered.
#[derive(Default)]
pub struct MemoryGauges {
    structures: RwLock<Vec<(&'static str, Arc<dyn Footprint>)>>,
}

impl MemoryGauges {
    /// Reports `footprint` under `structure` (a fixed name: `redirect_cache`, ...).
    pub fn register(&self, structure: &'static str, footprint: Arc<dyn Footprint>) {
        let mut structures = self
            .structures
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        structures.push((structure, footprint));
    }
}

impl std::fmt::Debug for MemoryGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let structures = self
            .structures
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let names: Vec<&str> = structures.iter().map(|(name, _)| *name).collect();
        f.debug_struct("MemoryGauges")
            .field("structures", &names)
            .finish()
    }
}

impl Sample for MemoryGauges {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        let structures = self
            .structures
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        out.gauges(
            "shortener_memory_bytes",
            "Bytes held by a bounded structure of the node",
            structures
                .iter()
                .map(|(name, f)| ([("structure", *name)], f.bytes() as f64)),
        )?;
        out.gauges(
            "shortener_memory_budget_bytes",
            "Bytes a bounded structure of the node is configured to hold at most",
            structures
                .iter()
                .map(|(name, f)| ([("structure", *name)], f.budget() as f64)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Metrics, Sources};

    struct Fixed(u64, u64);

    impl Footprint for Fixed {
        fn bytes(&self) -> u64 {
            self.0
        }
        fn budget(&self) -> u64 {
            self.1
        }
    }

    #[test]
    fn each_structure_reports_its_bytes_and_its_budget() {
        let gauges = Arc::new(MemoryGauges::default());
        gauges.register("redirect_cache", Arc::new(Fixed(1234, 4096)));
        gauges.register("negative_cache", Arc::new(Fixed(0, 1024)));
        let text = Metrics::new(Sources::new(vec![gauges])).render();
        for line in [
            "# TYPE shortener_memory_bytes gauge",
            "shortener_memory_bytes{structure=\"redirect_cache\"} 1234",
            "shortener_memory_bytes{structure=\"negative_cache\"} 0",
            "shortener_memory_budget_bytes{structure=\"redirect_cache\"} 4096",
            "shortener_memory_budget_bytes{structure=\"negative_cache\"} 1024",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert_eq!(text.matches("# TYPE shortener_memory_bytes ").count(), 1);
    }
}
