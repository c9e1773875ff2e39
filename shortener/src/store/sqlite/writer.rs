//! The embedded store's writer thread: every write to the SQLite file runs here, and each
//! round of writes is made durable by one fsync of the WAL before anyone is answered.
//!
//! A round takes everything waiting: create rows (up to the batch limit) go into one
//! transaction together; any other write (a lease, a delete, a click-flush chunk, a create
//! with an idempotency key, a migration) runs as a transaction of its own. Then the thread
//! fsyncs the WAL ([`WalSync::sync_now`]) and answers the whole round, and starts the next with
//! what arrived meanwhile, so rounds grow with the disk's latency.
//!
//! The one exception is a write that needs no fsync of its own (a chunk of click counts, made
//! durable later by one fsync for the whole flush): a round holding nothing else runs no fsync,
//! answers at its commits, and is not counted as a write that reads must wait for. In a round
//! with durable writes it is answered with them, after their fsync.
//!
//! One thread doing the whole cycle keeps the hand-offs to a minimum: under load it never
//! sleeps except in its fsync, so a round costs two context switches. It also means one fsync
//! covers every kind of write at once: a lease taken in the middle of a stream of creates
//! shares their fsync instead of adding one of its own (docs/decisions.md has the figures).

use super::rows::insert_all;
use super::walsync::WalSync;
use crate::store::reply::{Reply, answer};
use crate::store::{HighWater, InsertOutcome, NewLink, StoreError, WriterStats};
use codespace::CodeSpace;
use rusqlite::Connection;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{mpsc, oneshot};

/// What answers a write once the fsync after it has finished (with that fsync's outcome).
type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A write of its own: runs its transaction (given a connection; given none, it is refused
/// unrun), returns how to answer it.
type Run = Box<dyn FnOnce(Option<&mut Connection>) -> Done + Send>;

enum Job {
    /// A create row, batched with the others waiting. Boxed: a row is near a kilobyte, and
    /// unboxed it is copied into the caller's future, the channel and out again, and makes
    /// every slot of the channel as large.
    Insert(Box<NewLink>, Reply),
    /// A transaction of its own, answered after an fsync covers it.
    Run(Run),
    /// A transaction of its own, answered at its commit: no fsync waits for it.
    RunUnsynced(Run),
}

/// A handle to the writer thread; cheap to clone. The thread ends when every handle is gone.
#[derive(Clone)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
    stats: Arc<WriterStats>,
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the SQLite writer thread has stopped".into())
}

fn panicked() -> StoreError {
    StoreError::Internal(
        "a write to the SQLite store panicked; what it had not committed was rolled back".into(),
    )
}

impl Writer {
    /// Starts the thread over `conn` (the file's only writer connection), whose generated
    /// rows are made in `space` and raise `high_water` as they are written (before their
    /// commit). A round carries at most `max_batch` create rows.
    pub(super) fn start(
        conn: Connection,
        sync: Arc<WalSync>,
        space: Arc<CodeSpace>,
        high_water: Arc<HighWater>,
        max_batch: usize,
    ) -> Result<Self, StoreError> {
        let max_batch = max_batch.max(1);
        let (jobs, queue) = mpsc::channel(max_batch * 4);
        let stats = Arc::new(WriterStats::default());
        let thread_stats = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let placement = (&*space, &*high_water);
                rounds(conn, queue, &sync, placement, max_batch, &thread_stats)
            })
            .map_err(|e| StoreError::Internal(format!("start the SQLite writer thread: {e}")))?;
        Ok(Self { jobs, stats })
    }

    /// Rounds and create rows written so far.
    pub(super) fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }

    /// Inserts one create row in the next round; returns after the fsync that covers it.
    pub(super) async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        let (reply, outcome) = oneshot::channel();
        self.jobs
            .send(Job::Insert(Box::new(link), reply))
            .await
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }

    /// Runs `f` as a transaction of its own in the next round; returns its value after the
    /// fsync that covers it.
    pub(super) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(f, Job::Run).await
    }

    /// Runs `f` as a transaction of its own in the next round and returns its value once it
    /// has committed (or, in a round with durable writes, once their fsync is done), without
    /// waiting for an fsync of its own: a crash of the machine (not only of the
    /// process) can take it back until a later [`Writer::run`] returns. Reads may see it
    /// before then without waiting for an fsync ([`WalSync::reveal`] does not count a round of
    /// such writes), so it is only for data whose loss in a machine crash is acceptable and
    /// that nothing acknowledged depends on: click counts, never links or leases.
    pub(super) async fn run_unsynced<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(f, Job::RunUnsynced).await
    }

    async fn submit<T, F>(&self, f: F, job: fn(Run) -> Job) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, value) = oneshot::channel();
        let run: Run = Box::new(move |conn| {
            let result = conn.map(|conn| guarded(conn, f));
            Box::new(move |synced: Result<(), StoreError>| {
                let answer = match result {
                    Some(result) => result.and_then(|v| synced.map(|()| v)),
                    // Refused unrun: `synced` carries the reason.
                    None => synced.and_then(|()| Err(stopped())),
                };
                let _ = reply.send(answer);
            })
        });
        self.jobs.send(job(run)).await.map_err(|_| stopped())?;
        value.await.map_err(|_| stopped())?
    }
}

/// Runs `f` on `conn`; a panic becomes an error. A panic unwinds through the transaction,
/// which rolls it back. A transaction left open (begun by hand, then a panic or a return
/// without `COMMIT`) is rolled back here and fails the write, so the next write starts clean.
fn guarded<T>(
    conn: &mut Connection,
    f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let result = catch_unwind(AssertUnwindSafe(|| f(conn))).unwrap_or_else(|_| Err(panicked()));
    if conn.is_autocommit() {
        return result;
    }
    let _ = conn.execute_batch("ROLLBACK");
    result.and(Err(StoreError::Internal(
        "a write to the SQLite store left its transaction open; it was rolled back".into(),
    )))
}

/// `error`, from an fsync that followed committed writes, as their outcome: unknown.
fn in_doubt(error: StoreError) -> StoreError {
    match error {
        StoreError::Internal(message) => StoreError::Ambiguous(message),
        other => other,
    }
}

/// The thread: rounds of writes until every handle is dropped.
fn rounds(
    mut conn: Connection,
    mut queue: mpsc::Receiver<Job>,
    sync: &WalSync,
    (space, high_water): (&CodeSpace, &HighWater),
    max_batch: usize,
    stats: &WriterStats,
) {
    while let Some(first) = queue.blocking_recv() {
        let (mut links, mut replies, mut runs) = (Vec::new(), Vec::new(), Vec::new());
        // Whether anything in the round waits for an fsync.
        let mut durable = false;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Insert(link, reply) => {
                    links.push(*link);
                    replies.push(reply);
                    durable = true;
                }
                Job::Run(run) => {
                    runs.push(run);
                    durable = true;
                }
                Job::RunUnsynced(run) => runs.push(run),
            }
            if links.len() < max_batch && runs.len() < max_batch {
                next = queue.try_recv().ok();
            }
        }
        if let Some(error) = sync.failed() {
            // Nothing is trusted after a failed fsync: run nothing more, answer the error.
            answer(replies, Err(error.clone()));
            for run in runs {
                run(None)(Err(error.clone()));
            }
            continue;
        }
        let write = || {
            let inserted = (!links.is_empty()).then(|| {
                guarded(&mut conn, |conn| {
                    insert_all(conn, space, high_water, &links)
                })
            });
            let done: Vec<Done> = runs.into_iter().map(|run| run(Some(&mut conn))).collect();
            (inserted, done)
        };
        // A round of unsynced writes only is neither marked as writing nor fsynced: reads may
        // reveal it before an fsync (see `Writer::run_unsynced`).
        let ((inserted, done), synced) = if durable {
            // The round's writes are committed to the WAL: an fsync that fails after them
            // leaves their outcome unknown (they may be there after a restart), which is what
            // their callers are told, not that they failed.
            (sync.writing(write), sync.sync_now().map_err(in_doubt))
        } else {
            (write(), Ok(()))
        };
        if let Some(result) = inserted {
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.rows.fetch_add(links.len() as u64, Ordering::Relaxed);
            answer(replies, result.and_then(|o| synced.clone().map(|()| o)));
        }
        for done in done {
            done(synced.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::convert::db_error;
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A test write with nothing to return.
    type TestWrite = Box<dyn FnOnce(&mut Connection) -> Result<(), StoreError> + Send>;

    fn start() -> (tempfile::TempDir, Writer, Arc<WalSync>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.db");
        let conn = Connection::open(&path).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        let sync = Arc::new(WalSync::start(&path).expect("sync"));
        let space = Arc::new(
            CodeSpace::new(&codespace::CodeKey::generate(), codespace::DEFAULT_LENGTH)
                .expect("space"),
        );
        let writer = Writer::start(
            conn,
            Arc::clone(&sync),
            space,
            Arc::new(HighWater::unknown()),
            8,
        )
        .expect("writer");
        (dir, writer, sync)
    }

    /// A writer over a file with one table `t (v INTEGER)`, created by one durable write.
    async fn start_with_table() -> (tempfile::TempDir, Writer, Arc<WalSync>) {
        let (dir, writer, sync) = start();
        writer
            .run(|conn| {
                conn.execute_batch("CREATE TABLE t (v INTEGER)")
                    .map_err(db_error)
            })
            .await
            .expect("create table");
        (dir, writer, sync)
    }

    /// A write that panics fails alone, rolled back, and the thread goes on writing.
    #[tokio::test]
    async fn a_panicking_write_fails_alone_and_the_thread_goes_on() {
        let (_dir, writer, sync) = start_with_table().await;
        // A panic inside a rusqlite transaction, a panic inside one begun by hand, and a
        // return that leaves one begun by hand open: each fails alone and is rolled back.
        let failing: [TestWrite; 3] = [
            Box::new(|conn| {
                let tx = conn.transaction().expect("begin");
                tx.execute("INSERT INTO t VALUES (1)", []).expect("insert");
                panic!("a bug in a write");
            }),
            Box::new(|conn| {
                conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
                    .expect("begin");
                panic!("a bug inside a transaction begun by hand");
            }),
            Box::new(|conn| {
                conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (3)")
                    .map_err(db_error)
            }),
        ];
        for (i, write) in failing.into_iter().enumerate() {
            let outcome = writer.run(write).await;
            assert!(
                matches!(outcome, Err(StoreError::Internal(_))),
                "case {i}: {outcome:?}"
            );
        }
        let refused = writer
            .run(|_| -> Result<(), StoreError> { Err(StoreError::Internal("refused".into())) })
            .await;
        assert!(matches!(refused, Err(StoreError::Internal(m)) if m == "refused"));
        let rows: i64 = writer
            .run(|conn| {
                conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                    .map_err(db_error)
            })
            .await
            .expect("count");
        assert_eq!(rows, 0, "every failed write was rolled back");
        let d = sync.durability();
        assert_eq!((d.writes, d.durable_writes), (6, 6));
    }

    /// An unsynced write is answered at its commit, with no fsync of its own; reads do not
    /// wait for one to reveal it, and the next durable write's fsync covers it.
    #[tokio::test]
    async fn unsynced_writes_wait_for_no_fsync_until_a_durable_one() {
        let (_dir, writer, sync) = start_with_table().await;
        let before = sync.durability();
        for v in 0..5 {
            writer
                .run_unsynced(move |conn| {
                    conn.execute("INSERT INTO t VALUES (?1)", [v])
                        .map(drop)
                        .map_err(db_error)
                })
                .await
                .expect("unsynced insert");
        }
        sync.reveal().await.expect("a read that saw them");
        let revealed = sync.durability();
        assert_eq!(
            revealed.wal_syncs, before.wal_syncs,
            "no fsync for them, not even for a read that saw them"
        );
        assert_eq!(
            revealed.writes, before.writes,
            "not counted as durable writes"
        );
        writer
            .run_unsynced(|conn| {
                conn.execute("INSERT INTO t VALUES (5)", [])
                    .map(drop)
                    .map_err(db_error)
            })
            .await
            .expect("unsynced insert");
        writer.run(|_| Ok(())).await.expect("a durable write");
        let after = sync.durability();
        assert_eq!(after.wal_syncs, revealed.wal_syncs + 1);
        assert_eq!(
            after.durable_writes, after.writes,
            "the durable write's fsync covers it"
        );
    }

    /// After a failed fsync the writer runs nothing more: every write is refused unrun, with
    /// the fsync's error.
    #[tokio::test]
    async fn a_round_whose_fsync_fails_is_answered_as_unknown() {
        let (_dir, writer, sync) = start();
        let failing = Arc::clone(&sync);
        // The write commits; the fsync after it fails.
        let answered = writer
            .run(move |_| {
                failing.fail_for_test("EIO (simulated)");
                Ok(())
            })
            .await;
        assert!(
            matches!(&answered, Err(StoreError::Ambiguous(m)) if m.contains("EIO (simulated)")),
            "{answered:?}"
        );
        // What comes after is refused unrun, as a plain failure: it was not written.
        let refused = writer.run(|_| Ok(())).await;
        assert!(
            matches!(&refused, Err(StoreError::Internal(_))),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn after_a_failed_fsync_writes_are_refused_unrun() {
        let (_dir, writer, sync) = start();
        writer
            .run(|_| Ok(()))
            .await
            .expect("a write before the failure");
        sync.fail_for_test("EIO (simulated)");
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let refused = writer
            .run(move |_| {
                flag.store(true, Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert!(
            matches!(&refused, Err(StoreError::Internal(m)) if m.contains("EIO (simulated)")),
            "{refused:?}"
        );
        assert!(
            !ran.load(Ordering::SeqCst),
            "a write ran after the fsync failed"
        );
        assert_eq!(sync.durability().writes, 1);
    }
}
