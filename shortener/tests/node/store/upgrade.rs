//! Upgrading to links that belong to domains: a database holding every kind of link from before
//! domains (the `domain` column and its migration taken away again, which is what the release
//! before wrote) keeps every link answering on the hosts it answered on, on both stores and on
//! both PostgreSQL layouts, and none of them on a branded domain claimed afterwards. An index
//! an operator built ahead of its migration, left invalid, is built again.

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

/// Every link of `links` answers on `host` as it did: a redirect to its URL, or a protected
/// link's form; never a 404.
async fn all_answer(node: &Node, host: &str, links: &HashMap<String, String>) {
    for (code, url) in links {
        let (status, location) = node.on_host(host, code).await;
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
        let (status, _) = node.on_host("go.brand.example", code).await;
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

/// An index of named base62 codes that a failed concurrent build left invalid (which an
/// operator may build ahead of migration 29) is not taken as built: the migration drops it and
/// builds it again, and the mark's read uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_index_of_named_codes_is_built_again_by_its_migration() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("invalid").await;
    node.stop().await;
    let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
    let valid = async || -> bool {
        db.query_one(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'links_named_base62'::regclass",
            &[],
        )
        .await
        .expect("the index")
        .get(0)
    };
    db.batch_execute(
        "UPDATE pg_index SET indisvalid = false \
             WHERE indexrelid = 'links_named_base62'::regclass; \
         DELETE FROM shortener_schema_migrations WHERE version = 29;",
    )
    .await
    .expect("an invalid index, the migration not yet run");
    assert!(!valid().await);
    let node = stack.node("invalid").await;
    assert!(valid().await, "the migration built the index again");
    node.stop().await;
}
