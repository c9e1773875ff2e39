//! A purge of more ended deliveries than one statement removes: the delivery loop takes one
//! batch a pass and comes back for the rest until none is left, keeping what is within the
//! retention, and delivers as usual meanwhile.

use super::support::{SECRET, config, log, receiver, register, verified};
use crate::helpers::{Backend, Node, Stack, metric};
use serde_json::json;
use std::time::Duration;

/// Ended deliveries past the retention: two and a half purge batches of 10,000.
const OLD: i64 = 25_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_of_many_batches_removes_every_old_row_and_only_those() {
    let stack = Stack::new(Backend::Postgres).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 10);
    let start = chrono::Utc::now();
    let clock = shortener::clock::Clock::manual(start);
    config.clock = clock.clone();
    config.webhooks.webhook_log_days = 2;
    let node = Node::start(config).await;
    let (_, endpoint) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    let id = endpoint["id"].as_i64().expect("id");

    // Rows as deliveries leave them: old ones delivered or failed five days ago (by the node's
    // clock), and a few delivered yesterday, within the retention.
    let db = stack.db.as_ref().expect("a database");
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let old = start - chrono::Duration::days(5);
    let recent = start - chrono::Duration::days(1);
    client
        .execute(
            "WITH e AS (INSERT INTO webhook_events (tenant, kind, data, created_at) \
               SELECT 'acme', 'link.created', '{}', CASE WHEN n <= $2 THEN $3::timestamptz ELSE $4::timestamptz END \
               FROM generate_series(1, $2::bigint + 5) AS n RETURNING id, created_at) \
             INSERT INTO webhook_deliveries (endpoint_id, event_id, state, attempts, delivered_at, failed_at) \
             SELECT $1, id, CASE WHEN id % 2 = 0 THEN 'delivered' ELSE 'failed' END, 1, \
               CASE WHEN id % 2 = 0 THEN created_at END, CASE WHEN id % 2 = 1 THEN created_at END FROM e",
            &[&id, &OLD, &old, &recent],
        )
        .await
        .expect("seed the outbox");
    let count = |table: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    assert_eq!(count("webhook_deliveries").await, OLD + 5);

    // The hourly purge comes round; it runs until only the recent rows are left.
    clock.advance(chrono::Duration::hours(2));
    let purged = testkit::wait_until(Duration::from_secs(60), || async {
        let text = node.metrics().await;
        metric(&text, "shortener_webhook_purged_deliveries_total") >= OLD as f64
            && metric(&text, "shortener_webhook_purged_events_total") >= OLD as f64
    })
    .await;
    let text = node.metrics().await;
    assert!(purged, "{text}");
    assert_eq!(
        metric(&text, "shortener_webhook_purged_deliveries_total"),
        OLD as f64
    );
    assert_eq!(
        metric(&text, "shortener_webhook_purged_events_total"),
        OLD as f64
    );
    assert_eq!(count("webhook_deliveries").await, 5);
    assert_eq!(count("webhook_events").await, 5);

    // New events are delivered and logged beside the kept ones.
    node.create_with_key(json!({ "url": "https://example.com/after" }), &keys.own)
        .await;
    let delivered = testkit::wait_until(Duration::from_secs(10), || async {
        log(&node, id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    assert!(delivered);
    assert_eq!(verified(&receiver).len(), 1);
    assert_eq!(count("webhook_deliveries").await, 6);
}
