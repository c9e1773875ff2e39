//! The batching writer: concurrent creates share round trips and commits.
//!
//! Each create hands its row to a writer task and waits for the outcome. The writer takes
//! whatever rows are waiting (up to `max_batch`) and inserts them with one statement and one
//! commit, with up to `max_in_flight` batches running at once. Nothing waits for a batch to
//! fill: a lone request goes out at once, and under load batches grow by themselves while
//! earlier ones are in flight. Each caller is answered only after the commit (I3), and
//! conflicts are still resolved per row.

use super::error::pool_error;
use super::insert::insert_rows;
use super::send::Pooled;
use crate::store::reply::{Reply, answer};
use crate::store::{InsertOutcome, NewLink, StoreError, WriterStats};
use codespace::CodeSpace;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// How often a batch rolled back by a deadlock is run again before its callers see an error.
const RETRIES: usize = 3;

/// A handle to the writer task; cheap to clone. The task ends when every handle is dropped.
#[derive(Clone)]
pub(super) struct Batcher {
    jobs: mpsc::Sender<(NewLink, Reply)>,
    stats: Arc<WriterStats>,
}

impl Batcher {
    /// Starts the writer task over `pool` (within a tokio runtime): up to `max_in_flight`
    /// batches of up to `max_batch` rows at once, their slots computed in `space`.
    pub(super) fn start(
        pool: Pooled,
        space: Arc<CodeSpace>,
        max_batch: usize,
        max_in_flight: usize,
    ) -> Self {
        let (max_batch, max_in_flight) = (max_batch.max(1), max_in_flight.max(1));
        let (jobs, queue) = mpsc::channel(max_batch * max_in_flight * 4);
        let stats = Arc::new(WriterStats::default());
        tokio::spawn(run(
            pool,
            space,
            queue,
            max_batch,
            max_in_flight,
            Arc::clone(&stats),
        ));
        Self { jobs, stats }
    }

    /// Counts of batches and rows written so far.
    pub(super) fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Inserts one link in the next batch; returns after the commit.
    pub(super) async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        let (reply, outcome) = oneshot::channel();
        self.jobs
            .send((link, reply))
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        outcome
            .await
            .map_err(|_| StoreError::Internal("the writer dropped a create".into()))?
    }
}

async fn run(
    pool: Pooled,
    space: Arc<CodeSpace>,
    mut queue: mpsc::Receiver<(NewLink, Reply)>,
    max_batch: usize,
    max_in_flight: usize,
    stats: Arc<WriterStats>,
) {
    let permits = Arc::new(Semaphore::new(max_in_flight));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let Some(first) = queue.recv().await else {
            return;
        };
        let batch = gather(first, &mut queue, max_batch, &stats);
        let (pool, space) = (pool.clone(), Arc::clone(&space));
        tokio::spawn(async move {
            write(&pool, &space, batch).await;
            drop(permit);
        });
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

async fn write(pool: &Pooled, space: &CodeSpace, batch: Vec<(NewLink, Reply)>) {
    let (links, replies): (Vec<NewLink>, Vec<Reply>) = batch.into_iter().unzip();
    let mut attempt = 0;
    let result = loop {
        let result = match pool.get().await {
            Ok(client) => insert_rows(&client, space, &links).await,
            Err(error) => Err(pool_error(error)),
        };
        match result {
            Err(StoreError::Retry(message)) if attempt < RETRIES => {
                attempt += 1;
                tracing::debug!(%message, attempt, size = links.len(), "batch rolled back; running it again");
            }
            other => break other,
        }
    };
    answer(replies, result);
}
