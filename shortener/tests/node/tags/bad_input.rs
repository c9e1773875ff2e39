//! Bad input to `PATCH` and `DELETE /api/v1/tags/{tag}`: a table of bodies, media types and
//! paths, each refused with its status and code and nothing changed.

use super::{call, delete, make, node_with, stored};
use crate::helpers::{Backend, Stack};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A path's tag, the content type and body sent, and the status and error code expected.
type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, u16, &'a str);

async fn bad_input_is_refused_with_nothing_changed(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |_| {}).await;
    let w = keys.writer.as_str();
    let codes = [
        make(&node, w, &["keep"]).await,
        make(&node, w, &["keep", "b"]).await,
    ];
    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
    let before = stored(&node, &codes).await;
    let big = format!("{{\"name\": \"{}\"}}", "a".repeat(70_000));
    let cases: &[Case] = &[
        (
            "keep",
            Some("application/json"),
            Some("not json"),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("application/json"),
            Some("{}"),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("application/json"),
            Some("[]"),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": 5}"#),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": null}"#),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": "new", "tags": []}"#),
            400,
            "invalid_json",
        ),
        (
            "keep",
            Some("text/plain"),
            Some(r#"{"name": "new"}"#),
            415,
            "unsupported_media_type",
        ),
        (
            "keep",
            None,
            Some(r#"{"name": "new"}"#),
            415,
            "unsupported_media_type",
        ),
        (
            "keep",
            Some("application/json"),
            Some(&big),
            413,
            "payload_too_large",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": ""}"#),
            422,
            "invalid_tag",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": "Upper"}"#),
            422,
            "invalid_tag",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": "sp ace"}"#),
            422,
            "invalid_tag",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": "-lead"}"#),
            422,
            "invalid_tag",
        ),
        (
            "keep",
            Some("application/json"),
            Some(r#"{"name": "caf\u00e9"}"#),
            422,
            "invalid_tag",
        ),
        (
            "keep",
            Some("application/json"),
            Some(&format!(r#"{{"name": "{}"}}"#, "a".repeat(65))),
            422,
            "invalid_tag",
        ),
        // A tag no link could carry is on no link.
        (
            "KEEP",
            Some("application/json"),
            Some(r#"{"name": "new"}"#),
            404,
            "not_found",
        ),
        (
            "%FF",
            Some("application/json"),
            Some(r#"{"name": "new"}"#),
            404,
            "not_found",
        ),
    ];
    for (tag, media, body, status, error) in cases {
        let mut request = node
            .client
            .patch(format!("{}/api/v1/tags/{tag}", node.base))
            .bearer_auth(w);
        if let Some(media) = media {
            request = request.header("content-type", *media);
        }
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let response = request.send().await.expect("send");
        let got = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let shown = body.map(|b| b.chars().take(60).collect::<String>());
        assert_eq!(
            (got, answer["error"].as_str()),
            (*status, Some(*error)),
            "{tag} {shown:?}: {answer}"
        );
        assert_eq!(
            stored(&node, &codes).await,
            before,
            "{tag} {shown:?} changed something"
        );
    }
    for tag in ["KEEP", "%FF", "has%20space"] {
        assert_eq!(
            delete(&node, w, tag).await.0,
            StatusCode::NOT_FOUND,
            "{tag}"
        );
    }
    // Other methods on the path.
    for method in [Method::GET, Method::POST, Method::PUT] {
        let (status, _) = call(&node, method.clone(), "keep", w, None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
    assert_eq!(stored(&node, &codes).await, before);
}
on_both_stores!(bad_input_is_refused_with_nothing_changed);
