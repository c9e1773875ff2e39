//! A short URL made through Shlink's API is a link like any other: its tenant's webhook
//! endpoint is told of it; and the key's create rate applies, answered as problem+json with
//! `Retry-After`.

use super::{call, shlink_node_with};
use crate::compat_yourls::webhooks::receiver;
use crate::helpers::{Backend, Stack, metric};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

async fn a_shlink_create_is_announced_by_webhook(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (url, got) = receiver().await;
    let (node, keys) = shlink_node_with(&stack, "a", |c| {
        c.webhooks.webhook_allow_private = true;
    })
    .await;
    let registered = node
        .client
        .post(format!("{}/api/v1/webhooks", node.base))
        .bearer_auth(&keys.admin)
        .json(&json!({ "tenant": "acme", "url": url, "secret": "a-webhook-secret-0123456789" }))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), StatusCode::CREATED);
    let body = json!({"longUrl": "https://example.com/hooked", "customSlug": "shlink-hooked"});
    let (status, _, made) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        Some(&keys.own),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let created = |events: &[String]| {
        events.iter().any(|text| {
            let event: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            event["type"] == "link.created" && event["data"]["code"] == "shlink-hooked"
        })
    };
    let arrived = testkit::wait_until(Duration::from_secs(10), || async {
        created(&got.lock().expect("lock"))
    })
    .await;
    assert!(
        arrived,
        "no link.created event: {:?}",
        got.lock().expect("lock")
    );
}
on_both_stores!(a_shlink_create_is_announced_by_webhook);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_rate_limit_applies() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node_with(&stack, "a", |c| {
        (
            c.limits.create_rate,
            c.limits.create_burst,
            c.limits.batch_limit,
        ) = (1, 1, 1);
    })
    .await;
    let create = async |n: usize| {
        let body = json!({"longUrl": format!("https://example.com/limited/{n}")});
        call(
            &node,
            Method::POST,
            "/v3/short-urls",
            Some(&keys.own),
            Some(body),
        )
        .await
    };
    assert_eq!(create(1).await.0, StatusCode::OK);
    let (status, media, body) = create(2).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(media, "application/problem+json");
    assert_eq!(
        (&body["type"], &body["status"]),
        (&json!("about:blank"), &json!(429))
    );
    let refused = node
        .client
        .post(format!("{}/rest/v3/short-urls", node.base))
        .header("x-api-key", &keys.own)
        .json(&json!({"longUrl": "https://example.com/limited/3"}))
        .send()
        .await
        .expect("send");
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(node.stored_links().await, 1);
    let metrics = node.metrics().await;
    let limited = "shortener_compat_requests_total{dialect=\"shlink\",action=\"create\",outcome=\"rate_limited\"}";
    assert_eq!(metric(&metrics, limited), 2.0);
}
