//! What the delivery worker has done, for the metrics: attempts by outcome, endpoints it
//! disabled, what it purged, the outbox backlog it last measured, and the events dropped at
//! the per-tenant bound; reported as a part of `/metrics`.

use crate::metrics::{Sample, Samples};
use crate::store::{Backlog, OutboxBound};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// How one delivery attempt went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered,
    /// Another status.
    Refused,
    /// No answer within the timeout.
    Timeout,
    /// No connection.
    Unreachable,
    /// Anything else that went wrong sending it.
    Failed,
}

impl Outcome {
    /// Every outcome, in the order the metrics list them.
    pub const ALL: [Outcome; 5] = [
        Outcome::Delivered,
        Outcome::Refused,
        Outcome::Timeout,
        Outcome::Unreachable,
        Outcome::Failed,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Refused => "refused",
            Outcome::Timeout => "timeout",
            Outcome::Unreachable => "unreachable",
            Outcome::Failed => "failed",
        }
    }
}

/// The worker's counts.
#[derive(Debug)]
pub struct DeliveryCounters {
    attempts: [AtomicU64; Outcome::ALL.len()],
    disabled: AtomicU64,
    given_up: AtomicU64,
    purged_deliveries: AtomicU64,
    purged_events: AtomicU64,
    /// -1 until the first measurement.
    pending: AtomicI64,
    oldest_due_seconds: AtomicU64,
    /// -1 until the first measurement.
    full_tenants: AtomicI64,
    /// Events dropped per tenant, as this node's measurements took them from the store.
    dropped: Mutex<BTreeMap<String, u64>>,
}

impl Default for DeliveryCounters {
    fn default() -> Self {
        Self {
            attempts: Default::default(),
            disabled: AtomicU64::new(0),
            given_up: AtomicU64::new(0),
            purged_deliveries: AtomicU64::new(0),
            purged_events: AtomicU64::new(0),
            pending: AtomicI64::new(-1),
            oldest_due_seconds: AtomicU64::new(0),
            full_tenants: AtomicI64::new(-1),
            dropped: Mutex::default(),
        }
    }
}

impl DeliveryCounters {
    pub(super) fn attempted(&self, outcome: Outcome) {
        self.attempts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn disabled(&self) {
        self.disabled.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn gave_up(&self) {
        self.given_up.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn purged(&self, deliveries: u64, events: u64) {
        self.purged_deliveries
            .fetch_add(deliveries, Ordering::Relaxed);
        self.purged_events.fetch_add(events, Ordering::Relaxed);
    }

    pub(super) fn set_backlog(&self, backlog: Backlog) {
        self.pending.store(
            i64::try_from(backlog.pending).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
        self.oldest_due_seconds
            .store(backlog.oldest_due_seconds, Ordering::Relaxed);
    }

    pub(super) fn set_bound(&self, bound: OutboxBound) {
        self.full_tenants.store(
            i64::try_from(bound.full.len()).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
        let mut dropped = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        for (tenant, count) in bound.dropped {
            *dropped.entry(tenant).or_default() += count;
        }
    }

    /// Tenants whose outbox was at its bound at the last measurement; `None` before the first.
    pub fn full_tenants(&self) -> Option<u64> {
        let full = self.full_tenants.load(Ordering::Relaxed);
        (full >= 0).then_some(full as u64)
    }

    /// Events dropped at the per-tenant bound, by tenant, that this node counted (each drop is
    /// counted by one node: the sum over the nodes is the total).
    pub fn dropped(&self) -> Vec<(String, u64)> {
        let dropped = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        dropped.iter().map(|(t, n)| (t.clone(), *n)).collect()
    }

    /// Attempts that ended in `outcome` (a recorded attempt: one whose result was stored).
    pub fn attempts(&self, outcome: Outcome) -> u64 {
        self.attempts[outcome as usize].load(Ordering::Relaxed)
    }

    /// Deliveries this node ended `failed` (their last attempt failed).
    pub fn deliveries_given_up(&self) -> u64 {
        self.given_up.load(Ordering::Relaxed)
    }

    /// Endpoints disabled for failing `max_failures` deliveries in a row.
    pub fn endpoints_disabled(&self) -> u64 {
        self.disabled.load(Ordering::Relaxed)
    }

    /// Delivered deliveries and events removed by the purge.
    pub fn purged_total(&self) -> (u64, u64) {
        (
            self.purged_deliveries.load(Ordering::Relaxed),
            self.purged_events.load(Ordering::Relaxed),
        )
    }

    /// The last measured backlog; `None` before the first measurement.
    pub fn backlog(&self) -> Option<Backlog> {
        let pending = self.pending.load(Ordering::Relaxed);
        (pending >= 0).then(|| Backlog {
            pending: pending as u64,
            oldest_due_seconds: self.oldest_due_seconds.load(Ordering::Relaxed),
        })
    }
}

impl Sample for DeliveryCounters {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counters(
            "shortener_webhook_deliveries",
            "Webhook delivery attempts by outcome (delivered: a 2xx answer; refused: another status; timeout: no answer in time; unreachable: no connection; failed: anything else)",
            Outcome::ALL.map(|outcome| ([("outcome", outcome.label())], self.attempts(outcome))),
        )?;
        out.counter(
            "shortener_webhook_endpoints_disabled",
            "Webhook endpoints this node disabled for failing too many deliveries in a row",
            self.endpoints_disabled(),
        )?;
        out.counter(
            "shortener_webhook_deliveries_given_up",
            "Webhook deliveries this node ended failed: their last attempt (SHORTENER_WEBHOOK_MAX_ATTEMPTS) failed, and they are not tried again",
            self.deliveries_given_up(),
        )?;
        let (deliveries, events) = self.purged_total();
        out.counter(
            "shortener_webhook_purged_deliveries",
            "Delivered and failed webhook deliveries removed from the log after its retention",
            deliveries,
        )?;
        out.counter(
            "shortener_webhook_purged_events",
            "Webhook events removed once no delivery referred to them",
            events,
        )?;
        let dropped = self.dropped();
        out.counters(
            "shortener_webhook_events_dropped",
            "Webhook events not recorded because their tenant's outbox was at its bound (SHORTENER_WEBHOOK_MAX_PENDING), by tenant, as this node counted them",
            dropped
                .iter()
                .map(|(tenant, count)| ([("tenant", tenant.as_str())], *count)),
        )?;
        if let Some(full) = self.full_tenants() {
            out.gauge(
                "shortener_webhook_outbox_full_tenants",
                "Tenants whose webhook outbox was at its bound at the last measurement (their events are dropped)",
                full as f64,
            )?;
        }
        if let Some(backlog) = self.backlog() {
            out.gauge(
                "shortener_webhook_outbox_pending",
                "Webhook deliveries waiting for enabled endpoints (due or waiting for a retry), measured every ten delivery polls",
                backlog.pending as f64,
            )?;
            out.gauge(
                "shortener_webhook_outbox_oldest_due_seconds",
                "How long the oldest due webhook delivery has waited past its time (0: none due)",
                backlog.oldest_due_seconds as f64,
            )?;
        }
        Ok(())
    }
}

/// The webhooks' part of `/metrics`: what the delivery worker counted.
impl Sample for super::Webhooks {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        self.counters().sample(out)
    }
}
