//! Slow clients: the header read timeout closes connections that wait for a request head,
//! never one that is being answered.

use crate::helpers::{API_KEY, Backend, Node, Stack};
use std::time::Duration;

/// An embedded node whose header read timeout is one second (the cluster must outlive it).
async fn node_with_a_one_second_header_timeout(name: &str) -> (Stack, Node) {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config(name);
    config.listeners.header_read_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    (stack, node)
}

/// A raw TCP connection to `node`'s public HTTP port.
async fn connect(node: &Node) -> tokio::net::TcpStream {
    let addr = node.base.trim_start_matches("http://");
    tokio::net::TcpStream::connect(addr).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cluster, node) = node_with_a_one_second_header_timeout("slow").await;
    let mut stream = connect(&node).await;
    stream
        .write_all(b"GET /abc HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server kept a slow client's connection open past the timeout"
    );
}

/// Reads one HTTP/1.1 response with a `content-length` body from `stream`; returns its status
/// and body, or `None` if the server closed the connection first.
async fn read_response(stream: &mut tokio::net::TcpStream) -> Option<(u16, String)> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let status = head.get(9..12)?.parse().ok()?;
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("content-length"));
            while bytes.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                bytes.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]).into_owned();
            return Some((status, body));
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// The header read timeout bounds how long a connection waits for a request head, not how long
/// it lives: a keep-alive client that keeps sending requests stays connected through many
/// timeouts, and once it falls silent its connection is closed within two of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_keep_alive_connection_outlives_the_header_timeout_and_an_idle_one_does_not() {
    use tokio::io::AsyncWriteExt;
    let (_cluster, node) = node_with_a_one_second_header_timeout("keepalive").await;
    let code = node.create_url("https://example.com/keep-alive").await;
    let mut stream = connect(&node).await;
    let request = format!("GET /{code} HTTP/1.1\r\nHost: x\r\n\r\n");
    // Eight requests 400 ms apart: 3.2 s on one connection, over three header timeouts.
    for i in 0..8 {
        stream.write_all(request.as_bytes()).await.expect("write");
        let answer = read_response(&mut stream).await;
        assert_eq!(
            answer.map(|(status, _)| status),
            Some(302),
            "request {i} on a busy keep-alive connection was not answered"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream)).await;
    assert_eq!(
        closed,
        Ok(None),
        "an idle keep-alive connection was not closed"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "an idle connection was closed {:?} after its last response, before the timeout",
        started.elapsed()
    );
}

/// A request whose body is still arriving is being answered, not waiting for a head: the header
/// read timeout does not cut it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowly_sent_body_is_not_cut_by_the_header_timeout() {
    use tokio::io::AsyncWriteExt;
    let (_cluster, node) = node_with_a_one_second_header_timeout("slow-body").await;
    let mut stream = connect(&node).await;
    let body = br#"{"url":"https://example.com/slow-body"}"#;
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    // The body in four parts over 2.4 s: more than two header timeouts.
    for part in body.chunks(body.len().div_ceil(4)) {
        tokio::time::sleep(Duration::from_millis(600)).await;
        stream.write_all(part).await.expect("body");
    }
    let (status, answer) = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream))
        .await
        .expect("an answer in time")
        .expect("the connection was closed while the body was arriving");
    assert_eq!(status, 201, "{answer}");
    assert!(answer.contains("https://example.com/slow-body"), "{answer}");
}

/// Sends a request head announcing a body of 200 bytes on a new connection to `node`, then 20 of
/// them and nothing more: the answer, read within `within`.
async fn trickle(node: &Node, head: &str, within: Duration) -> Option<(u16, String)> {
    use tokio::io::AsyncWriteExt;
    let mut stream = connect(node).await;
    let head = format!(
        "{head}\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 200\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream
        .write_all(b"password=abcdefghijk")
        .await
        .expect("a part of the body");
    tokio::time::timeout(within, read_response(&mut stream))
        .await
        .expect("an answer before the test's own deadline")
}

/// Bodies read before the request is authenticated (a YOURLS form, which may carry its
/// signature; a protected link's password form) must arrive within their deadline: a client
/// that sends part of one and stalls gets a refusal saying so, not a connection held for good.
/// (An authenticated API body is another matter: `a_slowly_sent_body_is_not_cut_by_the_header_timeout`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_form_that_never_arrives_in_full_is_refused_at_its_deadline() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("trickle");
    config.compat.compat = vec!["yourls".into()];
    let node = Node::start(config).await;
    let (status, link) = node
        .create(
            serde_json::json!({ "url": "https://example.com/locked", "password": "correct horse" }),
        )
        .await;
    assert_eq!(status, 201, "{link}");
    let code = link["code"].as_str().expect("a code").to_string();
    // The test's own bound: the deadline (10 s) and a loaded machine's margin.
    let within = Duration::from_secs(30);
    let unlock = format!("POST /{code} HTTP/1.1");
    let (yourls, protected) = tokio::join!(
        trickle(&node, "POST /yourls-api.php HTTP/1.1", within),
        trickle(&node, &unlock, within),
    );
    let (status, body) = yourls.expect("the YOURLS endpoint answered");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("did not arrive within 10 seconds"), "{body}");
    let (status, body) = protected.expect("the protected link answered");
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("took too long"), "{body}");
}
