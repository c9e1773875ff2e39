//! Prometheus metrics of a node, rendered on the admin port (`/metrics`).
//!
//! Request metrics are recorded as they happen (this module). Every other series belongs to
//! the part that counts it: the part names its series and reports their values at scrape
//! time ([`Sample`]), and the wiring hands the parts to [`Metrics::new`] as [`Sources`], so the
//! hot path pays for nothing it does not need and this module imports no other part of the
//! crate. Latency histograms are lock-free (`latency`).

mod latency;
mod memory;
mod sample;
mod sampled;

use latency::LatencyHistogram;
pub use memory::{BytesInUse, Footprint, MemoryGauges};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
pub use sample::{Sample, Samples};
pub use sampled::Sources;
use std::time::Duration;

type Labels = Vec<(&'static str, &'static str)>;

/// The limits a refusal is counted under (`shortener_rate_limited_total{limit}`).
const RATE_LIMITS: [&str; 5] = ["not_found", "create", "read", "password", "password_checks"];

/// The node's metrics.
pub struct Metrics {
    registry: Registry,
    /// Handles of the redirect series, made once so the hot path neither allocates a label set
    /// nor takes the family's lock.
    redirect_by_status: Vec<(u16, Counter)>,
    redirect_by_outcome: Vec<(&'static str, LatencyHistogram)>,
    /// The same for creates, by outcome.
    create_by_outcome: Vec<(&'static str, Counter, LatencyHistogram)>,
    redirects: Family<Labels, Counter>,
    redirect_seconds: Family<Labels, LatencyHistogram>,
    creates: Family<Labels, Counter>,
    create_seconds: Family<Labels, LatencyHistogram>,
    rate_limited: Family<Labels, Counter>,
    /// By tenant: the label values come from the configured keys, never from a request.
    api_requests: Family<Vec<(&'static str, String)>, Counter>,
    api_unauthenticated: Family<Labels, Counter>,
    compat_requests: Family<Labels, Counter>,
}

impl Metrics {
    /// Registers every metric; `sources` are sampled at scrape time.
    pub fn new(sources: Sources) -> Self {
        let mut registry = Registry::default();
        let redirects = Family::<Labels, Counter>::default();
        let redirect_seconds = Family::<Labels, LatencyHistogram>::default();
        let creates = Family::<Labels, Counter>::default();
        let create_seconds = Family::<Labels, LatencyHistogram>::default();
        let rate_limited = Family::<Labels, Counter>::default();
        // Every limit's series from the start, so that a dashboard or an alert finds them at 0.
        for limit in RATE_LIMITS {
            let _ = rate_limited.get_or_create(&vec![("limit", limit)]);
        }
        let api_requests = Family::<Vec<(&'static str, String)>, Counter>::default();
        let api_unauthenticated = Family::<Labels, Counter>::default();
        let compat_requests = Family::<Labels, Counter>::default();
        registry.register(
            "shortener_redirects",
            "Redirect requests by HTTP status",
            redirects.clone(),
        );
        registry.register(
            "shortener_redirect_duration_seconds",
            "Redirect latency by outcome",
            redirect_seconds.clone(),
        );
        registry.register(
            "shortener_creates",
            "Create requests by outcome",
            creates.clone(),
        );
        registry.register(
            "shortener_create_duration_seconds",
            "Create latency by outcome",
            create_seconds.clone(),
        );
        registry.register(
            "shortener_rate_limited",
            "Requests refused by a rate limit, by limit",
            rate_limited.clone(),
        );
        registry.register(
            "shortener_api_requests",
            "Authenticated API requests by tenant, operation and admission outcome (admitted, forbidden, rate_limited, invalid)",
            api_requests.clone(),
        );
        registry.register(
            "shortener_api_unauthenticated",
            "API requests refused for a missing, unknown or expired key, by operation",
            api_unauthenticated.clone(),
        );
        registry.register(
            "shortener_compat_requests",
            "Requests to another shortener's API the node speaks (SHORTENER_COMPAT), by dialect, action and outcome",
            compat_requests.clone(),
        );
        registry.register_collector(Box::new(sources));
        let redirect_by_status = [301, 302, 307, 308, 403, 404, 410, 429, 451, 500, 503]
            .into_iter()
            .map(|s| {
                (
                    s,
                    redirects
                        .get_or_create(&vec![("status", status_label(s))])
                        .clone(),
                )
            })
            .collect();
        let redirect_by_outcome = ["redirect", "not_found", "gone", "blocked", "error"]
            .into_iter()
            .map(|o| {
                (
                    o,
                    redirect_seconds
                        .get_or_create(&vec![("outcome", o)])
                        .clone(),
                )
            })
            .collect();
        let create_by_outcome = [
            "created",
            "existing",
            "invalid",
            "conflict",
            "unavailable",
            "rate_limited",
            "unauthorized",
            "error",
        ]
        .into_iter()
        .map(|o| {
            let labels = vec![("outcome", o)];
            (
                o,
                creates.get_or_create(&labels).clone(),
                create_seconds.get_or_create(&labels).clone(),
            )
        })
        .collect();
        Self {
            registry,
            redirect_by_status,
            redirect_by_outcome,
            create_by_outcome,
            redirects,
            redirect_seconds,
            creates,
            create_seconds,
            rate_limited,
            api_requests,
            api_unauthenticated,
            compat_requests,
        }
    }

    /// Records one redirect request.
    pub fn redirect(&self, status: u16, outcome: &'static str, elapsed: Duration) {
        match self.redirect_by_status.iter().find(|(s, _)| *s == status) {
            Some((_, counter)) => {
                counter.inc();
            }
            None => {
                self.redirects
                    .get_or_create(&vec![("status", status_label(status))])
                    .inc();
            }
        }
        match self.redirect_by_outcome.iter().find(|(o, _)| *o == outcome) {
            Some((_, histogram)) => histogram.observe(elapsed),
            None => self
                .redirect_seconds
                .get_or_create(&vec![("outcome", outcome)])
                .observe(elapsed),
        }
    }

    /// Records one create (or one batch item).
    pub fn create(&self, outcome: &'static str, elapsed: Duration) {
        match self.create_by_outcome.iter().find(|(o, ..)| *o == outcome) {
            Some((_, counter, histogram)) => {
                counter.inc();
                histogram.observe(elapsed);
            }
            None => {
                let labels = vec![("outcome", outcome)];
                self.creates.get_or_create(&labels).inc();
                self.create_seconds.get_or_create(&labels).observe(elapsed);
            }
        }
    }

    /// Records a refusal by the limit named `limit` (one of [`RATE_LIMITS`]).
    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited
            .get_or_create(&vec![("limit", limit)])
            .inc();
    }

    /// Records one request to another shortener's API: its `dialect`, `action` and `outcome`
    /// each one of a fixed set, never taken from the request.
    pub fn compat_request(
        &self,
        dialect: &'static str,
        action: &'static str,
        outcome: &'static str,
    ) {
        self.compat_requests
            .get_or_create(&vec![
                ("dialect", dialect),
                ("action", action),
                ("outcome", outcome),
            ])
            .inc();
    }

    /// Records the admission of an authenticated API request.
    pub fn api_request(&self, tenant: &str, operation: &'static str, outcome: &'static str) {
        self.api_requests
            .get_or_create(&vec![
                ("tenant", tenant.to_string()),
                ("operation", operation.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    /// Records an API request refused for its credentials.
    pub fn api_unauthenticated(&self, operation: &'static str) {
        self.api_unauthenticated
            .get_or_create(&vec![("operation", operation)])
            .inc();
    }

    /// Renders every metric in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            tracing::error!("encode metrics");
        }
        out
    }
}

fn status_label(status: u16) -> &'static str {
    match status {
        301 => "301",
        302 => "302",
        307 => "307",
        308 => "308",
        403 => "403",
        404 => "404",
        410 => "410",
        429 => "429",
        451 => "451",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limits_refusals_are_a_series_from_the_start() {
        let metrics = Metrics::new(Sources::new(Vec::new()));
        metrics.rate_limited("read");
        let text = metrics.render();
        for limit in RATE_LIMITS {
            let value = if limit == "read" { 1 } else { 0 };
            let series = format!("shortener_rate_limited_total{{limit=\"{limit}\"}} {value}");
            assert!(text.lines().any(|l| l == series), "{series}: {text}");
        }
    }
}
