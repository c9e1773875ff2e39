//! Deliveries sent again by hand (`POST /api/v1/webhooks/{id}/deliveries/retry`): a delivery
//! that failed for good goes out once more when its receiver is back, one by its event or
//! every failed one at once; a delivered one is sent again on request; and refused requests
//! (no admin key, an unknown endpoint or event, a bad body, a disabled endpoint) change
//! nothing.

use super::{api, config, deliveries, receiver, registered, send, verified};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// `POST /api/v1/webhooks/{id}/deliveries/retry` with `body` (sent as it is, as
/// `content_type`), as `key`.
async fn retry(
    node: &Node,
    key: &str,
    id: &str,
    body: &str,
    content_type: &str,
) -> (StatusCode, Value) {
    let path = format!("/webhooks/{id}/deliveries/retry");
    send(node, reqwest::Method::POST, &path, key, content_type, body).await
}

/// The body naming `event`.
fn event(event: i64) -> String {
    format!("{{\"event_id\": {event}}}")
}

/// The log as (event, state, attempts), oldest event first.
async fn states(node: &Node, key: &str, id: &str) -> Vec<(i64, String, i64)> {
    let id: i64 = id.parse().expect("an endpoint id");
    let mut rows: Vec<(i64, String, i64)> = deliveries(node, id, key)
        .await
        .iter()
        .map(|d| {
            (
                d["event_id"].as_i64().expect("event"),
                d["state"].as_str().expect("state").to_string(),
                d["attempts"].as_i64().expect("attempts"),
            )
        })
        .collect();
    rows.sort();
    rows
}

async fn failed_deliveries_are_sent_again_on_request(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(400, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 100);
    config.webhooks.webhook_max_attempts = std::num::NonZero::new(2).expect("non-zero");
    let node = Node::start(config).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let id = endpoint["id"].to_string();
    for n in 0..2 {
        node.create_with_key(
            json!({ "url": format!("https://example.com/r{n}") }),
            &keys.own,
        )
        .await;
    }
    let failed = testkit::wait_until(Duration::from_secs(30), || async {
        let rows = states(&node, &keys.admin, &id).await;
        rows.len() == 2 && rows.iter().all(|r| r.1 == "failed")
    })
    .await;
    let before = states(&node, &keys.admin, &id).await;
    assert!(failed, "{before:?}");
    let (first, second) = (before[0].0, before[1].0);
    let sent = verified(&receiver).len();
    assert_eq!(sent, 4, "two attempts each");

    let json = "application/json";
    let unknown_event = event(second + 1000);
    let cases: Vec<(&str, &str, String, &str, StatusCode, &str)> = vec![
        (
            "a key without admin",
            &keys.own,
            id.clone(),
            "{}",
            StatusCode::FORBIDDEN,
            "",
        ),
        (
            "an unknown endpoint",
            &keys.admin,
            "999999".into(),
            "{}",
            StatusCode::NOT_FOUND,
            "",
        ),
        (
            "an endpoint id that is no number",
            &keys.admin,
            "x".into(),
            "{}",
            StatusCode::NOT_FOUND,
            "",
        ),
        (
            "no body",
            &keys.admin,
            id.clone(),
            "",
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "a negative event",
            &keys.admin,
            id.clone(),
            "{\"event_id\": -1}",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_event_id",
        ),
        (
            "an event that is no number",
            &keys.admin,
            id.clone(),
            "{\"event_id\": \"1\"}",
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "an unknown field",
            &keys.admin,
            id.clone(),
            "{\"state\": \"failed\"}",
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "an event the endpoint has no delivery of",
            &keys.admin,
            id.clone(),
            &unknown_event,
            StatusCode::CONFLICT,
            "not_retryable",
        ),
    ];
    for (case, key, target, body, status, code) in &cases {
        let (got, answer) = retry(&node, key, target, body, json).await;
        assert_eq!(got, *status, "{case}: {answer}");
        if !code.is_empty() {
            assert_eq!(answer["error"], *code, "{case}: {answer}");
        }
        assert_eq!(
            states(&node, &keys.admin, &id).await,
            before,
            "{case} changed the log"
        );
    }
    let (got, _) = retry(&node, &keys.admin, &id, "{}", "text/plain").await;
    assert_eq!(got, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(states(&node, &keys.admin, &id).await, before);

    // The receiver is back: one event by hand, then every failed one.
    receiver.answer(200);
    let (got, answer) = retry(&node, &keys.admin, &id, &event(first), json).await;
    assert_eq!((got, &answer), (StatusCode::OK, &json!({ "retried": 1 })));
    let delivered = |want: Vec<(i64, &'static str, i64)>| {
        let (node, key, id) = (&node, keys.admin.clone(), id.clone());
        async move {
            let want: Vec<(i64, String, i64)> = want
                .into_iter()
                .map(|(e, s, a)| (e, s.to_string(), a))
                .collect();
            testkit::wait_until(Duration::from_secs(20), || async {
                states(node, &key, &id).await == want
            })
            .await
        }
    };
    assert!(delivered(vec![(first, "delivered", 1), (second, "failed", 2)]).await);
    let (got, answer) = retry(&node, &keys.admin, &id, "{}", json).await;
    assert_eq!((got, &answer), (StatusCode::OK, &json!({ "retried": 1 })));
    assert!(delivered(vec![(first, "delivered", 1), (second, "delivered", 1)]).await);
    let (got, answer) = retry(&node, &keys.admin, &id, "{}", json).await;
    assert_eq!(
        (got, answer),
        (StatusCode::OK, json!({ "retried": 0 })),
        "none failed"
    );

    // A delivered event is sent again when asked for by name.
    let (got, _) = retry(&node, &keys.admin, &id, &event(second), json).await;
    assert_eq!(got, StatusCode::OK);
    let again = testkit::wait_until(Duration::from_secs(20), || async {
        verified(&receiver).iter().filter(|e| e.0 == second).count() == 4
    })
    .await;
    assert!(again, "{:?}", verified(&receiver));
    let per_event = |event: i64| verified(&receiver).iter().filter(|e| e.0 == event).count();
    assert_eq!((per_event(first), per_event(second)), (3, 4));

    // A disabled endpoint retries nothing until it is enabled again.
    let path = format!("/webhooks/{id}");
    let disabled = node
        .client
        .patch(format!("{}/api/v1{path}", node.base))
        .bearer_auth(&keys.admin)
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .expect("disable");
    assert_eq!(disabled.status(), StatusCode::OK);
    let settled = states(&node, &keys.admin, &id).await;
    let (got, answer) = retry(&node, &keys.admin, &id, &event(first), json).await;
    assert_eq!(got, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["error"], "endpoint_disabled");
    assert_eq!(states(&node, &keys.admin, &id).await, settled);
    node.stop().await;
}
on_both_stores!(failed_deliveries_are_sent_again_on_request);

/// A tenant at its pending bound gets no more pending deliveries from a retry
/// (`outbox_full`), with nothing changed. A retry starts the endpoint over: the failed attempt
/// had put it on hold (here for ten minutes), and the delivery made due goes out at once rather
/// than after the hold; the run of failures is back at 0.
async fn a_retry_keeps_to_the_tenants_bound_and_lifts_the_endpoints_hold(backend: Backend) {
    let stack = Stack::new(backend).await;
    // The receiver holds the first request without answering, until the attempt times out.
    let receiver = receiver(super::HANG, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 100);
    let webhooks = &mut config.webhooks;
    webhooks.webhook_max_attempts = std::num::NonZero::new(1).expect("non-zero");
    webhooks.webhook_retry_base_ms = std::num::NonZero::new(600_000).expect("non-zero");
    webhooks.webhook_timeout_ms = std::num::NonZero::new(2_000).expect("non-zero");
    webhooks.webhook_max_pending = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let id = endpoint["id"].to_string();
    let failures = async || {
        let (_, list) = api(&node, reqwest::Method::GET, "/webhooks", &keys.admin).await;
        list["webhooks"][0]["failures"].clone()
    };
    node.create_with_key(json!({ "url": "https://example.com/held" }), &keys.own)
        .await;
    let hanging = testkit::wait_until(Duration::from_secs(20), || async {
        receiver.requests().len() == 1
    })
    .await;
    assert!(hanging, "the event never went out");
    // Its one delivery is pending while the attempt hangs: the tenant is at its bound of one.
    let before = states(&node, &keys.admin, &id).await;
    assert_eq!(before.len(), 1);
    let (got, answer) = retry(&node, &keys.admin, &id, "{}", "application/json").await;
    assert_eq!(got, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["error"], "outbox_full");
    assert_eq!(states(&node, &keys.admin, &id).await, before);

    // The attempt times out: the delivery fails for good and the endpoint is held.
    let failed = testkit::wait_until(Duration::from_secs(20), || async {
        states(&node, &keys.admin, &id)
            .await
            .first()
            .map(|r| r.1.clone())
            == Some("failed".into())
    })
    .await;
    assert!(failed, "{:?}", states(&node, &keys.admin, &id).await);
    assert_eq!(failures().await, json!(1));
    let event = before[0].0;
    receiver.answer(200);
    let (got, answer) = retry(&node, &keys.admin, &id, "{}", "application/json").await;
    assert_eq!((got, answer), (StatusCode::OK, json!({ "retried": 1 })));
    let delivered = testkit::wait_until(Duration::from_secs(20), || async {
        states(&node, &keys.admin, &id).await == [(event, "delivered".to_string(), 1)]
    })
    .await;
    assert!(
        delivered,
        "held: {:?}",
        states(&node, &keys.admin, &id).await
    );
    assert_eq!(failures().await, json!(0));
    node.stop().await;
}
on_both_stores!(a_retry_keeps_to_the_tenants_bound_and_lifts_the_endpoints_hold);

/// On PostgreSQL a retry counts the room under its tenant's bound holding the tenant's retry
/// lock, so retries of two endpoints of one tenant take turns instead of both counting the
/// same room: while another transaction holds that lock, a retry waits for it, then answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_of_one_tenant_take_turns_on_its_lock() {
    let stack = Stack::new(Backend::Postgres).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (config, keys) = config(&stack, 100);
    let node = Node::start(config).await;
    let endpoint = registered(&node, &keys, &receiver).await;
    let id = endpoint["id"].to_string();
    let mut db = stack.db.as_ref().expect("PostgreSQL").connect().await;
    let tenant: String = db
        .query_one(
            "SELECT tenant FROM webhook_endpoints WHERE id = $1",
            &[&endpoint["id"].as_i64().expect("id")],
        )
        .await
        .expect("the endpoint's tenant")
        .get(0);
    let held = db.transaction().await.expect("begin");
    held.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('webhook retry ' || $1, 0))",
        &[&tenant],
    )
    .await
    .expect("take the tenant's retry lock");
    let retrying = {
        let request = node
            .client
            .post(format!(
                "{}/api/v1/webhooks/{id}/deliveries/retry",
                node.base
            ))
            .bearer_auth(&keys.admin)
            .header("content-type", "application/json")
            .body("{}");
        tokio::spawn(async move {
            let response = request.send().await.expect("send");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        })
    };
    let observer = stack.db.as_ref().expect("PostgreSQL").connect().await;
    let waiting = testkit::wait_until(Duration::from_secs(10), || async {
        observer
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .await
            .expect("locks")
            .get::<_, i64>(0)
            == 1
    })
    .await;
    assert!(waiting, "the retry did not wait for the tenant's lock");
    assert!(!retrying.is_finished());
    held.commit().await.expect("let go");
    let (got, answer) = tokio::time::timeout(Duration::from_secs(10), retrying)
        .await
        .expect("the retry answered once the lock was free")
        .expect("retry");
    assert_eq!((got, answer), (StatusCode::OK, json!({ "retried": 0 })));
    node.stop().await;
}
