//! Prometheus metrics, served as text on the admin port's `/metrics`. The registry is here,
//! its families in `families.rs` (in groups, each registering its own), what each call records
//! in `record.rs`.
//!
//! Label values are bounded: namespaces exist only once created (auto-creation is off by
//! default), callers come from the tokens file, reasons and outcomes are fixed words.

use deadpool_postgres::Pool;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

mod families;
mod record;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabel {
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallerLabel {
    caller: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkipLabel {
    namespace: String,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// Every metric the service exports (names are listed in `docs/id-service.md`).
pub struct Metrics {
    registry: Registry,
    leases: families::Leases,
    allocations: families::Allocations,
    cursor: families::Cursor,
    calls: families::Calls,
    callers: families::Callers,
    replica: families::Replica,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric at zero, each error reason among them.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("idservice");
        let metrics = Self {
            leases: families::Leases::register(&mut registry),
            allocations: families::Allocations::register(&mut registry),
            cursor: families::Cursor::register(&mut registry),
            calls: families::Calls::register(&mut registry),
            callers: families::Callers::register(&mut registry),
            replica: families::Replica::register(&mut registry),
            registry: {
                registry.register_collector(Box::new(TraceExport));
                registry
            },
        };
        for reason in crate::error::Error::REASONS {
            let label = ReasonLabel { reason };
            drop(metrics.leases.errors.get_or_create(&label));
            drop(metrics.allocations.errors.get_or_create(&label));
        }
        metrics
    }

    /// Shows `namespace`'s counters at zero before their first event, so that an alert on
    /// their `increase()` sees the first one (a series born at 1 shows no increase): the
    /// timeline jump after a failover is nearly always a replica's first.
    pub fn expect_namespace(&self, namespace: &str) {
        let label = NamespaceLabel {
            namespace: namespace.to_string(),
        };
        drop(self.leases.leases.get_or_create(&label));
        drop(self.leases.ids_leased.get_or_create(&label));
        drop(self.cursor.timeline_jumps.get_or_create(&label));
        for cause in ["timeline", "reported"] {
            drop(self.cursor.ids_skipped.get_or_create(&SkipLabel {
                namespace: namespace.to_string(),
                cause,
            }));
        }
    }

    /// The text exposition of every metric, with the pool gauges refreshed first.
    pub fn encode(&self, pool: &Pool) -> String {
        let status = pool.status();
        for (state, value) in [
            ("open", status.size),
            ("idle", status.available),
            ("max", status.max_size),
        ] {
            self.replica
                .db_connections
                .get_or_create(&StateLabel { state })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// The trace export's counters (the `otel` crate's), read at scrape time, zero while tracing
/// is off; and the connections the pool's eviction discarded (`pgtls`'s).
#[derive(Debug)]
struct TraceExport;

impl prometheus_client::collector::Collector for TraceExport {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::MetricType;
        use prometheus_client::metrics::counter::ConstCounter;
        let stats = otel::stats();
        let read = |f: fn(&otel::ExportStats) -> u64| stats.as_deref().map_or(0, f);
        ConstCounter::new(pgtls::evict::evicted()).encode(encoder.encode_descriptor(
            "db_connections_evicted",
            "Pooled PostgreSQL connections discarded instead of reused: made before a statement \
             was refused as read-only (25006), its session shut down (57P01-57P03) or its \
             connection failed (class 08).",
            None,
            MetricType::Counter,
        )?)?;
        let exported = ConstCounter::new(read(otel::ExportStats::exported));
        exported.encode(encoder.encode_descriptor(
            "trace_spans_exported",
            "Spans the OTLP collector accepted.",
            None,
            MetricType::Counter,
        )?)?;
        let mut dropped = encoder.encode_descriptor(
            "trace_spans_dropped",
            "Spans dropped instead of exported: the export queue was full (reason=queue_full) \
             or their batch failed or timed out (reason=export_failed).",
            None,
            MetricType::Counter,
        )?;
        for (reason, value) in [
            ("queue_full", read(otel::ExportStats::dropped_queue_full)),
            (
                "export_failed",
                read(otel::ExportStats::dropped_export_failed),
            ),
        ] {
            ConstCounter::new(value).encode(dropped.encode_family(&[("reason", reason)])?)?;
        }
        Ok(())
    }
}
