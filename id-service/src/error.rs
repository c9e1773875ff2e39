//! The cases a caller acts on, and their one mapping to gRPC status codes.
//!
//! The JSON endpoint answers with the HTTP equivalent of the same status (see `http_api`), so
//! this stays the only place where a domain error becomes something a caller sees.

use std::time::Duration;
use tonic::metadata::MetadataValue;

/// Why a request could not be served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed; nothing was written.
    #[error("{0}")]
    InvalidArgument(String),
    /// No such lease or namespace.
    #[error("{0}")]
    NotFound(String),
    /// CreateNamespace of a name that exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// The namespace has no IDs left below its bound.
    #[error("namespace {namespace} is exhausted: no IDs left below its bound")]
    Exhausted {
        /// The exhausted namespace.
        namespace: String,
    },
    /// The caller is above one of its quotas; nothing was written.
    #[error("{message}")]
    QuotaExceeded {
        /// Which quota, and what to do about it.
        message: String,
        /// When the quota allows the call again.
        retry_after: Duration,
    },
    /// The request contradicts the ledger's state (a reported high water far above the
    /// cursor); nothing was written.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The ledger database cannot be reached right now; retrying later is safe.
    #[error("the lease ledger is unavailable: {0}")]
    Unavailable(String),
    /// The replica is shutting down and cut the call off at the end of its drain; another
    /// replica can serve it.
    #[error("the id-service is shutting down; retry on another replica")]
    ShuttingDown,
    /// No token, or one the service does not know.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's token does not cover this namespace or scope.
    #[error("{0}")]
    PermissionDenied(String),
    /// Anything else. The text is logged, never sent to the caller.
    #[error("internal error: {0}")]
    Internal(String),
}

/// How long a caller should wait before retrying an unavailable ledger.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(1);

impl Error {
    /// An [`Error::InvalidArgument`] with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }

    /// Every [`Error::reason`], so that the error counters show each at zero from the start:
    /// an alert on `rate()` or `increase()` sees no rise in a series' first sample.
    pub const REASONS: [&'static str; 11] = [
        "invalid_argument",
        "not_found",
        "already_exists",
        "exhausted",
        "quota_exceeded",
        "failed_precondition",
        "unavailable",
        "shutting_down",
        "unauthenticated",
        "permission_denied",
        "internal",
    ];

    /// A short, stable label for metrics (`idservice_lease_errors_total{reason}`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::NotFound(_) => "not_found",
            Self::AlreadyExists(_) => "already_exists",
            Self::Exhausted { .. } => "exhausted",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::FailedPrecondition(_) => "failed_precondition",
            Self::Unavailable(_) => "unavailable",
            Self::ShuttingDown => "shutting_down",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::PermissionDenied(_) => "permission_denied",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidArgument(m) => tonic::Status::invalid_argument(m),
            Error::NotFound(m) => tonic::Status::not_found(m),
            Error::AlreadyExists(m) => tonic::Status::already_exists(m),
            e @ Error::Exhausted { .. } => tonic::Status::resource_exhausted(e.to_string()),
            Error::QuotaExceeded {
                message,
                retry_after,
            } => with_retry_advice(tonic::Status::resource_exhausted(message), retry_after),
            Error::FailedPrecondition(m) => tonic::Status::failed_precondition(m),
            // The cause (a connection error) is logged where it is handled; callers only need
            // to know that retrying later is safe.
            Error::Unavailable(_) => with_retry_advice(
                tonic::Status::unavailable("the lease ledger is unavailable; retry later"),
                UNAVAILABLE_RETRY,
            ),
            e @ Error::ShuttingDown => {
                with_retry_advice(tonic::Status::unavailable(e.to_string()), UNAVAILABLE_RETRY)
            }
            Error::Unauthenticated(m) => tonic::Status::unauthenticated(m),
            Error::PermissionDenied(m) => tonic::Status::permission_denied(m),
            Error::Internal(_) => tonic::Status::internal("internal error"),
        }
    }
}

/// Adds `retry-after` (whole seconds, rounded up) and `retry-after-ms` trailing metadata.
fn with_retry_advice(mut status: tonic::Status, after: Duration) -> tonic::Status {
    let millis = u64::try_from(after.as_millis()).unwrap_or(u64::MAX).max(1);
    let seconds = millis.div_ceil(1000);
    let metadata = status.metadata_mut();
    metadata.insert("retry-after", MetadataValue::from(seconds));
    metadata.insert("retry-after-ms", MetadataValue::from(millis));
    status
}

#[cfg(test)]
mod tests {

    /// Every variant's reason is listed, so its counters start at zero.
    #[test]
    fn every_reason_is_listed() {
        let every = [
            Error::invalid("x"),
            Error::NotFound("x".into()),
            Error::AlreadyExists("x".into()),
            Error::Exhausted {
                namespace: "x".into(),
            },
            Error::QuotaExceeded {
                message: "x".into(),
                retry_after: Duration::from_secs(1),
            },
            Error::FailedPrecondition("x".into()),
            Error::Unavailable("x".into()),
            Error::ShuttingDown,
            Error::Unauthenticated("x".into()),
            Error::PermissionDenied("x".into()),
            Error::Internal("x".into()),
        ];
        // No wildcard: a new variant does not compile here until `every` (and REASONS) has it.
        for error in &every {
            match error {
                Error::InvalidArgument(_)
                | Error::NotFound(_)
                | Error::AlreadyExists(_)
                | Error::Exhausted { .. }
                | Error::QuotaExceeded { .. }
                | Error::FailedPrecondition(_)
                | Error::Unavailable(_)
                | Error::ShuttingDown
                | Error::Unauthenticated(_)
                | Error::PermissionDenied(_)
                | Error::Internal(_) => {}
            }
        }
        let reasons: std::collections::BTreeSet<_> = every.iter().map(Error::reason).collect();
        let listed: std::collections::BTreeSet<_> = Error::REASONS.into_iter().collect();
        assert_eq!(reasons, listed);
    }
    use super::*;
    use tonic::Code;

    #[test]
    fn each_case_maps_to_its_documented_status_and_internal_text_stays_inside() {
        let quota = || Error::QuotaExceeded {
            message: "over quota".into(),
            retry_after: Duration::from_millis(1500),
        };
        let cases = [
            (Error::invalid("bad"), Code::InvalidArgument),
            (Error::NotFound("none".into()), Code::NotFound),
            (Error::AlreadyExists("taken".into()), Code::AlreadyExists),
            (
                Error::Exhausted {
                    namespace: "a".into(),
                },
                Code::ResourceExhausted,
            ),
            (quota(), Code::ResourceExhausted),
            (
                Error::FailedPrecondition("far".into()),
                Code::FailedPrecondition,
            ),
            (Error::Unavailable("conn refused".into()), Code::Unavailable),
            (Error::ShuttingDown, Code::Unavailable),
            (Error::Unauthenticated("no".into()), Code::Unauthenticated),
            (Error::PermissionDenied("no".into()), Code::PermissionDenied),
            (Error::Internal("secret detail".into()), Code::Internal),
        ];
        for (error, code) in cases {
            let status = tonic::Status::from(error);
            assert_eq!(status.code(), code);
            assert!(!status.message().contains("secret detail"));
            assert!(!status.message().contains("conn refused"));
        }
    }

    #[test]
    fn quota_refusals_carry_retry_advice_and_an_exhausted_namespace_does_not() {
        let status = tonic::Status::from(Error::QuotaExceeded {
            message: "over quota".into(),
            retry_after: Duration::from_millis(1500),
        });
        let read = |key| status.metadata().get(key).and_then(|v| v.to_str().ok());
        assert_eq!(read("retry-after"), Some("2"));
        assert_eq!(read("retry-after-ms"), Some("1500"));
        let exhausted = tonic::Status::from(Error::Exhausted {
            namespace: "a".into(),
        });
        assert!(exhausted.metadata().get("retry-after").is_none());
    }
}
