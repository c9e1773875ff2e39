//! Behind a real PgBouncer (Debian's) in session pooling mode, with `options` ignored as
//! docs/operations.md says to configure it: the node migrates, creates, redirects and hears
//! another node's changes (LISTEN holds its session's server connection), and its id-service
//! leases through the same pooler.

use crate::helpers::{Node, Stack};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use testkit::cluster::Cluster;
use testkit::pgbouncer::{Mode, PgBouncer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_work_through_pgbouncer_in_session_mode() {
    let cluster = Cluster::start(&[]).await;
    cluster.create_database("links").await;
    let bouncer = PgBouncer::start(cluster.port(), Mode::Session, 20).await;
    let stack = Stack::on_database(&bouncer.database_url("links")).await;
    let a = Node::start(stack.config("a")).await;
    let b = Node::start(stack.config("b")).await;

    let creates = (0..20).map(|i| a.create_url_owned(format!("https://example.com/{i}")));
    let codes = futures::future::join_all(creates).await;
    for (i, code) in codes.iter().enumerate() {
        assert_eq!(
            b.location(code).await,
            (StatusCode::FOUND, Some(format!("https://example.com/{i}")))
        );
    }
    // An edit on a reaches b's cache through the change feed.
    let (status, _) = a
        .patch(&codes[0], json!({ "url": "https://example.com/edited" }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let heard = testkit::wait_until(Duration::from_secs(10), || async {
        b.location(&codes[0]).await.1.as_deref() == Some("https://example.com/edited")
    })
    .await;
    assert!(heard, "b never saw the edit");
}
