//! Group commit for the SQLite store: one fsync of the WAL makes many commits durable.
//!
//! The writer connection runs with `synchronous = NORMAL`: a commit appends its frames to the
//! WAL and returns without an fsync (SQLite still syncs around every checkpoint and when the WAL
//! starts over, so the file is consistent after any crash). Durability is then this module's
//! job: a write is answered only after an fsync of the WAL that began after the commit. The
//! store's writer thread runs one itself after each round of writes ([`WalSync::sync_now`]);
//! anyone else waits at a [`WalSync::barrier`] for a dedicated thread that runs fsyncs back to
//! back, where callers that arrive while one is running share the next.
//!
//! Reads must not reveal a commit that a crash could still take back (a dedup hit answered from
//! a row whose fsync has not finished would acknowledge a link that may vanish). A read
//! therefore calls [`WalSync::reveal`] before it answers: free when every commit so far is
//! synced, one shared fsync otherwise.
//!
//! An fsync error is final: the kernel may have dropped the dirty pages, so a later fsync that
//! succeeds proves nothing. From then on every write and read of the store fails, and the node
//! must be restarted (SQLite recovers the file from its WAL on open).

use crate::store::StoreError;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use tokio::sync::oneshot;

type Waiter = oneshot::Sender<Result<(), String>>;

/// A snapshot of what the group commit has done ([`crate::store::Capabilities::durability`]).
#[derive(Debug, Clone, Copy)]
pub struct Durability {
    /// Fsyncs of the WAL run so far.
    pub wal_syncs: u64,
    /// Rounds of durable writes finished on the writer connection (each one or more
    /// transactions; rounds of unsynced click counts only are not counted).
    pub writes: u64,
    /// How many of them an fsync is known to cover.
    pub durable_writes: u64,
}

/// Makes commits of one SQLite file durable in groups. Dropping it stops its thread.
pub(super) struct WalSync {
    shared: Arc<SyncState>,
}

struct SyncState {
    /// The WAL file (the same inode SQLite writes: SQLite removes it only when the last
    /// connection closes, and the store keeps its connections open as long as this lives).
    wal: File,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// True while the writer runs a round of writes (from before the first `BEGIN` to after
    /// the last `COMMIT`).
    writing: AtomicBool,
    /// Rounds of durable writes finished on the writer connection (what reads wait for).
    written: AtomicU64,
    /// `written` as it was when the last successful fsync began.
    synced: AtomicU64,
    /// Set by the first failed fsync; nothing is trusted after it.
    failed: OnceLock<String>,
    /// Fsyncs run.
    syncs: AtomicU64,
    /// Held through each fsync. Linux reports a writeback error to one fsync per open file
    /// description: with two at once on `wal`, the one that sees the error could be the one
    /// whose writes were not lost, and the other would wrongly succeed.
    one_at_a_time: Mutex<()>,
}

#[derive(Default)]
struct Queue {
    waiters: Vec<Waiter>,
    stop: bool,
}

impl WalSync {
    /// Opens the WAL of the database at `db` and starts the sync thread.
    pub(super) fn start(db: &Path) -> Result<Self, StoreError> {
        let mut name = db.as_os_str().to_owned();
        name.push("-wal");
        let wal = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&name)
            .map_err(|e| {
                StoreError::Internal(format!("open {}: {e}", Path::new(&name).display()))
            })?;
        let shared = Arc::new(SyncState {
            wal,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            writing: AtomicBool::new(false),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            failed: OnceLock::new(),
            syncs: AtomicU64::new(0),
            one_at_a_time: Mutex::new(()),
        });
        let worker = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("sqlite-wal-sync".into())
            .spawn(move || worker.run())
            .map_err(|e| StoreError::Internal(format!("start the WAL sync thread: {e}")))?;
        Ok(Self { shared })
    }

    /// Runs `write` (a whole transaction on the writer connection) marked as in progress, so
    /// that a concurrent read that sees its commit also waits for its fsync.
    pub(super) fn writing<T>(&self, write: impl FnOnce() -> T) -> T {
        let s = &self.shared;
        s.writing.store(true, Ordering::SeqCst);
        let result = write();
        s.written.fetch_add(1, Ordering::SeqCst);
        s.writing.store(false, Ordering::SeqCst);
        result
    }

    /// Returns once everything written to the WAL before this call is on disk.
    pub(super) async fn barrier(&self) -> Result<(), StoreError> {
        let s = &self.shared;
        if let Some(error) = s.failed.get() {
            return Err(failure(error));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut queue = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.waiters.push(tx);
        }
        s.wake.notify_one();
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(failure(&error)),
            Err(_) => Err(StoreError::Unavailable(
                "the WAL sync thread has stopped".into(),
            )),
        }
    }

    /// Fsyncs the WAL on the calling thread (a blocking call): when it returns `Ok`, every
    /// write finished before the call is on disk. Barrier waiters already queued share this
    /// fsync, since their writes finished before they queued. The SQLite writer thread uses it
    /// right after each batch's commit, so a batch needs no hand-off to the sync thread.
    pub(super) fn sync_now(&self) -> Result<(), StoreError> {
        let s = &self.shared;
        let waiters =
            std::mem::take(&mut s.queue.lock().unwrap_or_else(|p| p.into_inner()).waiters);
        let result = s.sync_once();
        for waiter in waiters {
            let _ = waiter.send(result.clone());
        }
        result.map_err(|error| failure(&error))
    }

    /// Records a failed fsync as if one had happened (tests of what follows one).
    #[cfg(test)]
    pub(super) fn fail_for_test(&self, error: &str) {
        let _ = self.shared.failed.set(error.to_string());
    }

    /// The error that stopped the store, once an fsync has failed.
    pub(super) fn failed(&self) -> Option<StoreError> {
        self.shared.failed.get().map(|error| failure(error))
    }

    /// Returns once every commit a read that has just finished could have seen is on disk:
    /// at once when nothing is waiting for an fsync.
    pub(super) async fn reveal(&self) -> Result<(), StoreError> {
        let s = &self.shared;
        // Order matters: a read that saw a commit saw `writing` set before it; if `writing` is
        // clear now, that commit's `written` increment is already visible.
        let writing = s.writing.load(Ordering::SeqCst);
        let written = s.written.load(Ordering::SeqCst);
        if writing || written > s.synced.load(Ordering::SeqCst) || s.failed.get().is_some() {
            self.barrier().await
        } else {
            Ok(())
        }
    }

    /// What the group commit has done so far.
    pub(super) fn durability(&self) -> Durability {
        let s = &self.shared;
        Durability {
            wal_syncs: s.syncs.load(Ordering::SeqCst),
            writes: s.written.load(Ordering::SeqCst),
            durable_writes: s.synced.load(Ordering::SeqCst),
        }
    }
}

impl Drop for WalSync {
    fn drop(&mut self) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stop = true;
        self.shared.wake.notify_one();
    }
}

fn failure(error: &str) -> StoreError {
    StoreError::Internal(format!(
        "the database's write-ahead log could not be synced to disk ({error}); writes since \
         the last successful sync may be lost, so the store refuses all requests until the node \
         is restarted"
    ))
}

impl SyncState {
    /// One fsync of the WAL, covering every write finished before it began; fsyncs from
    /// different threads run one after another.
    fn sync_once(&self) -> Result<(), String> {
        let _one = self.one_at_a_time.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(error) = self.failed.get() {
            return Err(error.clone());
        }
        let target = self.written.load(Ordering::SeqCst);
        let result = self.wal.sync_data().map_err(|e| e.to_string());
        self.syncs.fetch_add(1, Ordering::Relaxed);
        match &result {
            Ok(()) => {
                self.synced.fetch_max(target, Ordering::SeqCst);
            }
            Err(error) => {
                if self.failed.set(error.clone()).is_ok() {
                    tracing::error!(%error, "fsync of the SQLite WAL failed; refusing all requests until restart");
                }
            }
        }
        result
    }

    fn run(&self) {
        loop {
            let waiters = {
                let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                while queue.waiters.is_empty() && !queue.stop {
                    queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
                }
                if queue.waiters.is_empty() {
                    return;
                }
                std::mem::take(&mut queue.waiters)
            };
            // Every waiter registered before this point; every write it depends on finished
            // before it registered, so it is covered by the fsync that starts now.
            let result = self.sync_once();
            for waiter in waiters {
                let _ = waiter.send(result.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> (tempfile::TempDir, WalSync) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sync = WalSync::start(&dir.path().join("links.db")).expect("start");
        (dir, sync)
    }

    /// A read after a write that no fsync covers yet waits for one; a second read does not.
    #[tokio::test]
    async fn a_read_after_an_unsynced_write_waits_for_an_fsync() {
        let (_dir, sync) = start();
        sync.reveal().await.expect("reveal");
        assert_eq!(sync.durability().wal_syncs, 0, "nothing pending, no fsync");

        sync.writing(|| ());
        let d = sync.durability();
        assert_eq!((d.writes, d.durable_writes), (1, 0));
        sync.reveal().await.expect("reveal");
        let d = sync.durability();
        assert_eq!((d.wal_syncs, d.durable_writes), (1, 1));

        sync.reveal().await.expect("reveal");
        assert_eq!(sync.durability().wal_syncs, 1);
    }

    /// While a write is in progress, a read cannot tell whether it saw that write's commit, so
    /// it waits for an fsync even though every finished write is already covered.
    #[tokio::test]
    async fn a_read_during_a_write_waits_for_an_fsync() {
        let (_dir, sync) = start();
        let sync = Arc::new(sync);
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let sync = Arc::clone(&sync);
            std::thread::spawn(move || {
                sync.writing(|| {
                    entered_tx.send(()).expect("signal");
                    release_rx.recv().expect("release");
                })
            })
        };
        entered_rx.recv().expect("writer entered");
        let d = sync.durability();
        assert_eq!((d.writes, d.durable_writes), (0, 0));
        sync.reveal().await.expect("reveal");
        assert_eq!(sync.durability().wal_syncs, 1);
        release_tx.send(()).expect("release");
        writer.join().expect("writer");
    }

    /// Writes waiting at the same time share fsyncs, and each returns covered.
    #[tokio::test]
    async fn concurrent_barriers_share_fsyncs() {
        let (_dir, sync) = start();
        let sync = Arc::new(sync);
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let sync = Arc::clone(&sync);
                tokio::spawn(async move {
                    sync.writing(|| ());
                    sync.barrier().await.expect("barrier");
                    let d = sync.durability();
                    assert!(d.durable_writes >= 1);
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        let d = sync.durability();
        assert_eq!((d.writes, d.durable_writes), (32, 32));
        assert!(d.wal_syncs <= 32);
    }
}
