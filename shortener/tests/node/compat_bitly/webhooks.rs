//! A link made through Bitly's API is a link like any other: its tenant's webhook endpoint is
//! told of it, as of a link made through the JSON API.

use super::{bitly_node, shorten};
use crate::compat_yourls::webhooks::receiver;
use crate::helpers::{Backend, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

async fn a_bitly_shorten_is_announced_by_webhook(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (url, got) = receiver().await;
    let (node, keys) = bitly_node(&stack, "a", |c| {
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
    let (status, made) = shorten(
        &node,
        &keys.own,
        json!({ "long_url": "https://example.com/hooked" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["id"]
        .as_str()
        .and_then(|id| id.strip_prefix("sho.rt/"))
        .expect("id")
        .to_string();
    let created = |events: &[String]| {
        events.iter().any(|text| {
            let event: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            event["type"] == "link.created" && event["data"]["code"] == code.as_str()
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
on_both_stores!(a_bitly_shorten_is_announced_by_webhook);
