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
            .query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' \
                    AND query LIKE '%INSERT INTO links%'", &[])
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

/// With `SHORTENER_SHUTDOWN_DELAY`, readiness goes off at SIGTERM while the public port goes
/// on serving, new connections included, for the delay; then the node drains and stops
/// accepting. Without it, nothing a load balancer sends between SIGTERM and its next health
/// check would be answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_delay_keeps_serving_with_readiness_off() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("delayed");
    config.listeners.shutdown_delay = 3;
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/delayed").await;
    node.begin_shutdown();
    let not_ready = testkit::wait_until(std::time::Duration::from_secs(5), || async {
        matches!(node.client.get(format!("{}/readyz", node.admin)).send().await, Ok(r) if r.status() == 503)
    })
    .await;
    assert!(not_ready, "readiness stayed on");
    // A fresh connection, as a load balancer opens, is still served.
    let fresh = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let answer = fresh
        .get(format!("{}/{code}", node.base))
        .send()
        .await
        .expect("served during the delay");
    assert_eq!(answer.status(), StatusCode::FOUND);
    // Then it stops accepting.
    let stopped = testkit::wait_until(std::time::Duration::from_secs(15), || async {
        fresh
            .get(format!("{}/{code}", node.base))
            .send()
            .await
            .is_err()
    })
    .await;
    assert!(stopped, "the public port never stopped accepting");
}

/// A redirect still waiting on the store when the drain bound runs out is cut off with its
/// connection before the node's last click flush: it counts no visit that no flush would ever
/// write (its client sees the connection close, not a redirect).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_past_the_drain_bound_ends_before_the_last_click_flush() {
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("cut");
    config.listeners.drain_timeout = 1;
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/cut").await;
    node.app.cache.clear();
    let mut locker = stack.db.as_ref().expect("postgres").connect().await;
    let lock = locker.transaction().await.expect("begin");
    lock.batch_execute("LOCK TABLE links IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    let visit = tokio::spawn(
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", crate::helpers::BROWSER)
            .send(),
    );
    let admin = stack.db.as_ref().expect("postgres").connect().await;
    let waiting = testkit::wait_until(std::time::Duration::from_secs(10), || async {
        let rows = admin
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE '%FROM links%'",
                &[],
            )
            .await
            .expect("activity");
        !rows.is_empty()
    })
    .await;
    assert!(waiting, "the redirect never reached the database");

    let app = std::sync::Arc::clone(&node.app);
    node.stop().await;
    lock.rollback().await.expect("unlock");
    let answered = visit.await.expect("join");
    assert!(
        answered.is_err(),
        "a request past the drain bound was answered: {answered:?}"
    );
    // The request's task has ended (its client saw it), so any visit it counted is counted.
    assert_eq!(
        app.visits.clicks().pending_human(&code),
        0,
        "a visit was counted after the last flush"
    );
}

/// A gRPC stream still open at the drain bound (a health watch, which never ends by itself) is
/// cut off with its connection when the node stops: nothing of the node serves it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grpc_stream_past_the_drain_bound_is_cut_when_the_node_stops() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("watch");
    config.listeners.drain_timeout = 1;
    let node = Node::start(config).await;
    let mut watch = node
        .health_client()
        .await
        .watch(tonic_health::pb::HealthCheckRequest {
            service: "shortener.v1.Links".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("a status").expect("a message");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    node.stop().await;
    // The stream may still deliver NOT_SERVING, then it ends: with an error, as its connection
    // was cut, or cleanly.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            match watch.message().await {
                Ok(Some(update)) => assert_eq!(update.status, ServingStatus::NotServing as i32),
                other => return other.map(|_| ()),
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "a health watch was still served after the node stopped"
    );
}

/// The URL search index's pending list (PostgreSQL's trigram index takes inserts there first)
/// is merged into the index by the node in the background, so no create's statement does it:
/// after a run of creates the list empties within seconds, though it is far below the limit at
/// which an insert would merge it (raised by migration 23) and too few rows were inserted for
/// autovacuum to clean it. The list search still finds the links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_index_pending_list_is_merged_off_the_create_path() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("merging").await;
    let db = stack.db.as_ref().expect("postgres").connect().await;
    let options: Vec<String> = db
        .query_one(
            "SELECT reloptions FROM pg_class WHERE relname = 'links_url_trgm'",
            &[],
        )
        .await
        .expect("reloptions")
        .get(0);
    assert_eq!(options, ["gin_pending_list_limit=65536"]);
    db.batch_execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        .await
        .expect("pgstattuple");
    let pending = || async {
        let row = db
            .query_one(
                "SELECT pending_pages, pending_tuples FROM pgstatginindex('links_url_trgm')",
                &[],
            )
            .await
            .expect("pgstatginindex");
        (row.get::<_, i32>(0), row.get::<_, i64>(1))
    };
    let urls = (0..120).map(|i| format!("https://example.com/merged/needle-{i}"));
    futures::future::join_all(urls.map(|url| node.create_url_owned(url))).await;
    let merged = testkit::wait_until(std::time::Duration::from_secs(15), || async {
        pending().await == (0, 0)
    })
    .await;
    assert!(merged, "the pending list was left: {:?}", pending().await);
    let found = node
        .client
        .get(format!("{}/api/v1/links?q=needle-11&limit=100", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .send()
        .await
        .expect("list");
    assert_eq!(found.status(), StatusCode::OK);
    let found: serde_json::Value = found.json().await.expect("json");
    let urls: Vec<&str> = found["links"]
        .as_array()
        .expect("links")
        .iter()
        .filter_map(|l| l["url"].as_str())
        .collect();
    let mut expected = vec!["https://example.com/merged/needle-11".to_string()];
    expected.extend((110..120).map(|i| format!("https://example.com/merged/needle-{i}")));
    let mut urls: Vec<String> = urls.into_iter().map(str::to_string).collect();
    urls.sort();
    expected.sort();
    assert_eq!(urls, expected);
}
