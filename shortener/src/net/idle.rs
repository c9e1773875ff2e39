//! gRPC connections that stay idle are closed.
//!
//! An HTTP/2 connection has no request heads to time out on, and its keep-alive pings are
//! traffic too, so idleness is counted in calls: [`IdleIo`] wraps the socket, the gRPC guard
//! marks each call's start and end on the connection's [`Activity`] (found in the request's
//! extensions, through [`Connected`]), and a connection with no call in flight and none
//! started for a whole idle timeout fails its next read, which ends it. The check runs when the
//! connection's task reads, woken by one timer per connection.
//!
//! A stopping node drains its gRPC connections gracefully (GOAWAY, in-flight calls finish) up
//! to its drain bound; past it, the listener's cut token makes every connection's reads and
//! writes fail, which ends the connection and drops the calls still on it (a long stream, a
//! health watch), so no call outlives the node's stop.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::transport::server::Connected;

use super::Admitted;

/// The calls of one connection: started, and finished.
#[derive(Debug, Default)]
pub struct Activity {
    started: AtomicU64,
    finished: AtomicU64,
}

impl Activity {
    /// Marks a call's start; the returned guard marks its end when dropped.
    pub fn call(self: &Arc<Self>) -> CallGuard {
        self.started.fetch_add(1, Ordering::Relaxed);
        CallGuard(Arc::clone(self))
    }
}

/// A call in flight on a connection.
pub struct CallGuard(Arc<Activity>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a gRPC request knows of its connection.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The peer.
    pub peer: SocketAddr,
    /// The connection's calls.
    pub activity: Arc<Activity>,
}

/// A socket that fails its reads once the connection has been idle for a whole timeout, and
/// its reads and writes once its listener is cut.
pub struct IdleIo {
    stream: TcpStream,
    info: ConnectionInfo,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
    seen: u64,
    cut: Pin<Box<WaitForCancellationFutureOwned>>,
    _admitted: Admitted,
}

impl IdleIo {
    /// Wraps `stream` from `peer`, admitted by its listener's gate, closing it after `timeout`
    /// without calls, or at once when `cut` is cancelled.
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        timeout: Duration,
        admitted: Admitted,
        cut: CancellationToken,
    ) -> Self {
        Self {
            stream,
            info: ConnectionInfo {
                peer,
                activity: Arc::default(),
            },
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
            seen: 0,
            // A token of its own, so that connections polling it share no lock.
            cut: Box::pin(cut.child_token().cancelled_owned()),
            _admitted: admitted,
        }
    }

    /// An error once the listener is cut (the task is woken when it is).
    fn cut(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.cut.as_mut().poll(cx).is_ready().then(|| {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the node is stopping and its drain bound has passed",
            )
        })
    }

    /// Whether the timer ran out on an idle connection; re-arms it otherwise.
    fn idle(&mut self, cx: &mut Context<'_>) -> bool {
        while self.timer.as_mut().poll(cx).is_ready() {
            let started = self.info.activity.started.load(Ordering::Relaxed);
            let finished = self.info.activity.finished.load(Ordering::Relaxed);
            if started == self.seen && started == finished {
                return true;
            }
            self.seen = started;
            self.timer.as_mut().reset(Instant::now() + self.timeout);
        }
        false
    }
}

impl Connected for IdleIo {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl AsyncRead for IdleIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(error) = self.cut(cx) {
            return Poll::Ready(Err(error));
        }
        if self.idle(cx) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no call on this connection within the idle timeout",
            )));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for IdleIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.cut(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(error) = self.cut(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.stream).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.cut(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The connections `listener` accepts, each admitted by `gate` (one over its caps is closed at
/// once) and wrapped to close after `timeout` without calls or when `cut` is cancelled: the
/// incoming stream of a tonic server. Accept errors (out of descriptors, say) are logged and
/// backed off, never ended on.
pub fn incoming(
    listener: tokio::net::TcpListener,
    gate: Arc<super::ConnectionGate>,
    timeout: Duration,
    cut: CancellationToken,
) -> impl futures::Stream<Item = io::Result<IdleIo>> {
    futures::stream::unfold(listener, move |listener| {
        let gate = Arc::clone(&gate);
        let cut = cut.clone();
        async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, listener = "grpc", "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(admitted) = gate.admit(peer.ip()) else {
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let io = IdleIo::new(stream, peer, timeout, admitted, cut);
                return Some((Ok(io), listener));
            }
        }
    })
}
