//! Bad input to Bitly's API, from a table: each answered in Bitly's error shape (`message`,
//! the field at fault in `errors`), with nothing written; past the key's rate a shorten is
//! Bitly's `429` with `Retry-After`.

use super::{assert_error, bitly_node, call};
use crate::helpers::{Backend, Stack, metric};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// One bad request: method, path under `/v4`, body, then Bitly's message and the field and
/// `error_code` it names.
struct Bad {
    method: Method,
    path: String,
    body: Option<Value>,
    message: &'static str,
    field: &'static str,
    error_code: &'static str,
}

fn cases(code: &str) -> Vec<Bad> {
    let shorten = |body: Value, message, field, error_code| Bad {
        method: Method::POST,
        path: "/shorten".into(),
        body: Some(body),
        message,
        field,
        error_code,
    };
    let read = |path: String, message, field| Bad {
        method: Method::GET,
        path,
        body: None,
        message,
        field,
        error_code: "invalid",
    };
    const URL: &str = "INVALID_ARG_LONG_URL";
    vec![
        shorten(json!({}), URL, "long_url", "missing"),
        shorten(json!({ "long_url": "" }), URL, "long_url", "missing"),
        shorten(json!({ "long_url": 5 }), URL, "long_url", "invalid"),
        shorten(
            json!({ "long_url": "not a url" }),
            URL,
            "long_url",
            "invalid",
        ),
        shorten(
            json!({ "long_url": "ftp://example.com/x" }),
            URL,
            "long_url",
            "invalid",
        ),
        shorten(
            json!({ "long_url": "https://www.evil.example/x" }),
            URL,
            "long_url",
            "invalid",
        ),
        shorten(
            json!({ "long_url": format!("https://example.com/{}", "x".repeat(10_000)) }),
            URL,
            "long_url",
            "invalid",
        ),
        shorten(
            json!({ "long_url": "https://example.com/d", "domain": "go.globex.example" }),
            "INVALID_ARG_DOMAIN",
            "domain",
            "invalid",
        ),
        shorten(
            json!({ "long_url": "https://example.com/d", "domain": "not a host" }),
            "INVALID_ARG_DOMAIN",
            "domain",
            "invalid",
        ),
        shorten(
            json!({ "long_url": "https://example.com/g", "group_guid": "globex" }),
            "INVALID_ARG_GROUP_GUID",
            "group_guid",
            "invalid",
        ),
        Bad {
            method: Method::POST,
            path: "/expand".into(),
            body: Some(json!({})),
            message: "INVALID_ARG_BITLINK",
            field: "bitlink_id",
            error_code: "missing",
        },
        Bad {
            method: Method::POST,
            path: "/expand".into(),
            body: Some(json!({ "bitlink_id": code })),
            message: "INVALID_ARG_BITLINK",
            field: "bitlink_id",
            error_code: "invalid",
        },
        read(
            "/bitlinks/sho.rt/bad%20code!".into(),
            "INVALID_ARG_BITLINK",
            "bitlink",
        ),
        // Not UTF-8 once decoded: no bitlink, said in Bitly's shape after the key check.
        read(
            "/bitlinks/sho.rt/%FF".into(),
            "INVALID_ARG_BITLINK",
            "bitlink",
        ),
        read(
            format!("/bitlinks/not%20a%20host/{code}"),
            "INVALID_ARG_BITLINK",
            "bitlink",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks?unit=minute"),
            "INVALID_ARG_UNIT",
            "unit",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks?unit=year"),
            "INVALID_ARG_UNIT",
            "unit",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks?units=0"),
            "INVALID_ARG_UNITS",
            "units",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks?units=many"),
            "INVALID_ARG_UNITS",
            "units",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks/summary?unit_reference=yesterday"),
            "INVALID_ARG_UNIT_REFERENCE",
            "unit_reference",
        ),
        // Years chrono reads but no unit can be stepped from (it would overflow).
        read(
            format!(
                "/bitlinks/sho.rt/{code}/clicks?unit=hour&units=1&unit_reference=%2B262143-12-31T23:00:00%2B0000"
            ),
            "INVALID_ARG_UNIT_REFERENCE",
            "unit_reference",
        ),
        read(
            format!(
                "/bitlinks/sho.rt/{code}/clicks?units=2&unit_reference=-262144-01-01T00:00:00%2B0000"
            ),
            "INVALID_ARG_UNIT_REFERENCE",
            "unit_reference",
        ),
        read(
            format!("/bitlinks/sho.rt/{code}/clicks?unit_reference=10000-01-01T00:00:00%2B0000"),
            "INVALID_ARG_UNIT_REFERENCE",
            "unit_reference",
        ),
    ]
}

async fn bad_input_is_refused_in_bitlys_shape(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = bitly_node(&stack, "a", |_| {}).await;
    let key = keys.own.as_str();
    let code = node.create_url("https://example.com/kept").await;
    let stored = node.stored_links().await;
    for bad in cases(&code) {
        let (status, _, body) = call(
            &node,
            bad.method.clone(),
            &bad.path,
            Some(key),
            bad.body.clone(),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{} {:?}: {body}",
            bad.path,
            bad.body
        );
        assert_error(&body, bad.message);
        assert_eq!(
            body["errors"],
            json!([{ "field": bad.field, "error_code": bad.error_code }]),
            "{} {:?}",
            bad.path,
            bad.body
        );
    }
    // A body that is not JSON, or JSON with a slip in it: the description says where.
    for (text, said) in [
        (
            "long_url=https://example.com/form",
            "the body is not valid JSON: expected value at line 1 column 1",
        ),
        (
            r#"{"long_url": "https://example.com/x",}"#,
            "the body is not valid JSON: trailing comma at line 1 column 38",
        ),
    ] {
        let response = node
            .client
            .post(format!("{}/v4/shorten", node.base))
            .bearer_auth(key)
            .body(text)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: Value = response.json().await.expect("json");
        assert_error(&body, "INVALID_ARG_LONG_URL");
        assert_eq!(body["description"], said, "{text}");
    }
    // A body past the bound is 413, as the JSON API answers it, in Bitly's shape.
    let huge = json!({ "long_url": format!("https://example.com/{}", "a".repeat(70_000)) });
    let (status, _, body) = call(&node, Method::POST, "/shorten", Some(key), Some(huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_error(&body, "PAYLOAD_TOO_LARGE");
    assert_eq!(node.stored_links().await, stored);
    let metrics = node.metrics().await;
    let invalid =
        "shortener_compat_requests_total{dialect=\"bitly\",action=\"shorten\",outcome=\"invalid\"}";
    assert_eq!(metric(&metrics, invalid), 13.0);
}
on_both_stores!(bad_input_is_refused_in_bitlys_shape);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_rate_limit_applies() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = bitly_node(&stack, "a", |c| {
        (
            c.limits.create_rate,
            c.limits.create_burst,
            c.limits.batch_limit,
        ) = (1, 1, 1);
    })
    .await;
    let body = |n: u32| Some(json!({ "long_url": format!("https://example.com/limited/{n}") }));
    let (status, _, _) = call(&node, Method::POST, "/shorten", Some(&keys.own), body(1)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, retry, refused) =
        call(&node, Method::POST, "/shorten", Some(&keys.own), body(2)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert!(retry.is_some_and(|r| r.parse::<u64>().is_ok_and(|s| s >= 1)));
    assert_error(&refused, "RATE_LIMIT_EXCEEDED");
    assert_eq!(node.stored_links().await, 1);
    let metrics = node.metrics().await;
    let limited = "shortener_compat_requests_total{dialect=\"bitly\",action=\"shorten\",outcome=\"rate_limited\"}";
    assert_eq!(metric(&metrics, limited), 1.0);
}

/// A public URL with a path: a bitlink's id holds it, and reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_url_with_a_path_makes_ids_that_read_back() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = bitly_node(&stack, "a", |c| {
        c.listeners.public_url = Some("https://example.net/s/".into());
    })
    .await;
    let body = Some(json!({ "long_url": "https://example.com/pathed" }));
    let (status, _, made) = call(&node, Method::POST, "/shorten", Some(&keys.own), body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["id"].as_str().expect("id");
    assert!(id.starts_with("example.net/s/"), "{made}");
    let (status, _, read) = call(
        &node,
        Method::GET,
        &format!("/bitlinks/{id}"),
        Some(&keys.own),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["long_url"], "https://example.com/pathed");
}
