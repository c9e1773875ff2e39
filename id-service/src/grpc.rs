//! The `idalloc.v1.IdAllocator` handlers and the optional bearer-token check.

use crate::config::Secret;
use crate::domain::{BlockBounds, LeaseRequest, ListRequest, LookupRequest};
use crate::error::Error;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use proto::idalloc::v1 as pb;
use proto::idalloc::v1::id_allocator_server::IdAllocator;
use std::future::Future;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// Serves leases and look-ups from the [`Ledger`].
#[derive(Clone)]
pub struct LeaseService {
    ledger: Ledger,
    bounds: BlockBounds,
    metrics: Arc<Metrics>,
    cut_off: CancellationToken,
}

impl LeaseService {
    /// A service over `ledger` that grants blocks within `bounds`. Calls still running when
    /// `cut_off` is cancelled (the drain timeout passed) end with UNAVAILABLE.
    pub fn new(
        ledger: Ledger,
        bounds: BlockBounds,
        metrics: Arc<Metrics>,
        cut_off: CancellationToken,
    ) -> Self {
        Self {
            ledger,
            bounds,
            metrics,
            cut_off,
        }
    }

    /// Runs a handler unless the drain timeout cuts it off. Dropping a grant half-way is safe:
    /// its transaction either commits (the IDs become a gap) or rolls back.
    async fn guard<T>(&self, work: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
        tokio::select! {
            result = work => result,
            _ = self.cut_off.cancelled() => Err(Error::ShuttingDown.into()),
        }
    }
}

/// Logs a failed call at a level that matches who has to act on it.
fn log_failure(method: &'static str, error: &Error) {
    match error {
        Error::Unavailable(_) => tracing::warn!(method, %error, "ledger unavailable"),
        Error::Internal(_) => tracing::error!(method, %error, "call failed"),
        _ => tracing::debug!(method, %error, "call refused"),
    }
}

#[tonic::async_trait]
impl IdAllocator for LeaseService {
    async fn lease_block(
        &self,
        request: Request<pb::LeaseBlockRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        self.guard(self.lease_block_inner(request)).await
    }

    async fn lookup_id(
        &self,
        request: Request<pb::LookupIdRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        self.guard(self.lookup_id_inner(request)).await
    }

    async fn list_leases(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        self.guard(self.list_leases_inner(request)).await
    }
}

impl LeaseService {
    async fn lease_block_inner(
        &self,
        request: Request<pb::LeaseBlockRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        let started = Instant::now();
        let outcome = match LeaseRequest::parse(request.into_inner(), self.bounds) {
            Ok(request) => self.ledger.grant(&request).await,
            Err(e) => Err(e),
        };
        self.metrics.lease(&outcome, started.elapsed());
        match outcome {
            Ok(lease) => {
                tracing::info!(
                    lease_id = lease.lease_id,
                    namespace = %lease.namespace,
                    start = lease.block.start,
                    end = lease.block.end,
                    holder = %lease.holder,
                    "lease granted"
                );
                Ok(Response::new(lease.into()))
            }
            Err(error) => {
                log_failure("LeaseBlock", &error);
                Err(error.into())
            }
        }
    }

    async fn lookup_id_inner(
        &self,
        request: Request<pb::LookupIdRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        let outcome = match LookupRequest::try_from(request.into_inner()) {
            Ok(request) => self.ledger.lookup(&request).await,
            Err(e) => Err(e),
        };
        self.metrics.lookup("LookupId", &outcome);
        outcome
            .map(|lease| Response::new(lease.into()))
            .map_err(|error| {
                log_failure("LookupId", &error);
                error.into()
            })
    }

    async fn list_leases_inner(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        let outcome = match ListRequest::try_from(request.into_inner()) {
            Ok(request) => self.ledger.list(&request).await,
            Err(e) => Err(e),
        };
        self.metrics.lookup("ListLeases", &outcome);
        outcome
            .map(|leases| {
                Response::new(pb::ListLeasesResponse {
                    leases: leases.into_iter().map(Into::into).collect(),
                })
            })
            .map_err(|error| {
                log_failure("ListLeases", &error);
                error.into()
            })
    }
}

/// Checks `authorization: Bearer <token>` when a token is configured; lets every call through
/// otherwise.
#[derive(Clone)]
pub struct TokenCheck {
    expected: Option<Arc<[u8]>>,
    metrics: Arc<Metrics>,
}

impl TokenCheck {
    /// A check for `token` (none: no check).
    pub fn new(token: Option<&Secret>, metrics: Arc<Metrics>) -> Self {
        Self {
            expected: token.map(|t| Arc::from(format!("Bearer {}", t.expose()).into_bytes())),
            metrics,
        }
    }

    fn verify(&self, presented: Option<&[u8]>) -> Result<(), Error> {
        let Some(expected) = &self.expected else {
            return Ok(());
        };
        match presented {
            None => Err(Error::Unauthenticated(
                "missing authorization: Bearer <token>".into(),
            )),
            Some(presented) if constant_time_eq(presented, expected) => Ok(()),
            Some(_) => Err(Error::Unauthenticated("wrong token".into())),
        }
    }
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .map(|value| value.as_bytes());
        match self.verify(presented) {
            Ok(()) => Ok(request),
            Err(error) => {
                self.metrics.unauthenticated();
                tracing::debug!(%error, "call refused");
                Err(error.into())
            }
        }
    }
}

/// Compares without an early exit, so timing does not reveal how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_token_must_be_presented_exactly() {
        let secret: Secret = "s3cret".parse().expect("infallible");
        let check = TokenCheck::new(Some(&secret), Arc::new(Metrics::new()));
        assert!(check.verify(Some(b"Bearer s3cret")).is_ok());
        assert!(check.verify(None).is_err());
        assert!(check.verify(Some(b"Bearer s3cre")).is_err());
        assert!(check.verify(Some(b"Bearer s3cret ")).is_err());
        assert!(check.verify(Some(b"s3cret")).is_err());
        let open = TokenCheck::new(None, Arc::new(Metrics::new()));
        assert!(open.verify(None).is_ok());
    }
}
