//! Behind a real PgBouncer (Debian's 1.18) in transaction pooling mode, with three server
//! connections for two nodes of eight connections each, so every transaction may land on a
//! server connection another client used last: with `SHORTENER_DATABASE_POOL_MODE=transaction`
//! the nodes migrate over `SHORTENER_DATABASE_DIRECT_URL` on a fresh database, create,
//! redirect, edit (the change feed listens over the direct URL), delete, list, export and
//! count visits; `shortener migrate` and `shortener layout` work through the same settings.

use crate::analytics::stats;
use crate::helpers::{Node, Stack};
use chrono::Utc;
use pgtls::pooler::PoolMode;
use reqwest::StatusCode;
use serde_json::json;
use shortener::access::{digest, generate_api_key};
use shortener::config::Config;
use shortener::store::{KeyStore, NewApiKey, NewSession, SessionStore};
use std::process::{Command, Output};
use std::time::Duration;
use testkit::cluster::Cluster;
use testkit::pgbouncer::{Mode, PgBouncer};

/// Server connections PgBouncer opens to the links database: fewer than either node's pool.
pub const SERVER_CONNECTIONS: u32 = 3;

/// Node `name` of `stack` through `bouncer` in transaction mode, with `direct` (a URL of the
/// database `links`, or of the one it names) as its direct URL.
pub fn behind(stack: &Stack, name: &str, bouncer: &PgBouncer, direct: &str) -> Config {
    let mut config = stack.config(name);
    let database = direct.rsplit('/').next().unwrap_or("links");
    config.store.database_url = Some(bouncer.database_url(database));
    config.store.database_pool_mode = PoolMode::Transaction;
    config.store.database_direct_url = Some(direct.to_string());
    config
}

/// Whether the database at `url` holds the links table.
pub async fn has_links_table(url: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .query_one("SELECT to_regclass('links') IS NOT NULL", &[])
        .await
        .expect("look for the links table")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_work_through_pgbouncer_in_transaction_mode() {
    let cluster = Cluster::start(&[]).await;
    let direct = cluster.create_database("links").await;
    let bouncer = PgBouncer::start(cluster.port(), Mode::Transaction, SERVER_CONNECTIONS).await;
    let stack = Stack::on_database(&direct).await;
    assert!(!has_links_table(&direct).await, "a fresh database");
    let a = Node::start(behind(&stack, "a", &bouncer, &direct)).await;
    let b = Node::start(behind(&stack, "b", &bouncer, &direct)).await;
    // The migrations ran over the direct URL.
    assert!(has_links_table(&direct).await);

    let creates = (0..40).map(|i| a.create_url_owned(format!("https://example.com/{i}")));
    let codes = futures::future::join_all(creates).await;
    let redirects = codes.iter().map(|code| b.location(code));
    for (i, answer) in futures::future::join_all(redirects)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            answer,
            (StatusCode::FOUND, Some(format!("https://example.com/{i}")))
        );
    }

    // An edit and a delete on a reach b's cache through the change feed.
    let (status, body) = a
        .patch(&codes[0], json!({ "url": "https://example.com/edited" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(a.delete(&codes[1]).await, StatusCode::NO_CONTENT);
    let heard = testkit::wait_until(Duration::from_secs(10), || async {
        b.location(&codes[0]).await.1.as_deref() == Some("https://example.com/edited")
            && b.location(&codes[1]).await.0 == StatusCode::GONE
    })
    .await;
    assert!(heard, "b never saw the edit and the delete");

    // Lists and exports read every live link.
    let listed = b.list_all("state=active", 7).await;
    assert_eq!(listed.len(), 39, "{listed:?}");
    assert!(!listed.contains(&codes[1]));
    let (status, csv) = a.export("format=csv&state=active").await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    assert_eq!(csv.lines().count(), 40, "a header and 39 links:\n{csv}");

    // Visits through either node are counted in the stats: three, and b's redirect above.
    for node in [&a, &b, &a] {
        assert_eq!(node.visit(&codes[2]).await.status(), StatusCode::FOUND);
    }
    let path = format!("/links/{}/stats", codes[2]);
    let counted = testkit::wait_until(Duration::from_secs(15), || async {
        let (_, body) = stats(&a, &path).await;
        let totals = &body["totals"];
        ["human", "head", "bot"]
            .iter()
            .map(|k| totals[k].as_u64().unwrap_or(0))
            .sum::<u64>()
            == 4
    })
    .await;
    assert!(counted, "{}", stats(&a, &path).await.1);
    // The deleted link's row stays, marked deleted.
    assert_eq!(a.stored_links().await, 40);
    sessions_and_keys(&a, &b).await;
    assert!(
        !bouncer.log().contains("prepared statement"),
        "{}",
        bouncer.log()
    );
}

/// Console sessions and API keys written through `a` are read, changed and revoked through
/// `b`.
async fn sessions_and_keys(a: &Node, b: &Node) {
    let session = NewSession {
        digest: [7; 32],
        subject: "person-7".into(),
        email: None,
        name: None,
        claims: "{}".into(),
        tenant: Some("acme".into()),
        expires_at: Utc::now() + chrono::Duration::hours(8),
    };
    a.app
        .store
        .insert_session(&session)
        .await
        .expect("insert a session");
    let found = b
        .app
        .store
        .session([7; 32])
        .await
        .expect("read the session");
    assert_eq!(found.map(|s| s.subject), Some("person-7".to_string()));
    assert!(
        b.app
            .store
            .switch_session_tenant([7; 32], "globex")
            .await
            .expect("switch")
    );
    assert!(a.app.store.revoke_session([7; 32]).await.expect("revoke"));

    let key = NewApiKey {
        tenant: "acme".into(),
        name: "ci".into(),
        digest: digest(&generate_api_key()),
        scopes: "links:read".into(),
        created_by: "acme/lead".into(),
        expires_at: None,
        person: None,
    };
    let stored = a
        .app
        .store
        .insert_api_key(&key)
        .await
        .expect("insert a key");
    assert!(stored.is_some(), "a new name");
    let listed = b.app.store.api_keys(Some("acme")).await.expect("list keys");
    assert_eq!(
        listed.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["ci"]
    );
    assert!(
        b.app
            .store
            .revoke_api_key("acme", "ci")
            .await
            .expect("revoke")
    );
    assert!(
        a.app
            .store
            .api_keys(Some("acme"))
            .await
            .expect("list")
            .is_empty()
    );
}

/// The `shortener` binary behind `bouncer` in transaction mode, with `direct` as its direct
/// URL, and `stack`'s id-service and keys.
fn shortener(stack: &Stack, bouncer: &PgBouncer, direct: &str, database: &str) -> Command {
    let mut command = crate::store::layout::shortener(stack);
    command
        .env("DATABASE_URL", bouncer.database_url(database))
        .env("SHORTENER_DATABASE_POOL_MODE", "transaction")
        .env("SHORTENER_DATABASE_DIRECT_URL", direct);
    command
}

fn run(mut command: Command, args: &[&str]) -> String {
    let out: Output = command.args(args).output().expect("run shortener");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "shortener {args:?}: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrate_and_layout_commands_work_through_pgbouncer_in_transaction_mode() {
    let cluster = Cluster::start(&[]).await;
    let direct = cluster.create_database("links").await;
    let bouncer = PgBouncer::start(cluster.port(), Mode::Transaction, 2).await;
    let stack = Stack::on_database(&direct).await;

    run(shortener(&stack, &bouncer, &direct, "links"), &["migrate"]);
    assert!(has_links_table(&direct).await);
    let node = Node::start(behind(&stack, "a", &bouncer, &direct)).await;
    let creates = (0..25).map(|i| node.create_url_owned(format!("https://example.com/{i}")));
    futures::future::join_all(creates).await;

    let status = run(
        shortener(&stack, &bouncer, &direct, "links"),
        &["layout", "status"],
    );
    assert!(status.contains("slot"), "{status}");
    let verified = run(
        shortener(&stack, &bouncer, &direct, "links"),
        &["layout", "verify"],
    );
    assert!(verified.contains("25"), "{verified}");
}
