//! The conversions every SQLite file shares: times in their stored form (Unix milliseconds),
//! and rusqlite errors as store errors. A leaf: the files that hold SQL use it, it uses none
//! of them.

use crate::store::StoreError;
use chrono::{DateTime, TimeZone, Utc};

/// Unix milliseconds, the stored form of times.
pub(super) fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// A stored time back as a time (the earliest time for one out of range).
pub(super) fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Classifies a rusqlite error: a busy or locked file can be retried later.
pub(super) fn db_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::Unavailable(e.to_string())
        }
        // Only a read is interrupted, at its deadline (`readers`).
        Some(rusqlite::ErrorCode::OperationInterrupted) => {
            StoreError::Unavailable(format!("the read ran past its deadline ({e})"))
        }
        _ => StoreError::Internal(e.to_string()),
    }
}
