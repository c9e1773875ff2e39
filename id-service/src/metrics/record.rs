//! What each call records.

use super::{
    CallerLabel, MethodLabel, Metrics, NamespaceLabel, OutcomeLabel, ReasonLabel, SkipLabel,
};
use crate::domain::{IdRanges, Lease};
use crate::error::Error;
use crate::ledger::Skip;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Metrics {
    fn granted(&self, lease: &Lease, skip: Option<&Skip>) {
        let label = NamespaceLabel {
            namespace: lease.namespace.clone(),
        };
        let end = i64::try_from(lease.block.end).unwrap_or(i64::MAX);
        self.leases
            .last_id
            .get_or_create(&label)
            .inner()
            .fetch_max(end, Ordering::Relaxed);
        if let Some(skip) = skip {
            if skip.new_timeline {
                self.cursor.timeline_jumps.get_or_create(&label).inc();
            }
            self.cursor
                .ids_skipped
                .get_or_create(&SkipLabel {
                    namespace: lease.namespace.clone(),
                    cause: skip.cause(),
                })
                .inc_by(skip.ids());
        }
    }

    /// Records the outcome of one LeaseBlock call.
    pub fn lease(&self, outcome: &Result<(Lease, Option<Skip>), Error>, elapsed: Duration) {
        match outcome {
            Ok((lease, skip)) => {
                let label = NamespaceLabel {
                    namespace: lease.namespace.clone(),
                };
                self.leases.leases.get_or_create(&label).inc();
                self.leases
                    .ids_leased
                    .get_or_create(&label)
                    .inc_by(lease.block.len());
                self.granted(lease, skip.as_ref());
                self.leases.duration.observe(elapsed.as_secs_f64());
            }
            Err(error) => {
                self.leases
                    .errors
                    .get_or_create(&ReasonLabel {
                        reason: error.reason(),
                    })
                    .inc();
            }
        }
    }

    /// Records a segment this replica leased for AllocateIds.
    pub fn segment(&self, lease: &Lease, skip: Option<&Skip>) {
        self.allocations
            .segments
            .get_or_create(&NamespaceLabel {
                namespace: lease.namespace.clone(),
            })
            .inc();
        self.granted(lease, skip);
    }

    /// Records the outcome of one AllocateIds call for `namespace`.
    pub fn allocate(&self, namespace: &str, outcome: &Result<IdRanges, Error>, elapsed: Duration) {
        match outcome {
            Ok(ranges) => {
                let label = NamespaceLabel {
                    namespace: namespace.to_string(),
                };
                self.allocations.allocations.get_or_create(&label).inc();
                self.allocations
                    .ids_allocated
                    .get_or_create(&label)
                    .inc_by(ranges.count());
                self.allocations.duration.observe(elapsed.as_secs_f64());
            }
            Err(error) => {
                self.allocations
                    .errors
                    .get_or_create(&ReasonLabel {
                        reason: error.reason(),
                    })
                    .inc();
            }
        }
    }

    /// Sets the IDs left in this replica's segments of `namespace`.
    pub fn set_segment_ids_in_hand(&self, namespace: &str, ids: u64) {
        self.allocations
            .ids_in_hand
            .get_or_create(&NamespaceLabel {
                namespace: namespace.to_string(),
            })
            .set(i64::try_from(ids).unwrap_or(i64::MAX));
    }

    /// Records the outcome of one look-up call.
    pub fn lookup<T>(&self, method: &'static str, outcome: &Result<T, Error>) {
        self.calls
            .lookups
            .get_or_create(&MethodLabel {
                method,
                outcome: outcome_of(outcome),
            })
            .inc();
    }

    /// Records the outcome of one NamespaceAdmin call.
    pub fn namespace_admin<T>(&self, method: &'static str, outcome: &Result<T, Error>) {
        self.calls
            .namespace_admin
            .get_or_create(&MethodLabel {
                method,
                outcome: outcome_of(outcome),
            })
            .inc();
    }

    /// Counts a call refused by the token check.
    pub fn unauthenticated(&self) {
        self.callers.unauthenticated.inc();
    }

    /// Counts a call of `caller` refused for its scope or namespace.
    pub fn permission_denied(&self, caller: &str) {
        self.refused(caller, "permission_denied");
    }

    /// Counts a call of `caller` refused by its quota.
    pub fn quota_exceeded(&self, caller: &str) {
        self.refused(caller, "quota_exceeded");
    }

    fn refused(&self, caller: &str, reason: &'static str) {
        self.callers
            .refusals
            .get_or_create(&CallerLabel {
                caller: caller.to_string(),
                reason,
            })
            .inc();
    }

    /// Sets the number of callers in use.
    pub fn set_callers(&self, callers: usize) {
        self.callers
            .callers
            .set(i64::try_from(callers).unwrap_or(i64::MAX));
    }

    /// Counts a reload of the tokens file (`ok` or `error`).
    pub fn tokens_reload(&self, outcome: &'static str) {
        self.callers
            .reloads
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Sets the readiness gauge.
    pub fn set_ready(&self, ready: bool) {
        self.replica.ready.set(i64::from(ready));
    }
}

fn outcome_of<T>(outcome: &Result<T, Error>) -> &'static str {
    match outcome {
        Ok(_) => "ok",
        Err(e) => e.reason(),
    }
}
