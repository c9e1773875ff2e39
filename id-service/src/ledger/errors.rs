//! Database errors sorted into the cases callers act on.

use crate::domain::Namespace;
use crate::error::Error;
use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

/// The SQLSTATE `id_grant()` raises for a reported high water too far above the cursor.
const HIGH_WATER_TOO_FAR: &str = "IH001";

/// A pool error (no connection) as a caller's case.
pub(crate) fn pool_error(error: PoolError) -> Error {
    match error {
        PoolError::Timeout(kind) => Error::Unavailable(format!(
            "no database connection within the timeout ({kind:?})"
        )),
        PoolError::Backend(e) => classify(e, None),
        PoolError::Closed => Error::Unavailable("the connection pool is closed".into()),
        other => Error::Internal(format!("connection pool: {other}")),
    }
}

/// A statement's error as a caller's case, for a statement about `namespace`.
pub(crate) fn db_error(error: tokio_postgres::Error, namespace: &Namespace) -> Error {
    classify(error, Some(namespace))
}

/// Sorts a database error into the cases callers act on, and tells the pool's eviction (see
/// [`pgtls::evict`]) about it: a connection that answered read-only, was shut down or failed is
/// not handed out again.
pub(crate) fn classify(error: tokio_postgres::Error, namespace: Option<&Namespace>) -> Error {
    pgtls::evict::note(&error);
    let Some(db) = error.as_db_error() else {
        // No server answer at all: the connection failed, closed or timed out.
        return Error::Unavailable(match pgtls::evict::explain_connect(&error) {
            Some(hint) => format!("{hint}: {error}"),
            None => error.to_string(),
        });
    };
    let code = db.code();
    if *code == SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED {
        return Error::Exhausted {
            namespace: namespace.map(|n| n.to_string()).unwrap_or_default(),
        };
    }
    if *code == SqlState::NO_DATA_FOUND {
        return Error::NotFound(db.message().to_string());
    }
    // Raised by the ledger's functions before they change anything.
    if *code == SqlState::INVALID_PARAMETER_VALUE {
        return Error::InvalidArgument(db.message().to_string());
    }
    if code.code() == HIGH_WATER_TOO_FAR {
        return Error::FailedPrecondition(db.message().to_string());
    }
    let class = &code.code()[..2];
    let transient = matches!(
        class,
        "08" // connection exception
        | "53" // insufficient resources (too many connections, disk full)
        | "57" // operator intervention: shutdown, crash recovery, query cancelled
        | "40" // serialization failure, deadlock: nothing was committed
    ) || *code == SqlState::LOCK_NOT_AVAILABLE
        // A standby after a failover misrouting: writes are refused, nothing was granted.
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        // A standby still in recovery (the timeline check cannot run there).
        || *code == SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE;
    if transient {
        Error::Unavailable(format!("{}: {}", code.code(), db.message()))
    } else if let Some(hint) =
        // Only the session mode names statements; in transaction mode they are unnamed.
        pgtls::pooler::explain_statement_error(
            &error,
            pgtls::pooler::PoolMode::Session,
        )
    {
        Error::Internal(format!("{}: {} ({hint})", code.code(), db.message()))
    } else {
        Error::Internal(format!("{}: {}", code.code(), db.message()))
    }
}
