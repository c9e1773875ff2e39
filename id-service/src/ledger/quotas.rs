//! Callers' quotas in the ledger, shared by every replica: one GCRA cell per caller and kind,
//! charged by `id_take_quota()` (see `migrations/0003_caller_quotas.sql`).

use super::{Ledger, bigint, classify};
use crate::error::Error;
use std::time::Duration;
use tokio_postgres::types::Type;

/// Which bucket of a caller a charge takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// IDs: a lease counts its size, AllocateIds its count.
    Ids,
    /// Leases: one per LeaseBlock.
    Leases,
}

impl QuotaKind {
    /// The name the ledger keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaKind::Ids => "ids",
            QuotaKind::Leases => "leases",
        }
    }
}

/// The bucket a charge takes from: refilled at `rate` a second, holding at most `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaCharge<'a> {
    /// The caller's name.
    pub caller: &'a str,
    /// The bucket.
    pub kind: QuotaKind,
    /// Tokens to take (at least 1).
    pub count: u64,
    /// Tokens added per second.
    pub rate: u32,
    /// The bucket's size.
    pub burst: u32,
}

impl Ledger {
    /// Takes `charge.count` tokens from the caller's shared bucket, as one autocommit
    /// statement: `Ok(None)` when taken, `Ok(Some(wait))` when refused (nothing taken; `wait`
    /// until they could be), `Err` when the database could not be asked.
    pub async fn take_quota(&self, charge: &QuotaCharge<'_>) -> Result<Option<Duration>, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_procedure_span("postgresql", "id_take_quota");
        tracing::Instrument::instrument(self.take_quota_untraced(charge), span).await
    }

    async fn take_quota_untraced(
        &self,
        charge: &QuotaCharge<'_>,
    ) -> Result<Option<Duration>, Error> {
        let client = self.client().await?;
        let row = super::sql::query_opt(
            &client,
            self.settings.pool_mode,
            "SELECT id_take_quota($1, $2, $3, $4, $5)",
            &[
                (&charge.caller, Type::TEXT),
                (&charge.kind.as_str(), Type::TEXT),
                (&bigint(charge.count), Type::INT8),
                (&i64::from(charge.rate), Type::INT8),
                (&i64::from(charge.burst), Type::INT8),
            ],
        )
        .await
        .map_err(|e| classify(e, None))?
        .ok_or_else(|| Error::Internal("id_take_quota returned no row".into()))?;
        let wait: i64 = row.get(0);
        Ok(u64::try_from(wait)
            .ok()
            .filter(|w| *w > 0)
            .map(Duration::from_micros))
    }
}
