//! What the public listener adds around a request that is not a plain redirect: a body that
//! records whether it was read to its end (a connection whose request body was left unread is
//! closed after the answer), and the caching a JSON API answer says nothing of.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request body that records when it has been read to its end.
pub(super) struct Tracked {
    pub(super) inner: Incoming,
    pub(super) read: Arc<AtomicBool>,
}

impl hyper::body::Body for Tracked {
    type Data = hyper::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Finishes the answer to a request whose body `read` tracked: `Connection: close` when the
/// body was left unread, and, for the JSON API (`api`), `no-store` unless the answer says how
/// it may be cached. The API's answers hold a tenant's data, and one made with a console
/// session carries only a cookie, which shared caches do not treat as private.
pub(super) fn finish(response: &mut axum::response::Response, read: &AtomicBool, api: bool) {
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if api && !response.headers().contains_key(header::CACHE_CONTROL) {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}
