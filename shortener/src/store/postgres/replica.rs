//! Reads from a streaming replica (`SHORTENER_DATABASE_READ_URL`): redirect cache misses, gets,
//! histories, lists and exports go there, and everything that decides a write stays on the
//! primary (dedup and idempotency lookups, the codes an import checks, every write).
//!
//! A replica lags, so a read goes to the primary instead when the replica could answer wrong:
//!
//! - **Unknown there**: a code the replica does not have is looked up on the primary before
//!   anyone is told it does not exist, so a fresh link never answers 404 because of lag.
//! - **Changed here**: a link this node changed, or that the change feed reports changed by
//!   another node, and a tenant this node wrote to, are *marked*. A marked code or tenant reads
//!   from the primary until the replica has replayed the primary's WAL past the change: the
//!   mark holds the primary's WAL position taken after the change committed, and a poll of the
//!   replica's replay position (every [`POLL`]) clears the marks it has passed. So whoever
//!   writes through a node reads their own writes through it, and a cache refilled after a
//!   change notification is refilled from a store that has the change.
//! - **Down or wrong**: a replica that does not answer sends reads to the primary (counted, and
//!   logged when it goes and when it comes back), never an error to the client. One that is not
//!   in recovery (a primary) or replicates another cluster or database is refused at start-up
//!   and, if it turns into one later (a promotion), is no longer read from.
//!
//! One state machine (marks, replay position, availability) with its poll and its unit tests
//! (the last 30-odd lines).

use super::error::db_error;
use super::replica_marks::{Lsn, Mark, Marks};
use super::send::{Conn, Pooled};
use crate::store::StoreError;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often the replica's replay position (and whether it is still a replica) is read.
pub const POLL: Duration = Duration::from_millis(100);
/// How often the replica's lag behind the primary, in bytes, is measured.
const LAG_EVERY: u32 = 10;

/// Why a read that could have gone to the replica went to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The replica did not have the row: the primary was asked before answering "not found".
    Unknown,
    /// The code or tenant changed recently and the replica had not replayed the change.
    Fresh,
    /// The replica did not answer (or is not verified yet).
    Down,
    /// The replica answered the read with an error.
    Error,
    /// The replica was refused: not in recovery, or another cluster or database.
    Refused,
}

impl Fallback {
    /// Every reason, in the order of the metric's series.
    pub const ALL: [Fallback; 5] = [
        Fallback::Unknown,
        Fallback::Fresh,
        Fallback::Down,
        Fallback::Error,
        Fallback::Refused,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Fallback::Unknown => "unknown",
            Fallback::Fresh => "fresh",
            Fallback::Down => "down",
            Fallback::Error => "error",
            Fallback::Refused => "refused",
        }
    }
}

/// What the replica routing has done, for `/metrics`.
#[derive(Debug, Default)]
pub struct ReplicaStats {
    /// Reads the replica answered.
    pub reads: AtomicU64,
    fallbacks: [AtomicU64; 5],
    /// Whether the replica answers and is verified (1) or not (0).
    pub available: AtomicBool,
    /// The replica's distance behind the primary in WAL bytes at the last measurement (-1
    /// before the first).
    pub lag_bytes: AtomicI64,
}

impl ReplicaStats {
    /// Reads sent to the primary for `reason`.
    pub fn fallbacks(&self, reason: Fallback) -> u64 {
        self.fallbacks[reason as usize].load(Ordering::Relaxed)
    }

    fn fell_back(&self, reason: Fallback) {
        self.fallbacks[reason as usize].fetch_add(1, Ordering::Relaxed);
    }
}

const UNVERIFIED: u8 = 0;
const VERIFIED: u8 = 1;
const REFUSED: u8 = 2;

/// The replica's pool and what is known of it.
pub(super) struct Replica {
    pool: Pooled,
    primary: Pooled,
    marks: Mutex<Marks>,
    replayed: AtomicI64,
    state: AtomicU8,
    stats: Arc<ReplicaStats>,
}

/// Where a read goes (short-lived, on the stack of one read: the connection is not boxed).
#[allow(clippy::large_enum_variant)]
pub(super) enum Route {
    /// To the replica, on this connection.
    Replica(Conn),
    /// To the primary.
    Primary,
}

/// What the scope of a read is: one code, or the links of a tenant (`None`: every tenant).
pub(super) enum Scope<'a> {
    Code(&'a str),
    Tenant(Option<&'a str>),
}

impl Replica {
    /// The replica behind `pool`, read instead of `primary`; starts its poll on the current
    /// runtime (it ends when the store is dropped).
    pub(super) fn start(pool: Pooled, primary: Pooled) -> Arc<Self> {
        let replica = Arc::new(Self {
            pool,
            primary,
            marks: Mutex::new(Marks::default()),
            replayed: AtomicI64::new(-1),
            state: AtomicU8::new(UNVERIFIED),
            stats: Arc::new(ReplicaStats {
                lag_bytes: AtomicI64::new(-1),
                ..ReplicaStats::default()
            }),
        });
        tokio::spawn(poll(Arc::downgrade(&replica)));
        replica
    }

    /// The replica pool's connections now.
    pub(super) fn pool_status(&self) -> deadpool_postgres::Status {
        self.pool.pool.status()
    }

    pub(super) fn stats(&self) -> Arc<ReplicaStats> {
        Arc::clone(&self.stats)
    }

    /// Checks the replica at start-up: an answer that shows it is not a replica of this
    /// database is an error; no answer is not (reads go to the primary until it answers).
    pub(super) async fn verify_at_start(&self) -> Result<(), StoreError> {
        match self.verify().await {
            Ok(()) => Ok(()),
            Err(Verify::Refused(why)) => Err(StoreError::Internal(why)),
            Err(Verify::Unreachable(error)) => {
                tracing::warn!(%error, "the read replica does not answer; reads go to the primary until it does");
                Ok(())
            }
        }
    }

    async fn verify(&self) -> Result<(), Verify> {
        let replica = self
            .pool
            .get()
            .await
            .map_err(|e| Verify::Unreachable(e.to_string()))?;
        let primary = self
            .primary
            .get()
            .await
            .map_err(|e| Verify::Unreachable(format!("the primary: {e}")))?;
        let ours = identity(&replica).await.map_err(Verify::Unreachable)?;
        let theirs = identity(&primary).await.map_err(Verify::Unreachable)?;
        let refused = if !ours.in_recovery {
            Some("SHORTENER_DATABASE_READ_URL points at a server that is not in recovery (a primary, not a streaming replica); refusing to read from it".to_string())
        } else if ours.system != theirs.system {
            Some(format!(
                "SHORTENER_DATABASE_READ_URL is a replica of another cluster (system identifier {} where DATABASE_URL's is {}); refusing to read from it",
                ours.system, theirs.system
            ))
        } else if ours.database != theirs.database {
            Some(format!(
                "SHORTENER_DATABASE_READ_URL names database {:?} where DATABASE_URL names {:?}; refusing to read from it",
                ours.database, theirs.database
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            if self.state.swap(REFUSED, Ordering::AcqRel) != REFUSED {
                tracing::error!("{why}");
            }
            self.stats.available.store(false, Ordering::Relaxed);
            return Err(Verify::Refused(why));
        }
        self.state.store(VERIFIED, Ordering::Release);
        Ok(())
    }

    /// Where a read of `scope` goes now.
    pub(super) async fn route(&self, scope: Scope<'_>) -> Route {
        match self.state.load(Ordering::Acquire) {
            REFUSED => return self.primary_for(Fallback::Refused),
            VERIFIED => {}
            _ => return self.primary_for(Fallback::Down),
        }
        if !self.stats.available.load(Ordering::Relaxed) {
            return self.primary_for(Fallback::Down);
        }
        if self.marked(&scope) {
            return self.primary_for(Fallback::Fresh);
        }
        match self.pool.get().await {
            Ok(client) => Route::Replica(client),
            Err(_) => {
                self.went_down("a connection could not be had");
                self.primary_for(Fallback::Down)
            }
        }
    }

    fn primary_for(&self, reason: Fallback) -> Route {
        self.stats.fell_back(reason);
        Route::Primary
    }

    /// Counts a read the replica answered.
    pub(super) fn answered(&self) {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a read that falls back to the primary after the replica's answer.
    pub(super) fn fell_back(&self, reason: Fallback, error: Option<&StoreError>) {
        if let Some(error) = error {
            tracing::debug!(%error, "a read on the replica failed; asking the primary");
        }
        self.stats.fell_back(reason);
    }

    fn marked(&self, scope: &Scope<'_>) -> bool {
        let marks = self.marks.lock().expect("marks");
        if marks.everything.is_some() {
            return true;
        }
        match scope {
            Scope::Code(code) => marks.codes.contains_key(*code),
            Scope::Tenant(tenant) => {
                marks.any.is_some()
                    || match tenant {
                        Some(t) => marks.tenants.contains_key(*t),
                        None => !marks.tenants.is_empty(),
                    }
            }
        }
    }

    /// Marks a write that just committed: `codes` changed, of `tenant` (`None`: not known here).
    pub(super) fn wrote<'a>(&self, codes: impl IntoIterator<Item = &'a str>, tenant: Option<&str>) {
        // Stamped under the lock: marks go in in the order of their instants, so the one that
        // stands for all past their bound is the newest.
        let mut marks = self.marks.lock().expect("marks");
        marks.mark(codes, tenant, Mark::Pending(Instant::now()));
    }

    /// Marks a code another node changed (the change feed reported it).
    pub(super) fn changed_elsewhere(&self, code: &str) {
        // Its tenant is not in the notification: lists wait for it too.
        let mut marks = self.marks.lock().expect("marks");
        marks.mark([code], None, Mark::Pending(Instant::now()));
    }

    /// Marks everything: the change feed reconnected, so changes may have gone unreported.
    pub(super) fn missed_changes(&self) {
        self.marks.lock().expect("marks").everything = Some(Mark::Pending(Instant::now()));
    }

    fn went_down(&self, why: &str) {
        if self.stats.available.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                why,
                "the read replica is unavailable; reads go to the primary"
            );
        }
    }

    /// One poll: the replica's replay position and recovery state, the primary's position when
    /// marks wait for it, and now and then the lag.
    async fn poll_once(&self, round: u32) {
        if self.state.load(Ordering::Acquire) != VERIFIED {
            if self.verify().await.is_err() {
                return;
            }
            tracing::info!("the read replica is verified; reads go to it");
        }
        let status = async {
            let client = self.pool.get().await.map_err(|e| e.to_string())?;
            let row = client
                .query_one(
                    "SELECT pg_is_in_recovery(), (coalesce(pg_last_wal_replay_lsn(), '0/0') - '0/0'::pg_lsn)::bigint",
                    &[],
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok::<(bool, Lsn), String>((row.get(0), row.get(1)))
        }
        .await;
        let replayed = match status {
            Ok((true, replayed)) => replayed,
            Ok((false, _)) => {
                // Promoted (or replaced by a primary): its data no longer follows ours.
                let _ = self.verify().await;
                return;
            }
            Err(error) => {
                self.went_down(&error);
                return;
            }
        };
        self.replayed.store(replayed, Ordering::Relaxed);
        let pending = self.marks.lock().expect("marks").has_pending();
        let primary = if pending || round.is_multiple_of(LAG_EVERY) {
            let at = Instant::now();
            primary_lsn(&self.primary).await.ok().map(|lsn| (at, lsn))
        } else {
            None
        };
        if let Some((_, lsn)) = primary
            && round.is_multiple_of(LAG_EVERY)
        {
            self.stats
                .lag_bytes
                .store((lsn - replayed).max(0), Ordering::Relaxed);
        }
        self.marks.lock().expect("marks").settle(primary, replayed);
        if !self.stats.available.swap(true, Ordering::Relaxed) {
            tracing::info!("the read replica answers; reads go to it");
        }
    }
}

enum Verify {
    Refused(String),
    Unreachable(String),
}

struct Identity {
    in_recovery: bool,
    system: String,
    database: String,
}

async fn identity(client: &Conn) -> Result<Identity, String> {
    let row = client
        .query_one(
            "SELECT pg_is_in_recovery(), (SELECT system_identifier FROM pg_control_system())::text, current_database()",
            &[],
        )
        .await
        .map_err(|e| db_error(e).to_string())?;
    Ok(Identity {
        in_recovery: row.get(0),
        system: row.get(1),
        database: row.get(2),
    })
}

async fn primary_lsn(pool: &Pooled) -> Result<Lsn, StoreError> {
    let client = pool.get().await.map_err(super::error::pool_error)?;
    let row = client
        .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint", &[])
        .await
        .map_err(db_error)?;
    Ok(row.get(0))
}

async fn poll(replica: Weak<Replica>) {
    let mut round = 0u32;
    loop {
        let Some(replica) = replica.upgrade() else {
            return;
        };
        replica.poll_once(round).await;
        drop(replica);
        round = round.wrapping_add(1);
        tokio::time::sleep(POLL).await;
    }
}
