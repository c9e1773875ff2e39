//! One import from its first row to its summary, the same for every transport.
//!
//! A transport turns its input (an HTTP body of NDJSON or CSV, a stream of gRPC messages) into
//! a stream of rows and hands it to [`LinkService::import_rows`]; it gets back a stream of
//! [`ImportEvent`]s to write as its answers. In between, two stages: one task reads the rows,
//! numbers them from 1, checks them and gathers them into chunks of [`CHUNK_ROWS`], while
//! another writes the chunk before (`import_chunk`, which charges the probes) and passes its
//! results on in row order, then the totals. The channels between the stages and towards the
//! transport hold a chunk or two, so an import's memory does not grow with its length; a
//! transport that stops reading the events (its client has gone) stops the import.

use super::{CHUNK_ROWS, ChunkRow, Import, ImportTotals, RowResult};
use crate::domain::{Caller, CreateRules, Error, ImportInput, ImportRow};
use crate::links::{LinkService, Place};
use chrono::Utc;
use futures::{Stream, StreamExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Checked chunks waiting for the write (besides the one being read and the one being written).
const READ_AHEAD: usize = 1;
/// Chunks of results waiting for the transport.
const RESULTS_AHEAD: usize = 2;

/// The most checked rows one chunk holds, in [`ImportRow::weight`]s: a chunk of rows near the
/// record bound closes long before [`CHUNK_ROWS`], so an import holds a few of these at most
/// (the one read, [`READ_AHEAD`], the one written).
pub const CHUNK_BYTES: usize = 4 << 20;

/// What a refused row is counted as in [`CHUNK_BYTES`] (its refusal's text).
const REFUSED_ROW_BYTES: usize = 256;

/// How long an import waits for its next row by default (`SHORTENER_IMPORT_IDLE_MS`); past it
/// the import stops, `import_idle`, having answered every row before (a sender that stalls
/// gives its place back; one that trickles rows, each within this bound, runs into
/// `SHORTENER_IMPORT_MAX_SECONDS`). A client that takes no answer for as long ends it too.
pub const ROW_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// Why an import whose next row (or first, or a CSV's header) did not come within `wait`
/// stopped.
pub fn import_idle(wait: std::time::Duration) -> Error {
    Error::bad_request(
        "import_idle",
        format!(
            "no row came within {} s: the rows answered were imported; send the rest again",
            wait.as_secs_f64()
        ),
    )
}

/// Why an import that ran past `max` stopped.
fn import_too_long(max: std::time::Duration) -> Error {
    Error::bad_request(
        "import_too_long",
        format!(
            "the import ran past its bound of {} s: the rows answered were imported; send the \
             rest in another import",
            max.as_secs_f64()
        ),
    )
}

/// Why an import whose client took no answer within `wait` stopped.
fn answers_not_taken(wait: std::time::Duration) -> Error {
    Error::bad_request(
        "import_idle",
        format!(
            "the client took no answer within {} s: the rows answered were imported; send \
             the rest again",
            wait.as_secs_f64()
        ),
    )
}

/// What the two stages of one import share besides their channels.
struct Shared<E> {
    /// The writing stage is on a chunk (writing it, or handing its answers over): a client
    /// may wait for those answers before it sends more, so the reading stage's idle bound
    /// waits as long.
    busy: AtomicBool,
    /// The summary of an import whose client took no answer in time: the transport ends with
    /// it once the answers handed over before are read, never as if the import were whole.
    left: Mutex<Option<ImportSummary<E>>>,
}

/// How one import goes: as a dry run or not, on which domain, under which rules.
#[derive(Debug, Clone)]
pub struct ImportSettings {
    /// Check every row and store nothing.
    pub dry_run: bool,
    /// A branded domain the caller's tenant owns (checked by [`LinkService::check_domain`]
    /// first), or `None` for the default domain.
    pub domain: Option<String>,
    /// Whether a row's own `domain` decides where it goes (an import that names no domain of
    /// its own); otherwise every row goes on `domain`.
    pub row_domains: bool,
    /// Hosts a row's `domain` may name that mean the default domain (the public hosts of the
    /// deployment the rows were exported from), as [`crate::domain::plain_host`] writes them.
    pub default_hosts: Vec<String>,
    /// What each row is checked against.
    pub rules: CreateRules,
    /// How long the import waits for its next row ([`ROW_IDLE`] by default).
    pub idle: std::time::Duration,
}

/// A row as a transport reads it: its fields, or why they could not be read with the code the
/// row gave where the reader found one (the row is answered as refused, and the import goes
/// on).
pub type InputRow = Result<ImportInput, super::Refusal>;

/// Why an import stopped before its input ended. The rows after the last answered one were
/// not imported; importing them again is safe (what was created is found again).
#[derive(Debug)]
pub enum ImportStop<E> {
    /// Reading the input failed (the transport's error: a broken body or stream).
    Input(E),
    /// Writing failed (the store's error), or the import ran into a bound of its own (its next
    /// row took longer than [`ImportSettings::idle`], `import_idle`).
    Failed(Error),
}

/// The end of an import.
#[derive(Debug)]
pub struct ImportSummary<E> {
    /// The totals over every row answered.
    pub totals: ImportTotals,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// Why it stopped early, if it did.
    pub stopped: Option<ImportStop<E>>,
}

/// What an import tells its transport, in order: chunks of results, then its summary.
#[derive(Debug)]
pub enum ImportEvent<E> {
    /// The results of one chunk, in row order.
    Rows(Vec<RowResult>),
    /// The end.
    End(ImportSummary<E>),
}

/// A checked chunk of rows, or why reading stopped.
type Chunk<E> = Result<Vec<ChunkRow>, ImportStop<E>>;

impl LinkService {
    /// Imports `rows` for `caller` (links go to its tenant, on the domain `input` names), each
    /// checked against `input`'s rules; a dry run checks every row and stores nothing. The
    /// events end with the summary, unless the stream of them is dropped first.
    ///
    /// The import holds `place` ([`LinkService::admit_import`], taken before its input is
    /// read) until it ends.
    pub fn import_rows<S, E>(
        self: &Arc<Self>,
        caller: &Caller,
        place: Place,
        input: ImportSettings,
        rows: S,
    ) -> impl Stream<Item = ImportEvent<E>> + Send + use<S, E>
    where
        S: Stream<Item = Result<InputRow, E>> + Send + 'static,
        E: Send + 'static,
    {
        let (chunks_tx, chunks) = mpsc::channel(READ_AHEAD);
        let (events, rx) = mpsc::channel(RESULTS_AHEAD);
        let shared = Arc::new(Shared {
            busy: AtomicBool::new(false),
            left: Mutex::new(None),
        });
        let bounds = Bounds {
            idle: input.idle,
            max: self.import_max,
            until: tokio::time::Instant::now() + self.import_max,
        };
        let import = self.start_import(caller, &input);
        let reading = read_chunks(rows, input.rules, bounds, Arc::clone(&shared), chunks_tx);
        tokio::spawn(reading);
        let stage = (place, input.idle, Arc::clone(&shared));
        tokio::spawn(Arc::clone(self).write_chunks(import, stage, chunks, events));
        // Once the writing stage has let go of its end of the channel: the summary it could
        // not hand over, if any.
        let left = futures::stream::once(async move {
            let mut left = shared.left.lock().unwrap_or_else(|p| p.into_inner());
            left.take().map(ImportEvent::End)
        })
        .filter_map(std::future::ready);
        ReceiverStream::new(rx).chain(left)
    }

    /// A place for one import of `caller` among those running on the node, its tenant's and
    /// its key's (more are refused, `RateLimited`): taken before the import's input is read.
    pub fn admit_import(&self, caller: &Caller) -> Result<Place, Error> {
        self.imports.admit(caller)
    }

    /// Waits up to `within` for the imports running on this node to end (their writing stages
    /// outlive a transport cut at stop by a chunk and its audit entry); whether they did.
    pub async fn imports_settled(&self, within: std::time::Duration) -> bool {
        self.imports.settled(within).await
    }

    /// How long an import waits for its next row (`SHORTENER_IMPORT_IDLE_MS`).
    pub fn import_idle(&self) -> std::time::Duration {
        self.import_idle
    }

    /// The writing stage: imports each chunk and sends its results, then the summary.
    ///
    /// A transport that takes no event for `idle` (its client stopped reading) ends the
    /// import, and `place` with it, leaving its summary in `shared` for the transport.
    async fn write_chunks<E>(
        self: Arc<Self>,
        import: Import,
        (_place, idle, shared): (Place, std::time::Duration, Arc<Shared<E>>),
        mut chunks: mpsc::Receiver<Chunk<E>>,
        events: mpsc::Sender<ImportEvent<E>>,
    ) {
        let mut totals = ImportTotals::default();
        let mut stopped = None;
        let leave = |totals, stopped| {
            let summary = ImportSummary {
                totals,
                dry_run: import.dry_run,
                stopped: Some(stopped),
            };
            *shared.left.lock().unwrap_or_else(|p| p.into_inner()) = Some(summary);
        };
        while let Some(chunk) = chunks.recv().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(stop) => {
                    stopped = Some(stop);
                    break;
                }
            };
            shared.busy.store(true, Ordering::Relaxed);
            match self.import_chunk(&import, chunk).await {
                Ok((results, failed)) => {
                    results.iter().for_each(|result| totals.add(result));
                    let sent = tokio::time::timeout(idle, events.send(ImportEvent::Rows(results)));
                    match sent.await {
                        Ok(Ok(())) => {}
                        // The transport has gone: nobody reads the summary.
                        Ok(Err(_)) => return,
                        Err(_) => {
                            return leave(totals, ImportStop::Failed(answers_not_taken(idle)));
                        }
                    }
                    if let Some(error) = failed {
                        stopped = Some(ImportStop::Failed(error));
                        break;
                    }
                }
                Err(error) => {
                    stopped = Some(ImportStop::Failed(error));
                    break;
                }
            }
            shared.busy.store(false, Ordering::Relaxed);
        }
        // Dropping the receiver stops the reading stage, if it is still going.
        drop(chunks);
        let summary = ImportSummary {
            totals,
            dry_run: import.dry_run,
            stopped,
        };
        match tokio::time::timeout(idle, events.reserve()).await {
            Ok(Ok(place)) => place.send(ImportEvent::End(summary)),
            // The transport has gone: nobody reads the summary.
            Ok(Err(_)) => {}
            Err(_) => leave(summary.totals, ImportStop::Failed(answers_not_taken(idle))),
        }
    }
}

/// How long an import's reading stage waits: for one row, and in all.
struct Bounds {
    /// For the next row.
    idle: std::time::Duration,
    /// In all (`SHORTENER_IMPORT_MAX_SECONDS`).
    max: std::time::Duration,
    /// When `max` runs out.
    until: tokio::time::Instant,
}

/// `input` checked against `rules` now; a refusal keeps the row's code.
fn checked(input: ImportInput, rules: &CreateRules) -> Result<ImportRow, super::Refusal> {
    let code = input.code.clone();
    ImportRow::parse(input, rules, Utc::now()).map_err(|error| (code, error))
}

/// Whether a refused row's `code` is one the node can serve, and so named in its answer (a
/// code no link can have is echoed only in the message).
fn servable(code: &str, rules: &CreateRules) -> bool {
    crate::domain::check_legacy_code(code, rules.code_length).is_ok()
}

/// The reading stage: sends the checked chunks of `rows` to `chunks` until the rows end, one
/// fails (sent after the rows before it), the next row takes longer than the idle bound to
/// come, the import runs past its bound in all, or the writing stage has stopped. Each row is
/// checked as it comes, so a row that is refused holds only its refusal, and a chunk closes
/// at [`CHUNK_ROWS`] rows or [`CHUNK_BYTES`] of checked rows, whichever comes first.
async fn read_chunks<S, E>(
    rows: S,
    rules: CreateRules,
    bounds: Bounds,
    shared: Arc<Shared<E>>,
    chunks: mpsc::Sender<Chunk<E>>,
) where
    S: Stream<Item = Result<InputRow, E>>,
{
    let mut rows = std::pin::pin!(rows);
    let mut number = 0u64;
    loop {
        let mut chunk: Vec<ChunkRow> = Vec::with_capacity(CHUNK_ROWS);
        let (mut bytes, mut failed, mut ended) = (0, None, false);
        while chunk.len() < CHUNK_ROWS && bytes < CHUNK_BYTES {
            let next = next_row(&mut rows, bounds.idle, &shared.busy, &chunks);
            let Ok(next) = tokio::time::timeout_at(bounds.until, next).await else {
                failed = Some(ImportStop::Failed(import_too_long(bounds.max)));
                break;
            };
            match next {
                Ok(Some(Ok(input))) => {
                    number += 1;
                    let row = input
                        .and_then(|input| checked(input, &rules))
                        .map_err(|(code, error)| (code.filter(|c| servable(c, &rules)), error));
                    bytes += row.as_ref().map_or(REFUSED_ROW_BYTES, ImportRow::weight);
                    chunk.push((number, row));
                }
                Ok(Some(Err(error))) => failed = Some(ImportStop::Input(error)),
                Ok(None) => ended = true,
                Err(_) => failed = Some(ImportStop::Failed(import_idle(bounds.idle))),
            }
            if failed.is_some() || ended {
                break;
            }
        }
        if !chunk.is_empty() && chunks.send(Ok(chunk)).await.is_err() {
            return;
        }
        if let Some(error) = failed {
            let _ = chunks.send(Err(error)).await;
            return;
        }
        if ended {
            return;
        }
    }
}

/// The next row of `rows`, or `Err` when none came within `wait` while the writing stage was
/// not `busy` on a chunk (its client may wait for that chunk's answers before it sends more)
/// or had ended (`chunks` closed, however it ended).
async fn next_row<S: Stream + Unpin, T>(
    rows: &mut S,
    wait: std::time::Duration,
    busy: &AtomicBool,
    chunks: &mpsc::Sender<T>,
) -> Result<Option<S::Item>, ()> {
    loop {
        match tokio::time::timeout(wait, rows.next()).await {
            Ok(next) => return Ok(next),
            Err(_) if busy.load(Ordering::Relaxed) && !chunks.is_closed() => continue,
            Err(_) => return Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AnyHost, ImportInput};

    fn rules() -> CreateRules {
        CreateRules {
            max_url_length: 1 << 20,
            targets: Arc::new(AnyHost),
            code_length: 7,
            own_hosts: Arc::from([]),
            countries: true,
        }
    }

    /// Rows near the record bound close a chunk by what it holds long before `CHUNK_ROWS`;
    /// refused rows hold only their refusal; every row comes out once, in order.
    #[tokio::test]
    async fn a_chunk_closes_at_its_bytes_before_its_rows() {
        let big = "a".repeat(60 << 10);
        let rows: Vec<Result<InputRow, ()>> = (0..300)
            .map(|i| {
                Ok(Ok(ImportInput {
                    // Every third row is refused (no scheme); the rest are 60 KiB targets.
                    url: if i % 3 == 0 {
                        format!("example.com/{i}")
                    } else {
                        format!("https://example.com/{i}/{big}")
                    },
                    ..ImportInput::default()
                }))
            })
            .collect();
        let (tx, mut rx) = mpsc::channel(1000);
        let shared = Arc::new(Shared {
            busy: AtomicBool::new(false),
            left: Mutex::new(None),
        });
        read_chunks(
            futures::stream::iter(rows),
            rules(),
            Bounds {
                idle: std::time::Duration::from_secs(5),
                max: std::time::Duration::from_secs(60),
                until: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
            },
            shared,
            tx,
        )
        .await;
        let (mut numbers, mut chunks) = (Vec::new(), 0);
        while let Ok(chunk) = rx.try_recv() {
            chunks += 1;
            let chunk = chunk.expect("no stop");
            let held: usize = chunk
                .iter()
                .map(|(_, row)| row.as_ref().map_or(REFUSED_ROW_BYTES, ImportRow::weight))
                .sum();
            let last = chunk.last().map_or(0, |(_, row)| {
                row.as_ref().map_or(REFUSED_ROW_BYTES, ImportRow::weight)
            });
            assert!(held - last < CHUNK_BYTES, "closed at {held} bytes");
            numbers.extend(chunk.iter().map(|(n, _)| *n));
        }
        // 200 rows of 60 KiB: three chunks of 4 MiB at least, where rows alone made one.
        assert!(chunks >= 3, "{chunks} chunks");
        assert!(numbers.len() == 300, "{}", numbers.len());
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "in order");
    }
}
