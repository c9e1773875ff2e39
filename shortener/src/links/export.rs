//! Exports: every link of a list, streamed, with a bound on what one reader can hold.
//!
//! An export is a keyset walk over the list's order (newest first), one page per short read:
//! each page takes a store connection (or, embedded, a read transaction) only while its query
//! runs and gives it back before the page is handed to the reader. A reader that stops reading
//! therefore holds no pool connection and no snapshot: redirects and creates keep their
//! connections, and SQLite's checkpoints keep running. What a reader can hold is bounded
//! four ways: at most a few exports run on a node, fewer per tenant and per API key
//! ([`ExportLimits::places`]; more answer 429), each buffers at most [`BUFFERED_PAGES`] pages,
//! a page the reader has not taken within [`ExportLimits::send_timeout`] ends the export, and
//! so does [`ExportLimits::deadline`] (the transports close the stream as failed).
//!
//! A keyset walk is not one snapshot, and says so: every link that exists when the export
//! starts and still exists when the walk reaches it is sent exactly once, in order; a link
//! created during the export sorts before the walk's position and is not sent; an edit made
//! during the export shows if the walk has not passed the link yet.

use crate::domain::{Caller, Error, Link, ListQuery};
use crate::limits::{Gate, Place, Places};
use crate::store::{LinkStore, Store};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Links read per page of an export: one store round trip per this many links.
pub const EXPORT_PAGE: usize = 512;

/// Pages of an export waiting between the store and the transport.
pub const BUFFERED_PAGES: usize = 2;

/// How long an export may ask the node to wait for a slow client.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What an export hands the transport: a page of links (never empty), or the error that ended
/// it (the last item): the store's, or `export_ended` (a `Conflict`: not to be retried as it
/// was) when it ended early by its own bounds.
pub type ExportBatch = Result<Vec<Link>, Error>;

/// How much exporting one node, one tenant and one key may do at once, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct ExportLimits {
    /// Exports running at once on the node, per tenant and per API key.
    pub places: Places,
    /// How long a page may wait for the reader to take it before the export ends.
    pub send_timeout: Duration,
    /// How long one export may run: one read slowly but steadily ends here, so that its place
    /// is given back.
    pub deadline: Duration,
}

/// Admits exports within [`ExportLimits`].
pub(super) struct ExportGate {
    limits: ExportLimits,
    gate: Gate,
}

impl ExportGate {
    /// A gate with nothing running.
    pub(super) fn new(limits: ExportLimits) -> Self {
        Self {
            limits,
            gate: Gate::new(limits.places, RETRY_AFTER),
        }
    }

    /// Starts streaming every link of `query` for `caller`, within the limits (more answer
    /// `RateLimited`).
    pub(super) fn start(
        &self,
        store: Store,
        caller: &Caller,
        query: ListQuery,
    ) -> Result<LinkExport, Error> {
        let place = self.gate.admit(caller)?;
        let (tx, rx) = mpsc::channel(BUFFERED_PAGES);
        let ended = Arc::new(Mutex::new(Ended::Early));
        tokio::spawn(walk(store, query, tx, Arc::clone(&ended), self.limits));
        Ok(LinkExport {
            rx,
            ended,
            done: false,
            _place: place,
        })
    }
}

/// How a walk ended, as the reader learns once the pages stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Every link was sent.
    Complete,
    /// The reader took no page within the send timeout (or the walk has not ended yet).
    Early,
    /// The export ran for its whole deadline.
    Deadline(Duration),
}

/// The pages of a running export, in list order. It holds the export's place in the limits
/// until it is dropped, so a transport that stops reading keeps counting against them. An
/// export that ended before its last page (its reader stalled past the send timeout, or it ran
/// for its whole deadline) ends with an error item, never as if it were complete.
pub struct LinkExport {
    rx: mpsc::Receiver<ExportBatch>,
    ended: Arc<Mutex<Ended>>,
    done: bool,
    _place: Place,
}

impl LinkExport {
    /// The next page; `None` once every link was sent.
    pub async fn recv(&mut self) -> Option<ExportBatch> {
        std::future::poll_fn(|cx| self.poll_page(cx)).await
    }

    fn poll_page(&mut self, cx: &mut Context<'_>) -> Poll<Option<ExportBatch>> {
        if self.done {
            return Poll::Ready(None);
        }
        match std::task::ready!(self.rx.poll_recv(cx)) {
            Some(Err(error)) => {
                self.done = true;
                Poll::Ready(Some(Err(error)))
            }
            Some(page) => Poll::Ready(Some(page)),
            None => {
                self.done = true;
                let ended = *self.ended.lock().unwrap_or_else(|p| p.into_inner());
                let why = match ended {
                    Ended::Complete => return Poll::Ready(None),
                    Ended::Early => {
                        "the export ended early: its reader took no page within the send timeout"
                            .to_string()
                    }
                    Ended::Deadline(deadline) => format!(
                        "the export ended early: it ran for its whole deadline ({} s); \
                         export the rest with a narrower filter",
                        deadline.as_secs()
                    ),
                };
                Poll::Ready(Some(Err(Error::conflict("export_ended", why))))
            }
        }
    }
}

impl futures::Stream for LinkExport {
    type Item = ExportBatch;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ExportBatch>> {
        self.poll_page(cx)
    }
}

/// Reads `query` page by page into `out` until the last page (then marks it `Complete`), a
/// failure (sent as the last item), a reader that went away, a reader that took no page for
/// the send timeout, or the export's deadline (marked, and seen before each page is read).
async fn walk(
    store: Store,
    mut query: ListQuery,
    out: mpsc::Sender<ExportBatch>,
    ended: Arc<Mutex<Ended>>,
    limits: ExportLimits,
) {
    let (send_timeout, until) = (limits.send_timeout, Instant::now() + limits.deadline);
    let end = |how| *ended.lock().unwrap_or_else(|p| p.into_inner()) = how;
    query.limit = EXPORT_PAGE;
    loop {
        if Instant::now() >= until {
            tracing::info!(deadline = ?limits.deadline, "an export ran for its whole deadline; ending it");
            end(Ended::Deadline(limits.deadline));
            return;
        }
        let page = match store.list(&query).await {
            Ok(page) => page,
            Err(error) => {
                let _ = tokio::time::timeout(send_timeout, out.send(Err(error.into()))).await;
                return;
            }
        };
        if !page.links.is_empty() {
            match tokio::time::timeout(send_timeout, out.send(Ok(page.links))).await {
                Ok(Ok(())) => {}
                // The reader went away.
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::info!(
                        ?send_timeout,
                        "an export's reader took no page within the send timeout; ending the export"
                    );
                    return;
                }
            }
        }
        match page.next {
            Some(position) => query.after = Some(position),
            None => {
                end(Ended::Complete);
                return;
            }
        }
    }
}
