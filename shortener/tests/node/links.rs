//! The shortener core through its real interface (a server on a port, a real HTTP client), on
//! both stores.

use crate::helpers::{API_KEY, Backend, Node, Stack};
use chrono::{Duration as ChronoDuration, Utc};
use reqwest::StatusCode;
use serde_json::json;
use shortener::store::LinkStore;
use std::collections::HashSet;
use std::time::Duration;

async fn create_redirect_delete_then_gone(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let (status, body) = node
        .create(json!({ "url": "https://Example.com/a b?x=1" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let code = body["code"].as_str().expect("code");
    assert_eq!(code.len(), 7);
    assert!(code.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(body["url"], "https://example.com/a%20b?x=1");
    assert_eq!(body["short_url"], format!("https://sho.rt/{code}"));
    assert!(body["created_at"].as_str().is_some());

    let response = node.visit(code).await;
    assert_eq!(response.status(), StatusCode::FOUND);
    assert_eq!(
        response.headers()["location"],
        "https://example.com/a%20b?x=1"
    );
    let head = node
        .client
        .head(format!("{}/{code}", node.base))
        .send()
        .await
        .expect("head");
    assert_eq!(head.status(), StatusCode::FOUND);

    let (status, got) = node.get(code).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["code"], code);
    assert_eq!(got["deleted_at"], serde_json::Value::Null);

    assert_eq!(node.delete(code).await, StatusCode::NO_CONTENT);
    let gone = node.visit(code).await;
    assert_eq!(gone.status(), StatusCode::GONE);
    assert_eq!(gone.headers()["cache-control"], "no-store");
    let (_, got) = node.get(code).await;
    assert!(got["deleted_at"].as_str().is_some(), "{got}");
    assert_eq!(
        node.delete(code).await,
        StatusCode::NO_CONTENT,
        "deleting twice is fine"
    );

    let unknown = node.visit("zzzzzzz").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(unknown.headers()["cache-control"], "no-store");
    assert_eq!(node.delete("zzzzzzz").await, StatusCode::NOT_FOUND);
    assert_eq!(node.get("zzzzzzz").await.0, StatusCode::NOT_FOUND);
}
on_both_stores!(create_redirect_delete_then_gone);

async fn aliases_are_created_once_and_conflicts_are_409(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let (status, body) = node
        .create(json!({ "url": "https://example.com/1", "alias": "launch-day" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["code"], "launch-day");
    let (status, body) = node
        .create(json!({ "url": "https://example.com/2", "alias": "launch-day" }))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "alias_taken");
    let response = node.visit("launch-day").await;
    assert_eq!(
        response.headers()["location"],
        "https://example.com/1",
        "the first URL stays"
    );
    // Codes are case-sensitive: a different case is a different alias.
    let (status, _) = node
        .create(json!({ "url": "https://example.com/3", "alias": "Launch-Day" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        node.visit("Launch-Day").await.headers()["location"],
        "https://example.com/3"
    );
    assert_eq!(
        node.visit("launch-day").await.headers()["location"],
        "https://example.com/1"
    );
}
on_both_stores!(aliases_are_created_once_and_conflicts_are_409);

async fn dedup_under_fifty_concurrent_identical_requests_gives_one_code(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let body = json!({ "url": "https://example.com/popular", "dedup": true });
    let results = futures::future::join_all((0..50).map(|_| node.create(body.clone()))).await;
    let mut codes = HashSet::new();
    let mut created = 0;
    for (status, body) in &results {
        assert!(
            status == &StatusCode::CREATED || status == &StatusCode::OK,
            "{status} {body}"
        );
        created += usize::from(*status == StatusCode::CREATED);
        codes.insert(body["code"].as_str().expect("code").to_string());
    }
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert_eq!(created, 1);
    assert_eq!(node.stored_links().await, 1);
    // Without dedup, a new code; after deleting the deduplicated link, dedup makes a new one.
    let other = node.create_url("https://example.com/popular").await;
    assert!(!codes.contains(&other));
    let code = codes.into_iter().next().expect("one code");
    assert_eq!(node.delete(&code).await, StatusCode::NO_CONTENT);
    let (status, again) = node.create(body).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(again["code"], code.as_str());
}
on_both_stores!(dedup_under_fifty_concurrent_identical_requests_gives_one_code);

/// A dedup create is answered an existing link only while that one redirects: a disabled,
/// used-up or deleted twin gives its key up and the create makes a new link (a Bitly or Shlink client,
/// which sees no state, would otherwise hand out a link that answers 410).
async fn dedup_answers_only_a_link_that_redirects(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let body = json!({ "url": "https://example.com/dd", "dedup": true });
    let (status, first) = node.create(body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let first = first["code"].as_str().expect("code").to_string();
    let (status, again) = node.create(body.clone()).await;
    assert_eq!(
        (status, again["code"].as_str()),
        (StatusCode::OK, Some(&*first))
    );

    assert_eq!(
        node.patch(&first, json!({ "disabled": true })).await.0,
        StatusCode::OK
    );
    let (status, second) = node.create(body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    let second = second["code"].as_str().expect("code").to_string();
    assert_ne!(second, first);
    // Enabled again, the first keeps its code and state but not the key: dedup finds the second.
    assert_eq!(
        node.patch(&first, json!({ "disabled": false })).await.0,
        StatusCode::OK
    );
    let (status, third) = node.create(body).await;
    assert_eq!(
        (status, third["code"].as_str()),
        (StatusCode::OK, Some(&*second))
    );
    assert_eq!(node.visit(&first).await.status(), StatusCode::FOUND);

    // Used up: one visit of one allowed, counted in the store.
    let capped = json!({ "url": "https://example.com/once", "dedup": true, "max_visits": 1 });
    let (status, once) = node.create(capped.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{once}");
    let once = once["code"].as_str().expect("code").to_string();
    let visited = node
        .client
        .get(format!("{}/{once}", node.base))
        .header(
            "user-agent",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)",
        )
        .send()
        .await
        .expect("visit");
    assert_eq!(visited.status(), StatusCode::FOUND);
    let used_up = testkit::wait_until(std::time::Duration::from_secs(10), || async {
        node.get(&once).await.1["state"] == "used_up"
    })
    .await;
    assert!(used_up, "{}", node.get(&once).await.1);
    let (status, fresh) = node.create(capped).await;
    assert_eq!(status, StatusCode::CREATED, "{fresh}");
    assert_ne!(fresh["code"].as_str(), Some(&*once));
    assert_eq!(node.stored_links().await, 4);

    // Deleted (it keeps its key, for an import's rerun to find): a dedup create makes a new one.
    let gone = json!({ "url": "https://example.com/gone", "dedup": true });
    let (_, deleted) = node.create(gone.clone()).await;
    let deleted = deleted["code"].as_str().expect("code").to_string();
    assert_eq!(node.delete(&deleted).await, StatusCode::NO_CONTENT);
    let (status, remade) = node.create(gone.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{remade}");
    assert_ne!(remade["code"].as_str(), Some(&*deleted));
    let (status, again) = node.create(gone).await;
    assert_eq!((status, &again["code"]), (StatusCode::OK, &remade["code"]));
    assert_eq!(node.stored_links().await, 6);

    // Concurrent creates that all find a dead twin make one live link between them (the
    // release's own race is held to the twin in the store's test of it).
    let racing = json!({ "url": "https://example.com/race", "dedup": true });
    let (_, twin) = node.create(racing.clone()).await;
    let twin = twin["code"].as_str().expect("code").to_string();
    assert_eq!(
        node.patch(&twin, json!({ "disabled": true })).await.0,
        StatusCode::OK
    );
    let answers = futures::future::join_all((0..16).map(|_| node.create(racing.clone()))).await;
    let codes: HashSet<String> = answers
        .iter()
        .map(|(status, body)| {
            assert!(status.is_success(), "{status} {body}");
            body["code"].as_str().expect("code").to_string()
        })
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert!(!codes.contains(&twin));
    assert_eq!(node.stored_links().await, 8);
    let (status, found) = node.create(racing).await;
    assert_eq!(status, StatusCode::OK);
    assert!(codes.contains(found["code"].as_str().expect("code")));
}
on_both_stores!(dedup_answers_only_a_link_that_redirects);

async fn private_links_get_long_random_codes(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut codes = HashSet::new();
    for _ in 0..5 {
        let (status, body) = node
            .create(json!({ "url": "https://example.com/secret", "private": true }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let code = body["code"].as_str().expect("code").to_string();
        assert!(
            code.len() >= 12 && code.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{code}"
        );
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
        assert!(codes.insert(code));
    }
}
on_both_stores!(private_links_get_long_random_codes);

async fn expired_links_answer_410(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let expires = (Utc::now() + ChronoDuration::milliseconds(1500)).to_rfc3339();
    let (status, body) = node
        .create(json!({ "url": "https://example.com/soon", "expires_at": expires }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let code = body["code"].as_str().expect("code").to_string();
    assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    let gone = testkit::wait_until(Duration::from_secs(10), || async {
        node.visit(&code).await.status() == StatusCode::GONE
    })
    .await;
    assert!(gone, "the link never expired");
}
on_both_stores!(expired_links_answer_410);

async fn a_retried_create_with_the_same_idempotency_key_returns_the_same_link(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let body = json!({ "url": "https://example.com/once" });
    let (first_status, first) = node
        .create_with(body.clone(), &[("Idempotency-Key", "order-42")])
        .await;
    assert_eq!(first_status, StatusCode::CREATED);
    let retries = futures::future::join_all(
        (0..10).map(|_| node.create_with(body.clone(), &[("Idempotency-Key", "order-42")])),
    )
    .await;
    for (status, again) in retries {
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again["code"], first["code"]);
    }
    assert_eq!(node.stored_links().await, 1);
    // The same key with a different request is refused.
    let (status, err) = node
        .create_with(
            json!({ "url": "https://example.com/other" }),
            &[("Idempotency-Key", "order-42")],
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(err["error"], "idempotency_key_reused");
    // So is one that differs only in its password or its routing: a retry is the same request,
    // its password included (checked against the link's hash, never digested).
    let protected = json!({ "url": "https://example.com/kept", "password": "first-secret" });
    let (status, made) = node
        .create_with(protected.clone(), &[("Idempotency-Key", "order-44")])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (status, again) = node
        .create_with(protected, &[("Idempotency-Key", "order-44")])
        .await;
    assert_eq!((status, &again["code"]), (StatusCode::OK, &made["code"]));
    for other in [
        json!({ "url": "https://example.com/kept", "password": "other-secret" }),
        json!({ "url": "https://example.com/kept" }),
        json!({ "url": "https://example.com/kept", "password": "first-secret",
                "ios": "https://apps.apple.com/app/id1" }),
    ] {
        let (status, err) = node
            .create_with(other.clone(), &[("Idempotency-Key", "order-44")])
            .await;
        assert_eq!(
            (status, &err["error"]),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!("idempotency_key_reused")
            ),
            "{other}"
        );
    }
    assert_eq!(node.stored_links().await, 2);
    // Concurrent first attempts with a fresh key still create one link.
    let racing = futures::future::join_all(
        (0..10).map(|_| node.create_with(body.clone(), &[("Idempotency-Key", "order-43")])),
    )
    .await;
    let codes: HashSet<String> = racing
        .iter()
        .map(|(_, b)| b["code"].as_str().expect("code").to_string())
        .collect();
    assert_eq!(codes.len(), 1);
    assert_eq!(node.stored_links().await, 3);
}
on_both_stores!(a_retried_create_with_the_same_idempotency_key_returns_the_same_link);

async fn a_planted_generated_code_conflict_is_skipped_not_returned(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let parts = node.app.clone();
    // The IDs after this one come from the same block (blocks hold at least 10 IDs here).
    let id = parts.ids.next_id().expect("an ID in hand");
    for planted in [id + 1, id + 2] {
        let link = shortener::store::NewLink::plain(
            parts.space.encode(planted),
            "https://planted.example/".into(),
            codespace::shape::CodeKind::Alias,
            None,
            "default",
            "planter",
        );
        assert!(matches!(
            parts.store.insert(link).await.expect("plant"),
            shortener::store::InsertOutcome::Created(_)
        ));
    }
    let (status, body) = node
        .create(json!({ "url": "https://example.com/real" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["code"], parts.space.encode(id + 3));
    assert_eq!(
        parts
            .links
            .counters()
            .generated_conflicts
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // The planted codes kept their URLs.
    let planted = node.visit(&parts.space.encode(id + 1)).await;
    assert_eq!(planted.headers()["location"], "https://planted.example/");
}
on_both_stores!(a_planted_generated_code_conflict_is_skipped_not_returned);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_connection_killed_during_a_create_gives_503_with_retry_advice_then_recovery() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("a").await;
    node.create_url("https://example.com/warm").await;
    let db = stack.db.as_ref().expect("postgres");
    // Hold the table so the node's INSERT waits inside PostgreSQL, then kill its connection.
    let mut locker = db.connect().await;
    let lock = locker.transaction().await.expect("begin");
    lock.batch_execute("LOCK TABLE links IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    let create = tokio::spawn({
        let (client, base) = (node.client.clone(), node.base.clone());
        async move {
            let response = client
                .post(format!("{base}/api/v1/links"))
                .bearer_auth(API_KEY)
                .json(&json!({ "url": "https://example.com/in-flight" }))
                .send()
                .await
                .expect("send");
            let status = response.status();
            (
                status,
                response
                    .json::<serde_json::Value>()
                    .await
                    .unwrap_or_default(),
            )
        }
    });
    let admin = db.connect().await;
    let waiting = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let blocked = testkit::wait_until(Duration::from_secs(10), || async {
        !admin
            .query(waiting, &[])
            .await
            .expect("activity")
            .is_empty()
    })
    .await;
    assert!(blocked, "the create never reached the database");
    admin
        .execute(
            &format!("SELECT pg_terminate_backend(pid) FROM ({waiting}) w"),
            &[],
        )
        .await
        .expect("terminate");
    lock.commit().await.expect("unlock");
    let (status, body) = create.await.expect("join");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "unavailable");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Idempotency-Key")),
        "{body}"
    );
    let recovered = testkit::wait_until(Duration::from_secs(10), || async {
        node.create(json!({ "url": "https://example.com/recovered" }))
            .await
            .0
            == StatusCode::CREATED
    })
    .await;
    assert!(
        recovered,
        "the node did not recover after its connection was killed"
    );
}

/// An idempotency key is remembered for its lifetime only: after it, the same key and request
/// create a new link, and the purge deletes the expired claim.
async fn idempotency_keys_expire_and_are_purged(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("idem-ttl");
    config.access.idempotency_ttl = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let body = json!({ "url": "https://example.com/once-per-ttl" });
    let key = [("Idempotency-Key", "expiring-1")];
    let (status, first) = node.create_with(body.clone(), &key).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = node.create_with(body.clone(), &key).await;
    assert_eq!((status, &again["code"]), (StatusCode::OK, &first["code"]));
    let renewed = testkit::wait_until(Duration::from_secs(10), || async {
        node.create_with(body.clone(), &key).await.0 == StatusCode::CREATED
    })
    .await;
    assert!(renewed, "the idempotency key never expired");
    let cutoff = chrono::Utc::now() + chrono::Duration::seconds(1);
    let purged = node
        .app
        .store
        .purge_idempotency(cutoff)
        .await
        .expect("purge");
    assert!(purged >= 1, "nothing was purged");
}
on_both_stores!(idempotency_keys_expire_and_are_purged);
