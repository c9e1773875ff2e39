//! The metric families, in groups by the part of the service that records them. Each group
//! registers its own families; the order of registration is the order of `/metrics`.

use super::StateLabel;
use super::{CallerLabel, MethodLabel, NamespaceLabel, OutcomeLabel, ReasonLabel, SkipLabel};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

/// Registers `metric` as `name` and returns a handle to it.
fn add<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// LeaseBlock calls.
pub(super) struct Leases {
    pub(super) leases: Family<NamespaceLabel, Counter>,
    pub(super) ids_leased: Family<NamespaceLabel, Counter>,
    pub(super) errors: Family<ReasonLabel, Counter>,
    pub(super) duration: Histogram,
    pub(super) last_id: Family<NamespaceLabel, Gauge>,
}

impl Leases {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            leases: add(
                r,
                "leases",
                "Leases granted and committed",
                Family::default(),
            ),
            ids_leased: add(
                r,
                "ids_leased",
                "IDs granted in committed leases",
                Family::default(),
            ),
            errors: add(
                r,
                "lease_errors",
                "LeaseBlock calls that failed, by reason",
                Family::default(),
            ),
            // 0.5 ms .. ~4 s: a lease is one fsync'd commit.
            duration: add(
                r,
                "lease_duration_seconds",
                "Time to grant a lease, from request to durable commit",
                Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            ),
            last_id: add(
                r,
                "namespace_last_id",
                "One past the highest ID this replica has granted, per namespace",
                Family::default(),
            ),
        }
    }
}

/// AllocateIds calls and the segments they are served from.
pub(super) struct Allocations {
    pub(super) segments: Family<NamespaceLabel, Counter>,
    pub(super) allocations: Family<NamespaceLabel, Counter>,
    pub(super) ids_allocated: Family<NamespaceLabel, Counter>,
    pub(super) errors: Family<ReasonLabel, Counter>,
    pub(super) duration: Histogram,
    pub(super) ids_in_hand: Family<NamespaceLabel, Gauge>,
}

impl Allocations {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            segments: add(
                r,
                "segments",
                "Segments this replica leased for AllocateIds",
                Family::default(),
            ),
            allocations: add(
                r,
                "allocations",
                "AllocateIds calls answered (gRPC and JSON)",
                Family::default(),
            ),
            ids_allocated: add(
                r,
                "ids_allocated",
                "IDs handed out by AllocateIds",
                Family::default(),
            ),
            errors: add(
                r,
                "allocate_errors",
                "AllocateIds calls that failed, by reason",
                Family::default(),
            ),
            // 20 us .. ~0.65 s: served from memory, unless a segment must be waited for.
            duration: add(
                r,
                "allocate_duration_seconds",
                "Time to answer an AllocateIds call inside the service",
                Histogram::new(exponential_buckets(0.000_02, 2.0, 16)),
            ),
            ids_in_hand: add(
                r,
                "segment_ids_in_hand",
                "IDs left in this replica's segments, per namespace",
                Family::default(),
            ),
        }
    }
}

/// The ledger's cursor moving forward before a grant.
pub(super) struct Cursor {
    pub(super) timeline_jumps: Family<NamespaceLabel, Counter>,
    pub(super) ids_skipped: Family<SkipLabel, Counter>,
}

impl Cursor {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            timeline_jumps: add(
                r,
                "timeline_jumps",
                "Grants that found the database on a new timeline or system and moved the cursor",
                Family::default(),
            ),
            ids_skipped: add(
                r,
                "ids_skipped",
                "IDs the cursor skipped before a grant, by cause (timeline, reported)",
                Family::default(),
            ),
        }
    }
}

/// Look-ups and namespace management.
pub(super) struct Calls {
    pub(super) lookups: Family<MethodLabel, Counter>,
    pub(super) namespace_admin: Family<MethodLabel, Counter>,
}

impl Calls {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            lookups: add(
                r,
                "lookups",
                "LookupId and ListLeases calls by outcome",
                Family::default(),
            ),
            namespace_admin: add(
                r,
                "namespace_admin",
                "NamespaceAdmin calls by method and outcome",
                Family::default(),
            ),
        }
    }
}

/// Callers: refusals and the tokens file.
pub(super) struct Callers {
    pub(super) unauthenticated: Counter,
    pub(super) refusals: Family<CallerLabel, Counter>,
    pub(super) callers: Gauge,
    pub(super) reloads: Family<OutcomeLabel, Counter>,
}

impl Callers {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            unauthenticated: add(
                r,
                "unauthenticated",
                "Calls refused for a missing or unknown token",
                Counter::default(),
            ),
            refusals: add(
                r,
                "caller_refusals",
                "Calls of known callers refused, by reason (permission_denied, quota_exceeded)",
                Family::default(),
            ),
            callers: add(
                r,
                "callers",
                "Callers in the tokens file in use",
                Gauge::default(),
            ),
            reloads: add(
                r,
                "tokens_reloads",
                "Reloads of the tokens file by outcome (ok, error: the previous callers stay)",
                Family::default(),
            ),
        }
    }
}

/// The replica itself: its connection pool and its readiness.
pub(super) struct Replica {
    pub(super) db_connections: Family<StateLabel, Gauge>,
    pub(super) ready: Gauge,
}

impl Replica {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            db_connections: add(
                r,
                "db_connections",
                "PostgreSQL pool connections by state (open, idle, max)",
                Family::default(),
            ),
            ready: add(
                r,
                "ready",
                "1 while the replica reports ready",
                Gauge::default(),
            ),
        }
    }
}
