//! The HTTP/1 accept loop of the public and admin listeners: connection caps per listener and
//! client ([`ConnectionGate`]), a per-connection watchdog for clients that are slow to send
//! request heads (which also closes idle keep-alive connections), the peer address in every
//! request, and a bounded graceful drain.
//!
//! `axum::serve` offers neither a header read timeout nor a drain bound, so the loop is written
//! here on hyper's connection builder. Each request is first offered to
//! [`Handler::handle_now`] (the public listener answers cached redirects there, at once); the
//! rest go to [`Handler::handle`].
//!
//! hyper's own `header_read_timeout` is not used: it boxes and registers a fresh timer for every
//! request on a keep-alive connection (docs/decisions.md has its cost). The watchdog here costs each connection one timer, re-armed once per timeout, and
//! each request two stores to a counter that only its connection's task writes.

use crate::net::stall::StallIo;
use crate::net::{Admitted, ConnectionGate};
use axum::response::Response;
use futures::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How a listener answers requests.
pub trait Handler: Send + Sync + 'static {
    /// The answer to `request` from `peer`, when it is known without waiting (`None`: call
    /// [`Handler::handle`]).
    fn handle_now(&self, peer: SocketAddr, request: &hyper::Request<Incoming>) -> Option<Response>;

    /// The answer to `request` from `peer`.
    fn handle(
        &self,
        peer: SocketAddr,
        request: hyper::Request<Incoming>,
    ) -> impl Future<Output = Response> + Send;
}

/// How a listener treats slow clients and its drain.
#[derive(Debug, Clone, Copy)]
pub struct ServeSettings {
    /// A connection waiting for a request head longer than this is closed.
    pub header_timeout: Duration,
    /// How long in-flight requests may take once the listener stops.
    pub drain: Duration,
    /// A connection whose client takes no bytes of a response for this long is closed.
    pub send_timeout: Duration,
}

/// What every request of one connection shares: the handler, the peer, and the connection's progress.
struct Connection<H> {
    handler: Arc<H>,
    peer: SocketAddr,
    /// The connection's place in its listener's caps, freed when the connection ends.
    _admitted: Admitted,
    /// Request heads received plus responses written, on this connection: odd while a request
    /// is being answered (its body included), even while the connection waits for its next
    /// request head. Written only by the connection's own task, so a plain load and store suffice.
    progress: AtomicU64,
}

impl<H> Connection<H> {
    fn step(&self) {
        let now = self.progress.load(Ordering::Relaxed);
        self.progress.store(now.wrapping_add(1), Ordering::Relaxed);
    }

    fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }
}

/// Serves `handler` on `listener` until `stop` is cancelled, then waits up to the drain bound
/// for in-flight requests. A connection `gate` refuses is closed at once. A client that does
/// not finish sending its headers within the header timeout is disconnected: a connection that
/// waits for a request head through a whole timeout (a new connection, an idle keep-alive one,
/// or one whose client sends its head slowly) is closed between one and two timeouts after the
/// wait began. A request being answered, its body included, is never cut by this timeout.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: H,
    gate: Arc<ConnectionGate>,
    settings: ServeSettings,
    stop: CancellationToken,
) {
    let ServeSettings {
        header_timeout,
        drain,
        send_timeout,
    } = settings;
    let mut builder = hyper::server::conn::http1::Builder::new();
    // No timer for hyper: the watchdog in each connection's task bounds header reads instead.
    builder.header_read_timeout(None).keep_alive(true);
    let graceful = GracefulShutdown::new();
    let handler = Arc::new(handler);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Some(admitted) = gate.admit(peer.ip()) else {
            // Over a cap: closed now, so it neither waits in the backlog nor keeps a descriptor.
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let connection = Arc::new(Connection {
            handler: Arc::clone(&handler),
            peer,
            _admitted: admitted,
            progress: AtomicU64::new(0),
        });
        let requests = Arc::clone(&connection);
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            requests.step();
            // A cached redirect is answered here, while hyper calls the service, and the
            // request is dropped before hyper reads on. A request held until its future is
            // first polled still shares hyper's read buffer when hyper tries its next read, so
            // hyper would allocate a new buffer (8 KiB) for every request.
            if let Some(response) = requests.handler.handle_now(requests.peer, &request) {
                drop(request);
                requests.step();
                return Either::Left(std::future::ready(Ok::<_, Infallible>(response)));
            }
            let connection = Arc::clone(&requests);
            // Boxed, so the future hyper holds and moves for every request is as small as the
            // ready answer of a cached redirect, not as large as the routed handler's.
            Either::Right(Box::pin(async move {
                let response = connection.handler.handle(connection.peer, request).await;
                // The request counts as answered once its body is written (or abandoned), not
                // when its head is ready: a long body is never cut by the header watchdog.
                Ok::<_, Infallible>(response.map(|body| {
                    axum::body::Body::new(Answering {
                        body,
                        connection: Some(connection),
                    })
                }))
            }))
        });
        let serving = graceful.watch(
            builder.serve_connection(TokioIo::new(StallIo::new(stream, send_timeout)), service),
        );
        tokio::spawn(watched(serving, connection, header_timeout));
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(?drain, "drain bound reached; closing remaining connections");
    }
}

/// A response body being written; its connection steps to "answered" when hyper drops it
/// (written whole, or the connection failed).
struct Answering<H> {
    body: axum::body::Body,
    connection: Option<Arc<Connection<H>>>,
}

impl<H> Drop for Answering<H> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.step();
        }
    }
}

impl<H> hyper::body::Body for Answering<H> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<axum::body::Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Drives one connection until it ends, closing it (by dropping it) when it has waited for a
/// request head through a whole `header_timeout`: the watchdog wakes once per `header_timeout`
/// and closes the connection if its progress is even (waiting) and has not moved since the last
/// wake.
async fn watched<F, H>(serving: F, connection: Arc<Connection<H>>, header_timeout: Duration)
where
    F: Future<Output = Result<(), hyper::Error>>,
{
    let mut serving = pin!(serving);
    let mut watchdog = pin!(tokio::time::sleep(header_timeout));
    let mut seen = connection.progress();
    loop {
        tokio::select! {
            biased;
            ended = serving.as_mut() => {
                if let Err(error) = ended {
                    // No peer address in the log: client IPs are used for limits and countries only.
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            () = watchdog.as_mut() => {
                let progress = connection.progress();
                if progress == seen && progress.is_multiple_of(2) {
                    tracing::debug!(?header_timeout, "no request head within the header read timeout; closing");
                    return;
                }
                seen = progress;
                watchdog.as_mut().reset(tokio::time::Instant::now() + header_timeout);
            }
        }
    }
}
