//! A small HTTP/1.1 client on hyper's connection API: one request in flight per connection,
//! keep-alive, no pooling logic in the way of the measurement.

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects to `addr` (TCP_NODELAY, like the servers).
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect to {addr}"))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            host: addr.to_string(),
        })
    }

    /// Sends a request and reads the whole answer; returns its status and body.
    pub async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// `GET path`; returns the status.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<StatusCode> {
        let request = Request::get(path)
            .header(header::HOST, &self.host)
            .body(Full::new(Bytes::new()))?;
        Ok(self.send(request).await?.0)
    }

    /// `POST path` with a JSON body and a bearer key; returns the status and body.
    pub async fn post_json(
        &mut self,
        path: &str,
        bearer: &str,
        body: String,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = Request::post(path)
            .header(header::HOST, &self.host)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {bearer}"))
            .body(Full::new(Bytes::from(body)))?;
        self.send(request).await
    }
}

/// The status of a one-off `GET`.
pub async fn get_status(addr: SocketAddr, path: &str) -> anyhow::Result<u16> {
    Ok(Conn::connect(addr).await?.get(path).await?.as_u16())
}

/// The body of a one-off `GET`.
pub async fn get_text(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut conn = Conn::connect(addr).await?;
    let request = Request::get(path)
        .header(header::HOST, addr.to_string())
        .body(Full::new(Bytes::new()))?;
    let (_, body) = conn.send(request).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}
