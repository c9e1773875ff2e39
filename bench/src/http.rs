//! A small HTTP/1.1 client on hyper's connection API: one request in flight per connection,
//! keep-alive, no pooling logic in the way of the measurement.

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;

/// A TCP connection to `addr` with TCP_NODELAY, like the servers'.
async fn connect_tcp(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects to `addr` (TCP_NODELAY, like the servers).
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        let (sender, connection) = http1::handshake(TokioIo::new(connect_tcp(addr).await?)).await?;
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
        let (status, _, body) = self.send_reading_headers(request).await?;
        Ok((status, body))
    }

    /// [`Conn::send`], returning the answer's headers as well.
    pub async fn send_reading_headers(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<(StatusCode, hyper::HeaderMap, Bytes)> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, headers, body))
    }

    /// The `Host` this connection's requests name (the address it connected to).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `GET path`; returns the status.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<StatusCode> {
        let request = Request::get(path)
            .header(header::HOST, &self.host)
            .body(Full::new(Bytes::new()))?;
        Ok(self.send(request).await?.0)
    }

    /// `method path` with a bearer key and a body of `content_type`; returns the status and
    /// the whole answer body.
    pub async fn call(
        &mut self,
        method: hyper::Method,
        path: &str,
        bearer: &str,
        content_type: &str,
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, &self.host)
            .header(header::CONTENT_TYPE, content_type)
            .header(header::AUTHORIZATION, format!("Bearer {bearer}"))
            .body(Full::new(body))?;
        self.send(request).await
    }

    /// `GET path` with a bearer key, reading the answer as it streams in without keeping it:
    /// returns the status, the lines (newline bytes) and the bytes of the body.
    pub async fn get_counting(
        &mut self,
        path: &str,
        bearer: &str,
    ) -> anyhow::Result<(StatusCode, u64, u64)> {
        let request = Request::get(path)
            .header(header::HOST, &self.host)
            .header(header::AUTHORIZATION, format!("Bearer {bearer}"))
            .body(Full::new(Bytes::new()))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let mut body = response.into_body();
        let (mut lines, mut bytes) = (0u64, 0u64);
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                bytes += data.len() as u64;
                lines += data.iter().filter(|&&b| b == b'\n').count() as u64;
            }
        }
        Ok((status, lines, bytes))
    }

    /// `GET path` as a browser would send it; returns the status and the `Location` header.
    pub async fn get_location(&mut self, path: &str) -> anyhow::Result<(u16, Option<String>)> {
        let request = Request::get(path)
            .header(header::HOST, &self.host)
            .header(
                header::USER_AGENT,
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
            )
            .body(Full::new(Bytes::new()))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        response.into_body().collect().await?;
        Ok((status, location))
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

/// A keep-alive connection for the open-loop generator that writes its requests and reads its
/// answers itself: one task, one `write` and usually one `read` per request. hyper's client
/// adds a connection task and a hand-over between the two per request, which on the one load
/// core capped the generator at 60-70k req/s, below the rates it is asked to offer; the
/// latencies it measured near that cap were its own, for the ceiling as much as for the node.
pub struct RawConn {
    stream: tokio::net::TcpStream,
    host: String,
    request: Vec<u8>,
    /// Bytes read and not yet consumed (the start of the next answer, if any).
    input: Vec<u8>,
}

impl RawConn {
    /// Connects to `addr` (TCP_NODELAY, like the servers).
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<RawConn> {
        Ok(RawConn {
            stream: connect_tcp(addr).await?,
            host: addr.to_string(),
            request: Vec::with_capacity(256),
            input: Vec::with_capacity(4096),
        })
    }

    /// `GET path`; returns the status once the whole answer (head and body) has been read.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<u16> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.request.clear();
        for part in ["GET ", path, " HTTP/1.1\r\nHost: ", &self.host, "\r\n\r\n"] {
            self.request.extend_from_slice(part.as_bytes());
        }
        self.stream.write_all(&self.request).await?;
        loop {
            if let Some((status, length)) = answer_at_start(&self.input)?
                && self.input.len() >= length
            {
                self.input.drain(..length);
                return Ok(status);
            }
            self.input.reserve(4096);
            let read = self.stream.read_buf(&mut self.input).await?;
            anyhow::ensure!(read > 0, "the server closed the connection mid-answer");
        }
    }
}

/// The status and the whole length (head and body) of the answer that starts `input`, once its
/// head is complete; `None` while it is not. Bodies must be sized by `Content-Length` (the
/// servers measured answer redirects with an empty, sized body).
fn answer_at_start(input: &[u8]) -> anyhow::Result<Option<(u16, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(input).context("parse an answer's head")? {
        httparse::Status::Partial => return Ok(None),
        httparse::Status::Complete(head) => head,
    };
    let status = response.code.context("an answer without a status")?;
    let mut body = None;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            body = Some(std::str::from_utf8(header.value)?.trim().parse::<usize>()?);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            anyhow::bail!(
                "a {status} answer with a Transfer-Encoding body, which this client does not read"
            );
        }
    }
    let body = match body {
        Some(length) => length,
        None if status < 200 || status == 204 || status == 304 => 0,
        None => anyhow::bail!("a {status} answer without a Content-Length"),
    };
    Ok(Some((status, head + body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn raw_connections_read_each_answer_whole_across_reads() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            // A 404 with a body, sent in three pieces, then a redirect with an empty body.
            let answers: [&[&[u8]]; 2] = [
                &[
                    b"HTTP/1.1 404 Not Fo",
                    b"und\r\nContent-Length: 5\r\n\r\nhe",
                    b"llo",
                ],
                &[b"HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: 0\r\n\r\n"],
            ];
            for pieces in answers {
                let mut request = Vec::new();
                while !request.ends_with(b"\r\n\r\n") {
                    let mut byte = [0];
                    stream.read_exact(&mut byte).await.unwrap();
                    request.push(byte[0]);
                }
                seen.push(String::from_utf8(request).unwrap());
                for piece in pieces {
                    stream.write_all(piece).await.unwrap();
                    stream.flush().await.unwrap();
                    tokio::task::yield_now().await;
                }
            }
            seen
        });
        let mut conn = RawConn::connect(addr).await.unwrap();
        assert_eq!(conn.get("/first").await.unwrap(), 404);
        assert_eq!(conn.get("/second").await.unwrap(), 302);
        assert!(conn.input.is_empty(), "bytes left over: {:?}", conn.input);
        let seen = server.await.unwrap();
        assert_eq!(
            seen[0],
            format!("GET /first HTTP/1.1\r\nHost: {addr}\r\n\r\n")
        );
        assert!(seen[1].starts_with("GET /second HTTP/1.1\r\n"));
    }

    #[tokio::test]
    async fn raw_connections_keep_alive_against_the_ceiling() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(crate::ceiling::serve_on(listener));
        let mut conn = RawConn::connect(addr).await.unwrap();
        for i in 0..100 {
            assert_eq!(conn.get(&format!("/code{i}")).await.unwrap(), 302);
        }
    }

    #[test]
    fn answers_the_client_cannot_size_are_refused() {
        let cases: [(&[u8], &str); 4] = [
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Transfer-Encoding",
            ),
            (b"HTTP/1.1 200 OK\r\n\r\n", "without a Content-Length"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\n",
                "invalid digit",
            ),
            (b"NOT HTTP\r\n\r\n", "parse an answer's head"),
        ];
        for (input, expected) in cases {
            let error = answer_at_start(input).unwrap_err();
            assert!(
                format!("{error:#}").contains(expected),
                "{:?}: {error:#}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            answer_at_start(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap(),
            Some((204, 27))
        );
        assert_eq!(answer_at_start(b"HTTP/1.1 302 Fou").unwrap(), None);
    }
}
