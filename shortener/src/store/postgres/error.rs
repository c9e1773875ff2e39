//! PostgreSQL failures as [`StoreError`]s: what can be retried at once, what means the database
//! is not there, and what leaves a write's outcome unknown.

use crate::store::StoreError;
use deadpool_postgres::PoolError;

/// Classifies a tokio-postgres error, and tells the pools' eviction (see [`pgtls::evict`]) about
/// it: a connection that answered read-only, was shut down or failed is not handed out again.
pub(super) fn db_error(e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    pgtls::evict::note(&e);
    // The library's text omits the server's message and the cause (a refused connection, an
    // untrusted certificate); keep them for the logs.
    let text = match e.as_db_error() {
        // A prepared statement gone or already there: a pooler in transaction mode, probably.
        Some(db) => {
            match pgtls::pooler::explain_statement_error(&e, pgtls::pooler::PoolMode::Session) {
                Some(hint) => format!("{} ({}): {} ({hint})", e, db.code().code(), db.message()),
                None => format!("{} ({}): {}", e, db.code().code(), db.message()),
            }
        }
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            if let Some(hint) = pgtls::evict::explain_connect(&e) {
                text = format!("{hint}: {text}");
            }
            text
        }
    };
    let code = e.code().map(SqlState::code).unwrap_or("");
    if e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED)
        || e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
        // A server that is (now) a standby refused the write before doing anything; the
        // connection is evicted, and a fresh one finds the primary if the URL lists it.
        || pgtls::evict::read_only(&e)
    {
        // The statement rolled back and can run again at once.
        StoreError::Retry(text)
    } else if e.code().is_none()
        || e.is_closed()
        // connection exceptions, insufficient resources, operator intervention (shutdown, crash
        // recovery, cannot connect now), query cancelled: the database is (for now) not there.
        || code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57")
    {
        StoreError::Unavailable(text)
    } else {
        StoreError::Internal(text)
    }
}

/// For a failure after a write was sent: if the connection went away, the commit may or may not
/// have happened.
pub(super) fn after_write(error: StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(message) => StoreError::Ambiguous(message),
        other => other,
    }
}

/// A failure to take a connection from the pool. A database not accepting connections for
/// now (`55000`: `ALLOW_CONNECTIONS false`, as during a restore or a drop) is not there for
/// this node, as one that is down; too many clients (`53300`) and a server starting or
/// stopping (`57P03`) are already. A refused password or a database that does not exist
/// stay internal errors: no retry mends them, and they are logged as such.
pub(super) fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => {
            let refused_for_now = e.code()
                == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE);
            match db_error(e) {
                StoreError::Internal(text) if refused_for_now => StoreError::Unavailable(text),
                other => other,
            }
        }
        other => StoreError::Unavailable(other.to_string()),
    }
}
