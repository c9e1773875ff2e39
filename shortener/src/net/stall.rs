//! HTTP/1 connections whose client stops reading are closed.
//!
//! A response larger than the socket buffers (an export, a QR image, a long list) waits on the
//! client to read it. hyper polls a response body only while it can write, so a client that
//! stops reading leaves the response, and whatever produces it, waiting for as long as the
//! client keeps the connection open. [`StallIo`] bounds that wait: once a write has found the
//! socket full, the client has the send timeout to take some of what is waiting; if it takes
//! nothing, the write fails, hyper ends the connection, and the response and its producer are
//! dropped. A write that goes through re-arms the bound, so a slow but steady reader is never
//! cut. The timer is made on the first stall of a connection only: a redirect's few hundred
//! bytes never fill a socket, so the hot path pays one branch.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A socket whose writes fail once the peer has taken nothing for a whole send timeout.
pub struct StallIo<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write waits on a full socket: when the wait began plus the timeout.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Whether `stalled` counts a wait in progress (the timer is kept for reuse).
    waiting: bool,
}

impl<S> StallIo<S> {
    /// Wraps `inner`, failing its writes after `timeout` without progress.
    pub fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            stalled: None,
            waiting: false,
        }
    }

    /// What a write's `result` means under the bound: progress disarms it; a full socket arms
    /// it (once per wait) and fails the write when it runs out.
    fn judge<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.waiting = false;
            return result;
        }
        let deadline = Instant::now() + self.timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.waiting {
            timer.as_mut().reset(deadline);
            self.waiting = true;
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing within the send timeout",
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.judge(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.judge(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.judge(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_write_to_a_peer_that_reads_nothing_fails_after_the_timeout() {
        let (ours, _theirs) = tokio::io::duplex(1024);
        let mut io = StallIo::new(ours, Duration::from_secs(30));
        let started = Instant::now();
        let error = loop {
            if let Err(error) = io.write_all(&[0; 4096]).await {
                break error;
            }
        };
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_steady_reader_is_never_cut() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut io = StallIo::new(ours, Duration::from_secs(30));
        let reader = tokio::spawn(async move {
            let mut buf = [0; 512];
            let mut total = 0;
            while total < 64 * 1024 {
                // Each read comes 20 s after the last: slower than a third of the data per
                // timeout, but never a whole timeout without taking something.
                tokio::time::sleep(Duration::from_secs(20)).await;
                total += theirs.read(&mut buf).await.expect("read");
            }
            total
        });
        for _ in 0..64 {
            io.write_all(&[1; 1024])
                .await
                .expect("a steady reader is not cut");
        }
        drop(io);
        assert!(reader.await.expect("reader") >= 64 * 1024);
    }
}
