//! Statement bounds: a PostgreSQL statement held up past `SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS`
//! is cancelled by the server, an embedded read past it is interrupted; either is answered as a
//! retryable 503, changing nothing.

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_held_up_past_its_bound_is_cancelled_and_answered_503() {
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("a");
    config.store.database_statement_timeout_ms = 300;
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/before").await;

    // Another session holds the row's lock; the edit waits for it until the bound.
    let db = stack.db.as_ref().expect("postgres").connect().await;
    db.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM links WHERE code = '{code}' FOR UPDATE"
    ))
    .await
    .expect("hold the row");
    let (status, body) = node
        .patch(&code, json!({ "url": "https://example.com/after" }))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    db.batch_execute("ROLLBACK").await.expect("release");
    assert_eq!(node.get(&code).await.1["url"], "https://example.com/before");

    // Released, the same edit goes through.
    let (status, body) = node
        .patch(&code, json!({ "url": "https://example.com/after" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(node.get(&code).await.1["url"], "https://example.com/after");
    node.stop().await;
}

/// The embedded store takes the same setting as the bound of each read: a search that scans
/// past it is interrupted and answered as a retryable 503, while short reads still answer and
/// the same search answers under the default bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_read_past_its_bound_is_interrupted_and_answered_503() {
    const LINKS: usize = 30_000;
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("a").await;
    let rows: String = (0..LINKS)
        .map(|n| format!("{{\"url\":\"https://example.com/page/{n}\"}}\n"))
        .collect();
    let (status, lines) = node.import("application/x-ndjson", rows, "").await;
    assert_eq!(status, StatusCode::OK);
    let summary = &lines.last().expect("a summary line")["summary"];
    assert_eq!(summary["created"], LINKS, "{summary}");
    let code = node.create_url("https://example.com/short-read").await;
    // Matches nothing, so the page scans every link before it answers.
    let search = "q=nowhere-to-be-found&limit=10";
    let (status, page) = node.list(search).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    node.stop().await;

    let mut config = stack.config("a");
    config.store.database_statement_timeout_ms = 1;
    let node = Node::start(config).await;
    let (status, body) = node.list(search).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, link) = node.get(&code).await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert_eq!(link["url"], "https://example.com/short-read");
    node.stop().await;
}
