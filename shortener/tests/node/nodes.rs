//! Several nodes and restarts: codes stay distinct, links survive, IDs are never reused.

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use std::collections::HashSet;

async fn create_many(node: &Node, tag: &str) -> Vec<String> {
    let mut codes = Vec::new();
    for batch in 0..10 {
        let futures = (0..20)
            .map(|i| node.create_url_owned(format!("https://example.com/{tag}/{batch}/{i}")));
        codes.extend(futures::future::join_all(futures).await);
    }
    codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_on_one_postgres_and_one_id_service_create_distinct_codes() {
    let stack = Stack::new(Backend::Postgres).await;
    let a = stack.node("node-a").await;
    let b = stack.node("node-b").await;
    let (codes_a, codes_b) = tokio::join!(create_many(&a, "a"), create_many(&b, "b"));
    let all: HashSet<&String> = codes_a.iter().chain(&codes_b).collect();
    assert_eq!(all.len(), 400, "duplicate codes across nodes");
    // Each node can redirect the other's codes (one shared store).
    assert_eq!(a.visit(&codes_b[0]).await.status(), StatusCode::FOUND);
    assert_eq!(b.visit(&codes_a[0]).await.status(), StatusCode::FOUND);
    // Every code decodes to an ID inside a lease held by the node that made it.
    let db = stack.db.as_ref().expect("postgres").connect().await;
    for (codes, holder) in [(&codes_a, "node-a"), (&codes_b, "node-b")] {
        for code in codes.iter().take(50) {
            let id = a.app.space.decode(code).expect("generated code") as i64;
            let rows = db
                .query("SELECT holder FROM id_leases WHERE ids @> $1::int8", &[&id])
                .await
                .expect("query ledger");
            assert_eq!(rows.len(), 1, "id {id} of {code} in {} leases", rows.len());
            assert_eq!(rows[0].get::<_, String>(0), holder);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_mode_survives_a_restart_with_links_intact_and_new_ids() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("embedded");
    config.ids.key = None; // generate the key in the data dir, as a newcomer's first start does
    config.access.api_keys = vec![crate::helpers::API_KEY.to_string()];
    let first = Node::start(config.clone()).await;
    let before: Vec<String> = futures::future::join_all(
        (0..30).map(|i| first.create_url_owned(format!("https://example.com/{i}"))),
    )
    .await;
    let ids_before: Vec<u64> = before
        .iter()
        .map(|c| first.app.space.decode(c).expect("decode"))
        .collect();
    first.stop().await;

    let key_file = config.store.data_dir.join(shortener::app::KEY_FILE);
    assert!(key_file.exists(), "the generated key is kept");
    let second = Node::start(config).await;
    for (i, code) in before.iter().enumerate() {
        let response = second.visit(code).await;
        assert_eq!(response.status(), StatusCode::FOUND, "{code}");
        assert_eq!(
            response.headers()["location"],
            format!("https://example.com/{i}").as_str()
        );
    }
    let after: Vec<String> = futures::future::join_all(
        (0..30).map(|i| second.create_url_owned(format!("https://example.com/new/{i}"))),
    )
    .await;
    let max_before = ids_before.iter().max().copied().expect("ids");
    for code in &after {
        assert!(!before.contains(code));
        let id = second.app.space.decode(code).expect("decode");
        assert!(
            id > max_before,
            "id {id} after restart is not above {max_before}: a block was resumed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_shutdown_readiness_goes_off_first_and_an_in_flight_create_still_completes() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("draining").await;
    node.create_url("https://example.com/warm").await;
    // Hold the table so a create is in flight inside PostgreSQL when shutdown begins.
    let mut locker = stack.db.as_ref().expect("postgres").connect().await;
    let lock = locker.transaction().await.expect("begin");
    lock.batch_execute("LOCK TABLE links IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    let in_flight = tokio::spawn({
        let (client, base) = (node.client.clone(), node.base.clone());
        async move {
            client
                .post(format!("{base}/api/v1/links"))
                .bearer_auth(crate::helpers::API_KEY)
                .json(&serde_json::json!({ "url": "https://example.com/in-flight" }))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    let admin = stack.db.as_ref().expect("postgres").connect().await;
    let waiting = testkit::wait_until(std::time::Duration::from_secs(10), || async {
        let rows = admin
            .query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'", &[])
            .await
            .expect("activity");
        !rows.is_empty()
    })
    .await;
    assert!(waiting, "the create never reached the database");

    node.begin_shutdown();
    let not_ready = testkit::wait_until(std::time::Duration::from_secs(5), || async {
        matches!(node.client.get(format!("{}/readyz", node.admin)).send().await, Ok(r) if r.status() == 503)
    })
    .await;
    assert!(
        not_ready,
        "readiness did not go off while a request was in flight"
    );
    assert!(!in_flight.is_finished(), "the in-flight create was cut off");

    lock.commit().await.expect("unlock");
    let status = in_flight
        .await
        .expect("join")
        .expect("the in-flight create got an answer");
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the in-flight create was not drained"
    );
}
