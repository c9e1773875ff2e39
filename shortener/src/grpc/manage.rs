//! Link management over gRPC: list, update, import (a stream each way), export (a stream out).

use super::{LinksApi, wire};
use crate::domain::{Caller, Error, ImportInput, ImportRow, LinkPatch, PatchInput};
use crate::links::{CHUNK_ROWS, ChunkRow, ImportTotals};
use chrono::Utc;
use futures::{Stream, StreamExt};
use proto::shortener::v1 as pb;
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// The answers of an import.
pub type ImportStream = Pin<Box<dyn Stream<Item = Result<pb::ImportLinksResponse, Status>> + Send>>;
/// The links of an export.
pub type ExportStream = Pin<Box<dyn Stream<Item = Result<pb::Link, Status>> + Send>>;

/// Answers waiting for the client.
const ANSWER_BUFFER: usize = 256;

impl LinksApi {
    pub(super) async fn list(
        &self,
        caller: &Caller,
        request: pb::ListLinksRequest,
    ) -> Result<pb::ListLinksResponse, Error> {
        let input = wire::list_input(request.filter, request.limit, request.cursor)?;
        let page = self.links.list(caller, &input).await?;
        Ok(pb::ListLinksResponse {
            links: page
                .links
                .iter()
                .map(|l| wire::link(&self.public, l))
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    pub(super) async fn update(
        &self,
        caller: &Caller,
        request: pb::UpdateLinkRequest,
    ) -> Result<pb::Link, Error> {
        let code = self.code(&request.code)?;
        let patch = LinkPatch::parse(PatchInput::try_from(request)?, &self.rules, Utc::now())?;
        let link = self.links.update(caller, &code, &patch).await?;
        Ok(wire::answer(caller, false, &self.public, &link))
    }

    /// Reads the rows as they come, a chunk at a time, and streams one result per row back in
    /// order, then the summary. A stream that fails midway (the client's) ends the import with
    /// what was done so far answered.
    pub(super) fn import(
        &self,
        caller: Caller,
        mut rows: tonic::Streaming<pb::ImportLinksRequest>,
    ) -> ImportStream {
        let (tx, rx) = mpsc::channel(ANSWER_BUFFER);
        let links = std::sync::Arc::clone(&self.links);
        let rules = self.rules.clone();
        tokio::spawn(async move {
            let mut import = None;
            let mut dry_run = false;
            let mut totals = ImportTotals::default();
            let mut chunk: Vec<ChunkRow> = Vec::with_capacity(CHUNK_ROWS);
            let mut number = 0u64;
            let mut failed: Option<Status> = None;
            let mut ended = false;
            while !ended {
                match rows.next().await {
                    Some(Ok(message)) => {
                        let import = import.get_or_insert_with(|| {
                            dry_run = message.dry_run;
                            links.start_import(&caller, dry_run)
                        });
                        let now = Utc::now();
                        for row in message.rows {
                            number += 1;
                            let parsed = ImportInput::try_from(row)
                                .and_then(|input| ImportRow::parse(input, &rules, now));
                            chunk.push((number, parsed));
                            if chunk.len() == CHUNK_ROWS
                                && !flush(&links, import, &mut chunk, &mut totals, &tx).await
                            {
                                return;
                            }
                        }
                        continue;
                    }
                    Some(Err(status)) => failed = Some(status),
                    None => {}
                }
                ended = true;
            }
            let import = import.unwrap_or_else(|| links.start_import(&caller, dry_run));
            if !flush(&links, &import, &mut chunk, &mut totals, &tx).await {
                return;
            }
            if let Some(status) = failed {
                let _ = tx.send(Err(status)).await;
                return;
            }
            let summary = pb::ImportSummary {
                rows: totals.rows,
                created: totals.created,
                exists: totals.exists,
                errors: totals.errors,
                dry_run,
            };
            let _ = tx
                .send(Ok(pb::ImportLinksResponse {
                    outcome: Some(pb::import_links_response::Outcome::Summary(summary)),
                }))
                .await;
        });
        Box::pin(ReceiverStream::new(rx))
    }

    pub(super) fn export(
        &self,
        caller: &Caller,
        request: pb::ExportLinksRequest,
    ) -> Result<ExportStream, Error> {
        let input = wire::list_input(request.filter, None, None)?;
        let links = self.links.export(caller, &input)?;
        let public = self.public.clone();
        // One message per link, as before; the store hands them over a batch at a time.
        Ok(Box::pin(links.flat_map(move |next| {
            let messages: Vec<Result<pb::Link, Status>> = match next {
                Ok(batch) => batch
                    .iter()
                    .map(|link| Ok(wire::link(&public, link)))
                    .collect(),
                Err(error) => vec![Err(Status::from(Error::from(error)))],
            };
            futures::stream::iter(messages)
        })))
    }
}

/// Imports the rows of `chunk` and sends their results; false once the client has gone or the
/// store failed (the failure is sent as the call's status).
async fn flush(
    links: &crate::links::LinkService,
    import: &crate::links::Import,
    chunk: &mut Vec<ChunkRow>,
    totals: &mut ImportTotals,
    tx: &mpsc::Sender<Result<pb::ImportLinksResponse, Status>>,
) -> bool {
    if chunk.is_empty() {
        return true;
    }
    match links.import_chunk(import, std::mem::take(chunk)).await {
        Ok(results) => {
            for result in results {
                totals.add(&result);
                if tx.send(Ok(wire::row_result(result))).await.is_err() {
                    return false;
                }
            }
            true
        }
        Err(error) => {
            let _ = tx.send(Err(Status::from(error))).await;
            false
        }
    }
}
