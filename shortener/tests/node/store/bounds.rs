//! PostgreSQL statement bounds: a statement held up past `SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS`
//! is cancelled by the server and answered as a retryable 503, changing nothing.

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
