//! The HTTP/1 accept loop of the public and admin listeners: connection caps per listener and
//! client ([`ConnectionGate`]), a header timeout for clients that are slow to send
//! request heads (which also closes idle keep-alive connections), the peer address in every
//! request, and a bounded graceful drain ([`Drain`]).
//!
//! `axum::serve` offers neither a header read timeout nor a drain bound, so the loop is written
//! here on hyper's connection builder. Each request is first offered to
//! [`Handler::handle_now`] (the public listener answers cached redirects there, at once); the
//! rest go to [`Handler::handle`].
//!
//! hyper's own `header_read_timeout` is not used: it boxes and registers a fresh timer for every
//! request on a keep-alive connection (docs/decisions.md has its cost). Here no connection holds
//! a timer: one sweep per listener and timeout reads each connection's progress ([`Drain::sweep`]),
//! and a request costs two stores to a counter that only its connection's task writes, and a
//! load of the sweep's mark each time the task is woken.

use super::drain::{Drain, Listed, SWEEPS, Watched};
use crate::net::stall::StallIo;
use crate::net::{Admitted, ConnectionGate};
use axum::response::Response;
use futures::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulConnection;
use std::convert::Infallible;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
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
    /// The largest request head (request line and headers) read, in bytes, and so the most a
    /// connection's read buffer grows to: a longer head is answered 431 and the connection
    /// closed. At least 8 KiB.
    pub max_head: usize,
}

impl ServeSettings {
    /// The head bound for a listener whose requests may carry a URL of up to `max_url_length`
    /// bytes in their query (percent-encoded, up to three bytes each): room for that and
    /// 8 KiB of other headers, and never under 16 KiB.
    pub fn head_for(max_url_length: usize) -> usize {
        (3 * max_url_length + (8 << 10)).max(16 << 10)
    }
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
    /// The progress at which the header sweep found the connection waiting through a whole
    /// timeout; `u64::MAX` (a progress no connection lives to reach) until then.
    expired_at: AtomicU64,
}

impl<H: Send + Sync + 'static> Watched for Connection<H> {
    fn progress(&self) -> u64 {
        Connection::progress(self)
    }

    fn expire(&self, progress: u64) {
        self.expired_at.store(progress, Ordering::Relaxed);
    }
}

impl<H> Connection<H> {
    fn step(&self) {
        let now = self.progress.load(Ordering::Relaxed);
        self.progress.store(now.wrapping_add(1), Ordering::Relaxed);
    }

    fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// Whether the sweep found the connection waiting for a request head through a whole
    /// timeout and it has not moved since: read by its own task, which alone moves it, so a
    /// head that arrived after the sweep's look keeps the connection.
    fn expired(&self) -> bool {
        self.expired_at.load(Ordering::Relaxed) == self.progress()
    }
}

/// Serves `handler` on `listener` until `stop` is cancelled, then waits up to the drain bound
/// for in-flight requests; the connections still open past it are closed, and have ended when
/// this returns (so no request of theirs counts a visit after the last click flush, which runs
/// after the servers stop). A connection `gate` refuses is closed at once. A client that does
/// not finish sending its headers within the header timeout is disconnected: a connection that
/// waits for a request head through a whole timeout (a new connection, an idle keep-alive one,
/// or one whose client sends its head slowly) is closed between one and one and a half timeouts
/// after the wait began, during the drain too. A request being answered, its body included, is never cut by this timeout.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: H,
    gate: Arc<ConnectionGate>,
    settings: ServeSettings,
    stop: CancellationToken,
) {
    let ServeSettings {
        header_timeout,
        send_timeout,
        max_head,
        ..
    } = settings;
    let max_head = max_head.max(8 << 10);
    let mut builder = hyper::server::conn::http1::Builder::new();
    // No timer for hyper: the listener's sweep bounds header reads instead. The buffer bound
    // keeps a connection that sends a long head from growing its read buffer to hyper's
    // default of ~400 KiB (the memory gauges count a connection at `CONNECTION_BYTES`).
    builder
        .header_read_timeout(None)
        .keep_alive(true)
        .max_header_size(max_head)
        .max_buf_size(max_head);
    let drain = Arc::new(Drain::default());
    let handler = Arc::new(handler);
    let mut connections = tokio::task::JoinSet::new();
    // Aborted when `serve` returns or is dropped; it runs through the drain, which a client
    // that sent part of a head would otherwise hold to its bound.
    let _sweeping = Sweeping(tokio::spawn(sweep(Arc::clone(&drain), header_timeout)));
    loop {
        // Ended connections are reaped as new ones come, so the set holds the open ones.
        while connections.try_join_next().is_some() {}
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
            expired_at: AtomicU64::new(u64::MAX),
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
                // when its head is ready: a long body is never cut by the header timeout.
                Ok::<_, Infallible>(response.map(|body| {
                    axum::body::Body::new(Answering {
                        body,
                        connection: Some(connection),
                    })
                }))
            }))
        });
        let serving =
            builder.serve_connection(TokioIo::new(StallIo::new(stream, send_timeout)), service);
        let listed = drain.enlist(Arc::clone(&connection) as Arc<dyn Watched>);
        connections.spawn(watched(serving, connection, listed));
    }
    drop(listener);
    drain.begin();
    let bound = settings.drain;
    if tokio::time::timeout(bound, drain.ended()).await.is_err() {
        tracing::warn!(drain = ?bound, open = connections.len(), "drain bound reached; closing remaining connections");
        connections.abort_all();
    }
    while connections.join_next().await.is_some() {}
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

/// The sweep's task, aborted when dropped.
struct Sweeping(tokio::task::JoinHandle<()>);

impl Drop for Sweeping {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sweeps `drain`'s connections [`SWEEPS`] times per `header_timeout` ([`Drain::sweep`]),
/// until aborted.
async fn sweep(drain: Arc<Drain>, header_timeout: Duration) {
    let mut ticks = tokio::time::interval(header_timeout / SWEEPS);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick completes at once.
    ticks.tick().await;
    loop {
        ticks.tick().await;
        drain.sweep();
    }
}

/// Drives one connection until it ends, closing it (by dropping it) when the listener's sweep
/// finds that it waited for a request head through a whole header timeout (it is then closed
/// between one and one and a half timeouts after the wait began; see [`Drain::sweep`]). Once the
/// listener's drain begins (`listed`), the connection finishes the request it is answering and
/// closes.
async fn watched<F, H>(serving: F, connection: Arc<Connection<H>>, mut listed: Listed)
where
    F: GracefulConnection<Error = hyper::Error>,
{
    let mut serving = pin!(serving);
    let mut draining = false;
    poll_fn(|cx| {
        if !draining && listed.began(cx) {
            draining = true;
            serving.as_mut().graceful_shutdown();
        }
        if let Poll::Ready(ended) = serving.as_mut().poll(cx) {
            if let Err(error) = ended {
                // No peer address in the log: client IPs are used for limits and countries only.
                tracing::debug!(%error, "connection ended with an error");
            }
            return Poll::Ready(());
        }
        if connection.expired() {
            tracing::debug!("no request head within the header read timeout; closing");
            return Poll::Ready(());
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::Notify;

    /// Answers `/slow` once `release` is notified (telling `arrived` when it has the request),
    /// anything else at once.
    struct Held {
        arrived: Arc<Notify>,
        release: Arc<Notify>,
    }

    impl Handler for Held {
        fn handle_now(
            &self,
            _: SocketAddr,
            request: &hyper::Request<Incoming>,
        ) -> Option<Response> {
            (request.uri().path() != "/slow").then(|| Response::new("now".into()))
        }

        async fn handle(&self, _: SocketAddr, _: hyper::Request<Incoming>) -> Response {
            self.arrived.notify_one();
            self.release.notified().await;
            Response::new("slow".into())
        }
    }

    /// Reads until the peer closes, within `within`; `None` if it did not close in time.
    async fn read_to_close(stream: &mut TcpStream, within: Duration) -> Option<String> {
        let mut text = Vec::new();
        let read = tokio::time::timeout(within, stream.read_to_end(&mut text)).await;
        read.ok()?.ok()?;
        Some(String::from_utf8_lossy(&text).into_owned())
    }

    #[tokio::test]
    async fn a_drain_closes_idle_connections_at_once_and_lets_the_request_in_flight_finish() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let handler = Held {
            arrived: Arc::clone(&arrived),
            release: Arc::clone(&release),
        };
        let settings = ServeSettings {
            header_timeout: Duration::from_secs(60),
            drain: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            max_head: 16 << 10,
        };
        let stop = CancellationToken::new();
        let gate = ConnectionGate::new("test", 16, 16, 64);
        let serving = tokio::spawn(serve(listener, handler, gate, settings, stop.clone()));

        // A keep-alive connection that has had its answer and waits for the next request.
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        idle.write_all(b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .expect("send");
        let mut answer = [0; 256];
        let n = idle.read(&mut answer).await.expect("answer");
        assert!(
            answer[..n].ends_with(b"now"),
            "{:?}",
            String::from_utf8_lossy(&answer[..n])
        );
        // A request being answered when the drain begins.
        let mut busy = TcpStream::connect(addr).await.expect("connect");
        busy.write_all(b"GET /slow HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .expect("send");
        tokio::time::timeout(Duration::from_secs(10), arrived.notified())
            .await
            .expect("the slow request reached its handler");

        stop.cancel();
        let closed = read_to_close(&mut idle, Duration::from_secs(10)).await;
        assert_eq!(
            closed.as_deref(),
            Some(""),
            "the idle connection was not closed"
        );
        assert!(
            !serving.is_finished(),
            "the drain ended before the request in flight"
        );
        release.notify_one();
        let answered = read_to_close(&mut busy, Duration::from_secs(10))
            .await
            .expect("the request in flight was answered and its connection closed");
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
        assert!(
            answered.to_ascii_lowercase().contains("connection: close"),
            "{answered}"
        );
        assert!(answered.ends_with("slow"), "{answered}");
        tokio::time::timeout(Duration::from_secs(10), serving)
            .await
            .expect("the drain ended with its last connection, long before its bound")
            .expect("serve");
    }
}
