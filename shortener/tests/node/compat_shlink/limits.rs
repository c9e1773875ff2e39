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

/// A key that may create or change links but not read them sees only the code and short URL
/// of a link its request did not create (a `findIfExists` hit, an edit, new rules), as the
/// JSON API answers it: the target is what only a read reveals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_cannot_read_sees_no_target_it_did_not_send() {
    use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
    let stack = Stack::new(Backend::Sqlite).await;
    let [full, creator, writer] = [(); 3].map(|()| generate_api_key());
    let entry = |name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: "acme".into(),
        name: name.into(),
        digest: digest(key),
        scopes: shortener::domain::Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let text = [
        entry("full", &full, "links:create,links:read,links:write"),
        entry("creator", &creator, "links:create"),
        entry("writer", &writer, "links:write"),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    let path = stack.dir.path().join("limited-keys.toml");
    std::fs::write(&path, text).expect("write keys file");
    let mut config = stack.config("a");
    config.compat.compat = vec!["shlink".into()];
    config.access.api_keys_file = Some(path);
    let node = crate::helpers::Node::start(config).await;
    let secret = "https://secret.example/only-readers-know";
    // findIfExists finds a link made with it (our dedup) to the same URL.
    let body = json!({"longUrl": secret, "findIfExists": true, "title": "Secret"});
    let (status, _, made) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        Some(&full),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let code = made["shortCode"].as_str().expect("code").to_string();
    let receipt = json!({"shortCode": code, "shortUrl": format!("https://sho.rt/{code}")});
    let again = json!({"longUrl": secret, "findIfExists": true});
    let (status, _, found) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        Some(&creator),
        Some(again),
    )
    .await;
    assert_eq!((status, &found), (StatusCode::OK, &receipt));
    assert_eq!(node.stored_links().await, 1);
    let (status, _, edited) = call(
        &node,
        Method::PATCH,
        &format!("/v3/short-urls/{code}"),
        Some(&writer),
        Some(json!({"title": "Changed"})),
    )
    .await;
    assert_eq!((status, &edited), (StatusCode::OK, &receipt));
    let rules = json!({"redirectRules": [{"longUrl": "https://example.com/de", "conditions": [{"type": "language", "matchKey": null, "matchValue": "de"}]}]});
    let (status, _, set) = call(
        &node,
        Method::POST,
        &format!("/v3/short-urls/{code}/redirect-rules"),
        Some(&writer),
        Some(rules),
    )
    .await;
    assert_eq!((status, &set), (StatusCode::OK, &receipt));
    // Its own new link it sees whole.
    let (_, _, own) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        Some(&creator),
        Some(json!({"longUrl": "https://example.com/mine"})),
    )
    .await;
    assert_eq!(own["longUrl"], "https://example.com/mine");
    let (status, _, _) = call(
        &node,
        Method::GET,
        &format!("/v3/short-urls/{code}"),
        Some(&creator),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
