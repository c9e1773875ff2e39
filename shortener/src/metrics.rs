//! Prometheus metrics of a node, rendered on the admin port.

use crate::service::LinkService;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;

/// The node's metrics. Pool and service counters are sampled at scrape time.
#[derive(Default)]
pub struct Metrics {}

impl Metrics {
    /// Renders every metric in the OpenMetrics text format.
    pub async fn render(&self, service: &LinkService) -> String {
        let mut registry = Registry::default();
        let stats = service.ids().stats();
        registry.register(
            "shortener_ids_in_hand",
            "IDs left in the current and spare blocks",
            ConstGauge::new(stats.ids_in_hand as i64),
        );
        registry.register(
            "shortener_runway_seconds",
            "Seconds of id-service outage the node can ride out at its current create rate",
            ConstGauge::new(if stats.runway_seconds.is_finite() {
                stats.runway_seconds
            } else {
                1e9
            }),
        );
        registry.register(
            "shortener_leases",
            "ID blocks leased since start",
            ConstCounter::new(stats.leases),
        );
        registry.register(
            "shortener_lease_errors",
            "Failed lease attempts since start",
            ConstCounter::new(stats.lease_errors),
        );
        registry.register(
            "shortener_lease_rewinds",
            "Leases refused for starting below a block already seen (alarm)",
            ConstCounter::new(stats.rewinds),
        );
        registry.register(
            "shortener_generated_code_conflicts",
            "Generated codes found already taken (must stay 0: alarm)",
            ConstCounter::new(service.counters.generated_conflicts.load(Ordering::Relaxed)),
        );
        let mut out = String::new();
        if encode(&mut out, &registry).is_err() {
            tracing::error!("encode metrics");
        }
        out
    }
}
