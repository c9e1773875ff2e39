//! The `IdAllocator` handlers: LeaseBlock, LookupId, ListLeases and AllocateIds.

use super::{IdService, authorization, log_failure};
use crate::auth::{Principal, Scope};
use crate::domain::{AllocateRequest, LeaseRequest, ListRequest, LookupRequest};
use crate::error::Error;
use crate::ledger::Grant;
use crate::logsafe::Escaped;
use proto::idalloc::v1 as pb;
use proto::idalloc::v1::id_allocator_server::IdAllocator;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl IdAllocator for IdService {
    async fn lease_block(
        &self,
        request: Request<pb::LeaseBlockRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        let started = Instant::now();
        // Cut off at the drain bound, the handler never counts its outcome: counted here.
        let cut = || {
            self.0
                .metrics
                .lease(&Err(Error::ShuttingDown), started.elapsed());
        };
        self.0.guard_or(self.lease_block_inner(request), cut).await
    }

    async fn lookup_id(
        &self,
        request: Request<pb::LookupIdRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        self.0.guard(self.lookup_id_inner(request)).await
    }

    async fn list_leases(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        self.0.guard(self.list_leases_inner(request)).await
    }

    async fn allocate_ids(
        &self,
        request: Request<pb::AllocateIdsRequest>,
    ) -> Result<Response<pb::AllocateIdsResponse>, Status> {
        self.0.guard(self.allocate_ids_inner(request)).await
    }
}

impl IdService {
    async fn lease_block_inner(
        &self,
        request: Request<pb::LeaseBlockRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        let shared = &self.0;
        let started = Instant::now();
        let (metadata, _, message) = request.into_parts();
        let mut caller = Principal::Insecure;
        let outcome = async {
            let (principal, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Lease, || {
                    LeaseRequest::parse(message, shared.bounds)
                })
                .map_err(|refused| {
                    if let Some(principal) = &refused.caller {
                        caller = principal.clone();
                    }
                    refused.error
                })?;
            caller = principal.clone();
            let holder = principal.holder(&request.holder)?;
            let charged = match principal
                .take_lease()
                .and_then(|()| principal.take_ids(request.size))
            {
                Ok(()) => shared.quotas.charge(&principal, 1, request.size).await,
                refused => refused,
            };
            charged.inspect_err(|error| {
                if matches!(error, Error::QuotaExceeded { .. }) {
                    shared.metrics.quota_exceeded(principal.name());
                }
            })?;
            let grant = Grant {
                namespace: &request.namespace,
                size: request.size,
                holder: &holder,
                high_water: request.high_water,
            };
            shared.ledger.grant(&grant).await
        }
        .await;
        shared.metrics.lease(&outcome, started.elapsed());
        match outcome {
            Ok((lease, skip)) => {
                if let Some(skip) = &skip {
                    tracing::warn!(
                        namespace = %lease.namespace,
                        from = skip.from,
                        to = skip.to,
                        skipped = skip.ids(),
                        cause = skip.cause(),
                        caller = caller.name(),
                        "the cursor moved forward before a lease was granted"
                    );
                }
                tracing::info!(
                    lease_id = lease.lease_id,
                    namespace = %lease.namespace,
                    start = lease.block.start,
                    end = lease.block.end,
                    holder = %Escaped(&lease.holder),
                    caller = caller.name(),
                    "lease granted"
                );
                Ok(Response::new(lease.into()))
            }
            Err(error) => {
                log_failure("LeaseBlock", caller.name(), &error);
                Err(error.into())
            }
        }
    }

    async fn lookup_id_inner(
        &self,
        request: Request<pb::LookupIdRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        let caller = std::sync::OnceLock::new();
        let outcome = async {
            let (_, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Lookup, || {
                    LookupRequest::try_from(message)
                })
                .map_err(|refused| refused.noted(&caller))?;
            shared.ledger.lookup(&request).await
        }
        .await;
        shared.metrics.lookup("LookupId", &outcome);
        outcome
            .map(|lease| Response::new(lease.into()))
            .map_err(|error| {
                log_failure("LookupId", caller.get().map_or("", String::as_str), &error);
                error.into()
            })
    }

    async fn list_leases_inner(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        let caller = std::sync::OnceLock::new();
        let outcome = async {
            let (_, request) = shared
                .gate
                .admit(authorization(&metadata), Scope::Lookup, || {
                    ListRequest::try_from(message)
                })
                .map_err(|refused| refused.noted(&caller))?;
            shared.ledger.list(&request).await
        }
        .await;
        shared.metrics.lookup("ListLeases", &outcome);
        outcome
            .map(|leases| {
                Response::new(pb::ListLeasesResponse {
                    leases: leases.into_iter().map(Into::into).collect(),
                })
            })
            .map_err(|error| {
                log_failure(
                    "ListLeases",
                    caller.get().map_or("", String::as_str),
                    &error,
                );
                error.into()
            })
    }

    async fn allocate_ids_inner(
        &self,
        request: Request<pb::AllocateIdsRequest>,
    ) -> Result<Response<pb::AllocateIdsResponse>, Status> {
        let shared = &self.0;
        let (metadata, _, message) = request.into_parts();
        let (principal, request) = shared
            .gate
            .admit(authorization(&metadata), Scope::Allocate, || {
                AllocateRequest::from_wire(message, shared.max_count)
            })
            .map_err(|refused| {
                log_failure("AllocateIds", refused.caller_name(), &refused.error);
                Status::from(refused.error)
            })?;
        match shared.allocator.allocate(&principal, &request).await {
            Ok(ranges) => Ok(Response::new(ranges.into())),
            Err(error) => {
                log_failure("AllocateIds", principal.name(), &error);
                Err(error.into())
            }
        }
    }
}
