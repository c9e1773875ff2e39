//! Prometheus metrics of a node, rendered on the admin port (`/metrics`).
//!
//! Request metrics are recorded as they happen; the ID pool, cache and service counters are
//! sampled at scrape time by a collector, so the hot path pays for nothing it does not need.

use crate::service::LinkService;
mod latency;

use latency::LatencyHistogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

type Labels = Vec<(&'static str, &'static str)>;

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
}

impl Metrics {
    /// Registers every metric; `service` is sampled at scrape time.
    pub fn new(service: &Arc<LinkService>) -> Self {
        let mut registry = Registry::default();
        let redirects = Family::<Labels, Counter>::default();
        let redirect_seconds = Family::<Labels, LatencyHistogram>::default();
        let creates = Family::<Labels, Counter>::default();
        let create_seconds = Family::<Labels, LatencyHistogram>::default();
        let rate_limited = Family::<Labels, Counter>::default();
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
        registry.register_collector(Box::new(Sampled(Arc::downgrade(service))));
        let redirect_by_status = [301, 302, 307, 308, 404, 410, 429, 500, 503]
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
        let redirect_by_outcome = ["redirect", "not_found", "gone", "error"]
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

    /// Records a refusal by the limit named `limit` (`not_found` or `create`).
    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited
            .get_or_create(&vec![("limit", limit)])
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
        404 => "404",
        410 => "410",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

/// Values owned elsewhere (ID pool, cache, service counters), read at scrape time.
#[derive(Debug)]
struct Sampled(Weak<LinkService>);

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for Sampled {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(service) = self.0.upgrade() else {
            return Ok(());
        };
        let stats = service.ids().stats();
        let e = &mut encoder;
        gauge(
            e,
            "shortener_ids_in_hand",
            "IDs left in the current and spare blocks",
            stats.ids_in_hand as f64,
        )?;
        let runway = if stats.runway_seconds.is_finite() {
            stats.runway_seconds
        } else {
            f64::MAX
        };
        gauge(
            e,
            "shortener_runway_seconds",
            "Seconds of id-service outage the node can ride out at its current create rate",
            runway,
        )?;
        gauge(
            e,
            "shortener_id_rate_per_second",
            "IDs handed out per second (moving average)",
            stats.rate_per_second,
        )?;
        counter(e, "shortener_leases", "ID blocks leased", stats.leases)?;
        counter(
            e,
            "shortener_lease_errors",
            "Failed lease attempts",
            stats.lease_errors,
        )?;
        counter(
            e,
            "shortener_lease_rewinds",
            "Leases refused for starting below a block already seen (alarm)",
            stats.rewinds,
        )?;
        let counters = &service.counters;
        counter(
            e,
            "shortener_generated_code_conflicts",
            "Generated codes found already taken (must stay 0: alarm)",
            counters.generated_conflicts.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_cache_hits",
            "Redirect lookups answered from the cache",
            counters.cache_hits.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_cache_misses",
            "Redirect lookups that went to the store",
            counters.cache_misses.load(Ordering::Relaxed),
        )?;
        gauge(
            e,
            "shortener_cache_entries",
            "Entries held in the redirect cache (links and recently unknown codes)",
            service.cache().len() as f64,
        )?;
        counter(
            e,
            "shortener_clicks_flushed",
            "Click counts written to the store",
            service.clicks().flushed.load(Ordering::Relaxed),
        )?;
        let writer = service.writer_stats();
        counter(
            e,
            "shortener_write_batches",
            "Batched inserts committed or attempted (one commit each)",
            writer.batches.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "shortener_write_batch_rows",
            "Rows carried by batched inserts (divide by shortener_write_batches for the mean batch size)",
            writer.rows.load(Ordering::Relaxed),
        )?;
        if let crate::store::Store::Sqlite(sqlite) = service.store() {
            let d = sqlite.durability();
            counter(
                e,
                "shortener_sqlite_wal_syncs",
                "Fsyncs of the SQLite write-ahead log (each makes every write before it durable)",
                d.wal_syncs,
            )?;
            counter(
                e,
                "shortener_sqlite_writes",
                "Rounds of durable writes on the SQLite writer connection (each one or more transactions, one fsync; click-count chunks committed without one are not counted)",
                d.writes,
            )?;
        }
        let utilisation = stats.high_water as f64 / service.space().capacity() as f64;
        gauge(
            e,
            "shortener_code_space_utilisation",
            "Share of the L-character code space used by leased IDs (n / 62^L)",
            utilisation,
        )?;
        Ok(())
    }
}
