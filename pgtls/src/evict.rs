//! Pooled connections that must not be used again, and the check that a connection reaches a
//! primary.
//!
//! A connection that answered "read-only transaction" (SQLSTATE 25006: its server is a standby,
//! or a primary demoted under it), was shut down by an administrator or a crash (57P01-57P03),
//! or failed (class 08) will answer the same way to the next caller. Services report every
//! database error to [`note`]; one of these kinds moves the process's eviction mark to now, and
//! the pool hook from [`hook`] discards, instead of handing out, every idle connection made
//! before the mark. A pool full of connections to a demoted primary is thus emptied by the
//! first refused statement, and the connections made after it go where the connection string
//! says (with `target_session_attrs=read-write`, to whichever host is the primary now).
//!
//! The mark is one for the whole process, shared by its pools: a failure seen on one connection
//! usually concerns its peers to the same server, and a connection discarded needlessly costs
//! one reconnect, while one kept wrongly costs a failed request.

use deadpool_postgres::{Hook, HookError, Metrics};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio_postgres::error::SqlState;

/// The instant marks are measured from (set by the first use).
static BASE: OnceLock<Instant> = OnceLock::new();
/// One past the nanoseconds since [`BASE`] of the latest mark; 0 when nothing was marked.
static MARK: AtomicU64 = AtomicU64::new(0);
/// Connections discarded by the hook, ever.
static EVICTED: AtomicU64 = AtomicU64::new(0);

fn since_base(at: Instant) -> u64 {
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(at.saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX)
}

/// Whether an error means its connection must not be reused: the server refused a write as
/// read-only (25006), shut the session down (57P01 admin shutdown, 57P02 crash shutdown, 57P03
/// cannot connect now), or the connection failed (class 08, or no answer at all).
pub fn evicts(error: &tokio_postgres::Error) -> bool {
    match error.code() {
        Some(code) => {
            *code == SqlState::READ_ONLY_SQL_TRANSACTION
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || code.code().starts_with("08")
        }
        // Without a code: a closed connection (an I/O failure closes it too); a decoding
        // error leaves the connection sound.
        None => error.is_closed(),
    }
}

/// Whether an error is the server refusing a write because it is read-only (25006).
pub fn read_only(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION)
}

/// Looks at a database error: if [`evicts`] says so, every pooled connection made until now is
/// discarded at its next checkout. Returns whether it did.
pub fn note(error: &tokio_postgres::Error) -> bool {
    let evicts = evicts(error);
    if evicts {
        mark();
    }
    evicts
}

/// Moves the mark to now: every pooled connection made until now is discarded at its next
/// checkout (for a check that found a connection's server read-only without a failed write).
pub fn mark() {
    MARK.fetch_max(
        since_base(Instant::now()).saturating_add(1),
        Ordering::AcqRel,
    );
}

/// Connections the hook has discarded since the process started (the services' metric
/// `*_db_connections_evicted_total`).
pub fn evicted() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// Whether a connection made at `created` is older than the mark.
fn stale(created: Instant) -> bool {
    let mark = MARK.load(Ordering::Acquire);
    mark != 0 && since_base(created) < mark
}

/// The `pre_recycle` hook every pool of the services installs: a connection made before the
/// latest [`note`]d failure is discarded (and counted) rather than handed out; the pool then
/// takes another idle connection or makes a new one.
pub fn hook() -> Hook {
    // Pin the base before the pool makes its first connection.
    let _ = since_base(Instant::now());
    Hook::sync_fn(|_, metrics: &Metrics| {
        if stale(metrics.created) {
            EVICTED.fetch_add(1, Ordering::Relaxed);
            Err(HookError::message(
                "made before a refused or failed statement",
            ))
        } else {
            Ok(())
        }
    })
}

/// Why a connection is not to a primary.
#[derive(Debug, thiserror::Error)]
pub enum PrimaryError {
    /// The server accepts no writes.
    #[error(
        "the database is read-only (a standby, or a primary demoted since): no primary is reachable \
         through this connection string; list every member with target_session_attrs=read-write"
    )]
    ReadOnly,
    /// The check itself failed.
    #[error("check transaction_read_only: {0}")]
    Query(#[from] tokio_postgres::Error),
}

/// Checks that `client` reaches a server that accepts writes (`SHOW transaction_read_only` is
/// `off`); a read-only one also [`mark`]s every pooled connection for eviction.
pub async fn require_primary(client: &tokio_postgres::Client) -> Result<(), PrimaryError> {
    let rows = client.simple_query("SHOW transaction_read_only").await;
    let rows = match rows {
        Ok(rows) => rows,
        Err(error) => {
            note(&error);
            return Err(error.into());
        }
    };
    let value = rows.iter().find_map(|message| match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
        _ => None,
    });
    if value.as_deref() == Some("off") {
        Ok(())
    } else {
        mark();
        Err(PrimaryError::ReadOnly)
    }
}

/// What [`explain_connect`] adds to a connection failure that found no primary.
pub const NO_PRIMARY: &str =
    "no host of the connection string is a primary (each one that answered is read-only)";

/// The words to add to a connection failure whose last host refused as read-only: with
/// `target_session_attrs=read-write` tokio-postgres reports only "database does not allow
/// writes" for the last host it tried.
pub fn explain_connect(error: &tokio_postgres::Error) -> Option<&'static str> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(c) = cause {
        if c.to_string().contains("does not allow writes") {
            return Some(NO_PRIMARY);
        }
        cause = c.source();
    }
    None
}

/// Runs `attempt` (a start-up step that needs the primary, such as the migrations) until it
/// does not fail for want of a primary (`no_primary` says which failures are that): while an
/// HA cluster has no leader, a service waits, logging why every few seconds, instead of
/// exiting and being restarted in a loop. Any other outcome is returned at once.
pub async fn wait_for_primary<T, E, F, Fut>(
    what: &str,
    mut attempt: F,
    no_primary: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut pause = std::time::Duration::from_millis(500);
    loop {
        match attempt().await {
            Err(error) if no_primary(&error) => {
                tracing::error!(
                    %error,
                    retry_in_ms = pause.as_millis() as u64,
                    "{what}: {NO_PRIMARY}; waiting for one (not ready meanwhile)"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The error a statement gets from a real server, on a fresh session.
    async fn error_of(db: &testkit::TestDb, setup: &str, statement: &str) -> tokio_postgres::Error {
        let client = db.connect().await;
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS t (n int)")
            .await
            .expect("create table");
        if !setup.is_empty() {
            client.batch_execute(setup).await.expect(setup);
        }
        client.batch_execute(statement).await.expect_err(statement)
    }

    #[tokio::test]
    async fn read_only_refusals_shutdowns_and_closed_connections_evict_and_other_errors_do_not() {
        let db = testkit::TestDb::create().await;
        let cases = [
            (
                "SET default_transaction_read_only = on",
                "INSERT INTO t VALUES (1)",
                true,
                true,
            ),
            (
                "",
                "SELECT pg_terminate_backend(pg_backend_pid())",
                true,
                false,
            ),
            ("", "SELECT 1/0", false, false),
            ("", "SELEKT 1", false, false),
            ("", "INSERT INTO missing VALUES (1)", false, false),
        ];
        for (setup, statement, evicting, refused_write) in cases {
            let error = error_of(&db, setup, statement).await;
            assert_eq!(evicts(&error), evicting, "{statement}: {error:?}");
            assert_eq!(read_only(&error), refused_write, "{statement}: {error:?}");
        }
    }

    #[test]
    fn a_connection_made_before_the_mark_is_stale_and_one_made_after_is_not() {
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        mark();
        std::thread::sleep(Duration::from_millis(2));
        let after = Instant::now();
        assert!(stale(before));
        assert!(!stale(after));
    }
}
