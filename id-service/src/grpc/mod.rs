//! The gRPC services: `idalloc.v1.IdAllocator` ([`IdService`]) and `idalloc.v1.NamespaceAdmin`
//! ([`AdminService`]). Every handler starts with [`Gate::admit`], so the token, the request,
//! the scope and the namespace are checked before anything else happens.

mod admin;
mod id_allocator;

use crate::allocator::Allocator;
use crate::auth::{Gate, SharedQuotas};
use crate::domain::BlockBounds;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// What both services share.
pub struct Shared {
    /// The lease ledger.
    pub ledger: Ledger,
    /// The one admission check.
    pub gate: Arc<Gate>,
    /// AllocateIds from this replica's segments.
    pub allocator: Arc<Allocator>,
    /// The server's block bounds.
    pub bounds: BlockBounds,
    /// The most IDs one AllocateIds call may ask for.
    pub max_count: u64,
    /// The bound of namespaces created without one.
    pub namespace_max: u64,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Callers' quotas shared by the replicas on the database.
    pub quotas: Arc<SharedQuotas>,
    /// Cancelled when the drain timeout passed: calls still running end with UNAVAILABLE.
    pub cut_off: CancellationToken,
}

impl Shared {
    /// Runs a handler unless the drain timeout cuts it off. Dropping a grant half-way is safe:
    /// its transaction either commits (the IDs become a gap) or rolls back.
    async fn guard<T>(&self, work: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
        tokio::select! {
            // The work first: a call served from memory completes on its first poll, and the
            // cut-off is then never polled (registering its waker takes a lock).
            biased;
            result = work => result,
            _ = self.cut_off.cancelled() => Err(Error::ShuttingDown.into()),
        }
    }
}

/// `idalloc.v1.IdAllocator`.
#[derive(Clone)]
pub struct IdService(pub Arc<Shared>);

/// `idalloc.v1.NamespaceAdmin`.
#[derive(Clone)]
pub struct AdminService(pub Arc<Shared>);

/// The raw `authorization` metadata value, if any.
fn authorization(metadata: &MetadataMap) -> Option<&[u8]> {
    metadata.get("authorization").map(|value| value.as_bytes())
}

/// Logs a failed call at a level that matches who has to act on it.
fn log_failure(method: &'static str, caller: &str, error: &Error) {
    match error {
        Error::Unavailable(_) => tracing::warn!(method, caller, %error, "ledger unavailable"),
        Error::Internal(_) => tracing::error!(method, caller, %error, "call failed"),
        Error::FailedPrecondition(_) => tracing::warn!(method, caller, %error, "call refused"),
        _ => tracing::debug!(method, caller, %error, "call refused"),
    }
}
