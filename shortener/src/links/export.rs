//! Exports: every link of a list, streamed, with a bound on what one reader can hold.
//!
//! An export is a keyset walk over the list's order (newest first), one page per short read:
//! each page takes a store connection (or, embedded, a read transaction) only while its query
//! runs and gives it back before the page is handed to the reader. A reader that stops reading
//! therefore holds no pool connection and no snapshot: redirects and creates keep their
//! connections, and SQLite's checkpoints keep running. What a reader can hold is bounded
//! three ways: at most [`ExportLimits::per_node`] exports run on a node and
//! [`ExportLimits::per_key`] per API key (more answer 429), each buffers at most
//! [`BUFFERED_PAGES`] pages, and a page the reader has not taken within
//! [`ExportLimits::send_timeout`] ends the export (the transports close the stream as failed).
//!
//! A keyset walk is not one snapshot, and says so: every link that exists when the export
//! starts and still exists when the walk reaches it is sent exactly once, in order; a link
//! created during the export sorts before the walk's position and is not sent; an edit made
//! during the export shows if the walk has not passed the link yet.

use crate::domain::{Caller, Error, Link, ListQuery};
use crate::store::{LinkStore, Store, StoreError};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Links read per page of an export: one store round trip per this many links.
pub const EXPORT_PAGE: usize = 512;

/// Pages of an export waiting between the store and the transport.
pub const BUFFERED_PAGES: usize = 2;

/// How long an export may ask the node to wait for a slow client.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What an export hands the transport: a page of links (never empty), or the error that ended
/// it (the last item).
pub type ExportBatch = Result<Vec<Link>, StoreError>;

/// How much exporting one node and one key may do at once.
#[derive(Debug, Clone, Copy)]
pub struct ExportLimits {
    /// Exports running at once on the node.
    pub per_node: NonZeroUsize,
    /// Exports running at once for one API key.
    pub per_key: NonZeroUsize,
    /// How long a page may wait for the reader to take it before the export ends.
    pub send_timeout: Duration,
}

/// Admits exports within [`ExportLimits`].
pub(super) struct ExportGate {
    limits: ExportLimits,
    node: Arc<Semaphore>,
    keys: Arc<Mutex<HashMap<String, usize>>>,
}

impl ExportGate {
    /// A gate with nothing running.
    pub(super) fn new(limits: ExportLimits) -> Self {
        Self {
            limits,
            node: Arc::new(Semaphore::new(limits.per_node.get())),
            keys: Arc::default(),
        }
    }

    /// A place for one export of `caller`, or `RateLimited` when the node or the key is full.
    fn admit(&self, caller: &Caller) -> Result<ExportSlot, Error> {
        let busy = || Error::RateLimited {
            retry_after: RETRY_AFTER,
        };
        let node = Arc::clone(&self.node)
            .try_acquire_owned()
            .map_err(|_| busy())?;
        let key = caller.key_id();
        let mut keys = self.keys.lock().expect("export counts are never poisoned");
        let running = keys.entry(key.clone()).or_default();
        if *running >= self.limits.per_key.get() {
            return Err(busy());
        }
        *running += 1;
        Ok(ExportSlot {
            _node: node,
            keys: Arc::clone(&self.keys),
            key,
        })
    }

    /// Starts streaming every link of `query` for `caller`, within the limits.
    pub(super) fn start(
        &self,
        store: Store,
        caller: &Caller,
        query: ListQuery,
    ) -> Result<LinkExport, Error> {
        let slot = self.admit(caller)?;
        let (tx, rx) = mpsc::channel(BUFFERED_PAGES);
        let complete = Arc::new(AtomicBool::new(false));
        tokio::spawn(walk(
            store,
            query,
            tx,
            Arc::clone(&complete),
            self.limits.send_timeout,
        ));
        Ok(LinkExport {
            rx,
            complete,
            ended: false,
            _slot: slot,
        })
    }
}

/// One running export's place in the node's and its key's counts, given back when dropped.
struct ExportSlot {
    _node: OwnedSemaphorePermit,
    keys: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().expect("export counts are never poisoned");
        if let Some(running) = keys.get_mut(&self.key) {
            *running -= 1;
            if *running == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

/// The pages of a running export, in list order. It holds the export's place in the limits
/// until it is dropped, so a transport that stops reading keeps counting against them. An
/// export that ended before its last page (its reader stalled past the send timeout) ends with
/// an error item, never as if it were complete.
pub struct LinkExport {
    rx: mpsc::Receiver<ExportBatch>,
    complete: Arc<AtomicBool>,
    ended: bool,
    _slot: ExportSlot,
}

impl LinkExport {
    /// The next page; `None` once every link was sent.
    pub async fn recv(&mut self) -> Option<ExportBatch> {
        std::future::poll_fn(|cx| self.poll_page(cx)).await
    }

    fn poll_page(&mut self, cx: &mut Context<'_>) -> Poll<Option<ExportBatch>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match std::task::ready!(self.rx.poll_recv(cx)) {
            Some(Err(error)) => {
                self.ended = true;
                Poll::Ready(Some(Err(error)))
            }
            Some(page) => Poll::Ready(Some(page)),
            None => {
                self.ended = true;
                if self.complete.load(Ordering::Acquire) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(StoreError::Unavailable(
                        "the export ended early: its reader took no page within the send timeout"
                            .into(),
                    ))))
                }
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

/// Reads `query` page by page into `out` until the last page (then marks `complete`), a
/// failure (sent as the last item), a reader that went away, or a reader that took no page for
/// `send_timeout`.
async fn walk(
    store: Store,
    mut query: ListQuery,
    out: mpsc::Sender<ExportBatch>,
    complete: Arc<AtomicBool>,
    send_timeout: Duration,
) {
    query.limit = EXPORT_PAGE;
    loop {
        let page = match store.list(&query).await {
            Ok(page) => page,
            Err(error) => {
                let _ = tokio::time::timeout(send_timeout, out.send(Err(error))).await;
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
                complete.store(true, Ordering::Release);
                return;
            }
        }
    }
}
