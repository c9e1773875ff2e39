//! The parts of the node read at scrape time: each reports its own series ([`Sample`]), in
//! the order the list gives them; this module knows none of them.

use super::{Sample, Samples};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::sync::Arc;

/// The parts whose values `/metrics` reads at scrape time, in the order their series appear.
#[derive(Default)]
pub struct Sources(Vec<Arc<dyn Sample>>);

impl Sources {
    /// Sources reading `parts`, in this order.
    pub fn new(parts: Vec<Arc<dyn Sample>>) -> Self {
        Self(parts)
    }
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("parts", &self.0.len())
            .finish()
    }
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut out = Samples::new(&mut encoder);
        for part in &self.0 {
            part.sample(&mut out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    struct Listener(&'static str, u64);

    impl Sample for Listener {
        fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
            out.counter(&format!("part_{}", self.0), "A part's count", self.1)?;
            out.gauges(
                &format!("part_{}_open", self.0),
                "A part's open things",
                [([("side", "left")], 1.5), ([("side", "right")], 2.0)],
            )
        }
    }

    #[test]
    fn every_part_reports_its_series_in_the_order_given() {
        let metrics = Metrics::new(Sources::new(vec![
            Arc::new(Listener("b", 7)),
            Arc::new(Listener("a", 3)),
        ]));
        let text = metrics.render();
        let b = text.find("part_b_total 7").expect(&text);
        let a = text.find("part_a_total 3").expect(&text);
        assert!(b < a, "parts out of order:\n{text}");
        assert!(text.contains("# TYPE part_a_open gauge"), "{text}");
        assert!(text.contains("part_a_open{side=\"right\"} 2.0"), "{text}");
    }
}
