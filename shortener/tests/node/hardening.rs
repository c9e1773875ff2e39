//! The transports against a hostile client: unauthenticated calls are refused before their
//! bodies are read, bodies are bounded per method, undecodable messages are the caller's error,
//! idle connections are closed, and a listener full of connections leaves the others serving.

use crate::helpers::{API_KEY, Backend, Node, Stack, authed, create, metric};
use crate::served::Served;
use futures::StreamExt;
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

/// A codec that sends and receives raw bytes, to put what no well-behaved client would on the
/// wire.
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// Calls `method` of `Links` with `body` as the raw message, with the test key.
async fn raw_call(node: &Node, method: &str, body: Vec<u8>) -> tonic::Status {
    let channel = tonic::transport::Channel::from_shared(node.grpc.clone())
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let path = format!("/shortener.v1.Links/{method}")
        .parse()
        .expect("path");
    grpc.unary::<Vec<u8>, Vec<u8>, Raw>(authed(body), path, Raw)
        .await
        .expect_err("a bad message was accepted")
}

async fn bad_messages_are_the_callers_error_and_never_echoed_at_length(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    // Not protobuf: field 1, length-delimited, claiming more bytes than follow.
    let garbage = raw_call(&node, "GetLink", vec![0x0a, 0xff, 0x01, 0x61]).await;
    assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage:?}");
    assert_eq!(
        garbage
            .metadata()
            .get("error-code")
            .and_then(|v| v.to_str().ok()),
        Some("invalid_message")
    );
    // The same for a batch, whose messages are read as they arrive, before tonic decodes them.
    let garbage = raw_call(&node, "BatchCreateLinks", vec![0x0a, 0x05, 0x01]).await;
    assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage:?}");
    // Over a method's bound, before it is decoded.
    let mut client = node.links_client().await;
    let huge_code = client
        .get_link(authed(pb::GetLinkRequest {
            code: "z".repeat(1_000_000),
            ..Default::default()
        }))
        .await
        .expect_err("a megabyte code was accepted");
    assert_eq!(huge_code.code(), Code::ResourceExhausted, "{huge_code:?}");
    assert!(
        huge_code.message().len() < 200,
        "{} bytes of message",
        huge_code.message().len()
    );
    let huge_url = client
        .create_link(authed(create(&format!(
            "https://example.com/{}",
            "a".repeat(100_000)
        ))))
        .await
        .expect_err("a 100 kB create was accepted");
    assert_eq!(huge_url.code(), Code::ResourceExhausted);
    // Under the bound but malformed: refused, and only a short escaped prefix comes back.
    let bad_code = format!("{}\u{202e}\n{}", "-".repeat(300), "x".repeat(300));
    let refused = client
        .get_link(authed(pb::GetLinkRequest {
            code: bad_code,
            ..Default::default()
        }))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().len() < 120, "{}", refused.message());
    assert!(!refused.message().contains('\u{202e}') && !refused.message().contains('\n'));
    // The node still serves.
    let link = client
        .create_link(authed(create("https://example.com/after")))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(link.url, "https://example.com/after");
}
on_both_stores!(bad_messages_are_the_callers_error_and_never_echoed_at_length);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unauthenticated_calls_are_refused_before_their_bodies_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = Served::start(
        &dir.path().join("data"),
        &[("SHORTENER_API_KEYS", API_KEY.into())],
        None,
    )
    .await;
    let before = served.peak_rss_kib();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", served.grpc))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let big = "a".repeat(3_900_000);
    let calls = (0..400).map(|_| {
        let mut client = pb::links_client::LinksClient::new(channel.clone());
        let message = create(&format!("https://example.com/{big}"));
        async move { client.create_link(tonic::Request::new(message)).await }
    });
    let results = futures::stream::iter(calls)
        .buffer_unordered(200)
        .collect::<Vec<_>>();
    let results = tokio::time::timeout(Duration::from_secs(120), results)
        .await
        .expect("400 refused calls take far less than two minutes");
    for result in results {
        assert_eq!(result.expect_err("refused").code(), Code::Unauthenticated);
    }
    let grown_mib = served.peak_rss_kib().saturating_sub(before) / 1024;
    // Each call's 3.9 MB was sent into windows of 256 KiB per call and 1 MiB per connection,
    // never decoded: the node's peak grows by far less than one such message per call.
    assert!(
        grown_mib < 100,
        "the node's peak memory grew by {grown_mib} MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grpc_port_full_of_idle_connections_leaves_the_redirect_port_answering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = Served::start(
        &dir.path().join("data"),
        &[
            ("SHORTENER_API_KEYS", API_KEY.into()),
            ("SHORTENER_MAX_CONNECTIONS_PER_CLIENT", "100000".into()),
        ],
        Some(256),
    )
    .await;
    let client = Served::client();
    let code = served.create(&client, "https://example.com/survives").await;
    // More idle connections than the node has descriptors.
    let mut idle = Vec::new();
    for _ in 0..400 {
        if let Ok(stream) = tokio::net::TcpStream::connect(served.grpc).await {
            idle.push(stream);
        }
    }
    let metrics_url = format!("http://{}/metrics", served.admin);
    let refused = testkit::wait_until(Duration::from_secs(10), || async {
        let text = client.get(&metrics_url).send().await.ok();
        match text {
            Some(r) => {
                metric(
                    &r.text().await.unwrap_or_default(),
                    "shortener_connections_refused_total{listener=\"grpc\"}",
                ) > 0.0
            }
            None => false,
        }
    })
    .await;
    assert!(refused, "the gRPC listener never reached its cap");
    for _ in 0..20 {
        let visit = client
            .get(format!("http://{}/{code}", served.http))
            .send()
            .await
            .expect("the redirect port answers");
        assert_eq!(visit.status(), StatusCode::FOUND);
    }
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_grpc_connection_is_closed_and_a_busy_one_is_not() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("idle");
    config.listeners.grpc_idle_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    // A client that keeps calling, 400 ms apart, across three timeouts: one connection.
    let mut client = node.links_client().await;
    for _ in 0..8 {
        client
            .create_link(authed(create("https://example.com/busy")))
            .await
            .expect("create");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let accepted = metric(
        &node.metrics().await,
        "shortener_connections_accepted_total{listener=\"grpc\"}",
    );
    assert_eq!(accepted, 1.0, "the busy connection was closed and reopened");
    // Once it falls silent it is closed, and so is a connection that never calls at all.
    let mut silent = tokio::net::TcpStream::connect(node.grpc.trim_start_matches("http://"))
        .await
        .expect("connect");
    silent
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("preface");
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 1024];
        loop {
            match silent.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle connection stayed open");
    let open = testkit::wait_until(Duration::from_secs(10), || async {
        metric(
            &node.metrics().await,
            "shortener_connections{listener=\"grpc\"}",
        ) == 0.0
    })
    .await;
    assert!(open, "the busy connection, now silent, was never closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_closes_connections_that_send_nothing() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("admin-idle");
    config.listeners.header_read_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let mut stream = tokio::net::TcpStream::connect(node.admin.trim_start_matches("http://"))
        .await
        .expect("connect");
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 64];
        matches!(stream.read(&mut buf).await, Ok(0) | Err(_))
    })
    .await;
    assert_eq!(
        closed.ok(),
        Some(true),
        "the admin port kept a silent connection"
    );
}

/// Sends `head` (a request line and headers, without the blank line that ends them) on a new
/// connection to `addr`, ends it, and returns what comes back before the connection closes or
/// ten seconds pass.
async fn send_head(addr: &str, head: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr.trim_start_matches("http://"))
        .await
        .expect("connect");
    // A refused head may close the connection before all of it is written.
    let _ = stream.write_all(format!("{head}\r\n\r\n").as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A request head is read up to a bound (three times the longest URL plus 8 KiB, at least
/// 16 KiB), so that no connection grows its read buffer past it: a head within the bound is
/// answered as always, a longer one gets 431 and nothing else, on the public and admin ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_past_its_bound_is_refused_431() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = Node::start(stack.config("heads")).await;
    let (status, created) = node
        .create(serde_json::json!({ "url": "https://example.com/heads" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let code = created["code"].as_str().expect("code").to_owned();
    // The default longest URL is 2,048 bytes: the bound is 16 KiB.
    let cookie = |bytes: usize| format!("cookie: c={}", "x".repeat(bytes));
    let within = send_head(
        &node.base,
        &format!("GET /{code} HTTP/1.1\r\nhost: t\r\n{}", cookie(12 << 10)),
    )
    .await;
    assert!(within.starts_with("HTTP/1.1 302"), "{within}");
    for addr in [&node.base, &node.admin] {
        let past = send_head(
            addr,
            &format!("GET /{code} HTTP/1.1\r\nhost: t\r\n{}", cookie(40 << 10)),
        )
        .await;
        assert!(past.starts_with("HTTP/1.1 431"), "{addr}: {past}");
    }
    // The node still answers.
    let again = node
        .client
        .get(format!("{}/{code}", node.base))
        .send()
        .await
        .expect("redirect");
    assert_eq!(again.status(), StatusCode::FOUND);
}
