//! A key a person makes while the same person signs in again is capped by that sign-in, on
//! PostgreSQL, in the one order where each could miss the other: the key's insert has read the
//! person's claims before the sign-in stored its session, and commits only after the sign-in
//! has gone to cap the person's keys. The test holds that order by holding a row the key's
//! insert must wait for (an uncommitted key of the same name) until the sign-in has either
//! finished or waits in turn.

use super::capped::{make_key, sign_in_as_ana, statuses, wait_statuses};
use super::issuer::{Key, TestIssuer};
use super::{configure, marketing_keys};
use crate::helpers::{Backend, Node, Stack, wait_for};
use reqwest::StatusCode;
use std::time::Duration;

/// How many of the database's sessions wait for a lock.
async fn waiting(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
        &[],
    )
    .await
    .expect("pg_stat_activity")
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_during_its_makers_sign_in_is_capped_by_it() {
    let stack = Stack::new(Backend::Postgres).await;
    let file_key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("capped-race");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    config.access.reload_interval_ms = std::num::NonZero::new(200).expect("non-zero");
    let node = Node::start(config).await;
    let db = stack.db.as_ref().expect("PostgreSQL");
    let (watcher, mut blocker) = (db.connect().await, db.connect().await);
    let admin = sign_in_as_ana(&node, &issuer, &signer, &["link-admins"]).await;

    // An uncommitted key named `late`: the key's insert waits for it, its claims already read.
    let held = blocker.transaction().await.expect("begin");
    held.execute(
        "INSERT INTO api_keys (tenant, name, digest, scopes, created_by) \
         VALUES ('marketing', 'late', $1, 'links:read', 'the test')",
        &[&vec![7u8; 32]],
    )
    .await
    .expect("hold the name");
    let writes = ["links:read", "links:create"];
    let (late, ()) = tokio::join!(make_key(&node, Some(&admin), "", "late", &writes), async {
        wait_for(
            "the key's insert to wait",
            Duration::from_secs(20),
            async || waiting(&watcher).await >= 1,
        )
        .await;
        // Ana signs in as a viewer now; once her sign-in has capped her keys (or waits for
        // the key's insert to end), the held row goes and the insert commits.
        let signing = sign_in_as_ana(&node, &issuer, &signer, &["link-viewers"]);
        tokio::pin!(signing);
        let done = tokio::select! {
            _ = &mut signing => true,
            () = wait_for("the sign-in to wait", Duration::from_secs(20), async || {
                waiting(&watcher).await >= 2
            }) => false,
        };
        held.rollback().await.expect("let the insert go");
        if !done {
            signing.await;
        }
    });
    let (forbidden, ok) = (StatusCode::FORBIDDEN, StatusCode::OK);
    wait_statuses(
        &node,
        &late,
        "the late key capped by the sign-in",
        (forbidden, ok),
    )
    .await;
    assert_eq!(statuses(&node, &late).await, (forbidden, ok));
    assert_eq!(
        super::capped::listed_in_force(&node, &file_key, "late").await,
        serde_json::json!(["links:read"])
    );
    node.stop().await;
}
