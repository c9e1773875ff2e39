//! The gRPC services: `idalloc.v1.IdAllocator` ([`IdService`]) and `idalloc.v1.NamespaceAdmin`
//! ([`NamespaceService`]). Every handler starts with [`Gate::admit`], so the token, the request,
//! the scope and the namespace are checked before anything else happens.

mod id_allocator;
mod namespaces;

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
        self.guard_or(work, || {}).await
    }

    /// [`Shared::guard`], running `cut` when the drain timeout cuts the handler off.
    async fn guard_or<T>(
        &self,
        work: impl Future<Output = Result<T, Status>>,
        cut: impl FnOnce(),
    ) -> Result<T, Status> {
        tokio::select! {
            // The work first: a call served from memory completes on its first poll, and the
            // cut-off is then never polled (registering its waker takes a lock).
            biased;
            result = work => result,
            _ = self.cut_off.cancelled() => {
                cut();
                Err(Error::ShuttingDown.into())
            }
        }
    }
}

/// `idalloc.v1.IdAllocator`.
#[derive(Clone)]
pub struct IdService(pub Arc<Shared>);

/// `idalloc.v1.NamespaceAdmin`.
#[derive(Clone)]
pub struct NamespaceService(pub Arc<Shared>);

/// The raw `authorization` metadata value, if any.
fn authorization(metadata: &MetadataMap) -> Option<&[u8]> {
    metadata.get("authorization").map(|value| value.as_bytes())
}

/// Logs a failed call at a level that matches who has to act on it. A refusal the caller's
/// operator must fix (no or an unknown token, a namespace it may not use or that does not
/// exist, one with no IDs left, a quota) is a warning with its reason, at most one per method,
/// caller and reason every [`REFUSAL_LOG_EVERY`], with the count of those not logged since:
/// of the [`GRANTING`] methods, where it leaves a caller without IDs, and a scope or namespace
/// denial of any method (a caller's token set up wrong); elsewhere a refusal is an ordinary
/// answer.
pub(crate) fn log_failure(method: &'static str, caller: &str, error: &Error) {
    let warned = match error {
        Error::PermissionDenied(_) => true,
        Error::Unauthenticated(_)
        | Error::NotFound(_)
        | Error::Exhausted { .. }
        | Error::QuotaExceeded { .. } => GRANTING.contains(&method),
        _ => false,
    };
    match error {
        Error::Unavailable(_) => tracing::warn!(method, caller, %error, "ledger unavailable"),
        Error::Internal(_) => tracing::error!(method, caller, %error, "call failed"),
        Error::FailedPrecondition(_) => tracing::warn!(method, caller, %error, "call refused"),
        _ if warned => {
            let reason = error.reason();
            if let Some(suppressed) = REFUSALS.admit(method, caller, reason) {
                tracing::warn!(method, caller, reason, suppressed, %error, "call refused");
            }
        }
        _ => tracing::debug!(method, caller, %error, "call refused"),
    }
}

/// The methods that grant IDs: their refusals leave a caller without IDs.
const GRANTING: [&str; 2] = ["LeaseBlock", "AllocateIds"];

/// How often one kind of refusal is logged at most.
const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The refusals logged lately, by method, caller and reason.
static REFUSALS: RefusalLog = RefusalLog(std::sync::Mutex::new(Vec::new()));

/// When each kind of refusal was last logged and how many were not logged since. The kinds are
/// few (methods x the tokens file's callers x reasons), and a caller that was never admitted
/// counts as one (`""`), so the list stays short.
struct RefusalLog(std::sync::Mutex<Vec<RefusalKind>>);

struct RefusalKind {
    method: &'static str,
    caller: String,
    reason: &'static str,
    logged_at: std::time::Instant,
    suppressed: u64,
}

impl RefusalLog {
    /// Whether to log this refusal now; if so, how many like it were not logged before it.
    fn admit(&self, method: &'static str, caller: &str, reason: &'static str) -> Option<u64> {
        let now = std::time::Instant::now();
        // A panic while holding the lock leaves at worst a stale count.
        let mut kinds = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let found = kinds
            .iter_mut()
            .find(|k| k.method == method && k.reason == reason && k.caller == caller);
        match found {
            Some(kind) if now.duration_since(kind.logged_at) < REFUSAL_LOG_EVERY => {
                kind.suppressed += 1;
                None
            }
            Some(kind) => {
                kind.logged_at = now;
                Some(std::mem::take(&mut kind.suppressed))
            }
            None => {
                kinds.push(RefusalKind {
                    method,
                    caller: caller.to_string(),
                    reason,
                    logged_at: now,
                    suppressed: 0,
                });
                Some(0)
            }
        }
    }
}
