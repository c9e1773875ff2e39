//! Link management over gRPC: list, update, import (a stream each way), export (a stream out).

use super::{LinksApi, wire};
use crate::domain::{Caller, Error, ImportInput, LinkPatch, PatchInput, PublicBase};
use crate::links::{
    ImportEvent, ImportSettings, ImportStop, ImportSummary, InputRow, Place, import_idle,
};
use chrono::Utc;
use futures::{Stream, StreamExt};
use proto::shortener::v1 as pb;
use std::pin::Pin;
use tonic::Status;

/// The answers of an import.
pub type ImportStream = Pin<Box<dyn Stream<Item = Result<pb::ImportLinksResponse, Status>> + Send>>;
/// The links of an export.
pub type ExportStream = Pin<Box<dyn Stream<Item = Result<pb::Link, Status>> + Send>>;

impl LinksApi {
    pub(super) async fn list(
        &self,
        caller: &Caller,
        request: pb::ListLinksRequest,
    ) -> Result<pb::ListLinksResponse, Error> {
        let input = wire::list_input(request.filter, request.limit, request.cursor, &self.rules)?;
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
        let code = self.code(&request.code, &request.domain)?;
        let patch = LinkPatch::parse(PatchInput::try_from(request)?, &self.rules, Utc::now())?;
        let link = self.links.update(caller, &code, &patch).await?;
        Ok(wire::answer(caller, false, &self.public, &link))
    }

    /// Feeds the rows as they come to the import pipeline and streams one result per row back
    /// in order, then the summary (the first message says whether it is a dry run). A stream
    /// that fails midway (the client's) ends the import with what was done so far answered,
    /// then the failure as the call's status; so does a store failure.
    ///
    /// The import holds `place` (taken before the first message is read) until it ends; a
    /// first message that does not come within the import's idle bound ends it, as a later
    /// row does.
    pub(super) fn import(
        &self,
        caller: Caller,
        place: Place,
        mut messages: tonic::Streaming<pb::ImportLinksRequest>,
    ) -> ImportStream {
        let links = std::sync::Arc::clone(&self.links);
        let rules = self.rules.clone();
        let public = self.public.clone();
        let stream = futures::stream::once(async move {
            let idle = links.import_idle();
            let first = tokio::time::timeout(idle, messages.next())
                .await
                .unwrap_or_else(|_| Some(Err(Status::from(import_idle(idle)))));
            let settings = match &first {
                Some(Ok(message)) => settings(&links, &caller, &rules, message).await,
                _ => settings(&links, &caller, &rules, &Default::default()).await,
            };
            let settings = match settings {
                Ok(settings) => settings,
                // Refused before any row is read: the import ends, its place given back.
                Err(error) => {
                    return futures::stream::iter(vec![Err(Status::from(error))]).boxed();
                }
            };
            let rows = futures::stream::iter(first)
                .chain(messages)
                .flat_map(|message| futures::stream::iter(rows_of(message)));
            links
                .import_rows(&caller, place, settings, rows)
                .flat_map(move |event| futures::stream::iter(answers(event, &public)))
                .boxed()
        })
        .flatten();
        Box::pin(stream)
    }

    pub(super) fn export(
        &self,
        caller: &Caller,
        request: pb::ExportLinksRequest,
    ) -> Result<ExportStream, Error> {
        let input = wire::list_input(request.filter, None, None, &self.rules)?;
        let links = self.links.export(caller, &input)?;
        let public = self.public.clone();
        // One message per link, as before; the store hands them over a batch at a time.
        Ok(Box::pin(links.flat_map(move |next| {
            let messages: Vec<Result<pb::Link, Status>> = match next {
                Ok(batch) => batch
                    .iter()
                    .map(|link| Ok(wire::link(&public, link)))
                    .collect(),
                Err(error) => vec![Err(Status::from(error))],
            };
            futures::stream::iter(messages)
        })))
    }
}

/// An import's settings from its first message: a dry run or not, the domain every row goes
/// on (the caller's tenant's) or each row's own, and the hosts that mean the default domain.
async fn settings(
    links: &crate::links::LinkService,
    caller: &Caller,
    rules: &crate::domain::CreateRules,
    first: &pb::ImportLinksRequest,
) -> Result<ImportSettings, Error> {
    let default_hosts =
        crate::domain::default_hosts(rules, first.default_hosts.iter().map(String::as_str))?;
    if first.domain.is_some() && !default_hosts.is_empty() {
        return Err(crate::domain::both_domains());
    }
    let domain = rules.domain(first.domain.as_deref())?;
    if let Some(host) = &domain {
        links.check_domain(caller, host).await?;
    }
    Ok(ImportSettings {
        dry_run: first.dry_run,
        row_domains: first.domain.is_none(),
        default_hosts,
        domain,
        rules: rules.clone(),
        idle: links.import_idle(),
    })
}

/// The most rows one import message may carry: a chunk's worth. A message is decoded whole
/// before any of it is read; what it may hold decoded is bounded as its bytes arrive (see
/// `grpc::decoded`), and this keeps what one message hands the import to a chunk.
pub const ROWS_PER_MESSAGE: usize = crate::links::CHUNK_ROWS;

/// The rows of one import message, converted as the import reads them (or the stream's
/// failure; a message of more than [`ROWS_PER_MESSAGE`] rows fails it).
fn rows_of(
    message: Result<pb::ImportLinksRequest, Status>,
) -> Box<dyn Iterator<Item = Result<InputRow, Status>> + Send> {
    match message {
        Ok(message) if message.rows.len() > ROWS_PER_MESSAGE => {
            Box::new(std::iter::once(Err(Status::invalid_argument(format!(
                "an import message holds at most {ROWS_PER_MESSAGE} rows, not {}: send them \
                 in more messages",
                message.rows.len()
            )))))
        }
        Ok(message) => Box::new(message.rows.into_iter().map(|row| {
            let code = row.code.clone();
            Ok(ImportInput::try_from(row).map_err(|error| (code, error)))
        })),
        Err(status) => Box::new(std::iter::once(Err(status))),
    }
}

/// The messages of one import event: a result per row, or the summary (or the status the
/// import stopped with).
fn answers(
    event: ImportEvent<Status>,
    public: &PublicBase,
) -> Vec<Result<pb::ImportLinksResponse, Status>> {
    match event {
        ImportEvent::Rows(results) => results
            .into_iter()
            .map(|result| Ok(wire::row_result(result, public)))
            .collect(),
        ImportEvent::End(ImportSummary {
            stopped: Some(ImportStop::Input(status)),
            ..
        }) => vec![Err(status)],
        ImportEvent::End(ImportSummary {
            stopped: Some(ImportStop::Failed(error)),
            ..
        }) => vec![Err(Status::from(error))],
        ImportEvent::End(ImportSummary {
            totals, dry_run, ..
        }) => {
            let summary = pb::ImportSummary {
                rows: totals.rows,
                created: totals.created,
                exists: totals.exists,
                errors: totals.errors,
                dry_run,
                valid: totals.valid,
            };
            vec![Ok(pb::ImportLinksResponse {
                outcome: Some(pb::import_links_response::Outcome::Summary(summary)),
            })]
        }
    }
}
