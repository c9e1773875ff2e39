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
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tonic::Status;

/// How long each streaming method's answer may hold its call: the method's own bound (an
/// import's longest run after the idle bound its first message may take, an export's
/// deadline) plus one send timeout for its last messages.
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

/// The stream and what its call holds, until the one ends or the bound passes; and the task
/// that last waited on the stream, woken when the bound drops it (its waker went with it).
#[derive(Default)]
struct Inner {
    stream: Option<(tonic::body::Body, Holding)>,
    waiting: Option<Waker>,
}

type Slot = Arc<Mutex<Inner>>;

/// `response` with its body holding `holding` until the body ends or `bound` passes; past
/// the bound the body is dropped and the answer ends with DEADLINE_EXCEEDED.
pub(super) fn hold(
    response: tonic::codegen::http::Response<tonic::body::Body>,
    holding: Holding,
    bound: Duration,
) -> tonic::codegen::http::Response<tonic::body::Body> {
    let (parts, body) = response.into_parts();
    let slot: Slot = Arc::new(Mutex::new(Inner {
        stream: Some((body, holding)),
        waiting: None,
    }));
    let (ended, on_end) = oneshot::channel::<()>();
    let timer = Arc::clone(&slot);
    tokio::spawn(async move {
        // Whichever comes first: the answer dropped (its sender with it), or the bound.
        if tokio::time::timeout(bound, on_end).await.is_err() {
            let (stream, waiting) = {
                let mut inner = lock(&timer);
                (inner.stream.take(), inner.waiting.take())
            };
            drop(stream);
            if let Some(waker) = waiting {
                waker.wake();
            }
        }
    });
    let held = Held {
        slot,
        bound,
        state: State::Streaming,
        _ended: ended,
    };
    tonic::codegen::http::Response::from_parts(parts, tonic::body::Body::new(held))
}

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Inner> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a held answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its stream runs (or was dropped at the bound, not yet said).
    Streaming,
    /// Its stream ended of itself.
    Ended,
    /// Its stream was dropped at the bound, and the status said.
    Told,
}

/// A response body that holds its call until it ends (see the module's comment).
struct Held {
    slot: Slot,
    bound: Duration,
    state: State,
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
        if self.state != State::Streaming {
            return Poll::Ready(None);
        }
        let mut inner = lock(&self.slot);
        let Some((body, _)) = inner.stream.as_mut() else {
            drop(inner);
            return Poll::Ready(self.past_bound());
        };
        let frame = Pin::new(body).poll_frame(cx);
        match frame {
            Poll::Ready(None) => {
                // The stream ended: its call is over.
                let stream = inner.stream.take();
                drop(inner);
                drop(stream);
                self.state = State::Ended;
            }
            Poll::Pending => inner.waiting = Some(cx.waker().clone()),
            Poll::Ready(Some(_)) => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        match self.state {
            State::Ended | State::Told => true,
            State::Streaming => lock(&self.slot)
                .stream
                .as_ref()
                .is_some_and(|(body, _)| body.is_end_stream()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        lock(&self.slot)
            .stream
            .as_ref()
            .map_or_else(SizeHint::default, |(body, _)| body.size_hint())
    }
}

impl Held {
    /// The last frame of a stream dropped at its bound: trailers with DEADLINE_EXCEEDED.
    fn past_bound(&mut self) -> Option<Result<Frame<Bytes>, Status>> {
        self.state = State::Told;
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
        let stream = lock(&self.slot).stream.take();
        drop(stream);
    }
}
