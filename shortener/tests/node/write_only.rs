//! A key that may change or create links but not read them: the answers of its writes name the
//! link (code and short URL) and show nothing only a read would reveal, over HTTP and gRPC. A
//! link its own request created is shown whole: every field is its own input.

use crate::helpers::{BROWSER, Backend, Node, Stack};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;

/// The target every test reads for: it must never reach a key that may not read links.
const TARGET: &str = "https://secret.example/only-readers-know";

/// The keys of one tenant: every links scope, `links:write` alone, `links:create` alone.
struct Keys {
    full: String,
    writer: String,
    creator: String,
}

async fn node_with_keys(stack: &Stack) -> (Node, Keys) {
    let keys = Keys {
        full: generate_api_key(),
        writer: generate_api_key(),
        creator: generate_api_key(),
    };
    let entry = |name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: "acme".into(),
        name: name.into(),
        digest: digest(key),
        scopes: Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let text = [
        entry("full", &keys.full, "links:create,links:read,links:write"),
        entry("writer", &keys.writer, "links:write"),
        entry("creator", &keys.creator, "links:create"),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    let path = stack.dir.path().join("api-keys.toml");
    std::fs::write(&path, text).expect("write keys file");
    let mut config = stack.config("write-only");
    config.access.api_keys_file = Some(path);
    config.compat.compat = vec!["bitly".into()];
    (Node::start(config).await, keys)
}

/// `method /api/v1{path}` with `key` and a JSON `body`: status and the answer's text.
async fn call(
    node: &Node,
    method: reqwest::Method,
    path: &str,
    key: &str,
    content_type: &str,
    body: Value,
) -> (StatusCode, String) {
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
    (status, response.text().await.expect("answer"))
}

async fn patch(node: &Node, code: &str, key: &str, body: Value) -> (StatusCode, String) {
    let path = format!("/links/{code}");
    let patch = "application/merge-patch+json";
    call(node, reqwest::Method::PATCH, &path, key, patch, body).await
}

async fn post(node: &Node, key: &str, body: Value) -> (StatusCode, String) {
    let json = "application/json";
    call(node, reqwest::Method::POST, "/links", key, json, body).await
}

/// Asserts `text` is the receipt of `code`: its code and short URL, nothing else.
fn receipt(text: &str, code: &str) {
    assert!(
        !text.contains("secret"),
        "the answer shows a read's fields: {text}"
    );
    let answer: Value = serde_json::from_str(text).expect("a JSON answer");
    let fields: Vec<&str> = answer
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields, ["code", "short_url"], "{text}");
    assert_eq!(answer["code"], code);
    let short_url = answer["short_url"].as_str().expect("a short URL");
    assert!(short_url.ends_with(&format!("/{code}")), "{short_url}");
}

/// `message` with `key` in its metadata.
fn with_key<T>(message: T, key: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {key}").parse().expect("ascii"),
    );
    request
}

/// Asserts a gRPC link is the receipt of `code`: only code and short URL set.
fn grpc_receipt(link: &pb::Link, code: &str) {
    assert_eq!(link.code, code);
    assert!(link.short_url.ends_with(&format!("/{code}")), "{link:?}");
    let bare = pb::Link {
        code: link.code.clone(),
        short_url: link.short_url.clone(),
        ..Default::default()
    };
    assert_eq!(*link, bare, "the answer shows a read's fields");
}

async fn writes_without_links_read_answer_no_more_than_the_code(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_keys(&stack).await;
    let (status, made) = post(
        &node,
        &keys.full,
        json!({ "url": TARGET, "dedup": true, "tags": ["secret-tag"], "max_visits": 1000 }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let made: Value = serde_json::from_str(&made).expect("json");
    let code = made["code"].as_str().expect("code").to_string();
    let visit = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("user-agent", BROWSER)
        .send()
        .await
        .expect("visit");
    assert_eq!(visit.status(), StatusCode::FOUND);

    // HTTP: an empty patch, and patches that change something, answer the receipt; the
    // changes are made all the same.
    for body in [
        json!({}),
        json!({ "tags": ["other"] }),
        json!({ "disabled": true }),
        json!({ "disabled": false, "max_visits": null }),
    ] {
        let (status, text) = patch(&node, &code, &keys.writer, body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{body}: {text}");
        receipt(&text, &code);
    }
    // A reader's edit answers the link whole, with what the writer changed.
    let (status, text) = patch(&node, &code, &keys.full, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let whole: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(whole["url"], TARGET);
    assert_eq!(whole["tags"], json!(["other"]));
    assert_eq!(whole["max_visits"], Value::Null);
    assert_eq!(whole["state"], "active");

    // A create-only key: a dedup create finds the reader's link and answers its receipt; a
    // link its request makes is shown whole.
    let (status, text) = post(
        &node,
        &keys.creator,
        json!({ "url": TARGET, "dedup": true }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    receipt(&text, &code);
    // So does a Bitly shorten of the same URL (always a dedup create): its id and short URL.
    let response = node
        .client
        .post(format!("{}/v4/shorten", node.base))
        .bearer_auth(&keys.creator)
        .json(&json!({ "long_url": TARGET }))
        .send()
        .await
        .expect("shorten");
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.expect("json");
    let fields: Vec<&String> = answer.as_object().expect("object").keys().collect();
    assert_eq!(fields, ["id", "link"], "{answer}");
    assert!(
        answer["link"]
            .as_str()
            .is_some_and(|l| l.ends_with(&format!("/{code}"))),
        "{answer}"
    );
    let (status, text) = post(
        &node,
        &keys.creator,
        json!({ "url": "https://example.com/mine" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let mine: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(mine["url"], "https://example.com/mine");
    assert_eq!(mine["clicks"]["human"], 0);

    // gRPC: the same, for UpdateLink, CreateLink and BatchCreateLinks.
    let mut client = node.links_client().await;
    for request in [
        pb::UpdateLinkRequest {
            code: code.clone(),
            ..Default::default()
        },
        pb::UpdateLinkRequest {
            code: code.clone(),
            tags: Some(pb::TagList {
                tags: vec!["grpc".into()],
            }),
            ..Default::default()
        },
    ] {
        let updated = client
            .update_link(with_key(request, &keys.writer))
            .await
            .expect("update")
            .into_inner();
        grpc_receipt(&updated, &code);
    }
    let updated = client
        .update_link(with_key(
            pb::UpdateLinkRequest {
                code: code.clone(),
                ..Default::default()
            },
            &keys.full,
        ))
        .await
        .expect("update")
        .into_inner();
    assert_eq!(updated.url, TARGET);
    assert_eq!(updated.tags, ["grpc"]);
    let twin = pb::CreateLinkRequest {
        url: TARGET.into(),
        dedup: true,
        ..Default::default()
    };
    let found = client
        .create_link(with_key(twin.clone(), &keys.creator))
        .await
        .expect("create")
        .into_inner();
    grpc_receipt(&found, &code);
    let batch = client
        .batch_create_links(with_key(
            pb::BatchCreateLinksRequest {
                items: vec![twin, crate::helpers::create("https://example.com/batch")],
            },
            &keys.creator,
        ))
        .await
        .expect("batch")
        .into_inner();
    match batch.results[0].outcome.as_ref() {
        Some(pb::batch_create_result::Outcome::Link(link)) => grpc_receipt(link, &code),
        other => panic!("{other:?}"),
    }
    match batch.results[1].outcome.as_ref() {
        Some(pb::batch_create_result::Outcome::Link(link)) => {
            assert_eq!(link.url, "https://example.com/batch");
            assert!(link.created_at.is_some());
        }
        other => panic!("{other:?}"),
    }
}
on_both_stores!(writes_without_links_read_answer_no_more_than_the_code);
