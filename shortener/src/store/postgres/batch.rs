//! The batching writer: concurrent creates share round trips and commits.
//!
//! Each create hands its row to a writer task and waits for the outcome. The writer takes
//! whatever rows are waiting (up to `max_batch`) and inserts them with one statement and one
//! commit, with up to `max_in_flight` batches running at once. A batch starts at once when no
//! other is in flight, so a lone request never waits for company; beside a batch in flight, a
//! new one waits until `fill` rows are waiting or nothing is in flight any more. Under load the
//! node so sends fewer, larger statements: each pays its commit, its round trip and the
//! executor's set-up of the statement's many parts once for more rows (docs/benchmarks.md,
//! "PostgreSQL creates: where the time goes"). Each caller is answered only after the commit
//! (I3), and conflicts are still resolved per row.

use super::error::pool_error;
use super::insert::insert_rows;
use super::send::{Conn, Pooled};
use crate::store::reply::{Reply, answer};
use crate::store::{InsertOutcome, NewLink, StoreError, WriterStats};
use codespace::CodeSpace;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};

/// How often a batch rolled back by a deadlock is run again before its callers see an error.
const RETRIES: usize = 3;

/// How the writer cuts its batches.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// Most rows in one batch.
    pub(super) max_batch: usize,
    /// Most batches in flight at once.
    pub(super) max_in_flight: usize,
    /// Rows a batch waits for before it starts beside another in flight (capped at
    /// `max_batch`).
    pub(super) fill: usize,
    /// How long one attempt at a batch's statement may take once it has a connection before
    /// its callers are told its outcome is unknown and the connection is closed (`None`: no
    /// bound of the node's own). The server's `statement_timeout` ends a slow statement; this
    /// ends the wait on a connection whose server has gone silent (a network partition), which
    /// nothing else would end before TCP gives up, minutes later.
    pub(super) deadline: Option<Duration>,
}

/// A create's row (boxed: near a kilobyte, it would otherwise be copied into every create's
/// future, into the channel and out again) and where its outcome goes.
type Job = (Box<NewLink>, Reply);

/// A handle to the writer task; cheap to clone. The task ends when every handle is dropped.
#[derive(Clone)]
pub(super) struct Batcher {
    jobs: mpsc::Sender<Job>,
    stats: Arc<WriterStats>,
}

impl Batcher {
    /// Starts the writer task over `pool` (within a tokio runtime), cutting batches as `shape`
    /// says, their slots computed in `space`.
    pub(super) fn start(pool: Pooled, space: Arc<CodeSpace>, shape: Shape) -> Self {
        let max_batch = shape.max_batch.max(1);
        let shape = Shape {
            max_batch,
            max_in_flight: shape.max_in_flight.max(1),
            fill: shape.fill.clamp(1, max_batch),
            deadline: shape.deadline,
        };
        let (jobs, queue) = mpsc::channel(shape.max_batch * shape.max_in_flight * 4);
        let stats = Arc::new(WriterStats::default());
        tokio::spawn(run(pool, space, queue, shape, Arc::clone(&stats)));
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
            .send((Box::new(link), reply))
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        outcome
            .await
            .map_err(|_| StoreError::Internal("the writer dropped a create".into()))?
    }
}

/// The batches in flight: how many, and a wake-up each time one ends.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    ended: Notify,
}

async fn run(
    pool: Pooled,
    space: Arc<CodeSpace>,
    mut queue: mpsc::Receiver<Job>,
    shape: Shape,
    stats: Arc<WriterStats>,
) {
    let permits = Arc::new(Semaphore::new(shape.max_in_flight));
    let in_flight = Arc::new(InFlight::default());
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let Some(first) = queue.recv().await else {
            return;
        };
        let batch = gather(first, &mut queue, shape, &in_flight).await;
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.rows.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let (pool, space, in_flight) = (pool.clone(), Arc::clone(&space), Arc::clone(&in_flight));
        in_flight.count.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            write(&pool, &space, batch, shape.deadline).await;
            in_flight.count.fetch_sub(1, Ordering::AcqRel);
            in_flight.ended.notify_one();
            drop(permit);
        });
    }
}

/// `first` and whatever else is waiting, up to `max_batch` rows; while another batch is in
/// flight, it waits for more until it holds `fill` rows or none is in flight any more.
async fn gather(
    first: Job,
    queue: &mut mpsc::Receiver<Job>,
    shape: Shape,
    in_flight: &InFlight,
) -> Vec<Job> {
    let mut batch = vec![first];
    take_waiting(&mut batch, queue, shape.max_batch);
    while batch.len() < shape.fill && in_flight.count.load(Ordering::Acquire) > 0 {
        tokio::select! {
            job = queue.recv() => match job {
                Some(job) => {
                    batch.push(job);
                    take_waiting(&mut batch, queue, shape.max_batch);
                }
                None => break,
            },
            // A batch ended: look again whether any is still in flight.
            () = in_flight.ended.notified() => {}
        }
    }
    batch
}

/// Adds whatever else is waiting in `queue` to `batch`, up to `max_batch` rows.
fn take_waiting(batch: &mut Vec<Job>, queue: &mut mpsc::Receiver<Job>, max_batch: usize) {
    while batch.len() < max_batch {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// Writes `batch`, less the rows whose callers have gone (a client that disconnected, a call
/// past its deadline: told nothing, a retry of theirs must not find a link they were never
/// answered for), and answers the rest after the commit.
async fn write(pool: &Pooled, space: &CodeSpace, batch: Vec<Job>, deadline: Option<Duration>) {
    let (links, replies): (Vec<NewLink>, Vec<Reply>) = batch
        .into_iter()
        .filter(|(_, reply)| !reply.is_closed())
        .map(|(link, reply)| (*link, reply))
        .unzip();
    if links.is_empty() {
        return;
    }
    let mut attempt = 0;
    let result = loop {
        let result = match pool.get().await {
            Ok(client) => insert_within(deadline, client, space, &links).await,
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

/// Inserts `links` on `client` within `deadline`: past it, the outcome is unknown (the
/// statement may have committed) and the connection, which may still be running it, is closed
/// rather than handed to the next batch.
async fn insert_within(
    deadline: Option<Duration>,
    client: Conn,
    space: &CodeSpace,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let Some(deadline) = deadline else {
        return insert_rows(&client, space, links).await;
    };
    let answered = tokio::time::timeout(deadline, insert_rows(&client, space, links)).await;
    answered.unwrap_or_else(|_| {
        drop(deadpool_postgres::Object::take(client.into_raw()));
        Err(StoreError::Ambiguous(format!(
            "the database did not answer a batched insert within {deadline:?}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use codespace::shape::CodeKind;
    use std::time::Duration;

    fn job(n: usize) -> Job {
        let link = NewLink::plain(
            format!("alias-{n}"),
            "https://example.com/".into(),
            CodeKind::Alias,
            None,
            "default",
            "ci",
        );
        (Box::new(link), oneshot::channel().0)
    }

    const SHAPE: Shape = Shape {
        max_batch: 8,
        max_in_flight: 4,
        fill: 4,
        deadline: None,
    };

    #[tokio::test]
    async fn with_nothing_in_flight_a_batch_starts_with_what_waits() {
        let (jobs, mut queue) = mpsc::channel(16);
        jobs.send(job(1)).await.expect("send");
        let batch = gather(job(0), &mut queue, SHAPE, &InFlight::default()).await;
        assert_eq!(batch.len(), 2);
    }

    /// Lets every other task on the test's runtime run until it waits again.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn beside_a_batch_in_flight_a_batch_waits_for_its_fill() {
        let (jobs, mut queue) = mpsc::channel(16);
        let in_flight = InFlight::default();
        in_flight.count.store(1, Ordering::Release);
        let gathering =
            tokio::spawn(async move { gather(job(0), &mut queue, SHAPE, &in_flight).await.len() });
        for n in 1..4 {
            settle().await;
            assert!(!gathering.is_finished(), "started with {n} of 4 rows");
            jobs.send(job(n)).await.expect("send");
        }
        let rows = tokio::time::timeout(Duration::from_secs(5), gathering)
            .await
            .expect("the batch starts once it holds 4 rows")
            .expect("gather");
        assert_eq!(rows, 4);
        // Never more than a batch's rows, however many wait.
        let (jobs, mut queue) = mpsc::channel(16);
        for n in 0..12 {
            jobs.send(job(n)).await.expect("send");
        }
        let first = queue.recv().await.expect("a job");
        let in_flight = InFlight::default();
        in_flight.count.store(1, Ordering::Release);
        assert_eq!(gather(first, &mut queue, SHAPE, &in_flight).await.len(), 8);
    }

    #[tokio::test]
    async fn a_waiting_batch_starts_when_the_last_one_in_flight_ends() {
        let (_jobs, mut queue) = mpsc::channel(16);
        let in_flight = Arc::new(InFlight::default());
        in_flight.count.store(2, Ordering::Release);
        let waiting = Arc::clone(&in_flight);
        let gathering =
            tokio::spawn(async move { gather(job(0), &mut queue, SHAPE, &waiting).await.len() });
        for left in [1, 0] {
            settle().await;
            assert!(!gathering.is_finished(), "started with batches in flight");
            in_flight.count.store(left, Ordering::Release);
            in_flight.ended.notify_one();
        }
        let rows = tokio::time::timeout(Duration::from_secs(5), gathering)
            .await
            .expect("the batch starts once nothing is in flight")
            .expect("gather");
        assert_eq!(rows, 1);
    }
}
