//! Callers' quotas across replicas: each replica's own buckets ([`super::quota`]) are checked
//! first, then the caller's shared buckets in the ledger, which every replica on the database
//! charges, so a caller spread over `n` replicas gets its quota once, not `n` times.
//!
//! Asking the database on every call would put a round trip on AllocateIds, which otherwise
//! never waits for it. So a replica takes a slice from the shared bucket (a tenth of a second of
//! the rate, or what the call needs if more) and spends it locally; what it has not spent within
//! a second is dropped, never handed back. A caller thus never gets more than its quota in all,
//! and may get a little less while replicas hold unspent slices.
//!
//! While the database cannot be asked, each replica's own buckets stand alone (a warning is
//! logged): quotas then hold per replica, as before, rather than stopping every caller. An ask
//! waits at most [`ASK_DEADLINE`] (a database that has gone silent never answers), and after one
//! fails the caller's calls pass on the replica's buckets alone for [`SLICE_LIFETIME`] before
//! the database is asked again, so an outage costs a caller one short wait a second, not one
//! per call.

use super::Principal;
use crate::error::Error;
use crate::ledger::{Ledger, QuotaCharge, QuotaKind};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How long a replica may keep a slice it took from a shared bucket.
const SLICE_LIFETIME: Duration = Duration::from_secs(1);

/// The longest a call waits for the database to charge a shared bucket.
const ASK_DEADLINE: Duration = Duration::from_millis(250);

/// How often a failing database is reported.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The unspent part of a replica's last slice of one caller's bucket.
#[derive(Default)]
struct Slice {
    left: u64,
    until: Option<Instant>,
    /// The (rate, burst) it was taken under: a change of settings drops it.
    settings: (u32, u32),
    /// Until when the database is not asked, after an ask failed: the replica's own buckets
    /// stand alone meanwhile.
    alone_until: Option<Instant>,
}

/// One caller's slice of one kind; a refill holds its lock across the database call.
type SliceCell = Arc<tokio::sync::Mutex<Slice>>;

/// The shared buckets of every caller, as one replica sees them.
pub struct SharedQuotas {
    ledger: Ledger,
    slices: Mutex<HashMap<(String, QuotaKind), SliceCell>>,
    last_warning: Mutex<Option<Instant>>,
}

impl SharedQuotas {
    /// Shared buckets kept in `ledger`.
    pub fn new(ledger: Ledger) -> Self {
        Self {
            ledger,
            slices: Mutex::new(HashMap::new()),
            last_warning: Mutex::new(None),
        }
    }

    /// Charges `leases` leases and `ids` IDs to the caller's shared buckets, those it has; call
    /// it after the replica's own buckets passed. A principal without quotas passes.
    pub async fn charge(&self, principal: &Principal, leases: u64, ids: u64) -> Result<(), Error> {
        let Some((caller, spec)) = principal.quota() else {
            return Ok(());
        };
        if let (Some(rate), true) = (spec.leases_per_second, leases > 0) {
            self.take(caller, QuotaKind::Leases, leases, rate, rate)
                .await?;
        }
        if let (Some(rate), Some(burst), true) =
            (spec.ids_per_second, spec.effective_ids_burst(), ids > 0)
        {
            self.take(caller, QuotaKind::Ids, ids, rate, burst).await?;
        }
        Ok(())
    }

    async fn take(
        &self,
        caller: &str,
        kind: QuotaKind,
        count: u64,
        rate: NonZeroU32,
        burst: NonZeroU32,
    ) -> Result<(), Error> {
        let cell = {
            let mut slices = self.slices.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slices.entry((caller.to_string(), kind)).or_default())
        };
        // One refill at a time per caller and kind: the calls behind it spend what it brings.
        let mut slice = cell.lock().await;
        let (rate, burst) = (rate.get(), burst.get());
        let now = Instant::now();
        if slice.alone_until.is_some_and(|until| now < until) {
            return Ok(());
        }
        if slice.settings != (rate, burst) || slice.until.is_none_or(|until| now >= until) {
            *slice = Slice {
                left: 0,
                until: None,
                settings: (rate, burst),
                alone_until: None,
            };
        }
        if slice.left >= count {
            slice.left -= count;
            return Ok(());
        }
        let need = count - slice.left;
        // A tenth of a second's worth, or what this call needs, within the bucket's size.
        let ahead = u64::from(rate).div_ceil(10).min(u64::from(burst));
        let mut asks = vec![need.max(ahead)];
        if need < asks[0] {
            asks.push(need);
        }
        let mut refused = None;
        for ask in asks {
            let charge = QuotaCharge {
                caller,
                kind,
                count: ask,
                rate,
                burst,
            };
            let asked = tokio::time::timeout(ASK_DEADLINE, self.ledger.take_quota(&charge))
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Unavailable(format!(
                        "the database did not charge the shared quota within {ASK_DEADLINE:?}"
                    )))
                });
            match asked {
                Ok(None) => {
                    slice.left = slice.left + ask - count;
                    slice.until = Some(Instant::now() + SLICE_LIFETIME);
                    return Ok(());
                }
                Ok(Some(wait)) => refused = Some(wait),
                Err(error) => {
                    self.warn(caller, &error);
                    slice.alone_until = Some(Instant::now() + SLICE_LIFETIME);
                    return Ok(());
                }
            }
        }
        let retry_after = refused.unwrap_or(Duration::from_secs(1));
        let what = match kind {
            QuotaKind::Ids => "IDs",
            QuotaKind::Leases => "leases",
        };
        Err(Error::QuotaExceeded {
            message: format!(
                "caller {caller} is above its quota of {what} per second (counted across \
                 replicas); retry after {} ms",
                retry_after.as_millis().max(1)
            ),
            retry_after,
        })
    }

    fn warn(&self, caller: &str, error: &Error) {
        let now = Instant::now();
        let mut last = self
            .last_warning
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
            *last = Some(now);
            tracing::warn!(
                caller,
                %error,
                "shared quotas unavailable; each replica enforces quotas alone meanwhile"
            );
        }
    }
}
