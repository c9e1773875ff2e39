//! AllocateIds, shared by the gRPC handler and the JSON endpoint: charge the caller's quota
//! (the replica's buckets, then the shared ones), then take the IDs from the replica's segments.

use crate::auth::{Principal, SharedQuotas};
use crate::domain::{AllocateRequest, IdRanges};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::segments::Segments;
use id_client::LeaseError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Hands out IDs from [`Segments`].
pub struct Allocator {
    segments: Arc<Segments>,
    metrics: Arc<Metrics>,
    /// Callers' quotas shared by the replicas.
    quotas: Arc<SharedQuotas>,
    /// How long a call may wait for a segment when the replica holds too few IDs.
    wait: Duration,
}

impl Allocator {
    /// An allocator over `segments` charging `quotas`; a call waits at most `wait` for a
    /// refill.
    pub fn new(
        segments: Arc<Segments>,
        metrics: Arc<Metrics>,
        quotas: Arc<SharedQuotas>,
        wait: Duration,
    ) -> Self {
        Self {
            segments,
            metrics,
            quotas,
            wait,
        }
    }

    /// Exactly `request.count` IDs for `principal`, who was admitted for the namespace with the
    /// `allocate` scope. Only a burst beyond what the replica holds waits for a segment; an
    /// exhausted namespace or an unreachable ledger with nothing in hand fails at once. IDs
    /// taken for a call that then fails are a gap.
    pub async fn allocate(
        &self,
        principal: &Principal,
        request: &AllocateRequest,
    ) -> Result<IdRanges, Error> {
        let started = Instant::now();
        let outcome = self.allocate_inner(principal, request).await;
        self.metrics
            .allocate(request.namespace.as_str(), &outcome, started.elapsed());
        outcome
    }

    async fn allocate_inner(
        &self,
        principal: &Principal,
        request: &AllocateRequest,
    ) -> Result<IdRanges, Error> {
        let charged = match principal.take_ids(request.count) {
            Ok(()) => self.quotas.charge(principal, 0, request.count).await,
            refused => refused,
        };
        charged.inspect_err(|error| {
            if matches!(error, Error::QuotaExceeded { .. }) {
                self.metrics.quota_exceeded(principal.name());
            }
        })?;
        let pool = self.segments.pool(&request.namespace).await?;
        let deadline = Instant::now() + self.wait;
        let mut ranges = IdRanges::default();
        let mut remaining = request.count;
        loop {
            if let Ok(taken) = pool.next_ranges(remaining) {
                for range in taken {
                    remaining -= range.end - range.start;
                    ranges.push(range);
                }
                if remaining == 0 {
                    return Ok(ranges);
                }
            }
            // Nothing (more) in hand: the refill is under way, or failing.
            match pool.last_lease_error() {
                Some(LeaseError::Exhausted(_)) => {
                    return Err(Error::Exhausted {
                        namespace: request.namespace.to_string(),
                    });
                }
                Some(error) => {
                    return Err(Error::Unavailable(format!(
                        "no segment for namespace {}: {error}",
                        request.namespace
                    )));
                }
                None => {}
            }
            // Woken by a segment, or by a failed lease, which the next turn reports at once.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero()
                || (!pool.wait_ready_or_failure(left).await && pool.last_lease_error().is_none())
            {
                return Err(Error::Unavailable(format!(
                    "no segment for namespace {} within {:?}",
                    request.namespace, self.wait
                )));
            }
        }
    }
}
