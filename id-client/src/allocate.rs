//! A thin client for `AllocateIds`: IDs in one call, for callers that do not want to hold
//! blocks themselves (the id-service holds the segments and refills them).

use crate::channel::{balanced_channel, bearer};
use codespace::Block;
use proto::idalloc::v1::{self as pb, id_allocator_client::IdAllocatorClient};
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// Where and with which token to call `AllocateIds`.
#[derive(Debug, Clone)]
pub struct AllocateClientConfig {
    /// id-service addresses (`http://host:port`); calls are balanced across them.
    pub endpoints: Vec<String>,
    /// The caller's bearer token, if the id-service requires one.
    pub token: Option<String>,
    /// How long to wait for a TCP connection.
    pub connect_timeout: Duration,
    /// The deadline of one call.
    pub request_timeout: Duration,
}

/// Why `AllocateIds` gave no IDs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// The caller is above its quota; retry after `retry_after`.
    #[error("quota exceeded, retry after {retry_after:?}: {message}")]
    QuotaExceeded {
        /// The server's text.
        message: String,
        /// When the quota allows the call again.
        retry_after: Duration,
    },
    /// The namespace has no IDs left; retrying will not help.
    #[error("namespace exhausted: {0}")]
    Exhausted(String),
    /// The service or its database is unreachable or shutting down; retrying later is safe.
    #[error("id-service unavailable: {0}")]
    Unavailable(String),
    /// Refused: a bad request, an unknown namespace, a missing or wrong token, or a namespace
    /// or scope the token does not cover. Retrying will not help without a change.
    #[error("refused: {0}")]
    Refused(String),
}

/// Calls `AllocateIds` on one or more id-service replicas.
#[derive(Clone)]
pub struct AllocateClient {
    client: IdAllocatorClient<Channel>,
    authorization: Option<MetadataValue<Ascii>>,
}

impl AllocateClient {
    /// A client for `config`; fails only on malformed endpoints or token. Connects lazily.
    pub fn new(config: &AllocateClientConfig) -> Result<Self, AllocateError> {
        let channel = balanced_channel(
            &config.endpoints,
            config.connect_timeout,
            config.request_timeout,
        )
        .map_err(AllocateError::Refused)?;
        let authorization = bearer(config.token.as_deref()).map_err(AllocateError::Refused)?;
        Ok(Self {
            client: IdAllocatorClient::new(channel),
            authorization,
        })
    }

    /// Exactly `count` fresh IDs of `namespace`, as ascending disjoint blocks (usually one).
    pub async fn allocate(&self, namespace: &str, count: u64) -> Result<Vec<Block>, AllocateError> {
        let mut request = tonic::Request::new(pb::AllocateIdsRequest {
            namespace: namespace.to_string(),
            count,
        });
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        let span = otel::rpc_client_span("idalloc.v1.IdAllocator", "AllocateIds");
        let call = async {
            // The caller's trace continues in the id-service.
            otel::inject_metadata(request.metadata_mut());
            let answer = self.client.clone().allocate_ids(request).await;
            let code = answer.as_ref().map_or_else(|s| s.code() as i32, |_| 0);
            otel::record_grpc_status(&tracing::Span::current(), code, true);
            answer
        };
        let reply = tracing::Instrument::instrument(call, span)
            .await
            .map_err(status_to_error)?
            .into_inner();
        checked_blocks(reply, count)
    }
}

/// The reply's ranges as blocks, refusing a reply that breaks the contract (empty, unordered
/// or overlapping ranges, or a different number of IDs than asked for).
fn checked_blocks(reply: pb::AllocateIdsResponse, count: u64) -> Result<Vec<Block>, AllocateError> {
    let mut blocks = Vec::with_capacity(reply.ranges.len());
    let mut total: u64 = 0;
    for range in reply.ranges {
        let block = Block::new(range.start, range.end).ok_or_else(|| {
            AllocateError::Unavailable(format!(
                "the id-service returned an empty range {}..{}",
                range.start, range.end
            ))
        })?;
        if blocks
            .last()
            .is_some_and(|last: &Block| last.end > block.start)
        {
            return Err(AllocateError::Unavailable(
                "the id-service returned unordered or overlapping ranges".into(),
            ));
        }
        total = total.saturating_add(block.len());
        blocks.push(block);
    }
    if total != count {
        return Err(AllocateError::Unavailable(format!(
            "the id-service returned {total} IDs for a request of {count}"
        )));
    }
    Ok(blocks)
}

/// The retry advice of a status: `retry-after-ms`, else `retry-after` (seconds).
pub(crate) fn retry_after(status: &tonic::Status) -> Option<Duration> {
    let read = |key: &str| {
        status
            .metadata()
            .get(key)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    read("retry-after-ms")
        .map(Duration::from_millis)
        .or_else(|| read("retry-after").map(Duration::from_secs))
}

fn status_to_error(status: tonic::Status) -> AllocateError {
    use tonic::Code;
    let message = format!("{}: {}", status.code(), status.message());
    match (status.code(), retry_after(&status)) {
        (Code::ResourceExhausted, Some(retry_after)) => AllocateError::QuotaExceeded {
            message,
            retry_after,
        },
        (Code::ResourceExhausted, None) => AllocateError::Exhausted(message),
        (
            Code::InvalidArgument
            | Code::Unauthenticated
            | Code::PermissionDenied
            | Code::NotFound
            | Code::FailedPrecondition,
            _,
        ) => AllocateError::Refused(message),
        _ => AllocateError::Unavailable(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ranges: &[(u64, u64)]) -> pb::AllocateIdsResponse {
        pb::AllocateIdsResponse {
            ranges: ranges
                .iter()
                .map(|&(start, end)| pb::IdRange { start, end })
                .collect(),
        }
    }

    #[test]
    fn a_reply_must_hold_exactly_the_ids_asked_for_in_ascending_disjoint_ranges() {
        let ok = checked_blocks(reply(&[(1, 5), (9, 10)]), 5).expect("valid");
        assert_eq!(
            ok,
            [Block { start: 1, end: 5 }, Block { start: 9, end: 10 }]
        );
        for (case, ranges, count) in [
            ("too few", &[(1, 5)][..], 5),
            ("too many", &[(1, 7)][..], 5),
            ("empty range", &[(1, 6), (6, 6)][..], 5),
            ("overlapping", &[(1, 4), (3, 5)][..], 5),
            ("descending", &[(10, 12), (1, 4)][..], 5),
        ] {
            assert!(checked_blocks(reply(ranges), count).is_err(), "{case}");
        }
    }

    #[test]
    fn quota_refusals_carry_retry_advice_and_exhaustion_does_not() {
        let mut quota = tonic::Status::resource_exhausted("over quota");
        quota
            .metadata_mut()
            .insert("retry-after-ms", MetadataValue::from(250u64));
        match status_to_error(quota) {
            AllocateError::QuotaExceeded {
                message,
                retry_after,
            } => {
                assert!(message.ends_with("over quota"), "{message}");
                assert_eq!(retry_after, Duration::from_millis(250));
            }
            other => panic!("expected a quota refusal, got {other:?}"),
        }
        let gone = tonic::Status::resource_exhausted("namespace exhausted");
        assert!(matches!(status_to_error(gone), AllocateError::Exhausted(_)));
        let denied = tonic::Status::permission_denied("no");
        assert!(matches!(status_to_error(denied), AllocateError::Refused(_)));
    }
}
