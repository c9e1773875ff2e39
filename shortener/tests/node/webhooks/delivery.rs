//! Delivery beyond the happy path: a receiver that answers after the timeout gets the event
//! again (same id) and a hanging one does not hold up the tenant's other endpoints; a disabled
//! endpoint is enabled again and gets what waited; refused PATCHes change nothing; the delivery
//! log is purged after its retention; the metrics count every attempt by outcome.

use super::{HANG, SECRET, api, config, log, receiver, register, send, verified};
use crate::helpers::{Backend, Node, Stack, metric};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::store::OutboxStore;
use std::time::Duration;

async fn patch_webhook(
    node: &Node,
    id: &str,
    key: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, Value) {
    let path = format!("/webhooks/{id}");
    send(node, reqwest::Method::PATCH, &path, key, content_type, body).await
}

async fn endpoint(node: &Node, key: &str) -> Value {
    let (_, list) = api(node, reqwest::Method::GET, "/webhooks", key).await;
    list["webhooks"][0].clone()
}

/// The value of `shortener_webhook_deliveries_total{outcome="..."}`.
async fn attempts(node: &Node, outcome: &str) -> f64 {
    let text = node.metrics().await;
    metric(
        &text,
        &format!("shortener_webhook_deliveries_total{{outcome=\"{outcome}\"}}"),
    )
}

/// `shortener_webhook_outbox_pending`, once it has been measured.
async fn pending(node: &Node) -> Option<f64> {
    let text = node.metrics().await;
    text.lines().find_map(|l| {
        l.strip_prefix("shortener_webhook_outbox_pending ")
            .and_then(|v| v.trim().parse().ok())
    })
}

async fn a_late_answer_is_a_timeout_and_the_event_comes_again(backend: Backend) {
    let stack = Stack::new(backend).await;
    // The first request is answered after 1.5 s; the node waits 300 ms.
    let late = receiver(200, Duration::from_millis(1500)).await;
    let hanging = receiver(HANG, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 10);
    config.webhooks.webhook_timeout_ms = std::num::NonZero::new(300).expect("non-zero");
    let node = Node::start(config).await;
    let mut ids = Vec::new();
    for receiver in [&late, &hanging] {
        let (status, endpoint) = register(
            &node,
            &keys.admin,
            json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{endpoint}");
        ids.push(endpoint["id"].as_i64().expect("id"));
    }
    let (late_id, hanging_id) = (ids[0], ids[1]);
    node.create_with_key(json!({ "url": "https://example.com/slow" }), &keys.own)
        .await;
    // The late receiver gets the event twice under one id: the timed-out attempt and the retry
    // that it answered in time; the delivery is then delivered.
    let delivered = testkit::wait_until(Duration::from_secs(15), || async {
        log(&node, late_id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    let late_log = log(&node, late_id, &keys.admin).await;
    assert!(delivered, "{late_log}");
    assert_eq!(late_log["deliveries"][0]["attempts"], 2, "{late_log}");
    let events = verified(&late);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], events[1], "a retry is the same event");
    // The hanging receiver held every attempt without answering; each one ended at the
    // timeout, and it did not keep the other endpoint's deliveries waiting.
    let timed_out = testkit::wait_until(Duration::from_secs(15), || async {
        log(&node, hanging_id, &keys.admin).await["deliveries"][0]["attempts"]
            .as_u64()
            .is_some_and(|n| n >= 2)
    })
    .await;
    let hanging_log = log(&node, hanging_id, &keys.admin).await;
    assert!(timed_out, "{hanging_log}");
    assert_eq!(
        (
            &hanging_log["deliveries"][0]["state"],
            &hanging_log["deliveries"][0]["last_status"],
            &hanging_log["deliveries"][0]["last_error"],
        ),
        (
            &json!("pending"),
            &Value::Null,
            &json!("no answer within the timeout")
        ),
        "{hanging_log}"
    );
    assert!(!hanging.requests().is_empty());
    let waiting = testkit::wait_until(Duration::from_secs(10), || async {
        pending(&node).await == Some(1.0)
    })
    .await;
    assert!(waiting, "the hanging endpoint's delivery is the backlog");
    assert_eq!(attempts(&node, "delivered").await, 1.0);
    assert!(attempts(&node, "timeout").await >= 3.0);
    assert_eq!(attempts(&node, "refused").await, 0.0);
}
on_both_stores!(a_late_answer_is_a_timeout_and_the_event_comes_again);

async fn a_disabled_endpoint_is_enabled_again_and_gets_what_waited(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(503, Duration::ZERO).await;
    // Disabled at the first failure; its retry would come a minute later.
    let (mut config, keys) = config(&stack, 1);
    config.webhooks.webhook_retry_base_ms = std::num::NonZero::new(60_000).expect("non-zero");
    let node = Node::start(config).await;
    let (_, registered) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    let id = registered["id"].as_i64().expect("id");
    node.create_with_key(json!({ "url": "https://example.com/waited" }), &keys.own)
        .await;
    let disabled = testkit::wait_until(Duration::from_secs(15), || async {
        !endpoint(&node, &keys.admin).await["disabled_at"].is_null()
    })
    .await;
    assert!(disabled, "{}", endpoint(&node, &keys.admin).await);
    // The counter moves once the store has answered the write that set `disabled_at`, which
    // the API can show first.
    testkit::wait_until(Duration::from_secs(5), || async {
        metric(
            &node.metrics().await,
            "shortener_webhook_endpoints_disabled_total",
        ) >= 1.0
    })
    .await;
    let text = node.metrics().await;
    assert_eq!(
        metric(&text, "shortener_webhook_endpoints_disabled_total"),
        1.0
    );
    assert_eq!(attempts(&node, "refused").await, 1.0);
    // Events while disabled are not queued for it; the one that failed waits.
    node.create_with_key(json!({ "url": "https://example.com/unseen" }), &keys.own)
        .await;
    let backlog = testkit::wait_until(Duration::from_secs(15), || async {
        pending(&node).await == Some(0.0)
    })
    .await;
    assert!(
        backlog,
        "a disabled endpoint's deliveries are not a backlog"
    );
    receiver.answer(204);
    let (status, enabled) = patch_webhook(
        &node,
        &id.to_string(),
        &keys.admin,
        "application/merge-patch+json",
        r#"{"enabled": true}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{enabled}");
    assert_eq!(
        (&enabled["failures"], &enabled["disabled_at"]),
        (&json!(0), &Value::Null),
        "{enabled}"
    );
    // The waiting delivery is due at once, not after its backoff.
    let delivered = testkit::wait_until(Duration::from_secs(5), || async {
        log(&node, id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    let after = log(&node, id, &keys.admin).await;
    assert!(delivered, "{after}");
    assert_eq!(after["deliveries"].as_array().map(Vec::len), Some(1));
    assert_eq!(after["deliveries"][0]["attempts"], 2, "{after}");
    let events = verified(&receiver);
    assert_eq!(events.len(), 2, "the refused attempt and the delivery");
    // Disabled by hand, it gets nothing new.
    let (status, off) = patch_webhook(
        &node,
        &id.to_string(),
        &keys.admin,
        "application/json",
        r#"{"enabled": false}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{off}");
    assert!(off["disabled_at"].is_string(), "{off}");
    node.create_with_key(json!({ "url": "https://example.com/off" }), &keys.own)
        .await;
    assert_eq!(
        log(&node, id, &keys.admin).await["deliveries"],
        after["deliveries"]
    );
    assert_eq!(attempts(&node, "delivered").await, 1.0);
}
on_both_stores!(a_disabled_endpoint_is_enabled_again_and_gets_what_waited);

async fn refused_webhook_updates_change_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (config, keys) = config(&stack, 10);
    let node = Node::start(config).await;
    let (_, registered) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": "http://127.0.0.2:9/hook", "secret": SECRET }),
    )
    .await;
    let id = registered["id"].as_i64().expect("id").to_string();
    let before = endpoint(&node, &keys.admin).await;
    let json = "application/json";
    let cases: [(&str, &str, &str, &str, &str, StatusCode); 9] = [
        (
            "unknown field",
            &id,
            &keys.admin,
            json,
            r#"{"enabled": true, "url": "http://x/"}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "read-only field",
            &id,
            &keys.admin,
            json,
            r#"{"failures": 0}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "not a boolean",
            &id,
            &keys.admin,
            json,
            r#"{"enabled": "yes"}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "empty object",
            &id,
            &keys.admin,
            json,
            "{}",
            StatusCode::BAD_REQUEST,
        ),
        (
            "not JSON",
            &id,
            &keys.admin,
            json,
            "enabled",
            StatusCode::BAD_REQUEST,
        ),
        (
            "wrong media type",
            &id,
            &keys.admin,
            "text/plain",
            r#"{"enabled": false}"#,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "unknown endpoint",
            "999999",
            &keys.admin,
            json,
            r#"{"enabled": false}"#,
            StatusCode::NOT_FOUND,
        ),
        (
            "not a number",
            "abc",
            &keys.admin,
            json,
            r#"{"enabled": false}"#,
            StatusCode::NOT_FOUND,
        ),
        (
            "no admin scope",
            &id,
            &keys.own,
            json,
            r#"{"enabled": false}"#,
            StatusCode::FORBIDDEN,
        ),
    ];
    for (case, id, key, content_type, body, status) in cases {
        let (got, answer) = patch_webhook(&node, id, key, content_type, body).await;
        assert_eq!(got, status, "{case}: {answer}");
        assert!(answer["error"].is_string(), "{case}: {answer}");
    }
    assert_eq!(
        endpoint(&node, &keys.admin).await,
        before,
        "nothing changed"
    );
}
on_both_stores!(refused_webhook_updates_change_nothing);

async fn ended_deliveries_are_purged_after_the_log_retention(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 10);
    let clock = shortener::clock::Clock::manual(chrono::Utc::now());
    config.clock = clock.clone();
    config.webhooks.webhook_log_days = 2;
    // One attempt each: a refused delivery ends `failed` at once.
    config.webhooks.webhook_max_attempts = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    let (_, registered) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    let id = registered["id"].as_i64().expect("id");
    node.create_with_key(json!({ "url": "https://example.com/kept" }), &keys.own)
        .await;
    let delivered = testkit::wait_until(Duration::from_secs(10), || async {
        log(&node, id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    assert!(delivered);
    // A day on, within the retention: kept, and so is a delivery that failed for good.
    clock.advance(chrono::Duration::days(1));
    receiver.answer(400);
    node.create_with_key(json!({ "url": "https://example.com/later" }), &keys.own)
        .await;
    let both = testkit::wait_until(Duration::from_secs(10), || async {
        log(&node, id, &keys.admin).await["deliveries"]
            .as_array()
            .is_some_and(|d| {
                d.len() == 2 && d[0]["state"] == "failed" && d[1]["state"] == "delivered"
            })
    })
    .await;
    assert!(both, "{}", log(&node, id, &keys.admin).await);
    receiver.answer(200);
    // Past the retention of all of them (by the node's clock): purged, events too.
    clock.advance(chrono::Duration::days(3));
    let purged = testkit::wait_until(Duration::from_secs(10), || async {
        let text = node.metrics().await;
        metric(&text, "shortener_webhook_purged_events_total") >= 2.0
    })
    .await;
    assert!(purged, "{}", node.metrics().await);
    assert_eq!(log(&node, id, &keys.admin).await["deliveries"], json!([]));
    let text = node.metrics().await;
    assert_eq!(
        metric(&text, "shortener_webhook_purged_deliveries_total"),
        2.0
    );
    assert_eq!(metric(&text, "shortener_webhook_purged_events_total"), 2.0);
    // What comes after the purge is delivered and logged as before.
    node.create_with_key(json!({ "url": "https://example.com/after" }), &keys.own)
        .await;
    let again = testkit::wait_until(Duration::from_secs(10), || async {
        log(&node, id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    assert!(again);
    assert_eq!(verified(&receiver).len(), 3);
}
on_both_stores!(ended_deliveries_are_purged_after_the_log_retention);

async fn a_late_last_failure_leaves_a_delivered_delivery_delivered(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (config, keys) = config(&stack, 10);
    let node = Node::start(config).await;
    let id = super::registered(&node, &keys, &receiver).await["id"]
        .as_i64()
        .expect("id");
    node.create_with_key(
        json!({ "url": "https://example.com/taken-over" }),
        &keys.own,
    )
    .await;
    let delivered = testkit::wait_until(Duration::from_secs(10), || async {
        log(&node, id, &keys.admin).await["deliveries"][0]["state"] == "delivered"
    })
    .await;
    let before = log(&node, id, &keys.admin).await;
    assert!(delivered, "{before}");
    // The last attempt of a node whose lease ran out, failing after another node delivered.
    let event_id = before["deliveries"][0]["event_id"].as_i64().expect("event");
    let finished = node
        .app
        .store
        .finish_delivery(shortener::store::Attempt {
            endpoint_id: id,
            event_id,
            delivered: false,
            status: Some(500),
            error: Some("answered 500".into()),
            retry_at: chrono::Utc::now(),
            max_failures: 10,
            last: true,
            // The lease a claim of the late node held (any token: the delivery is no longer
            // pending either way).
            lease: 0,
        })
        .await
        .expect("finish");
    assert!(!finished.given_up);
    assert_eq!(log(&node, id, &keys.admin).await, before);
}
on_both_stores!(a_late_last_failure_leaves_a_delivered_delivery_delivered);
