//! Bad input to YOURLS's API, from a table: each answered in YOURLS's error shape, naming
//! what is wrong, over GET and form POST, with nothing written.

use super::{get, json, post, yourls_node_with};
use crate::helpers::{Backend, Stack, metric};
use reqwest::StatusCode;
use serde_json::Value;

/// One bad request: its parameters (a signature is added unless given), the status, the
/// field that must be `expected`, and a word the message must hold.
struct Bad {
    params: Vec<(&'static str, String)>,
    status: StatusCode,
    field: &'static str,
    expected: Value,
    names: &'static str,
}

fn bad_cases(key: &str) -> Vec<Bad> {
    let case = |params: &[(&'static str, &str)], status, field, expected: Value, names| {
        let mut params: Vec<(&'static str, String)> =
            params.iter().map(|(n, v)| (*n, v.to_string())).collect();
        if !params.iter().any(|(n, _)| *n == "signature") {
            params.push(("signature", key.to_string()));
        }
        Bad {
            params,
            status,
            field,
            expected,
            names,
        }
    };
    let shorten = |url: &'static str, keyword: &'static str| {
        vec![("action", "shorturl"), ("url", url), ("keyword", keyword)]
    };
    let stale = (chrono::Utc::now().timestamp() - 3600).to_string();
    let stale: &'static str = Box::leak(stale.into_boxed_str());
    let long_title: &'static str = Box::leak("t".repeat(201).into_boxed_str());
    vec![
        case(
            &shorten("not a url", ""),
            StatusCode::BAD_REQUEST,
            "code",
            "error:nourl".into(),
            "url",
        ),
        case(
            &shorten("ftp://example.com/x", ""),
            StatusCode::BAD_REQUEST,
            "code",
            "error:nourl".into(),
            "url",
        ),
        case(
            &[("action", "shorturl")],
            StatusCode::BAD_REQUEST,
            "code",
            "error:nourl".into(),
            "url",
        ),
        case(
            &shorten("https://example.com/t", "yourls-taken"),
            StatusCode::OK,
            "code",
            "error:keyword".into(),
            "yourls-taken",
        ),
        case(
            &shorten("https://example.com/t", "api"),
            StatusCode::OK,
            "code",
            "error:keyword".into(),
            "keyword",
        ),
        case(
            &shorten("https://example.com/t", "bad keyword!"),
            StatusCode::OK,
            "code",
            "error:keyword".into(),
            "keyword",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("title", long_title),
            ],
            StatusCode::BAD_REQUEST,
            "status",
            "fail".into(),
            "title",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("signature", "not-a-key-at-all-0000"),
            ],
            StatusCode::FORBIDDEN,
            "errorCode",
            "403".into(),
            "signature",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("signature", ""),
            ],
            StatusCode::FORBIDDEN,
            "errorCode",
            "403".into(),
            "signature",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("timestamp", stale),
                ("signature", "0123456789abcdef0123456789abcdef"),
            ],
            StatusCode::FORBIDDEN,
            "errorCode",
            "403".into(),
            "timestamp",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("username", "admin"),
                ("password", "secret"),
            ],
            StatusCode::FORBIDDEN,
            "errorCode",
            "403".into(),
            "password",
        ),
        case(
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/t"),
                ("format", "jsonp"),
            ],
            StatusCode::BAD_REQUEST,
            "errorCode",
            "400".into(),
            "format",
        ),
        case(
            &[("action", "stats"), ("filter", "best")],
            StatusCode::BAD_REQUEST,
            "errorCode",
            "400".into(),
            "filter",
        ),
        case(
            &[("action", "stats"), ("limit", "many")],
            StatusCode::BAD_REQUEST,
            "errorCode",
            "400".into(),
            "limit",
        ),
    ]
}

async fn bad_input_is_answered_in_yourls_shape_and_writes_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let blocklist = stack.dir.path().join("blocked-domains");
    std::fs::write(&blocklist, ".phish.test\n").expect("write blocklist");
    let (node, keys) = yourls_node_with(&stack, "a", |c| {
        c.redirects.blocklist_file = Some(blocklist)
    })
    .await;
    let (status, _) = json(
        &node,
        &keys.own,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/x"),
            ("keyword", "yourls-taken"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let stored = node.stored_links().await;
    for bad in bad_cases(&keys.own) {
        let mut params: Vec<(&str, &str)> =
            bad.params.iter().map(|(n, v)| (*n, v.as_str())).collect();
        if !params.iter().any(|(n, _)| *n == "format") {
            params.push(("format", "json"));
        }
        for (via, (status, media, body)) in [
            ("get", get(&node, &params).await),
            ("post", post(&node, &params).await),
        ] {
            assert_eq!(status, bad.status, "{via} {params:?}: {body}");
            assert_eq!(media, "application/json", "{via} {params:?}");
            let answer: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(
                answer[bad.field], bad.expected,
                "{via} {params:?}: {answer}"
            );
            let message = answer["message"].as_str().unwrap_or_default();
            assert!(message.contains(bad.names), "{via} {params:?}: {message}");
        }
    }
    // The same refusals in the other formats: XML's elements, and no short URL in `simple`.
    let taken = [
        ("action", "shorturl"),
        ("url", "https://example.com/t"),
        ("keyword", "yourls-taken"),
        ("signature", keys.own.as_str()),
    ];
    let (status, media, body) = get(&node, &taken).await;
    assert_eq!(
        (status, media.as_str()),
        (StatusCode::OK, "application/xml")
    );
    assert!(
        body.contains("<status>fail</status><code>error:keyword</code>"),
        "{body}"
    );
    let simple = [&taken[..], &[("format", "simple")]].concat();
    let (status, _, body) = get(&node, &simple).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, ""));
    let (status, _, body) = get(
        &node,
        &[("action", "db-stats"), ("signature", "wrong-key-000000000")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("<errorCode>403</errorCode>"), "{body}");
    assert_eq!(
        node.stored_links().await,
        stored,
        "a refused request wrote a link"
    );
    let metrics = node.metrics().await;
    let refused = "shortener_compat_requests_total{dialect=\"yourls\",action=\"shorturl\",outcome=\"unauthenticated\"}";
    assert_eq!(metric(&metrics, refused), 8.0);
}
on_both_stores!(bad_input_is_answered_in_yourls_shape_and_writes_nothing);
