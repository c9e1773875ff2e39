//! What a streaming call holds while its answer streams: its place among the node's calls in
//! flight and its mark on the connection's activity ([`crate::net::idle`]).
//!
//! A streaming method's handler returns as soon as its answer's headers are ready; the stream
//! runs on in the response body. Marking the call finished at that point would make a
//! connection that carries only a long import or export look idle, and the idle check would
//! cut the stream midway. So the guard hands both to the response body ([`hold`]), which gives
//! them back when the stream ends, or when the call's bound ([`StreamBounds`]) has passed,
//! whichever comes first.
//!
//! At the bound the stream itself is dropped too, with all it holds (an export's or an
//! import's place): a client that stops reading but keeps its connection alive (it answers
//! pings, or makes other calls) leaves its stream waiting on flow control, never polled again,
//! so only a timer can end it. What the client reads after that is the messages already
//! written and a DEADLINE_EXCEEDED status.

use crate::net::idle::CallGuard;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tonic::Status;

/// How long each streaming method's answer may hold its call: the method's own bound (an
/// import's longest run, an export's deadline) plus one send timeout for its last messages.
#[derive(Debug, Clone, Copy)]
pub struct StreamBounds {
    /// `ImportLinks`.
    pub import: Duration,
    /// `ExportLinks`.
    pub export: Duration,
}

impl StreamBounds {
    /// The bound of `method` of `Links`; `None` for a unary method, whose answer is one
    /// message written as the handler returns.
    pub(super) fn of(&self, method: &str) -> Option<Duration> {
        match method {
            "ImportLinks" => Some(self.import),
            "ExportLinks" => Some(self.export),
            _ => None,
        }
    }
}

/// What a call holds: its place in flight, and its mark on the connection (none when the
/// connection did not say, as in tests that serve without [`crate::net::idle`]).
pub(super) type Holding = (OwnedSemaphorePermit, Option<CallGuard>);

/// The stream and what its call holds, until the one ends or the bound passes.
type Slot = Arc<Mutex<Option<(tonic::body::Body, Holding)>>>;

/// `response` with its body holding `holding` until the body ends or `bound` passes; past
/// the bound the body is dropped and the answer ends with DEADLINE_EXCEEDED.
pub(super) fn hold(
    response: tonic::codegen::http::Response<tonic::body::Body>,
    holding: Holding,
    bound: Duration,
) -> tonic::codegen::http::Response<tonic::body::Body> {
    let (parts, body) = response.into_parts();
    let slot: Slot = Arc::new(Mutex::new(Some((body, holding))));
    let (ended, on_end) = oneshot::channel::<()>();
    let timer = Arc::clone(&slot);
    tokio::spawn(async move {
        // Whichever comes first: the answer dropped (its sender with it), or the bound.
        if tokio::time::timeout(bound, on_end).await.is_err() {
            drop(take(&timer));
        }
    });
    let held = Held {
        slot,
        bound,
        told: false,
        _ended: ended,
    };
    tonic::codegen::http::Response::from_parts(parts, tonic::body::Body::new(held))
}

/// What `slot` still holds, taken out of it.
fn take(slot: &Slot) -> Option<(tonic::body::Body, Holding)> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// A response body that holds its call until it ends (see the module's comment).
struct Held {
    slot: Slot,
    bound: Duration,
    /// Whether the status of a stream dropped at its bound has been written.
    told: bool,
    /// Dropped with the body, which wakes the timer.
    _ended: oneshot::Sender<()>,
}

impl Body for Held {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let Some((body, _)) = slot.as_mut() else {
            drop(slot);
            return Poll::Ready(self.past_bound());
        };
        let frame = Pin::new(body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) {
            // The stream ended: its call is over.
            drop(slot.take());
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .map_or(self.told, |(body, _)| body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .map_or_else(SizeHint::default, |(body, _)| body.size_hint())
    }
}

impl Held {
    /// The last frame of a stream dropped at its bound: trailers with DEADLINE_EXCEEDED, once.
    fn past_bound(&mut self) -> Option<Result<Frame<Bytes>, Status>> {
        if std::mem::replace(&mut self.told, true) {
            return None;
        }
        let mut status = Status::deadline_exceeded(format!(
            "the stream ran past its bound of {} s and was ended",
            self.bound.as_secs()
        ));
        status.metadata_mut().insert(
            "error-code",
            tonic::metadata::MetadataValue::from_static("stream_ended"),
        );
        let mut trailers = tonic::codegen::http::HeaderMap::new();
        match status.add_header(&mut trailers) {
            Ok(()) => Some(Ok(Frame::trailers(trailers))),
            Err(status) => Some(Err(status)),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(take(&self.slot));
    }
}
