//! Stats reads held at the store (their rollups locked): a tenant's third read at once is
//! answered `429` at once rather than queued behind its first two, another tenant's read still
//! gets a place, and once the store answers, every held read completes.

use super::get_at;
use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

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
    let locker = db.connect().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE click_hourly, click_daily IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    // Three reads of one tenant at once: two take its places and wait on the lock, the one
    // that comes last is refused at once, whichever it is.
    let mut reads: Vec<_> = (0..3).map(|_| read(&codes[0], &keys.own)).collect();
    let one_back = testkit::wait_until(Duration::from_secs(10), || {
        let finished = reads.iter().any(|r| r.is_finished());
        async move { finished }
    })
    .await;
    assert!(one_back, "no read was refused");
    let refused = reads
        .iter()
        .position(|r| r.is_finished())
        .expect("a finished read");
    let (status, body) = reads.remove(refused).await.expect("refused read");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    // Another tenant's read is not refused: it waits on the lock as the first two do (a
    // refusal would be back at once).
    let mut other = read(&codes[1], &keys.other);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut other)
            .await
            .is_err(),
        "another tenant's read came back while the rollups were locked"
    );
    assert!(
        reads.iter().all(|r| !r.is_finished()),
        "the held reads wait"
    );

    locker.batch_execute("ROLLBACK").await.expect("unlock");
    for answer in reads.into_iter().chain([other]) {
        let (status, body) = answer.await.expect("read");
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = read(&codes[0], &keys.own).await.expect("read again");
    assert_eq!(status, StatusCode::OK, "places are given back: {body}");
}
