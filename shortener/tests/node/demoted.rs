//! A primary demoted under a full pool: a real primary and its streaming standby, listed in one
//! multi-host `DATABASE_URL` with `target_session_attrs=read-write` (the node's and its
//! id-service's). The primary turns read-only, as a demoted one does, and the standby is
//! promoted: the first creates after it succeed, batched or with an Idempotency-Key, their
//! refused attempts having emptied the pool of connections to the old primary. With no primary
//! left, a create is a 503 with `Retry-After` and `/readyz` names the read-only server while the
//! node stays ready (its cached redirects still answer), until a primary is back.

use crate::helpers::{Node, Stack, metric};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use testkit::cluster::Cluster;

async fn ready(node: &Node) -> (StatusCode, String) {
    let response = node
        .client
        .get(format!("{}/readyz", node.admin))
        .send()
        .await
        .expect("readyz");
    let status = response.status();
    (status, response.text().await.expect("readyz body"))
}

async fn evicted(node: &Node) -> f64 {
    metric(
        &node.metrics().await,
        "shortener_db_connections_evicted_total",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pool_of_connections_to_a_demoted_primary_recovers_on_the_first_refused_write() {
    let old = Cluster::start(&[]).await;
    old.create_database("links").await;
    let new = old.start_standby(&[]).await;
    let url = Cluster::multi_host_url(&[&old, &new], "links");
    let stack = Stack::on_database(&url).await;
    let mut config = stack.config("a");
    // A block large enough for every create below: the id-service is not what is tested.
    config.ids.min_block = 1000;
    let node = Node::start(config).await;

    // Fill the pool: concurrent creates each hold a connection to the old primary.
    let creates = (0..24).map(|i| node.create_url_owned(format!("https://example.com/{i}")));
    let before = futures::future::join_all(creates).await;
    assert_eq!(ready(&node).await.0, StatusCode::OK);

    // The old primary refuses writes from now on; the standby takes over with everything.
    // (The node's background writers may meet the refusal first: either evicts the pool.)
    let evicted_before = evicted(&node).await;
    old.set_read_only(true).await;
    new.promote().await;

    // The first create, batched, succeeds: a refused attempt evicted the stale connections.
    let code = node.create_url("https://example.com/after").await;
    assert!(
        evicted(&node).await > evicted_before,
        "the refused write evicted nothing"
    );
    // So does one with an Idempotency-Key (its own transaction), and every later write.
    let (status, body) = node
        .create_with(
            json!({ "url": "https://example.com/keyed" }),
            &[("idempotency-key", "demoted-1")],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for i in 0..10 {
        node.create_url(&format!("https://example.com/later/{i}"))
            .await;
    }
    // Nothing was lost: the links made before and after are all served.
    for code in before.iter().chain([&code]) {
        assert_eq!(node.get(code).await.0, StatusCode::OK, "{code}");
    }
    assert_eq!(ready(&node).await.0, StatusCode::OK);
    assert_eq!(node.location(&code).await.0, StatusCode::FOUND);

    // No primary at all: creates are refused as unavailable, with a time to come back.
    new.set_read_only(true).await;
    let response = node
        .client
        .post(format!("{}/api/v1/links", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .json(&json!({ "url": "https://example.com/none" }))
        .send()
        .await
        .expect("create");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        response.headers().get("retry-after").is_some(),
        "{:?}",
        response.headers()
    );
    let (status, body) = ready(&node).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.starts_with("ready, degraded: store:"), "{body}");
    assert!(body.contains("read-only"), "{body}");
    let redirect = node.location(&code).await;
    assert_eq!(
        redirect.0,
        StatusCode::FOUND,
        "a cached redirect while read-only"
    );

    // A primary again: ready, and creates succeed.
    new.set_read_only(false).await;
    let back = testkit::wait_until(Duration::from_secs(10), || async {
        ready(&node).await == (StatusCode::OK, "ready\n".to_string())
    })
    .await;
    assert!(back, "not ready again: {:?}", ready(&node).await);
    node.create_url("https://example.com/back").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_no_primary_at_start_the_node_waits_for_one_instead_of_exiting() {
    let old = Cluster::start(&[]).await;
    old.create_database("links").await;
    let standby = old.start_standby(&[]).await;
    let url = Cluster::multi_host_url(&[&old, &standby], "links");
    // The id-service is started first, while there is a primary: the node's wait is tested.
    let stack = Stack::on_database(&url).await;
    old.set_read_only(true).await;
    let config = stack.config("a");
    let starting = tokio::spawn(async move { Node::start(config).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !starting.is_finished(),
        "start-up ended (it should wait for a primary)"
    );
    old.set_read_only(false).await;
    let node = tokio::time::timeout(Duration::from_secs(20), starting)
        .await
        .expect("the node starts once a primary is back")
        .expect("start-up task");
    node.create_url("https://example.com/started").await;
    assert_eq!(ready(&node).await.0, StatusCode::OK);
}
