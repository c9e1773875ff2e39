//! Imports take a place among those running on the node, their tenant's and their key's before
//! any of their body is read (429 beyond), hold it while they run, and give it back when they
//! end: by their last row, a client that went away, or a next row that did not come within
//! the idle bound (`import_idle`, every row before it answered).

use crate::helpers::{Backend, Node, Stack};
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Keys `acme/a1`, `acme/a2`, `acme/a3` and `globex/g1`, each with every links scope, written
/// to a keys file of the stack; the keys in that order.
fn keys(stack: &Stack, config: &mut shortener::Config) -> [String; 4] {
    let keys: [String; 4] = std::array::from_fn(|_| generate_api_key());
    let names = [
        ("acme", "a1"),
        ("acme", "a2"),
        ("acme", "a3"),
        ("globex", "g1"),
    ];
    let text = names
        .iter()
        .zip(&keys)
        .map(|((tenant, name), key)| {
            render(&KeyEntry {
                tenant: (*tenant).into(),
                name: (*name).into(),
                digest: digest(key),
                scopes: Scopes::parse_list("links:create,links:read,links:write").expect("scopes"),
                expires: None,
            })
        })
        .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    let path = stack.dir.path().join("import-keys.toml");
    std::fs::write(&path, text).expect("write keys");
    config.access.api_keys_file = Some(path);
    keys
}

/// An import by `key` whose body is sent as far as one row of `url` and left open: the
/// connection, and the answer's status once its head came.
async fn open_import(node: &Node, key: &str, url: &str) -> (TcpStream, u16) {
    let addr = node.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let row = format!("{{\"url\":\"{url}\"}}\n");
    let head = format!(
        "POST /api/v1/links/import HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {key}\r\n\
         content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{row}\r\n",
        row.len()
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("an answer's head within 10 s")
            .expect("read");
        assert!(
            n > 0,
            "closed before an answer: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let status = String::from_utf8_lossy(&got)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    (stream, status)
}

async fn a_tenant_holds_its_share_of_the_import_places(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    let [a1, a2, a3, g1] = keys(&stack, &mut config);
    config.limits.import_max_per_tenant = std::num::NonZeroUsize::new(2).expect("non-zero");
    let node = Node::start(config).await;
    let url = "https://example.com/placed";

    let (first, status) = open_import(&node, &a1, url).await;
    assert_eq!(status, 200);
    assert_eq!(
        open_import(&node, &a1, url).await.1,
        429,
        "the key's one place"
    );
    let (_second, status) = open_import(&node, &a2, url).await;
    assert_eq!(status, 200, "the tenant's second place");
    assert_eq!(
        open_import(&node, &a3, url).await.1,
        429,
        "the tenant's two places"
    );
    let (_other, status) = open_import(&node, &g1, url).await;
    assert_eq!(status, 200, "another tenant is not held up");

    // The first client goes away: its import ends and its place is free again.
    drop(first);
    let free = testkit::wait_until(Duration::from_secs(10), || async {
        open_import(&node, &a3, url).await.1 == 200
    })
    .await;
    assert!(
        free,
        "the place of an import whose client left was given back"
    );
}
on_both_stores!(a_tenant_holds_its_share_of_the_import_places);

async fn an_import_whose_next_row_does_not_come_stops_and_gives_its_place_back(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    let [a1, ..] = keys(&stack, &mut config);
    config.limits.import_idle_ms = std::num::NonZeroU64::new(300).expect("non-zero");
    let node = Node::start(config).await;

    let (mut idle, status) = open_import(&node, &a1, "https://example.com/before-the-pause").await;
    assert_eq!(status, 200);
    // The answer ends by itself: the row before the pause, then the summary saying why.
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut answer))
        .await
        .expect("the answer ends within 10 s")
        .expect("read");
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.contains("\"row\":1") && text.contains("\"created\""),
        "{text}"
    );
    assert!(text.contains("\"import_idle\""), "{text}");
    let (_, status) = open_import(&node, &a1, "https://example.com/next").await;
    assert_eq!(status, 200, "the key's place was given back");
}
on_both_stores!(an_import_whose_next_row_does_not_come_stops_and_gives_its_place_back);

/// A gRPC client that takes no answer for the idle bound ends its import: the place is given
/// back, and once the client reads again the call ends `import_idle` after the answers handed
/// over before, never as if the import were whole.
async fn an_import_whose_answers_are_not_taken_ends_as_stopped(backend: Backend) {
    use futures::StreamExt;
    use proto::shortener::v1 as pb;
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    let [a1, ..] = keys(&stack, &mut config);
    config.limits.import_idle_ms = std::num::NonZeroU64::new(500).expect("non-zero");
    let node = Node::start(config).await;

    // Far more answers than the call's window and the import's buffers hold.
    let messages: Vec<pb::ImportLinksRequest> = (0..10)
        .map(|m| pb::ImportLinksRequest {
            rows: (0..1000)
                .map(|i| pb::ImportRow {
                    url: format!("https://example.com/unread/{m}/{i}"),
                    ..Default::default()
                })
                .collect(),
            dry_run: true,
            ..Default::default()
        })
        .collect();
    let mut request = tonic::Request::new(futures::stream::iter(messages));
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {a1}").parse().expect("ascii"),
    );
    // A client whose window holds a few thousand answers at most (as a small client's would).
    let channel = tonic::transport::Endpoint::from_shared(node.grpc.clone())
        .expect("endpoint")
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .expect("connect");
    let mut client = pb::links_client::LinksClient::new(channel);
    let mut answers = client
        .import_links(request)
        .await
        .expect("import")
        .into_inner();
    // Nothing is read until the import has ended: its key's one place is free again.
    let freed = testkit::wait_until(Duration::from_secs(20), || async {
        let (_, status) = open_import(&node, &a1, "https://example.com/probe").await;
        status == 200
    })
    .await;
    assert!(freed, "the unread import kept its place");
    let (mut rows, mut last) = (0, None);
    while let Some(answer) = answers.next().await {
        match answer {
            Ok(answer) => {
                assert!(
                    matches!(
                        answer.outcome,
                        Some(pb::import_links_response::Outcome::Row(_))
                    ),
                    "a summary as if whole: {answer:?}"
                );
                rows += 1;
            }
            Err(status) => last = Some(status),
        }
    }
    let status = last.expect("the call ends with a status, not as if whole");
    assert_eq!(
        status
            .metadata()
            .get("error-code")
            .and_then(|v| v.to_str().ok()),
        Some("import_idle"),
        "{status:?}"
    );
    assert!(rows < 10_000, "{rows}");
}
on_both_stores!(an_import_whose_answers_are_not_taken_ends_as_stopped);
