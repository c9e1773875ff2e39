//! The read-only connections. A read takes a free one (the next in turn only when all are
//! busy), so one slow read (a year of a busy tenant's rollups, an audit filter that matches
//! little) holds up no other read while another connection is free; and every read has a
//! deadline ([`READ_DEADLINE`]) past which SQLite interrupts it, as PostgreSQL's
//! `statement_timeout` ends a statement, so none holds a connection for long.

use super::convert::db_error;
use crate::store::StoreError;
use rusqlite::Connection;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// The longest one read runs; past it the read fails as the store being unavailable.
pub(super) const READ_DEADLINE: Duration = Duration::from_secs(10);

/// How many of SQLite's virtual machine steps pass between two looks at the deadline (a point
/// lookup takes a few hundred, so it looks at most once or twice).
const STEPS_BETWEEN_LOOKS: i32 = 1000;

/// What the deadlines count from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_millis() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

/// `limit` in whole milliseconds, at least one (0 would mean "no read runs").
fn millis(limit: Duration) -> u64 {
    (limit.as_millis() as u64).max(1)
}

/// One read-only connection and the deadline of the read on it (milliseconds since
/// [`EPOCH`]; 0 while none runs).
struct Reader {
    connection: Mutex<Connection>,
    deadline: Arc<AtomicU64>,
}

/// The read-only connections of a store.
pub(super) struct Readers {
    connections: Vec<Reader>,
    next: AtomicUsize,
    /// How long one read may run, in milliseconds ([`READ_DEADLINE`] until
    /// [`Readers::set_limit`]).
    limit: AtomicU64,
    /// Places for heavy reads (stats): one fewer than the connections, at least one.
    heavy: tokio::sync::Semaphore,
}

impl Readers {
    /// `connections`, each made read-only and given its deadline check: a read runs for
    /// `limit` at most.
    pub(super) fn new(connections: Vec<Connection>, limit: Duration) -> Result<Self, StoreError> {
        let connections = connections
            .into_iter()
            .map(|mut connection| {
                connection
                    .pragma_update(None, "query_only", true)
                    .map_err(db_error)?;
                connection
                    .pragma_update(None, "cache_size", -16384)
                    .map_err(db_error)?;
                let deadline = Arc::new(AtomicU64::new(0));
                let cell = Arc::clone(&deadline);
                connection
                    .progress_handler(
                        STEPS_BETWEEN_LOOKS,
                        Some(move || {
                            let at = cell.load(Ordering::Relaxed);
                            at != 0 && now_millis() >= at
                        }),
                    )
                    .map_err(db_error)?;
                Ok(Reader {
                    connection: Mutex::new(connection),
                    deadline,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let heavy = tokio::sync::Semaphore::new(connections.len().saturating_sub(1).max(1));
        Ok(Self {
            connections,
            next: AtomicUsize::new(0),
            limit: AtomicU64::new(millis(limit)),
            heavy,
        })
    }

    /// Reads from now on run for `limit` at most (a read already running keeps its deadline).
    pub(super) fn set_limit(&self, limit: Duration) {
        self.limit.store(millis(limit), Ordering::Relaxed);
    }

    fn limit(&self) -> Duration {
        Duration::from_millis(self.limit.load(Ordering::Relaxed))
    }

    /// A place for a heavy read, held while it runs: with it, such reads hold all connections
    /// but one at most. Waited for as long as a read may run, then the store is unavailable.
    pub(super) async fn heavy_place(&self) -> Result<tokio::sync::SemaphorePermit<'_>, StoreError> {
        match tokio::time::timeout(self.limit(), self.heavy.acquire()).await {
            Ok(Ok(place)) => Ok(place),
            Ok(Err(_)) => Err(StoreError::Internal(
                "the heavy-read places are closed".into(),
            )),
            Err(_) => Err(StoreError::Unavailable(
                "heavy reads hold every connection they may".into(),
            )),
        }
    }

    /// Runs `f` on a free connection (else the next in turn, once it is free) on the blocking
    /// pool, within its deadline (an interrupted read is [`StoreError::Unavailable`]).
    pub(super) async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let (reader, mut connection) = readers.take();
            let limit = readers.limit.load(Ordering::Relaxed);
            reader
                .deadline
                .store(now_millis() + limit, Ordering::Relaxed);
            let read = f(&mut connection);
            reader.deadline.store(0, Ordering::Relaxed);
            read
        })
        .await
        .map_err(|e| StoreError::Internal(format!("store task failed: {e}")))?
    }

    /// A free connection, looking from the next in turn; the next in turn itself when none is.
    /// (A panic mid-read rolls its transaction back as it unwinds, so a poisoned connection is
    /// consistent.)
    fn take(&self) -> (&Reader, MutexGuard<'_, Connection>) {
        let count = self.connections.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..count {
            let reader = &self.connections[(start + k) % count];
            match reader.connection.try_lock() {
                Ok(guard) => return (reader, guard),
                Err(TryLockError::Poisoned(poisoned)) => return (reader, poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        let reader = &self.connections[start % count];
        let guard = reader
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (reader, guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readers(count: usize) -> (tempfile::TempDir, Arc<Readers>) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("read.db");
        let writer = Connection::open(&path).expect("open");
        writer
            .execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);")
            .expect("table");
        let connections = (0..count)
            .map(|_| Connection::open(&path).expect("open"))
            .collect();
        let limit = Duration::from_millis(200);
        (
            dir,
            Arc::new(Readers::new(connections, limit).expect("readers")),
        )
    }

    /// A read that would run for ever.
    async fn endless(readers: &Arc<Readers>) -> Result<i64, StoreError> {
        readers
            .run(|c| {
                c.query_row(
                    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) \
                     SELECT count(*) FROM r",
                    [],
                    |row| row.get::<_, i64>(0),
                )
                .map_err(db_error)
            })
            .await
    }

    /// A read that would run for ever is interrupted at its deadline and reported as the
    /// store being unavailable; the connection serves the next read.
    #[tokio::test]
    async fn a_read_past_its_deadline_is_interrupted() {
        let (_dir, readers) = readers(1);
        let endless = endless(&readers).await;
        assert!(
            matches!(&endless, Err(StoreError::Unavailable(m)) if m.contains("deadline")),
            "{endless:?}"
        );
        let next = readers
            .run(|c| {
                c.query_row("SELECT n FROM t", [], |row| row.get::<_, i64>(0))
                    .map_err(db_error)
            })
            .await;
        assert_eq!(next.expect("read"), 1);
    }

    /// A limit set later governs the reads that start after it: an endless read runs until
    /// the new, longer deadline rather than the first one.
    #[tokio::test]
    async fn a_new_limit_governs_later_reads() {
        let (_dir, readers) = readers(1);
        readers.set_limit(Duration::from_millis(1500));
        let started = Instant::now();
        let endless = endless(&readers).await;
        assert!(
            matches!(&endless, Err(StoreError::Unavailable(_))),
            "{endless:?}"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(1400),
            "interrupted after {:?}, before the new deadline",
            started.elapsed()
        );
    }

    /// While one connection is busy, reads go to a free one instead of waiting behind it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_busy_connection_holds_up_no_read_while_another_is_free() {
        let (_dir, readers) = readers(2);
        let (started, entered) = std::sync::mpsc::channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = {
            let readers = Arc::clone(&readers);
            tokio::spawn(async move {
                readers
                    .run(move |_| {
                        let _ = started.send(());
                        let _ = held.recv();
                        Ok(())
                    })
                    .await
            })
        };
        entered.recv().expect("the busy read started");
        for _ in 0..10 {
            let read = tokio::time::timeout(
                Duration::from_secs(5),
                readers.run(|c| {
                    c.query_row("SELECT n FROM t", [], |row| row.get::<_, i64>(0))
                        .map_err(db_error)
                }),
            )
            .await;
            assert_eq!(read.expect("not held up").expect("read"), 1);
        }
        release.send(()).expect("release");
        busy.await.expect("task").expect("busy read");
    }
}
