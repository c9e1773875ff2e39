//! Prometheus metrics, served as text on the admin port's `/metrics`.

use crate::domain::Lease;
use crate::error::Error;
use deadpool_postgres::Pool;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabel {
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabel {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    state: &'static str,
}

/// Every metric the service exports (names are listed in `docs/id-service.md`).
pub struct Metrics {
    registry: Registry,
    leases: Family<NamespaceLabel, Counter>,
    ids_leased: Family<NamespaceLabel, Counter>,
    lease_errors: Family<ReasonLabel, Counter>,
    lease_duration: Histogram,
    last_id: Family<NamespaceLabel, Gauge>,
    lookups: Family<LookupLabel, Counter>,
    unauthenticated: Counter,
    db_connections: Family<PoolLabel, Gauge>,
    ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("idservice");
        let leases = Family::default();
        registry.register("leases", "Leases granted and committed", leases.clone());
        let ids_leased = Family::default();
        registry.register(
            "ids_leased",
            "IDs granted in committed leases",
            ids_leased.clone(),
        );
        let lease_errors = Family::default();
        registry.register(
            "lease_errors",
            "LeaseBlock calls that failed, by reason",
            lease_errors.clone(),
        );
        // 0.5 ms .. ~4 s: a lease is one fsync'd commit.
        let lease_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "lease_duration_seconds",
            "Time to grant a lease, from request to durable commit",
            lease_duration.clone(),
        );
        let last_id = Family::default();
        registry.register(
            "namespace_last_id",
            "One past the highest ID this replica has granted, per namespace",
            last_id.clone(),
        );
        let lookups = Family::default();
        registry.register(
            "lookups",
            "LookupId and ListLeases calls by outcome",
            lookups.clone(),
        );
        let unauthenticated = Counter::default();
        registry.register(
            "unauthenticated",
            "Calls refused for a missing or wrong token",
            unauthenticated.clone(),
        );
        let db_connections = Family::default();
        registry.register(
            "db_connections",
            "PostgreSQL pool connections by state (open, idle, max)",
            db_connections.clone(),
        );
        let ready = Gauge::default();
        registry.register("ready", "1 while the replica reports ready", ready.clone());
        Self {
            registry,
            leases,
            ids_leased,
            lease_errors,
            lease_duration,
            last_id,
            lookups,
            unauthenticated,
            db_connections,
            ready,
        }
    }

    /// Records the outcome of one LeaseBlock call.
    pub fn lease(&self, outcome: &Result<Lease, Error>, elapsed: Duration) {
        match outcome {
            Ok(lease) => {
                let label = NamespaceLabel {
                    namespace: lease.namespace.clone(),
                };
                self.leases.get_or_create(&label).inc();
                self.ids_leased
                    .get_or_create(&label)
                    .inc_by(lease.block.len());
                let end = i64::try_from(lease.block.end).unwrap_or(i64::MAX);
                self.last_id
                    .get_or_create(&label)
                    .inner()
                    .fetch_max(end, Ordering::Relaxed);
                self.lease_duration.observe(elapsed.as_secs_f64());
            }
            Err(error) => {
                self.lease_errors
                    .get_or_create(&ReasonLabel {
                        reason: error.reason(),
                    })
                    .inc();
            }
        }
    }

    /// Records the outcome of one look-up call.
    pub fn lookup<T>(&self, method: &'static str, outcome: &Result<T, Error>) {
        let outcome = match outcome {
            Ok(_) => "ok",
            Err(e) => e.reason(),
        };
        self.lookups
            .get_or_create(&LookupLabel { method, outcome })
            .inc();
    }

    /// Counts a call refused by the token check.
    pub fn unauthenticated(&self) {
        self.unauthenticated.inc();
    }

    /// Sets the readiness gauge.
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// The text exposition of every metric, with the pool gauges refreshed first.
    pub fn encode(&self, pool: &Pool) -> String {
        let status = pool.status();
        for (state, value) in [
            ("open", status.size),
            ("idle", status.available),
            ("max", status.max_size),
        ] {
            self.db_connections
                .get_or_create(&PoolLabel { state })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
