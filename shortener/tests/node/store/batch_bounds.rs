//! The PostgreSQL batching writer's bounds: a create whose caller has gone before its batch
//! ran is not written (a retry must not find a link its caller was never answered for), and a
//! batch whose database has gone silent is answered, its outcome unknown, within the statement
//! timeout and a margin rather than waited on until TCP gives up.

use crate::helpers::{Backend, Node, Stack, authed, create, proxied_database};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use testkit::proxy::Mode;

#[tokio::test]
async fn a_create_whose_caller_left_before_its_batch_ran_is_not_written() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("gone").await;
    let locker = stack.db.as_ref().expect("a database").connect().await;
    // A create that waits on the table's lock keeps a batch in flight; the next create's batch
    // waits beside it for company (SHORTENER_WRITE_FILL), past its caller's deadline.
    locker
        .batch_execute("BEGIN; LOCK TABLE links IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    let first = tokio::spawn(
        node.api(reqwest::Method::POST, "/links")
            .json(&json!({"url": "https://example.com/first"}))
            .send(),
    );
    let admin = stack.db.as_ref().expect("a database").connect().await;
    let waiting = testkit::wait_until(Duration::from_secs(10), || async {
        let rows = admin
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO links%'",
                &[],
            )
            .await
            .expect("activity");
        !rows.is_empty()
    })
    .await;
    assert!(waiting, "the first create never reached the lock");
    let mut client = node.links_client().await;
    let mut call = authed(create("https://example.com/gone"));
    call.set_timeout(Duration::from_millis(800));
    let refused = client
        .create_link(call)
        .await
        .expect_err("past its deadline");
    // The client gives up at its deadline (the server would end the call there too).
    assert!(
        matches!(
            refused.code(),
            tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
        ),
        "{refused:?}"
    );

    locker.batch_execute("ROLLBACK").await.expect("unlock");
    let first = first.await.expect("join").expect("send");
    assert_eq!(first.status(), StatusCode::CREATED);
    let (status, _) = node
        .create(json!({"url": "https://example.com/after"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // The gone caller's batch started as soon as the first one ended, before the last create;
    // what is checked is a write that must not happen, so it is given a moment to (nothing
    // the test can wait on marks its absence).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        node.stored_links().await,
        2,
        "only the answered creates are stored"
    );
}

#[tokio::test]
async fn a_batch_whose_database_went_silent_is_answered_as_unknown() {
    let stack = Stack::new(Backend::Postgres).await;
    let (url, proxy) = proxied_database(&stack, false).await;
    let mut config = stack.config("silent");
    config.store.database_url = Some(url);
    config.store.database_statement_timeout_ms = 1000;
    // The flushes keep off the pool, so that the create below finds a connection open (one it
    // would have to open through the silent proxy instead fails before anything is sent, an
    // outcome that is known).
    config.visits.click_flush_interval_ms = std::num::NonZero::new(50_000).expect("non-zero");
    config.visits.analytics_flush_interval_ms = std::num::NonZero::new(50_000).expect("non-zero");
    let node = Node::start(config).await;
    // Creates at once leave several connections open in the pool.
    let made = futures::future::join_all(
        (0..6).map(|i| node.create(json!({"url": format!("https://example.com/before-{i}")}))),
    )
    .await;
    assert!(
        made.iter()
            .all(|(status, _)| *status == StatusCode::CREATED)
    );

    proxy.set_mode(Mode::Blackhole);
    let answered = tokio::time::timeout(
        Duration::from_secs(30),
        node.create(json!({"url": "https://example.com/silent"})),
    )
    .await
    .expect("a create whose database is silent is answered, not left waiting");
    let (status, body) = answered;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.to_string().contains("may or may not"),
        "the outcome is unknown, and said so: {body}"
    );
    proxy.set_mode(Mode::Open);
}
