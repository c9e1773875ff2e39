//! Stats reads held at the store (their rollups locked): a tenant's third read at once is
//! answered `429` at once rather than queued behind its first two, another tenant's read still
//! gets a place, and once the store answers, every held read completes.

use super::get_at;
use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// Statements of this database waiting on a lock over the rollups.
async fn waiting_on_rollups(admin: &tokio_postgres::Client) -> usize {
    admin
        .query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND query LIKE '%click_%'",
            &[],
        )
        .await
        .expect("activity")
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_reads_two_stats_at_once_and_another_tenant_still_reads() {
    let stack = Stack::new(Backend::Postgres).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("a");
    config.access.api_keys_file = Some(path);
    let node = Node::start(config).await;
    let mut codes = Vec::new();
    for key in [&keys.own, &keys.other] {
        let (status, link) = node
            .create_with_key(json!({ "url": "https://example.com/read" }), key)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{link}");
        codes.push(link["code"].as_str().expect("code").to_string());
    }
    let read = |code: &str, key: &str| {
        let (client, base) = (node.client.clone(), node.base.clone());
        let (path, key) = (format!("/links/{code}/stats"), key.to_string());
        tokio::spawn(async move { get_at(&client, &base, &path, &key).await })
    };
    let db = stack.db.as_ref().expect("a database");
    let (locker, admin) = (db.connect().await, db.connect().await);
    locker
        .batch_execute("BEGIN; LOCK TABLE click_hourly, click_daily IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    let held = [read(&codes[0], &keys.own), read(&codes[0], &keys.own)];
    let both = testkit::wait_until(Duration::from_secs(10), || async {
        waiting_on_rollups(&admin).await >= 2
    })
    .await;
    assert!(both, "the two reads never reached the store");

    let (status, refused) = read(&codes[0], &keys.own).await.expect("third read");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert_eq!(refused["error"], "rate_limited", "{refused}");
    let other = read(&codes[1], &keys.other);
    let three = testkit::wait_until(Duration::from_secs(10), || async {
        waiting_on_rollups(&admin).await >= 3
    })
    .await;
    assert!(three, "another tenant's read got no place");

    locker.batch_execute("ROLLBACK").await.expect("unlock");
    for answer in held.into_iter().chain([other]) {
        let (status, body) = answer.await.expect("read");
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = read(&codes[0], &keys.own).await.expect("read again");
    assert_eq!(status, StatusCode::OK, "places are given back: {body}");
}
