//! The redirect ceiling: a minimal hyper 1.x server that answers every request with the same
//! 302 and `Location`. Nothing a redirect service does per request can cost less, so the node's
//! redirect rate is reported as a fraction of this one's on the same core and load generator.

use crate::procs::target_url;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper::{Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;

/// Starts the ceiling as a process of its own (this binary's `ceiling-server`) on a free port,
/// logging to `dir/ceiling.log`, and waits until it listens; its address and process.
pub async fn spawn(dir: &std::path::Path) -> anyhow::Result<(SocketAddr, crate::procs::Server)> {
    let addr = testkit::free_addr();
    let mut server = crate::procs::Server::spawn(
        "ceiling",
        &std::env::current_exe()?,
        &["ceiling-server", "--addr", &addr.to_string()],
        &[],
        dir.join("ceiling.log"),
    )?;
    server.wait_listening(addr).await?;
    Ok((addr, server))
}

/// Serves fixed redirects on `addr` until the process is killed (run as `bench ceiling-server`).
pub async fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    serve_on(tokio::net::TcpListener::bind(addr).await?).await
}

/// Serves fixed redirects on `listener`, forever.
pub async fn serve_on(listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let location = header::HeaderValue::from_str(&target_url(0))?;
    loop {
        // A failed accept (a connection reset while queued, out of descriptors) must not end
        // the server in the middle of a run, as it would not end the node's accept loop.
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                eprintln!("ceiling: accept failed: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        stream.set_nodelay(true)?;
        let location = location.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_request| {
                let location = location.clone();
                async move {
                    let mut response = Response::new(Empty::<Bytes>::new());
                    *response.status_mut() = StatusCode::FOUND;
                    response.headers_mut().insert(header::LOCATION, location);
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
