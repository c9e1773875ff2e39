//! Domain errors as gRPC statuses: the one place this mapping lives.

use crate::domain::Error;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// The gRPC code of a domain error.
pub fn code_of(error: &Error) -> Code {
    match error {
        Error::BadRequest { .. } | Error::Invalid { .. } => Code::InvalidArgument,
        Error::IdempotencyMismatch => Code::FailedPrecondition,
        Error::Unauthenticated => Code::Unauthenticated,
        Error::NotFound(_) => Code::NotFound,
        Error::AliasTaken(_) => Code::AlreadyExists,
        Error::Unavailable { .. } => Code::Unavailable,
        Error::RateLimited { .. } => Code::ResourceExhausted,
        Error::Internal(_) => Code::Internal,
    }
}

/// Converts a domain error into a status. The machine code travels in `error-code` metadata
/// and, for retryable errors, the delay in `retry-after` (seconds). Internal details are logged,
/// never sent.
pub fn to_status(error: Error) -> Status {
    if let Error::Internal(detail) = &error {
        tracing::error!(%detail, "internal error");
    }
    let mut status = Status::new(code_of(&error), error.public_message());
    let metadata = status.metadata_mut();
    metadata.insert("error-code", MetadataValue::from_static(error.code()));
    if let Error::Unavailable { retry_after, .. } | Error::RateLimited { retry_after } = &error {
        metadata.insert(
            "retry-after",
            MetadataValue::from(retry_after.as_secs().max(1)),
        );
    }
    status
}
