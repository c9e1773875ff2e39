//! Who may do what: every API request on either transport is admitted here, in one place.
//!
//! [`Admission::admit`] authenticates the request's `Authorization` value against the
//! [`ApiKeys`] and charges the caller's rate limits for the [`Operation`]; a refusal is counted
//! in the metrics and returned as the domain error both transports map to their status.

mod keys;

pub use keys::{ApiKeys, MIN_KEY_LENGTH, generate_api_key};

use crate::domain::{Caller, Error};
use crate::limits::Limits;
use crate::metrics::Metrics;
use std::sync::Arc;

/// What a request asks to do, as far as admission cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Create one link.
    Create,
    /// Create `items` links in one batch (gRPC).
    CreateBatch {
        /// How many items the batch holds.
        items: usize,
    },
    /// Read one link.
    Read,
    /// Delete one link.
    Delete,
}

/// The admission of API requests: keys, rate limits, and the batch bound.
pub struct Admission {
    keys: ApiKeys,
    limits: Arc<Limits>,
    metrics: Arc<Metrics>,
    batch_limit: usize,
}

impl Admission {
    /// Admission against `keys` and `limits`, counting refusals in `metrics`; batches hold 1 to
    /// `batch_limit` items.
    pub fn new(
        keys: ApiKeys,
        limits: Arc<Limits>,
        metrics: Arc<Metrics>,
        batch_limit: usize,
    ) -> Self {
        Self {
            keys,
            limits,
            metrics,
            batch_limit,
        }
    }

    /// The caller of a request whose `Authorization` value is `authorization`, if it may run
    /// `operation` now: [`Error::Unauthenticated`] without a known key, [`Error::Invalid`]
    /// `invalid_batch` for a batch outside its bound, [`Error::RateLimited`] past the
    /// caller's create rate.
    pub fn admit(
        &self,
        authorization: Option<&str>,
        operation: Operation,
    ) -> Result<Caller, Error> {
        let caller = self.keys.authenticate(authorization)?;
        let charged = match operation {
            Operation::Create => self.limits.create(&caller.id),
            Operation::CreateBatch { items } => {
                if items == 0 || items > self.batch_limit {
                    return Err(Error::invalid(
                        "invalid_batch",
                        format!("a batch holds 1 to {} items, not {items}", self.batch_limit),
                    ));
                }
                self.limits.create_n(&caller.id, items as u32)
            }
            Operation::Read | Operation::Delete => Ok(()),
        };
        if let Err(retry_after) = charged {
            self.metrics.rate_limited("create");
            return Err(Error::RateLimited { retry_after });
        }
        Ok(caller)
    }
}
