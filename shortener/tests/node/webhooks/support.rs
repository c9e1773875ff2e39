//! What the webhook tests share: a receiver on a local address, the node's configuration, and
//! requests to the webhooks API.

use crate::helpers::{Node, Stack};
use crate::tenants::{TenantKeys, write_keys};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::webhooks::sign;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const SECRET: &str = "a-webhook-secret-0123456789";

/// A receiver on 127.0.0.2: records every request; answers the status in force (set with
/// [`Receiver::answer`]), after `first_delay` for the first request; with [`HANG`] in force it
/// never answers.
#[derive(Clone)]
pub(super) struct Receiver {
    pub(super) url: String,
    got: Arc<Mutex<Vec<(HeaderMap, String)>>>,
    status: Arc<AtomicU16>,
}

/// A status that makes a [`Receiver`] hold the request without ever answering.
pub(super) const HANG: u16 = 0;

pub(super) async fn receiver(status: u16, first_delay: Duration) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got: Arc<Mutex<Vec<(HeaderMap, String)>>> = Arc::default();
    let status = Arc::new(AtomicU16::new(status));
    let (seen, answer) = (Arc::clone(&got), Arc::clone(&status));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
            async move {
                let first = {
                    let mut seen = seen.lock().expect("lock");
                    seen.push((headers, body));
                    seen.len() == 1
                };
                if first {
                    tokio::time::sleep(first_delay).await;
                }
                let status = answer.load(Ordering::SeqCst);
                if status == HANG {
                    std::future::pending::<()>().await;
                }
                AxumStatus::from_u16(status).expect("status")
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver { url, got, status }
}

impl Receiver {
    pub(super) fn requests(&self) -> Vec<(HeaderMap, String)> {
        self.got.lock().expect("lock").clone()
    }

    /// Answers `status` from now on.
    pub(super) fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }
}

pub(super) fn config(stack: &Stack, max_failures: u32) -> (shortener::Config, TenantKeys) {
    let path = stack.dir.path().join("api-keys.toml");
    let keys = if path.exists() {
        panic!("keys written once per stack")
    } else {
        write_keys(&path)
    };
    let mut config = stack.config("a");
    config.access.api_keys_file = Some(path);
    config.webhooks.webhook_allow_private = true;
    config.webhooks.webhook_max_failures = std::num::NonZero::new(max_failures).expect("non-zero");
    (config, keys)
}

pub(super) async fn register(node: &Node, key: &str, body: Value) -> (StatusCode, Value) {
    let response = node
        .client
        .post(format!("{}/api/v1/webhooks", node.base))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("register");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Registers `receiver` as an endpoint of tenant `acme` (by its admin key); the endpoint.
pub(super) async fn registered(node: &Node, keys: &TenantKeys, receiver: &Receiver) -> Value {
    let (status, endpoint) = register(
        node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{endpoint}");
    endpoint
}

pub(super) async fn api(
    node: &Node,
    method: reqwest::Method,
    path: &str,
    key: &str,
) -> (StatusCode, Value) {
    let response = node
        .client
        .request(method, format!("{}/api/v1{path}", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `method` on `/api/v1{path}` as `key`, with `body` sent as it is under `content_type`.
pub(super) async fn send(
    node: &Node,
    method: reqwest::Method,
    path: &str,
    key: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, Value) {
    let response = node
        .client
        .request(method, format!("{}/api/v1{path}", node.base))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The answer of endpoint `id`'s delivery log, as `key` reads it.
pub(super) async fn log(node: &Node, id: i64, key: &str) -> Value {
    let (status, log) = api(
        node,
        reqwest::Method::GET,
        &format!("/webhooks/{id}/deliveries"),
        key,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    log
}

/// The deliveries of endpoint `id`'s log (newest first).
pub(super) async fn deliveries(node: &Node, id: i64, key: &str) -> Vec<Value> {
    log(node, id, key).await["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The events `receiver` got, each checked for a valid signature: (id, type, code).
pub(super) fn verified(receiver: &Receiver) -> Vec<(i64, String, String)> {
    let now = chrono::Utc::now().timestamp();
    receiver
        .requests()
        .iter()
        .map(|(headers, body)| {
            let header = |name: &str| headers[name].to_str().expect("ascii").to_string();
            let timestamp: i64 = header(sign::TIMESTAMP_HEADER).parse().expect("timestamp");
            assert!(
                sign::verify(
                    SECRET,
                    timestamp,
                    body.as_bytes(),
                    &header(sign::SIGNATURE_HEADER),
                    now,
                    300
                ),
                "a bad signature on {body}"
            );
            let event: Value = serde_json::from_str(body).expect("JSON event");
            assert_eq!(header(sign::ID_HEADER), event["id"].to_string());
            (
                event["id"].as_i64().expect("id"),
                event["type"].as_str().expect("type").to_string(),
                // Rollup events name an hour, not a link.
                event["data"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}
