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
use crate::links::LinkService;
use chrono::Utc;
use futures::{Stream, StreamExt};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Checked chunks waiting for the write (besides the one being read and the one being written).
const READ_AHEAD: usize = 1;
/// Chunks of results waiting for the transport.
const RESULTS_AHEAD: usize = 2;

/// A row as a transport reads it: its fields, or why they could not be read (the row is
/// answered as refused, and the import goes on).
pub type InputRow = Result<ImportInput, Error>;

/// Why an import stopped before its input ended. The rows after the last answered one were
/// not imported; importing them again is safe (what was created is found again).
#[derive(Debug)]
pub enum ImportStop<E> {
    /// Reading the input failed (the transport's error: a broken body or stream).
    Input(E),
    /// Writing failed (the store's error).
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
type Chunk<E> = Result<Vec<ChunkRow>, E>;

impl LinkService {
    /// Imports `rows` for `caller` (links go to its tenant, on `domain`: a branded domain the
    /// caller's tenant owns, checked by [`LinkService::check_domain`] first, or `None` for the
    /// default domain), each checked against `rules`; a dry run checks every row and stores
    /// nothing. The events end with the summary, unless the stream of them is dropped first.
    pub fn import_rows<S, E>(
        self: &Arc<Self>,
        caller: &Caller,
        dry_run: bool,
        domain: Option<String>,
        rules: CreateRules,
        rows: S,
    ) -> impl Stream<Item = ImportEvent<E>> + Send + use<S, E>
    where
        S: Stream<Item = Result<InputRow, E>> + Send + 'static,
        E: Send + 'static,
    {
        let (chunks_tx, chunks) = mpsc::channel(READ_AHEAD);
        let (events, rx) = mpsc::channel(RESULTS_AHEAD);
        tokio::spawn(read_chunks(rows, rules, chunks_tx));
        let import = self.start_import(caller, dry_run, domain);
        tokio::spawn(Arc::clone(self).write_chunks(import, chunks, events));
        ReceiverStream::new(rx)
    }

    /// The writing stage: imports each chunk and sends its results, then the summary.
    async fn write_chunks<E>(
        self: Arc<Self>,
        import: Import,
        mut chunks: mpsc::Receiver<Chunk<E>>,
        events: mpsc::Sender<ImportEvent<E>>,
    ) {
        let mut totals = ImportTotals::default();
        let mut stopped = None;
        while let Some(chunk) = chunks.recv().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => {
                    stopped = Some(ImportStop::Input(error));
                    break;
                }
            };
            match self.import_chunk(&import, chunk).await {
                Ok(results) => {
                    results.iter().for_each(|result| totals.add(result));
                    if events.send(ImportEvent::Rows(results)).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    stopped = Some(ImportStop::Failed(error));
                    break;
                }
            }
        }
        // Dropping the receiver stops the reading stage, if it is still going.
        drop(chunks);
        let summary = ImportSummary {
            totals,
            dry_run: import.dry_run,
            stopped,
        };
        let _ = events.send(ImportEvent::End(summary)).await;
    }
}

/// The reading stage: sends the checked chunks of `rows` to `chunks` until the rows end, one
/// fails (sent after the rows before it), or the writing stage has stopped.
async fn read_chunks<S, E>(rows: S, rules: CreateRules, chunks: mpsc::Sender<Chunk<E>>)
where
    S: Stream<Item = Result<InputRow, E>>,
{
    let mut rows = std::pin::pin!(rows);
    let mut number = 0u64;
    loop {
        let mut read = Vec::with_capacity(CHUNK_ROWS);
        let mut failed = None;
        while read.len() < CHUNK_ROWS {
            match rows.next().await {
                Some(Ok(input)) => {
                    number += 1;
                    read.push((number, input));
                }
                Some(Err(error)) => {
                    failed = Some(error);
                    break;
                }
                None => break,
            }
        }
        let ended = failed.is_some() || read.len() < CHUNK_ROWS;
        let now = Utc::now();
        let chunk: Vec<ChunkRow> = read
            .into_iter()
            .map(|(row, input)| (row, input.and_then(|i| ImportRow::parse(i, &rules, now))))
            .collect();
        if !chunk.is_empty() && chunks.send(Ok(chunk)).await.is_err() {
            return;
        }
        if let Some(error) = failed {
            let _ = chunks.send(Err(error)).await;
        }
        if ended {
            return;
        }
    }
}
