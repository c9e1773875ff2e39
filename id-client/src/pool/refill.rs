//! The pool's refill task: leases a block whenever the spare slot is empty, sized to the
//! consumption rate, and retries with capped exponential backoff and jitter.

use super::{Inner, PoolConfig};
use crate::source::LeaseError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The block size to ask for: enough for `target_block_duration` at the measured rate.
pub(super) fn block_size(config: &PoolConfig, rate: f64) -> u64 {
    let wanted = if rate > 1e-9 {
        (rate * config.target_block_duration.as_secs_f64()).ceil() as u64
    } else {
        config.initial_block
    };
    wanted.clamp(config.min_block, config.max_block.max(config.min_block))
}

/// Keeps the spare slot filled: leases whenever it is empty, retries with capped exponential
/// backoff and jitter; every lease received goes through `State::accept`, which refuses blocks
/// that go backwards.
///
/// A request whose arguments the ledger refuses (`LeaseError::Invalid`: from a pool, its size
/// above the namespace's own block limit, which the refusal does not state) is asked again at
/// once at half its size, down to `min_block`, and no block after it is asked larger. Other
/// refusals (a reported high water the ledger will not jump to) leave the size alone.
pub(super) async fn refill(inner: Arc<Inner>) {
    let config = inner.config.clone();
    let mut backoff = config.backoff_initial;
    // The largest block the ledger is asked for: `max_block`, lowered by refused sizes.
    let mut cap = config.max_block.max(config.min_block);
    // Leases failed in a row, told when one works again.
    let mut failures: u32 = 0;
    // The wait a throttled lease was asked for, before the next attempt.
    let mut wait = Duration::ZERO;
    loop {
        let ask = {
            let mut state = inner.lock();
            let issued = state.issued;
            state.rate.observe(issued, Instant::now());
            if state.spare.is_some() {
                None
            } else {
                Some((
                    block_size(&config, state.rate.rate()).min(cap),
                    state.high_water,
                ))
            }
        };
        let Some((size, high_water)) = ask else {
            // Wake on demand, and now and then to keep the rate estimate fresh.
            tokio::select! {
                _ = inner.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        };
        match lease(&inner, size, high_water).await {
            Ok(lease) => {
                let accepted = inner.lock().accept(lease);
                match accepted {
                    Ok(()) => {
                        if failures > 0 {
                            tracing::info!(failures, "leasing works again");
                            failures = 0;
                        }
                        inner.filled.notify_waiters();
                        backoff = config.backoff_initial;
                        continue;
                    }
                    Err(refused) => {
                        inner.filled.notify_waiters();
                        tracing::error!(
                            lease_id = refused.lease_id,
                            start = refused.block.start,
                            end = refused.block.end,
                            "lease starts below a block already received; refusing it (ledger rewound?)"
                        )
                    }
                }
            }
            Err(LeaseError::Invalid(reason)) if size > config.min_block => {
                cap = (size / 2).max(config.min_block);
                tracing::warn!(
                    %reason,
                    refused = size,
                    asking = cap,
                    "the ledger refused a block of this size; asking for smaller blocks"
                );
                continue;
            }
            Err(error) => {
                inner.lock().failed(&error);
                failures += 1;
                // Waiters that give up on a failure learn of it now, not at their deadline.
                inner.filled.notify_waiters();
                if let LeaseError::Throttled { retry_after, .. } = &error {
                    // Many callers starting at once meet their quota; it passes by itself,
                    // after the wait the ledger asked for.
                    wait = (*retry_after).max(backoff);
                    tracing::info!(%error, retry_in_ms = wait.as_millis() as u64, "lease deferred");
                } else {
                    tracing::warn!(%error, retry_in = ?backoff, "lease failed");
                }
            }
        }
        let jitter = rand_fraction() * 0.5 + 0.75;
        tokio::time::sleep(wait.max(backoff.mul_f64(jitter))).await;
        wait = Duration::ZERO;
        backoff = (backoff * 2).min(config.backoff_max);
    }
}

/// One lease of `size` IDs from the source, reporting `high_water`, within the lease timeout;
/// traced as the follow-up of the request that emptied the spare slot, if one was traced.
async fn lease(
    inner: &Inner,
    size: u64,
    high_water: u64,
) -> Result<crate::source::Lease, LeaseError> {
    let trigger = inner
        .trigger
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    let lease = tracing::Instrument::instrument(
        inner.source.lease_reporting(size, high_water),
        otel::follow_up_span("refill ID pool", trigger.as_ref()),
    );
    match tokio::time::timeout(inner.config.lease_timeout, lease).await {
        Ok(result) => result,
        Err(_) => Err(LeaseError::Unavailable(format!(
            "no lease within {:?}",
            inner.config.lease_timeout
        ))),
    }
}

/// A cheap pseudo-random fraction in [0, 1) for retry jitter (not for anything secret).
fn rand_fraction() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    (RandomState::new().hash_one(std::time::SystemTime::now()) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_size_follows_the_rate_within_bounds() {
        let config = PoolConfig {
            min_block: 100,
            max_block: 10_000,
            initial_block: 500,
            target_block_duration: Duration::from_secs(60),
            ..PoolConfig::default()
        };
        assert_eq!(block_size(&config, 0.0), 500);
        assert_eq!(block_size(&config, 0.5), 100);
        assert_eq!(block_size(&config, 10.0), 600);
        assert_eq!(block_size(&config, 1e6), 10_000);
    }
}
