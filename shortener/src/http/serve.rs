//! The HTTP/1 accept loop: per-connection header read timeout, the peer address in every
//! request, and a bounded graceful drain.
//!
//! `axum::serve` offers neither a header read timeout nor a drain bound, so the loop is written
//! here on hyper's connection builder; requests go to [`Edge::handle`].

use super::Edge;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `edge` on `listener` until `stop` is cancelled, then waits up to `drain` for
/// in-flight requests. A client that does not finish sending its headers within
/// `header_timeout` is disconnected.
pub async fn serve(
    listener: TcpListener,
    edge: Edge,
    header_timeout: Duration,
    stop: CancellationToken,
    drain: Duration,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let edge = Arc::new(edge);
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
        let _ = stream.set_nodelay(true);
        let edge = Arc::clone(&edge);
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let edge = Arc::clone(&edge);
            async move { Ok::<_, Infallible>(edge.handle(peer, request).await) }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(?drain, "drain bound reached; closing remaining connections");
    }
}
