//! The cases a caller acts on, and their one mapping to gRPC status codes.

/// Why a request could not be served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed; nothing was written.
    #[error("{0}")]
    InvalidArgument(String),
    /// No such lease or namespace.
    #[error("{0}")]
    NotFound(String),
    /// The namespace has no IDs left below its bound.
    #[error("namespace {namespace} is exhausted: no IDs left below its bound")]
    Exhausted {
        /// The exhausted namespace.
        namespace: String,
    },
    /// The ledger database cannot be reached right now; retrying later is safe.
    #[error("the lease ledger is unavailable: {0}")]
    Unavailable(String),
    /// The replica is shutting down and cut the call off at the end of its drain; another
    /// replica can serve it.
    #[error("the id-service is shutting down; retry on another replica")]
    ShuttingDown,
    /// The call did not carry the configured token.
    #[error("{0}")]
    Unauthenticated(String),
    /// Anything else. The text is logged, never sent to the caller.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// An [`Error::InvalidArgument`] with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }

    /// A short, stable label for metrics (`idservice_lease_errors_total{reason}`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::NotFound(_) => "not_found",
            Self::Exhausted { .. } => "exhausted",
            Self::Unavailable(_) => "unavailable",
            Self::ShuttingDown => "shutting_down",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidArgument(m) => tonic::Status::invalid_argument(m),
            Error::NotFound(m) => tonic::Status::not_found(m),
            e @ Error::Exhausted { .. } => tonic::Status::resource_exhausted(e.to_string()),
            // The cause (a connection error) is logged where it is handled; callers only need
            // to know that retrying later is safe.
            Error::Unavailable(_) => {
                tonic::Status::unavailable("the lease ledger is unavailable; retry later")
            }
            e @ Error::ShuttingDown => tonic::Status::unavailable(e.to_string()),
            Error::Unauthenticated(m) => tonic::Status::unauthenticated(m),
            Error::Internal(_) => tonic::Status::internal("internal error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn each_case_maps_to_its_documented_status_and_internal_text_stays_inside() {
        let cases = [
            (Error::invalid("bad"), Code::InvalidArgument),
            (Error::NotFound("none".into()), Code::NotFound),
            (
                Error::Exhausted {
                    namespace: "a".into(),
                },
                Code::ResourceExhausted,
            ),
            (Error::Unavailable("conn refused".into()), Code::Unavailable),
            (Error::ShuttingDown, Code::Unavailable),
            (Error::Unauthenticated("no".into()), Code::Unauthenticated),
            (Error::Internal("secret detail".into()), Code::Internal),
        ];
        for (error, code) in cases {
            let status = tonic::Status::from(error);
            assert_eq!(status.code(), code);
            assert!(!status.message().contains("secret detail"));
            assert!(!status.message().contains("conn refused"));
        }
    }
}
