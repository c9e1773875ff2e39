//! Prometheus metrics, served as text on the admin port's `/metrics`. The registry and its
//! families are here; what each call records is in `record.rs`.
//!
//! Label values are bounded: namespaces exist only once created (auto-creation is off by
//! default), callers come from the tokens file, reasons and outcomes are fixed words.

use deadpool_postgres::Pool;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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
    leases: Family<NamespaceLabel, Counter>,
    ids_leased: Family<NamespaceLabel, Counter>,
    lease_errors: Family<ReasonLabel, Counter>,
    lease_duration: Histogram,
    last_id: Family<NamespaceLabel, Gauge>,
    segments: Family<NamespaceLabel, Counter>,
    allocations: Family<NamespaceLabel, Counter>,
    ids_allocated: Family<NamespaceLabel, Counter>,
    allocate_errors: Family<ReasonLabel, Counter>,
    allocate_duration: Histogram,
    segment_ids_in_hand: Family<NamespaceLabel, Gauge>,
    timeline_jumps: Family<NamespaceLabel, Counter>,
    ids_skipped: Family<SkipLabel, Counter>,
    lookups: Family<MethodLabel, Counter>,
    namespace_admin: Family<MethodLabel, Counter>,
    unauthenticated: Counter,
    caller_refusals: Family<CallerLabel, Counter>,
    callers: Gauge,
    tokens_reloads: Family<OutcomeLabel, Counter>,
    db_connections: Family<StateLabel, Gauge>,
    ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn add<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("idservice");
        let fast = || Histogram::new(exponential_buckets(0.000_02, 2.0, 16));
        Self {
            leases: add(
                &mut r,
                "leases",
                "Leases granted and committed",
                Family::default(),
            ),
            ids_leased: add(
                &mut r,
                "ids_leased",
                "IDs granted in committed leases",
                Family::default(),
            ),
            lease_errors: add(
                &mut r,
                "lease_errors",
                "LeaseBlock calls that failed, by reason",
                Family::default(),
            ),
            // 0.5 ms .. ~4 s: a lease is one fsync'd commit.
            lease_duration: add(
                &mut r,
                "lease_duration_seconds",
                "Time to grant a lease, from request to durable commit",
                Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            ),
            last_id: add(
                &mut r,
                "namespace_last_id",
                "One past the highest ID this replica has granted, per namespace",
                Family::default(),
            ),
            segments: add(
                &mut r,
                "segments",
                "Segments this replica leased for AllocateIds",
                Family::default(),
            ),
            allocations: add(
                &mut r,
                "allocations",
                "AllocateIds calls answered (gRPC and JSON)",
                Family::default(),
            ),
            ids_allocated: add(
                &mut r,
                "ids_allocated",
                "IDs handed out by AllocateIds",
                Family::default(),
            ),
            allocate_errors: add(
                &mut r,
                "allocate_errors",
                "AllocateIds calls that failed, by reason",
                Family::default(),
            ),
            // 20 us .. ~0.65 s: served from memory, unless a segment must be waited for.
            allocate_duration: add(
                &mut r,
                "allocate_duration_seconds",
                "Time to answer an AllocateIds call inside the service",
                fast(),
            ),
            segment_ids_in_hand: add(
                &mut r,
                "segment_ids_in_hand",
                "IDs left in this replica's segments, per namespace",
                Family::default(),
            ),
            timeline_jumps: add(
                &mut r,
                "timeline_jumps",
                "Grants that found the database on a new timeline or system and moved the cursor",
                Family::default(),
            ),
            ids_skipped: add(
                &mut r,
                "ids_skipped",
                "IDs the cursor skipped before a grant, by cause (timeline, reported)",
                Family::default(),
            ),
            lookups: add(
                &mut r,
                "lookups",
                "LookupId and ListLeases calls by outcome",
                Family::default(),
            ),
            namespace_admin: add(
                &mut r,
                "namespace_admin",
                "NamespaceAdmin calls by method and outcome",
                Family::default(),
            ),
            unauthenticated: add(
                &mut r,
                "unauthenticated",
                "Calls refused for a missing or unknown token",
                Counter::default(),
            ),
            caller_refusals: add(
                &mut r,
                "caller_refusals",
                "Calls of known callers refused, by reason (permission_denied, quota_exceeded)",
                Family::default(),
            ),
            callers: add(
                &mut r,
                "callers",
                "Callers in the tokens file in use",
                Gauge::default(),
            ),
            tokens_reloads: add(
                &mut r,
                "tokens_reloads",
                "Reloads of the tokens file by outcome (ok, error: the previous callers stay)",
                Family::default(),
            ),
            db_connections: add(
                &mut r,
                "db_connections",
                "PostgreSQL pool connections by state (open, idle, max)",
                Family::default(),
            ),
            ready: add(
                &mut r,
                "ready",
                "1 while the replica reports ready",
                Gauge::default(),
            ),
            registry: r,
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
            self.db_connections
                .get_or_create(&StateLabel { state })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
