//! A [`LeaseSource`] that leases from the id-service over gRPC.

use crate::channel::{balanced_channel, bearer};
use crate::source::{Lease, LeaseError, LeaseFuture, LeaseSource};
use codespace::Block;
use proto::idalloc::v1::{LeaseBlockRequest, id_allocator_client::IdAllocatorClient};
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

/// Where and as whom to lease.
#[derive(Debug, Clone)]
pub struct GrpcSourceConfig {
    /// id-service addresses (`http://host:port`); calls are balanced across them.
    pub endpoints: Vec<String>,
    /// The namespace to lease from.
    pub namespace: String,
    /// This process's identity in the ledger (for example the pod name).
    pub holder: String,
    /// A bearer token, if the id-service requires one.
    pub token: Option<String>,
    /// How long to wait for a TCP connection.
    pub connect_timeout: Duration,
    /// The deadline of one lease call.
    pub request_timeout: Duration,
}

/// Leases blocks from one or more id-service replicas.
///
/// The channel connects lazily, so a source can be built while the id-service is down; calls
/// then fail with [`LeaseError::Unavailable`] until it is back.
#[derive(Clone)]
pub struct GrpcLeaseSource {
    client: IdAllocatorClient<Channel>,
    namespace: String,
    holder: String,
    authorization: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl GrpcLeaseSource {
    /// A source for `config`; fails only on malformed endpoints or token.
    pub fn new(config: &GrpcSourceConfig) -> Result<Self, LeaseError> {
        let channel = balanced_channel(
            &config.endpoints,
            config.connect_timeout,
            config.request_timeout,
        )
        .map_err(LeaseError::Refused)?;
        let authorization = bearer(config.token.as_deref()).map_err(LeaseError::Refused)?;
        Ok(Self {
            client: IdAllocatorClient::new(channel),
            namespace: config.namespace.clone(),
            holder: config.holder.clone(),
            authorization,
        })
    }
}

impl LeaseSource for GrpcLeaseSource {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        self.lease_reporting(size, 0)
    }

    /// Sends `high_water` with the request, so that after a failover of the id-service's
    /// database the server grants above every ID this pool has seen.
    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            let mut request = tonic::Request::new(LeaseBlockRequest {
                namespace: self.namespace.clone(),
                size,
                holder: self.holder.clone(),
                high_water: (high_water > 0).then_some(high_water),
            });
            if let Some(value) = &self.authorization {
                request
                    .metadata_mut()
                    .insert("authorization", value.clone());
            }
            let span = otel::rpc_client_span("idalloc.v1.IdAllocator", "LeaseBlock");
            let call = async {
                // The caller's trace continues in the id-service.
                otel::inject_metadata(request.metadata_mut());
                let answer = self.client.clone().lease_block(request).await;
                let code = answer.as_ref().map_or_else(|s| s.code() as i32, |_| 0);
                otel::record_grpc_status(&tracing::Span::current(), code, true);
                answer
            };
            let lease = tracing::Instrument::instrument(call, span)
                .await
                .map_err(status_to_error)?
                .into_inner();
            let block = Block::new(lease.start, lease.end).ok_or_else(|| {
                LeaseError::Unavailable(format!(
                    "id-service returned an empty range {}..{}",
                    lease.start, lease.end
                ))
            })?;
            Ok(Lease {
                lease_id: lease.lease_id,
                block,
            })
        })
    }
}

fn status_to_error(status: tonic::Status) -> LeaseError {
    use tonic::Code;
    let message = format!("{}: {}", status.code(), status.message());
    match status.code() {
        // A quota refusal carries retry advice and passes; an exhausted namespace does not.
        Code::ResourceExhausted if crate::allocate::retry_after(&status).is_some() => {
            LeaseError::Throttled {
                detail: message,
                retry_after: crate::allocate::retry_after(&status).unwrap_or_default(),
            }
        }
        Code::ResourceExhausted => LeaseError::Exhausted(message),
        Code::Unauthenticated | Code::PermissionDenied => LeaseError::Unauthorized(message),
        Code::NotFound => LeaseError::UnknownNamespace(message),
        Code::InvalidArgument => LeaseError::Invalid(message),
        Code::FailedPrecondition => LeaseError::Refused(message),
        _ => LeaseError::Unavailable(message),
    }
}
