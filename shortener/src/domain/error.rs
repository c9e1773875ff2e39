//! The errors of the link service. Each transport maps them to its own status in one place.

use std::time::Duration;

/// The longest message a client is sent, in characters.
pub const MAX_MESSAGE: usize = 300;

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The request is malformed (JSON, types, unknown fields).
    #[error("{message}")]
    BadRequest {
        /// Stable machine code, e.g. `invalid_json`.
        code: &'static str,
        /// Human-readable explanation.
        message: String,
    },
    /// The request is well-formed but a value is not acceptable (URL, alias, expiry).
    #[error("{message}")]
    Invalid {
        /// Stable machine code, e.g. `invalid_url`.
        code: &'static str,
        /// Human-readable explanation.
        message: String,
    },
    /// Missing, unknown or expired credentials.
    #[error("{0}")]
    Unauthenticated(NoKey),
    /// The key is valid but lacks the scope the operation needs.
    #[error("this API key lacks the {0} scope")]
    Forbidden(super::Scope),
    /// No such link.
    #[error("no link with code {0:?}")]
    NotFound(String),
    /// The link was deleted, for good: it cannot be changed.
    #[error("the link {0:?} was deleted; deletes are permanent")]
    Gone(String),
    /// The alias is taken.
    #[error("the alias {0:?} is already taken")]
    AliasTaken(String),
    /// The host is another domain's already (of any tenant, the caller's included).
    #[error("the host {0:?} is already a domain")]
    DomainTaken(String),
    /// The request conflicts with what is stored (a domain that links are still on).
    #[error("{message}")]
    Conflict {
        /// Stable machine code, e.g. `domain_has_links`.
        code: &'static str,
        /// Human-readable explanation.
        message: String,
    },
    /// The caller may not claim this host (its tenant's allowed suffixes do not cover it).
    #[error(
        "this API key claims only hosts under a suffix the operator allows its tenant \
         (SHORTENER_DOMAIN_SUFFIXES; an admin key claims any host), not {0:?}"
    )]
    HostNotAllowed(String),
    /// The idempotency key was used before with a different request.
    #[error("the idempotency key was already used for a different request")]
    IdempotencyMismatch,
    /// No IDs in hand or the store is unreachable; retry later.
    #[error("{message}")]
    Unavailable {
        /// Human-readable explanation.
        message: String,
        /// When a retry is likely to succeed.
        retry_after: Duration,
    },
    /// The caller exceeded its rate; retry after the delay.
    #[error("rate limit exceeded; retry in {} s", retry_after.as_secs().max(1))]
    RateLimited {
        /// When the next request would be allowed.
        retry_after: Duration,
    },
    /// A fault inside the service; its text is logged, never shown to the caller.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// A validation failure with a machine code.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A malformed request with a machine code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Error::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// A conflict with what is stored, with a machine code.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Error::Conflict {
            code,
            message: message.into(),
        }
    }

    /// The stable machine code of the error, as sent to clients.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadRequest { code, .. }
            | Error::Invalid { code, .. }
            | Error::Conflict { code, .. } => code,
            Error::Unauthenticated(_) => "unauthorized",
            Error::Forbidden(_) => "forbidden",
            Error::NotFound(_) => "not_found",
            Error::Gone(_) => "gone",
            Error::AliasTaken(_) => "alias_taken",
            Error::DomainTaken(_) => "domain_taken",
            Error::HostNotAllowed(_) => "host_not_allowed",
            Error::IdempotencyMismatch => "idempotency_key_reused",
            Error::Unavailable { .. } => "unavailable",
            Error::RateLimited { .. } => "rate_limited",
            Error::Internal(_) => "internal",
        }
    }

    /// A short label of the outcome a failed create had, for metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            Error::BadRequest { .. } | Error::Invalid { .. } | Error::IdempotencyMismatch => {
                "invalid"
            }
            Error::Unauthenticated(_) => "unauthorized",
            Error::Forbidden(_) | Error::HostNotAllowed(_) => "forbidden",
            Error::AliasTaken(_) | Error::DomainTaken(_) | Error::Conflict { .. } => "conflict",
            Error::Unavailable { .. } => "unavailable",
            Error::RateLimited { .. } => "rate_limited",
            Error::NotFound(_) | Error::Gone(_) | Error::Internal(_) => "error",
        }
    }

    /// The message safe to show a client (internal details are withheld).
    /// At most [`MAX_MESSAGE`] characters, escaped: a message may quote client input (a
    /// JSON parser's complaint, say), and is never a way to reflect it at length.
    pub fn public_message(&self) -> String {
        match self {
            Error::Internal(_) => "internal error".to_string(),
            other => super::text::bounded(&other.to_string(), MAX_MESSAGE),
        }
    }
}

/// Why a request carries no key in force: each says what to send instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoKey {
    /// No `Authorization` header (or an empty key).
    #[error("no API key: send one as the header Authorization: Bearer <key>")]
    Missing,
    /// An `Authorization` header of another scheme.
    #[error("the Authorization header must be Bearer <key>")]
    NotBearer,
    /// A key no key in force has (never made, revoked, removed from the keys file, expired).
    #[error("the API key is not one in force: unknown, revoked or expired")]
    Unknown,
}
