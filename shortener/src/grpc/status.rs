//! Domain errors as gRPC statuses: the one place this mapping lives (a whole call's error and a
//! batch item's error share it).

use crate::domain::Error;
use proto::shortener::v1 as pb;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// The gRPC code of a domain error.
pub fn code_of(error: &Error) -> Code {
    match error {
        Error::BadRequest { .. } | Error::Invalid { .. } => Code::InvalidArgument,
        Error::IdempotencyMismatch => Code::FailedPrecondition,
        Error::Unauthenticated(_) => Code::Unauthenticated,
        Error::Forbidden(_) | Error::HostNotAllowed(_) => Code::PermissionDenied,
        Error::NotFound(_) => Code::NotFound,
        Error::Gone(_) => Code::FailedPrecondition,
        Error::AliasTaken(_) | Error::DomainTaken(_) => Code::AlreadyExists,
        Error::Conflict { .. } => Code::FailedPrecondition,
        Error::Unavailable { .. } => Code::Unavailable,
        Error::RateLimited { .. } => Code::ResourceExhausted,
        Error::Internal(_) => Code::Internal,
    }
}

fn log_internal(error: &Error) {
    if let Error::Internal(detail) = error {
        tracing::error!(detail = %crate::domain::text::Untrusted(detail), "internal error");
    }
}

/// A domain error as a status. The machine code travels in `error-code` metadata and, for
/// retryable errors, the delay in `retry-after` (seconds). Internal details are logged, never
/// sent.
impl From<Error> for Status {
    fn from(error: Error) -> Self {
        log_internal(&error);
        let mut status = Status::new(code_of(&error), error.public_message());
        let metadata = status.metadata_mut();
        metadata.insert("error-code", MetadataValue::from_static(error.code()));
        if let Error::Unavailable { retry_after, .. } | Error::RateLimited { retry_after } = &error
        {
            metadata.insert(
                "retry-after",
                MetadataValue::from(retry_after.as_secs().max(1)),
            );
        }
        status
    }
}

/// A domain error as the error of one batch item, with the same code and message a whole call
/// would get.
impl From<Error> for pb::ItemError {
    fn from(error: Error) -> Self {
        log_internal(&error);
        pb::ItemError {
            status: code_of(&error) as i32,
            error: error.code().to_string(),
            message: error.public_message(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_error_maps_to_its_code_and_internal_text_stays_inside() {
        let cases = [
            (Error::invalid("invalid_url", "bad"), Code::InvalidArgument),
            (
                Error::bad_request("invalid_json", "bad"),
                Code::InvalidArgument,
            ),
            (Error::IdempotencyMismatch, Code::FailedPrecondition),
            (
                Error::Unauthenticated(crate::domain::NoKey::Unknown),
                Code::Unauthenticated,
            ),
            (
                Error::Forbidden(crate::domain::Scope::LinksRead),
                Code::PermissionDenied,
            ),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::AliasTaken("x".into()), Code::AlreadyExists),
            (
                Error::Unavailable {
                    message: "down".into(),
                    retry_after: Duration::from_secs(3),
                },
                Code::Unavailable,
            ),
            (
                Error::RateLimited {
                    retry_after: Duration::from_millis(10),
                },
                Code::ResourceExhausted,
            ),
            (Error::Internal("secret detail".into()), Code::Internal),
        ];
        for (error, code) in cases {
            let machine = error.code();
            let item = pb::ItemError::from(error.clone());
            let status = Status::from(error);
            assert_eq!(status.code(), code, "{machine}");
            assert_eq!(item.status, code as i32, "{machine}");
            assert_eq!(item.error, machine);
            assert_eq!(
                status
                    .metadata()
                    .get("error-code")
                    .and_then(|v| v.to_str().ok()),
                Some(machine)
            );
            assert!(!status.message().contains("secret detail"), "{machine}");
            assert!(!item.message.contains("secret detail"), "{machine}");
        }
    }
}
