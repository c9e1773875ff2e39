//! The batching writer: concurrent creates share round trips and commits.
//!
//! Each create hands its row to a writer task and waits for the outcome. The writer takes
//! whatever rows are waiting (up to `max_batch`) and inserts them with one statement and one
//! commit ([`Store::insert_many`]), with up to `max_in_flight` batches running at once. Nothing
//! waits for a batch to fill: a lone request goes out at once, and under load batches grow by
//! themselves while earlier ones are in flight. Each caller is answered only after the commit
//! (I3), and conflicts are still resolved per row.
//!
//! On SQLite the batching is the store's own: its writer thread takes the waiting rows and
//! every other write together, commits, fsyncs once and answers (`store/sqlite_writer.rs`).

use super::{InsertOutcome, NewLink, SqliteStore, Store, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Where one create's outcome goes.
pub(super) type Reply = oneshot::Sender<Result<InsertOutcome, StoreError>>;

/// A handle to the writer; cheap to clone.
#[derive(Clone)]
pub struct BatchWriter {
    store: Store,
    route: Route,
    stats: Arc<WriterStats>,
}

#[derive(Clone)]
enum Route {
    /// To the writer task (PostgreSQL).
    Task(mpsc::Sender<(NewLink, Reply)>),
    /// To the store's writer thread (SQLite).
    Sqlite(SqliteStore),
}

/// What the writer has done since it started (read by the metrics at scrape time).
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Batched inserts run (each one statement per row and one commit).
    pub batches: AtomicU64,
    /// Rows those batches carried; `rows / batches` is the mean batch size.
    pub rows: AtomicU64,
}

/// How often a batch rolled back by a deadlock is run again before its callers see an error.
const RETRIES: usize = 3;

impl BatchWriter {
    /// Starts the writer over `store` (within a tokio runtime): on PostgreSQL a task with up
    /// to `max_in_flight` batches of up to `max_batch` rows at once, ending when every handle
    /// is dropped; on SQLite the store's writer thread, which batches by itself.
    pub fn start(store: Store, max_batch: usize, max_in_flight: usize) -> Self {
        if let Store::Sqlite(sqlite) = &store {
            return Self {
                route: Route::Sqlite(sqlite.clone()),
                stats: sqlite.writer_stats(),
                store,
            };
        }
        let max_in_flight = max_in_flight.max(1);
        let (jobs, queue) = mpsc::channel::<(NewLink, Reply)>(max_batch * max_in_flight * 4);
        let stats = Arc::new(WriterStats::default());
        Self::spawn_task(
            store.clone(),
            queue,
            max_batch,
            max_in_flight,
            Arc::clone(&stats),
        );
        Self {
            store,
            route: Route::Task(jobs),
            stats,
        }
    }

    fn spawn_task(
        store: Store,
        mut queue: mpsc::Receiver<(NewLink, Reply)>,
        max_batch: usize,
        max_in_flight: usize,
        writer_stats: Arc<WriterStats>,
    ) {
        let permits = Arc::new(Semaphore::new(max_in_flight));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                    return;
                };
                let Some(first) = queue.recv().await else {
                    return;
                };
                let batch = gather(first, &mut queue, max_batch, &writer_stats);
                let store = store.clone();
                tokio::spawn(async move {
                    write(&store, batch).await;
                    drop(permit);
                });
            }
        });
    }

    /// Counts of batches and rows written so far.
    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Inserts one link, batched with concurrent ones; returns after the commit. Links with an
    /// idempotency key take the single-row path (their claim needs its own transaction).
    pub async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        if link.idempotency.is_some() {
            return self.store.insert(link).await;
        }
        let jobs = match &self.route {
            Route::Sqlite(sqlite) => return sqlite.insert_batched(link).await,
            Route::Task(jobs) => jobs,
        };
        let (reply, outcome) = oneshot::channel();
        jobs.send((link, reply))
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        outcome
            .await
            .map_err(|_| StoreError::Internal("the writer dropped a create".into()))?
    }
}

/// `first` and whatever else is waiting, up to `max_batch` rows; counted in `stats`.
fn gather(
    first: (NewLink, Reply),
    queue: &mut mpsc::Receiver<(NewLink, Reply)>,
    max_batch: usize,
    stats: &WriterStats,
) -> Vec<(NewLink, Reply)> {
    let mut batch = vec![first];
    while batch.len() < max_batch {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    stats.batches.fetch_add(1, Ordering::Relaxed);
    stats.rows.fetch_add(batch.len() as u64, Ordering::Relaxed);
    batch
}

/// Sends each caller its row's outcome, or the batch's error.
pub(super) fn answer(replies: Vec<Reply>, result: Result<Vec<InsertOutcome>, StoreError>) {
    match result {
        Ok(outcomes) => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

async fn write(store: &Store, batch: Vec<(NewLink, Reply)>) {
    let (links, replies): (Vec<NewLink>, Vec<Reply>) = batch.into_iter().unzip();
    let mut attempt = 0;
    let result = loop {
        match store.insert_many(&links).await {
            Err(StoreError::Retry(message)) if attempt < RETRIES => {
                attempt += 1;
                tracing::debug!(%message, attempt, size = links.len(), "batch rolled back; running it again");
            }
            other => break other,
        }
    };
    answer(replies, result);
}
