//! Bad input to Shlink's API: each refused with `invalid-data` naming its field, nothing
//! written.

use super::{assert_problem, call, shlink_node};
use crate::helpers::{Backend, Stack};
use reqwest::Method;
use serde_json::{Value, json};

async fn bad_input_is_refused_naming_its_field(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = shlink_node(&stack, "a").await;
    let key = Some(keys.own.as_str());
    let (status, _, _) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        key,
        Some(json!({"longUrl": "https://example.com/kept", "customSlug": "kept"})),
    )
    .await;
    assert_eq!(status, 200);
    let stored = node.stored_links().await;
    let creates: Vec<(Value, &str)> = vec![
        (json!({}), "longUrl"),
        (json!({"longUrl": ""}), "longUrl"),
        (json!({"longUrl": 5}), "longUrl"),
        (json!({"longUrl": "not a url"}), "longUrl"),
        (json!({"longUrl": "ftp://example.com/x"}), "longUrl"),
        (json!({"longUrl": "http://127.0.0.1/x"}), "longUrl"),
        (
            json!({"longUrl": "https://example.com/x", "customSlug": "bad slug!"}),
            "customSlug",
        ),
        (
            json!({"longUrl": "https://example.com/x", "customSlug": "rest"}),
            "customSlug",
        ),
        (
            json!({"longUrl": "https://example.com/x", "tags": "one"}),
            "tags",
        ),
        (
            json!({"longUrl": "https://example.com/x", "tags": ["q&a"]}),
            "tags",
        ),
        (
            json!({"longUrl": "https://example.com/x", "validUntil": "tomorrow"}),
            "validUntil",
        ),
        (
            json!({"longUrl": "https://example.com/x", "validUntil": "2001-01-01T00:00:00+00:00"}),
            "validUntil",
        ),
        (
            json!({"longUrl": "https://example.com/x", "validSince": "2099-01-01T00:00:00+00:00"}),
            "validSince",
        ),
        (
            json!({"longUrl": "https://example.com/x", "maxVisits": 0}),
            "maxVisits",
        ),
        (
            json!({"longUrl": "https://example.com/x", "maxVisits": "ten"}),
            "maxVisits",
        ),
        (
            json!({"longUrl": "https://example.com/x", "crawlable": true}),
            "crawlable",
        ),
        (
            json!({"longUrl": "https://example.com/x", "shortCodeLength": 8}),
            "shortCodeLength",
        ),
        (
            json!({"longUrl": "https://example.com/x", "shortCodeLength": 0}),
            "shortCodeLength",
        ),
        (
            json!({"longUrl": "https://example.com/x", "shortCodeLength": "seven"}),
            "shortCodeLength",
        ),
        (
            json!({"longUrl": "https://example.com/x", "title": "t".repeat(201)}),
            "title",
        ),
        (
            json!({"longUrl": "https://example.com/x", "domain": "not a host"}),
            "domain",
        ),
        (
            json!({"longUrl": "https://example.com/x", "domain": "not-mine.example"}),
            "domain",
        ),
        (
            json!({"longUrl": "https://example.com/x", "deviceLongUrls": {"desktop": "https://example.com/d"}}),
            "deviceLongUrls",
        ),
        (json!(["not", "an", "object"]), "body"),
    ];
    for (body, field) in creates {
        let answer = call(
            &node,
            Method::POST,
            "/v3/short-urls",
            key,
            Some(body.clone()),
        )
        .await;
        assert_problem(&answer, 400, "invalid-data");
        assert_eq!(
            answer.2["invalidElements"],
            json!([field]),
            "{body}: {}",
            answer.2
        );
    }
    // JSON with a slip in it: the detail says where.
    let response = node
        .client
        .post(format!("{}/rest/v3/short-urls", node.base))
        .header("x-api-key", &keys.own)
        .header("content-type", "application/json")
        .body(r#"{"longUrl": "https://example.com/x",}"#)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 400);
    let problem: Value = response.json().await.expect("json");
    assert_eq!(problem["invalidElements"], json!(["body"]), "{problem}");
    assert_eq!(
        problem["detail"], "the body is not valid JSON: trailing comma at line 1 column 37",
        "{problem}"
    );
    assert_eq!(node.stored_links().await, stored);

    // Edits and rules refused leave the link as it was.
    let (_, _, before) = call(&node, Method::GET, "/v3/short-urls/kept", key, None).await;
    let edits: Vec<(&str, Value, &str)> = vec![
        ("", json!({"longUrl": null}), "longUrl"),
        ("", json!({"longUrl": "javascript:alert(1)"}), "longUrl"),
        (
            "",
            json!({"validUntil": "2001-01-01T00:00:00+00:00"}),
            "validUntil",
        ),
        ("", json!({"tags": [1]}), "tags"),
        (
            "/redirect-rules",
            json!({"redirectRules": "none"}),
            "redirectRules",
        ),
        (
            "/redirect-rules",
            json!({"redirectRules": [{"longUrl": "https://example.com/c", "conditions": [{"type": "geolocation-city-name", "matchKey": null, "matchValue": "Paris"}]}]}),
            "redirectRules[0].conditions[0]",
        ),
        (
            "/redirect-rules",
            json!({"redirectRules": [{"longUrl": "https://example.com/c", "conditions": [{"type": "device", "matchKey": null, "matchValue": "toaster"}]}]}),
            "redirectRules[0].conditions[0]",
        ),
        // A device of ours that Shlink has not: its rule would be hidden from every GET.
        (
            "/redirect-rules",
            json!({"redirectRules": [{"longUrl": "https://example.com/c", "conditions": [{"type": "device", "matchKey": null, "matchValue": "tablet"}]}]}),
            "redirectRules[0].conditions[0]",
        ),
        (
            "/redirect-rules",
            json!({"redirectRules": [{"longUrl": "not a url", "conditions": [{"type": "language", "matchKey": null, "matchValue": "de"}]}]}),
            "redirectRules",
        ),
    ];
    for (suffix, body, field) in edits {
        let method = if suffix.is_empty() {
            Method::PATCH
        } else {
            Method::POST
        };
        let answer = call(
            &node,
            method,
            &format!("/v3/short-urls/kept{suffix}"),
            key,
            Some(body.clone()),
        )
        .await;
        assert_problem(&answer, 400, "invalid-data");
        assert_eq!(
            answer.2["invalidElements"],
            json!([field]),
            "{body}: {}",
            answer.2
        );
    }
    let (_, _, after) = call(&node, Method::GET, "/v3/short-urls/kept", key, None).await;
    assert_eq!(after, before);

    // List parameters.
    let many_tags: Vec<String> = (0..101).map(|i| format!("tags%5B%5D=t{i}")).collect();
    let many_tags = many_tags.join("&");
    for (query, field) in [
        ("itemsPerPage=0", "itemsPerPage"),
        ("itemsPerPage=ten", "itemsPerPage"),
        ("page=0", "page"),
        ("page=1000&itemsPerPage=100", "page"),
        ("orderBy=visits-UP", "orderBy"),
        ("orderBy=colour-ASC", "orderBy"),
        ("tagsMode=some", "tagsMode"),
        ("startDate=yesterday", "startDate"),
        ("domain=not%20a%20host", "domain"),
        (many_tags.as_str(), "tags"),
    ] {
        let answer = call(
            &node,
            Method::GET,
            &format!("/v3/short-urls?{query}"),
            key,
            None,
        )
        .await;
        assert_problem(&answer, 400, "invalid-data");
        assert_eq!(
            answer.2["invalidElements"],
            json!([field]),
            "{query}: {}",
            answer.2
        );
    }
    // The legacy shorten's format.
    let answer = node
        .client
        .get(format!("{}/rest/v3/short-urls/shorten", node.base))
        .query(&[
            ("apiKey", keys.own.as_str()),
            ("longUrl", "https://example.com/f"),
            ("format", "xml"),
        ])
        .send()
        .await
        .expect("send");
    assert_eq!(answer.status(), 400);
    // A code that is not UTF-8 once decoded is no code: not found in Shlink's shape, after the
    // key check (without a key: unauthenticated, as for any code); a long one is said back cut.
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        let body = (method == Method::PATCH).then(|| json!({ "title": "t" }));
        let answer = call(
            &node,
            method.clone(),
            "/v3/short-urls/%FF",
            key,
            body.clone(),
        )
        .await;
        assert_problem(&answer, 404, "short-url-not-found");
        let answer = call(&node, method, "/v3/short-urls/%FF", None, body).await;
        assert_eq!(answer.0, 401, "{}", answer.2);
    }
    for path in [
        "/v3/short-urls/%FF/visits",
        "/v3/short-urls/%FF/redirect-rules",
    ] {
        assert_problem(
            &call(&node, Method::GET, path, key, None).await,
            404,
            "short-url-not-found",
        );
    }
    let long = "a".repeat(3000);
    let answer = call(
        &node,
        Method::GET,
        &format!("/v3/short-urls/{long}"),
        key,
        None,
    )
    .await;
    assert_problem(&answer, 404, "short-url-not-found");
    assert!(answer.2.to_string().len() < 1000, "{}", answer.2);
    // A body past the bound is 413, as the JSON API answers it, in Shlink's shape.
    let huge = json!({ "longUrl": format!("https://example.com/{}", "a".repeat(70_000)) });
    let (status, media, body) = call(&node, Method::POST, "/v3/short-urls", key, Some(huge)).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(media, "application/problem+json", "{body}");
    assert_eq!(body["status"], 413, "{body}");
    assert_eq!(node.stored_links().await, stored);
    // A number in a string is Shlink's number (`is_numeric`), as "ten" above is not.
    let (status, _, made) = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        key,
        Some(json!({"longUrl": "https://example.com/five", "maxVisits": "5"})),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(made["meta"]["maxVisits"], 5, "{made}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_its_field_on_sqlite() {
    bad_input_is_refused_naming_its_field(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_its_field_on_postgres() {
    bad_input_is_refused_naming_its_field(Backend::Postgres).await;
}
