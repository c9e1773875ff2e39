//! Bad input is refused with a clear error, changes nothing, and the node keeps serving
//! (invariant I6); the same bad input gets the same outcome over HTTP and gRPC.

use crate::helpers::{API_KEY, Backend, Node, Stack, authed, create};
use chrono::{Duration as ChronoDuration, Utc};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::json;
use tonic::Code;

/// Sends `body` as a create with `content_type` (none if empty); returns the status and the
/// JSON error code, after checking the error has a message.
async fn post_create(node: &Node, body: &str, content_type: &str) -> (u16, String) {
    let mut request = node
        .client
        .post(format!("{}/api/v1/links", node.base))
        .bearer_auth(API_KEY)
        .body(body.to_string());
    if !content_type.is_empty() {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let json: serde_json::Value = response.json().await.unwrap_or_default();
    assert!(
        json["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body:.80}: {json}"
    );
    (status, json["error"].as_str().unwrap_or("").to_string())
}

async fn bad_input_is_refused_and_nothing_is_stored(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let past = (Utc::now() - ChronoDuration::hours(1)).to_rfc3339();
    let long_url =
        json!({ "url": format!("https://example.com/{}", "a".repeat(2100)) }).to_string();
    let long_body = format!(r#"{{"url": "https://example.com/{}"}}"#, "a".repeat(20_000));
    let long_alias =
        json!({ "url": "https://example.com/", "alias": "x".repeat(65) + "-" }).to_string();
    let past_expiry = json!({ "url": "https://example.com/", "expires_at": past }).to_string();
    const JSON: &str = "application/json";
    // (body, content type, status, error code)
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, u16, &str)> = vec![
        (r#"{"url": "javascript:alert(1)"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": " javascript:alert(1)"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "java\tscript:alert(1)"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "JaVaScRiPt:alert(1)"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "data:text/html,<script>alert(1)</script>"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "file:///etc/passwd"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "ftp://example.com/x"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://example.com/\r\nSet-Cookie: x=y"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://example.com/\nx"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://example.com/%0d%0aSet-Cookie:x=y"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://example.com/%00"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://user:pass@example.com/"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "https://sho.rt/abcdefg"}"#, JSON, 422, "invalid_url"),
        (&long_url, JSON, 422, "invalid_url"),
        (r#"{"url": ""}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "example.com"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "/relative/path"}"#, JSON, 422, "invalid_url"),
        (r#"{"url": "http://"}"#, JSON, 422, "invalid_url"),
        ("not json", JSON, 400, "invalid_json"),
        ("", JSON, 400, "invalid_json"),
        ("[]", JSON, 400, "invalid_json"),
        (r#"{"url": 42}"#, JSON, 400, "invalid_json"),
        (r#"{"url": "https://example.com/", "dedup": "yes"}"#, JSON, 400, "invalid_json"),
        (r#"{"url": "https://example.com/", "colour": "red"}"#, JSON, 400, "invalid_json"),
        (r#"{"alias": "no-url"}"#, JSON, 400, "invalid_json"),
        (r#"{"url": "https://example.com/", "alias": "a/b"}"#, JSON, 422, "invalid_alias"),
        (r#"{"url": "https://example.com/", "alias": "api"}"#, JSON, 422, "invalid_alias"),
        (r#"{"url": "https://example.com/", "alias": "metrics"}"#, JSON, 422, "invalid_alias"),
        (r#"{"url": "https://example.com/", "alias": "abcdefg"}"#, JSON, 422, "invalid_alias"),
        (r#"{"url": "https://example.com/", "alias": ""}"#, JSON, 422, "invalid_alias"),
        (&long_alias, JSON, 422, "invalid_alias"),
        (r#"{"url": "https://example.com/", "alias": "caf\u00e9-1"}"#, JSON, 422, "invalid_alias"),
        (&past_expiry, JSON, 422, "invalid_expiry"),
        (r#"{"url": "https://example.com/", "expires_at": "tomorrow"}"#, JSON, 422, "invalid_expiry"),
        (r#"{"url": "https://example.com/", "max_visits": 18446744073709551615}"#, JSON, 422, "invalid_max_visits"),
        (r#"{"url": "https://example.com/", "max_visits": 0}"#, JSON, 422, "invalid_max_visits"),
        (r#"{"url": "https://example.com/", "max_visits": -1}"#, JSON, 422, "invalid_max_visits"),
        (r#"{"url": "https://example.com/", "max_visits": 1.5}"#, JSON, 422, "invalid_max_visits"),
        (r#"{"url": "https://example.com/", "max_visits": "5"}"#, JSON, 400, "invalid_json"),
        (r#"{"url": "https://example.com/", "tags": ["Not OK"]}"#, JSON, 422, "invalid_tag"),
        (r#"{"url": "https://example.com/", "password": ""}"#, JSON, 422, "invalid_password"),
        (r#"{"url": "https://example.com/", "alias": "my-link", "private": true}"#, JSON, 422, "conflicting_options"),
        (r#"{"url": "https://example.com/", "dedup": true, "private": true}"#, JSON, 422, "conflicting_options"),
        (r#"{"url": "https://example.com/"}"#, "text/plain", 415, "unsupported_media_type"),
        (r#"{"url": "https://example.com/"}"#, "", 415, "unsupported_media_type"),
        (&long_body, JSON, 413, "payload_too_large"),
    ];
    assert!(cases.len() >= 30);
    for (body, content_type, status, error) in &cases {
        let got = post_create(&node, body, content_type).await;
        assert_eq!(got, (*status, error.to_string()), "body {body:.80}");
    }
    // Credentials.
    for auth in [
        None,
        Some("Bearer wrong-key-0123456789"),
        Some("Basic dXNlcjpwYXNz"),
    ] {
        let mut request = node
            .client
            .post(format!("{}/api/v1/links", node.base))
            .json(&json!({"url": "https://example.com/"}));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.expect("send");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        let json: serde_json::Value = response.json().await.expect("json");
        assert_eq!(json["error"], "unauthorized");
    }
    // A bad idempotency key.
    let (status, json) = node
        .create_with(
            json!({"url": "https://example.com/"}),
            &[("Idempotency-Key", &"k".repeat(300))],
        )
        .await;
    assert_eq!(
        (status.as_u16(), json["error"].as_str()),
        (400, Some("invalid_idempotency_key"))
    );
    assert_eq!(
        node.stored_links().await,
        0,
        "a refused request stored something"
    );
    // Paths that cannot be codes are 404 without touching the cache or the store; the node
    // keeps serving.
    let before = node.lookups_seen();
    for path in [
        "a/b",
        "..%2f..%2fetc",
        "%00",
        &"x".repeat(80),
        "abc.def",
        "api",
    ] {
        let response = node
            .client
            .get(format!("{}/{path}", node.base))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(
        node.lookups_seen(),
        before,
        "a path that cannot be a code was looked up"
    );
    assert_eq!(
        node.create_url("https://example.com/still-fine")
            .await
            .len(),
        7
    );
}
on_both_stores!(bad_input_is_refused_and_nothing_is_stored);

/// The gRPC code an HTTP status stands for, as the two transports map domain errors.
fn grpc_class(status: u16) -> Code {
    match status {
        400 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        404 => Code::NotFound,
        409 => Code::AlreadyExists,
        429 => Code::ResourceExhausted,
        503 => Code::Unavailable,
        other => panic!("no gRPC class for HTTP {other}"),
    }
}

/// One bad request, as each transport sends it.
enum Call {
    /// A create with these JSON fields (gRPC: the same fields) and `Idempotency-Key`.
    Create(serde_json::Value, Option<&'static str>),
    /// A get of this code (percent-encoded in the HTTP path), with or without the key.
    Get(&'static str, bool),
    /// A delete of this code.
    Delete(&'static str),
}

/// `fields` of a JSON create as the gRPC message of the same create.
fn grpc_create(fields: &serde_json::Value, idempotency_key: Option<&str>) -> pb::CreateLinkRequest {
    let expires_at = fields["expires_at"].as_str().map(|t| {
        let t = chrono::DateTime::parse_from_rfc3339(t).expect("test times are RFC 3339");
        prost_types::Timestamp {
            seconds: t.timestamp(),
            nanos: 0,
        }
    });
    pb::CreateLinkRequest {
        alias: fields["alias"].as_str().map(str::to_string),
        dedup: fields["dedup"].as_bool().unwrap_or(false),
        private: fields["private"].as_bool().unwrap_or(false),
        idempotency_key: idempotency_key.map(str::to_string),
        expires_at,
        ..create(fields["url"].as_str().unwrap_or(""))
    }
}

/// HTTP's status and error code for `call`.
async fn over_http(node: &Node, call: &Call) -> (u16, String) {
    let request = match call {
        Call::Create(fields, key) => {
            let request = node
                .client
                .post(format!("{}/api/v1/links", node.base))
                .bearer_auth(API_KEY)
                .json(fields);
            match key {
                Some(key) => request.header("idempotency-key", *key),
                None => request,
            }
        }
        Call::Get(code, with_key) => {
            let request = node
                .client
                .get(format!("{}/api/v1/links/{code}", node.base));
            if *with_key {
                request.bearer_auth(API_KEY)
            } else {
                request
            }
        }
        Call::Delete(code) => node
            .client
            .delete(format!("{}/api/v1/links/{code}", node.base))
            .bearer_auth(API_KEY),
    };
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let json: serde_json::Value = response.json().await.unwrap_or_default();
    (status, json["error"].as_str().unwrap_or("").to_string())
}

/// gRPC's code and `error-code` for `call`.
async fn over_grpc(node: &Node, call: &Call) -> (Code, String) {
    let mut client = node.links_client().await;
    let refused = match call {
        Call::Create(fields, key) => client
            .create_link(authed(grpc_create(fields, *key)))
            .await
            .map(drop),
        Call::Get(code, with_key) => {
            let message = pb::GetLinkRequest {
                code: code.to_string(),
                ..Default::default()
            };
            let request = if *with_key {
                authed(message)
            } else {
                tonic::Request::new(message)
            };
            client.get_link(request).await.map(drop)
        }
        Call::Delete(code) => client
            .delete_link(authed(pb::DeleteLinkRequest {
                code: code.to_string(),
                ..Default::default()
            }))
            .await
            .map(drop),
    }
    .expect_err("a bad request was accepted");
    let error = refused
        .metadata()
        .get("error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (refused.code(), error)
}

async fn the_same_bad_input_gets_the_same_outcome_over_http_and_grpc(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let (status, _) = node
        .create(json!({ "url": "https://example.com/", "alias": "taken-1" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let stored = node.stored_links().await;
    let past = (Utc::now() - ChronoDuration::hours(1)).to_rfc3339();
    let url = |extra: serde_json::Value| {
        let mut fields = json!({ "url": "https://example.com/" });
        fields
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        fields
    };
    let long_key: &'static str = "k".repeat(300).leak();
    let cases = [
        Call::Create(json!({ "url": "javascript:alert(1)" }), None),
        Call::Create(json!({ "url": "https://sho.rt/abcdefg" }), None),
        Call::Create(url(json!({ "alias": "api" })), None),
        Call::Create(url(json!({ "alias": "abcdefg" })), None),
        Call::Create(url(json!({ "alias": "taken-1" })), None),
        Call::Create(url(json!({ "alias": "my-link", "private": true })), None),
        Call::Create(url(json!({ "expires_at": past })), None),
        Call::Create(url(json!({})), Some(long_key)),
        Call::Get("api", true),
        Call::Get("caf\u{e9}-1", true),
        Call::Get("a b", true),
        Call::Get("zzzzzzz", true),
        Call::Get("zzzzzzz", false),
        Call::Delete("metrics"),
        Call::Delete("nosuch-1"),
    ];
    for call in &cases {
        let (status, http_error) = over_http(&node, call).await;
        let (code, grpc_error) = over_grpc(&node, call).await;
        assert_eq!(
            code,
            grpc_class(status),
            "HTTP {status} {http_error} but gRPC {code:?}"
        );
        assert_eq!(http_error, grpc_error, "HTTP {status} and gRPC {code:?}");
    }
    assert_eq!(
        node.stored_links().await,
        stored,
        "a refused request stored something"
    );
}
on_both_stores!(the_same_bad_input_gets_the_same_outcome_over_http_and_grpc);
