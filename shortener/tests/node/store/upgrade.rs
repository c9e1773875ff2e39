//! Upgrading to links that belong to domains: a database holding every kind of link from before
//! domains (the `domain` column and its migration taken away again, which is what the release
//! before wrote) keeps every link answering on the hosts it answered on, on both stores and on
//! both PostgreSQL layouts, and none of them on a branded domain claimed afterwards.

use super::layout::{code_layout_with_old_rows, every_kind};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use std::collections::HashMap;

/// Which database the links were made on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    Sqlite,
    /// PostgreSQL, links found by slot.
    SlotLayout,
    /// PostgreSQL, links found by code (rows written before slots existed).
    CodeLayout,
}

/// Takes the link domains' migration away from the database of `config`, as if it had never run.
async fn forget_domains(stack: &Stack, before: Before, node_name: &str) {
    const UNDO: &str = "DROP INDEX links_domain; ALTER TABLE links DROP COLUMN domain;";
    match before {
        Before::Sqlite => {
            let path = stack
                .dir
                .path()
                .join(node_name)
                .join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open the embedded file");
            conn.execute_batch(&format!(
                "{UNDO} DELETE FROM shortener_schema_migrations WHERE version = 18;"
            ))
            .expect("undo the migration");
        }
        Before::SlotLayout | Before::CodeLayout => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            db.batch_execute(&format!(
                "{UNDO} DELETE FROM shortener_schema_migrations WHERE version = 16;"
            ))
            .await
            .expect("undo the migration");
        }
    }
}

/// `GET /{code}` on `host`: the status and the `Location`.
async fn visit(node: &Node, host: &str, code: &str) -> (StatusCode, Option<String>) {
    let response = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("host", host)
        .send()
        .await
        .expect("send");
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|v| v.to_str().expect("ascii").to_string());
    (response.status(), location)
}

/// Every link of `links` answers on `host` as it did: a redirect to its URL, or a protected
/// link's form; never a 404.
async fn all_answer(node: &Node, host: &str, links: &HashMap<String, String>) {
    for (code, url) in links {
        let (status, location) = visit(node, host, code).await;
        assert_ne!(status, StatusCode::NOT_FOUND, "{host}/{code} -> {url}");
        if status == StatusCode::FOUND {
            assert_eq!(location.as_deref(), Some(url.as_str()), "{host}/{code}");
        }
    }
}

async fn links_from_before_domains_answer_where_they_did(before: Before) {
    let backend = match before {
        Before::Sqlite => Backend::Sqlite,
        Before::SlotLayout | Before::CodeLayout => Backend::Postgres,
    };
    let stack = Stack::new(backend).await;
    let mut config = stack.config("upgrade");
    config.listeners.short_domains = vec!["s.example".into()];
    config.access.domain_suffixes = vec!["default=brand.example".into()];
    let node = Node::start(config.clone()).await;
    let links = every_kind(&node).await;
    if before == Before::CodeLayout {
        code_layout_with_old_rows(&stack).await;
    }
    node.stop().await;
    forget_domains(&stack, before, "upgrade").await;

    let node = Node::start(config).await;
    for host in ["127.0.0.1", "sho.rt", "s.example", "unclaimed.example"] {
        all_answer(&node, host, &links).await;
    }
    // A domain claimed after the upgrade holds none of them.
    let claimed = node
        .client
        .post(format!("{}/api/v1/domains", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .json(&serde_json::json!({"host": "go.brand.example"}))
        .send()
        .await
        .expect("claim");
    assert_eq!(claimed.status(), StatusCode::CREATED);
    for code in links.keys() {
        let (status, _) = visit(&node, "go.brand.example", code).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{code} on a new domain");
    }
    // And what the API shows of them names the default domain.
    for code in links.keys().take(5) {
        let (status, body) = node.get(code).await;
        assert_eq!(status, StatusCode::OK, "{code}: {body}");
        assert_eq!(body["domain"], "sho.rt", "{code}");
    }
}

#[tokio::test]
async fn embedded_links_from_before_domains_answer_where_they_did() {
    links_from_before_domains_answer_where_they_did(Before::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_layout_links_from_before_domains_answer_where_they_did() {
    links_from_before_domains_answer_where_they_did(Before::SlotLayout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_layout_links_from_before_domains_answer_where_they_did() {
    links_from_before_domains_answer_where_they_did(Before::CodeLayout).await;
}
