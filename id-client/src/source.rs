//! Where blocks come from.

use codespace::Block;
use std::future::Future;
use std::pin::Pin;

/// A block granted by a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The ledger's identifier of the lease.
    pub lease_id: u64,
    /// The IDs granted.
    pub block: Block,
}

/// Why a lease could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The ledger could not be reached or did not answer in time; retrying later may succeed.
    /// A lease whose reply was lost this way is simply a gap in the ID space.
    #[error("lease source unavailable: {0}")]
    Unavailable(String),
    /// The ledger holds this caller to its quota of leases a second (gRPC `RESOURCE_EXHAUSTED`
    /// with a retry delay); retrying after `retry_after` succeeds.
    #[error("lease source throttling this caller: {detail}")]
    Throttled {
        /// The ledger's words.
        detail: String,
        /// How long the ledger asked the caller to wait.
        retry_after: std::time::Duration,
    },
    /// The namespace has no IDs left; retrying will not help.
    #[error("namespace exhausted: {0}")]
    Exhausted(String),
    /// The caller was refused: no token, an unknown one, or one not allowed the namespace.
    /// Retrying will not help until the caller's token or the ledger's callers change.
    #[error("lease refused for this caller: {0}")]
    Unauthorized(String),
    /// The namespace does not exist on the ledger. Retrying helps once it is created.
    #[error("namespace not found: {0}")]
    UnknownNamespace(String),
    /// The request was refused as malformed; retrying will not help without a configuration
    /// change.
    #[error("lease request refused: {0}")]
    Refused(String),
    /// The request's arguments were refused (gRPC `INVALID_ARGUMENT`): from a pool, whose
    /// namespace and holder are fixed, its block size, above the namespace's own limit. A pool
    /// asks again for less; otherwise it is a [`LeaseError::Refused`].
    #[error("lease request refused: {0}")]
    Invalid(String),
}

impl LeaseError {
    /// The ledger's own words, without the kind.
    pub fn detail(&self) -> &str {
        match self {
            LeaseError::Unavailable(detail)
            | LeaseError::Throttled { detail, .. }
            | LeaseError::Exhausted(detail)
            | LeaseError::Unauthorized(detail)
            | LeaseError::UnknownNamespace(detail)
            | LeaseError::Refused(detail)
            | LeaseError::Invalid(detail) => detail,
        }
    }

    /// A short stable label of the kind, for metrics and machine-readable answers:
    /// `unreachable`, `throttled`, `exhausted`, `unauthorized`, `unknown_namespace` or
    /// `refused`.
    pub fn cause(&self) -> &'static str {
        match self {
            LeaseError::Unavailable(_) => "unreachable",
            LeaseError::Throttled { .. } => "throttled",
            LeaseError::Exhausted(_) => "exhausted",
            LeaseError::Unauthorized(_) => "unauthorized",
            LeaseError::UnknownNamespace(_) => "unknown_namespace",
            LeaseError::Refused(_) | LeaseError::Invalid(_) => "refused",
        }
    }
}

/// The boxed future a [`LeaseSource`] returns.
pub type LeaseFuture<'a> = Pin<Box<dyn Future<Output = Result<Lease, LeaseError>> + Send + 'a>>;

/// A ledger that grants blocks of IDs.
///
/// Implementations must only return a lease once it is durably recorded, and must never grant
/// an ID twice (across calls, processes, restarts and crashes).
pub trait LeaseSource: Send + Sync + 'static {
    /// Leases a block of about `size` IDs (the source may adjust the size within its bounds).
    fn lease(&self, size: u64) -> LeaseFuture<'_>;

    /// Like [`LeaseSource::lease`], also telling the source `high_water`: one past the highest
    /// ID this pool has received so far (0 before the first block). A ledger that may have gone
    /// back in time (a database failover or restore) uses it to grant above every ID still in
    /// use. [`crate::IdPool`] always calls this one; the default ignores `high_water`.
    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        let _ = high_water;
        self.lease(size)
    }
}
