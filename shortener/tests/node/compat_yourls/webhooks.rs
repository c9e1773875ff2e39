//! A link made through YOURLS's API is a link like any other: its tenant's webhook endpoint is
//! told of it, as of a link made through the JSON API.

use super::{json, yourls_node_with};
use crate::helpers::{Backend, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json as body};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A receiver on 127.0.0.2 that records each request body and answers 200.
pub(crate) async fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |text: String| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().expect("lock").push(text);
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

async fn a_yourls_shorten_is_announced_by_webhook(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (url, got) = receiver().await;
    let (node, keys) = yourls_node_with(&stack, "a", |c| {
        c.webhooks.webhook_allow_private = true;
    })
    .await;
    let registered = node
        .client
        .post(format!("{}/api/v1/webhooks", node.base))
        .bearer_auth(&keys.admin)
        .json(&body!({ "tenant": "acme", "url": url, "secret": "a-webhook-secret-0123456789" }))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), StatusCode::CREATED);
    let (status, made) = json(
        &node,
        &keys.own,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/hooked"),
            ("keyword", "yourls-hooked"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let created = |events: &[String]| {
        events.iter().any(|text| {
            let event: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            event["type"] == "link.created" && event["data"]["code"] == "yourls-hooked"
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
on_both_stores!(a_yourls_shorten_is_announced_by_webhook);
