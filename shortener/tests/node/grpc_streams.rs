//! Streaming calls over gRPC as calls in flight: an import or an export keeps its connection
//! from counting as idle while it streams, and one whose reader stops is ended at its bound,
//! giving back its place even on a connection that stays busy.

use crate::helpers::{Backend, Node, Stack, authed, metric};
use futures::StreamExt;
use proto::shortener::v1 as pb;
use proto::shortener::v1::links_client::LinksClient;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

/// A client whose streams take at most 16 KiB before it reads them, so that a stream it reads
/// slowly, or not at all, waits on flow control at the node.
async fn narrow_client(node: &Node) -> LinksClient<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(node.grpc.clone())
        .expect("uri")
        .initial_stream_window_size(Some(16 * 1024))
        .initial_connection_window_size(Some(1 << 20))
        .connect()
        .await
        .expect("connect gRPC");
    LinksClient::new(channel)
}

/// A client whose windows hold every answer of a seeding: it never waits on flow control,
/// whatever the node's send timeout and however busy the machine.
async fn wide_client(node: &Node) -> LinksClient<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(node.grpc.clone())
        .expect("uri")
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(8 << 20))
        .connect()
        .await
        .expect("connect gRPC");
    LinksClient::new(channel)
}

/// Imports `n` links in messages of a thousand rows.
async fn seed(client: &mut LinksClient<Channel>, n: usize) {
    let messages: Vec<pb::ImportLinksRequest> = (0..n)
        .collect::<Vec<_>>()
        .chunks(1000)
        .map(|chunk| pb::ImportLinksRequest {
            rows: chunk
                .iter()
                .map(|i| pb::ImportRow {
                    url: format!("https://example.com/seeded/{i}"),
                    ..Default::default()
                })
                .collect(),
            dry_run: false,
            ..Default::default()
        })
        .collect();
    let answers: Vec<_> = client
        .import_links(authed(futures::stream::iter(messages)))
        .await
        .expect("import")
        .into_inner()
        .collect()
        .await;
    assert_eq!(answers.len(), n + 1, "a result per row and the summary");
    let failed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_keeps_its_connection_past_the_idle_timeout() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("streams");
    config.listeners.grpc_idle_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let mut client = narrow_client(&node).await;
    seed(&mut client, 3000).await;

    // An import whose rows come 300 ms apart, twelve in all: over three idle timeouts with no
    // call but the import on the connection.
    let messages = futures::stream::iter(0..12).then(|n| async move {
        if n > 0 {
            // The client's pace, which is what the idle timeout is about.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        pb::ImportLinksRequest {
            rows: vec![pb::ImportRow {
                url: format!("https://example.com/trickled/{n}"),
                ..Default::default()
            }],
            dry_run: false,
            ..Default::default()
        }
    });
    let answers: Vec<_> = client
        .import_links(authed(messages))
        .await
        .expect("import")
        .into_inner()
        .collect()
        .await;
    assert_eq!(answers.len(), 13, "{answers:?}");
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");

    // An export read a few links at a time, 100 ms apart, for over three idle timeouts: the
    // node writes it as the reader makes room, so the stream runs that long.
    let mut export = client
        .export_links(authed(pb::ExportLinksRequest { filter: None }))
        .await
        .expect("export")
        .into_inner();
    let mut read = 0;
    while let Some(link) = export.next().await {
        link.expect("a link");
        read += 1;
        if read % 100 == 0 {
            // The reader's pace, which is what the idle timeout is about.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(read, 3012);
    let accepted = metric(
        &node.metrics().await,
        "shortener_connections_accepted_total{listener=\"grpc\"}",
    );
    assert_eq!(accepted, 1.0, "a streaming connection was closed as idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_export_ends_at_its_bound_and_gives_its_place_back() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("stalled");
    config.limits.export_max_per_key = std::num::NonZero::new(1).expect("non-zero");
    config.limits.export_max_seconds = std::num::NonZero::new(2).expect("non-zero");
    config.listeners.send_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let mut client = narrow_client(&node).await;
    // Seeded over a wide client: with a one-second send timeout, a narrow one could miss it
    // on a busy machine.
    seed(&mut wide_client(&node).await, 3000).await;

    // One export read for one link, then left unread: it waits on flow control at the node,
    // while the connection stays alive and busy with the calls below.
    let mut stalled = client
        .export_links(authed(pb::ExportLinksRequest { filter: None }))
        .await
        .expect("export")
        .into_inner();
    stalled.next().await.expect("a first link").expect("a link");

    // The key's one export place is taken until the stalled export's bound passes (its
    // deadline and one send timeout); then the next export on the same connection runs whole
    // (a small one, well within the deadline).
    let one = pb::ExportLinksRequest {
        filter: Some(pb::LinkFilter {
            q: Some("seeded/2999".into()),
            ..Default::default()
        }),
    };
    let refused = Arc::new(AtomicUsize::new(0));
    let whole = Arc::new(Mutex::new(None));
    let admitted = testkit::wait_until(Duration::from_secs(30), || {
        let (mut client, refused, whole) = (client.clone(), refused.clone(), whole.clone());
        let one = one.clone();
        async move {
            match client.export_links(authed(one)).await {
                Ok(answer) => {
                    let links: Vec<_> = answer.into_inner().collect().await;
                    *whole.lock().expect("lock") = Some(links);
                    true
                }
                Err(status) => {
                    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                    refused.fetch_add(1, Ordering::SeqCst);
                    false
                }
            }
        }
    })
    .await;
    assert!(admitted, "the stalled export kept its place");
    assert!(
        refused.load(Ordering::SeqCst) > 0,
        "the stalled export never held its place"
    );
    let whole = whole
        .lock()
        .expect("lock")
        .take()
        .expect("the second export");
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(
        whole[0].as_ref().expect("a link").url,
        "https://example.com/seeded/2999"
    );

    // The stalled export, read now, gives what was written and ends with its status.
    let rest: Vec<_> = stalled.collect().await;
    let ended = rest
        .last()
        .expect("an end")
        .as_ref()
        .expect_err("the stalled export did not end whole");
    assert_eq!(ended.code(), Code::DeadlineExceeded, "{ended:?}");
    assert!(rest.len() < 3000, "{} items after the first", rest.len());
}
