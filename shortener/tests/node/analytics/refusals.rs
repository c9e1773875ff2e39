//! Stats requests that are refused: bad ranges and parameters (400), another tenant's code
//! (404), a key without `stats:read` (403); none of them changes anything.

use super::get_with;
use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::json;
use shortener::access::{KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use std::time::Duration;
use tonic::Code;

async fn bad_stats_requests_are_refused_with_a_clear_error(backend: Backend) {
    let stack = Stack::new(backend).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    // And a key of the same tenant that may read links but not their stats.
    let reader = generate_api_key();
    let entry = KeyEntry {
        tenant: "acme".into(),
        name: "reader".into(),
        digest: digest(&reader),
        scopes: Scopes::parse_list("links:read").expect("scopes"),
        expires: None,
    };
    let text = std::fs::read_to_string(&path).expect("keys file") + &render(&entry);
    std::fs::write(&path, text).expect("write keys file");
    let mut config = stack.config("a");
    config.access.api_keys_file = Some(path);
    let node = Node::start(config).await;
    let (status, link) = node
        .create_with_key(json!({ "url": "https://example.com/refused" }), &keys.own)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let code = link["code"].as_str().expect("code").to_string();
    let (status, link) = node
        .create_with_key(json!({ "url": "https://example.com/theirs" }), &keys.other)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let theirs = link["code"].as_str().expect("code").to_string();
    assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        get_with(&node, &format!("/links/{code}/stats"), &keys.own)
            .await
            .1["totals"]["bot"]
            == 1
    })
    .await;
    assert!(counted, "the visit was never counted");
    let own = format!("/links/{code}/stats");
    let table: &[(&str, String, StatusCode, &str)] = &[
        (
            "from after to",
            format!("{own}?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z"),
            StatusCode::BAD_REQUEST,
            "invalid_range",
        ),
        (
            "range beyond retention",
            format!("{own}?from=2001-01-01T00:00:00Z"),
            StatusCode::BAD_REQUEST,
            "range_beyond_retention",
        ),
        (
            "unknown granularity",
            format!("{own}?granularity=minute"),
            StatusCode::BAD_REQUEST,
            "invalid_granularity",
        ),
        (
            "malformed from",
            format!("{own}?from=yesterday"),
            StatusCode::BAD_REQUEST,
            "invalid_time",
        ),
        (
            "malformed to",
            format!("{own}?to=2026-13-40T99:00:00Z"),
            StatusCode::BAD_REQUEST,
            "invalid_time",
        ),
        (
            "unknown parameter",
            format!("{own}?colour=red"),
            StatusCode::BAD_REQUEST,
            "invalid_query_parameter",
        ),
        (
            "top out of range",
            format!("{own}?top=0"),
            StatusCode::BAD_REQUEST,
            "invalid_query_parameter",
        ),
        (
            "unknown format",
            format!("{own}?format=xml"),
            StatusCode::BAD_REQUEST,
            "invalid_query_parameter",
        ),
        (
            "tag on one link",
            format!("{own}?tag=x"),
            StatusCode::BAD_REQUEST,
            "invalid_query_parameter",
        ),
        (
            "another tenant's code",
            format!("/links/{theirs}/stats"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "an unknown code",
            "/links/zzzzzzzz/stats".to_string(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "tenant summary, a domain it would not filter by",
            "/stats?domain=go.acme.example".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_query_parameter",
        ),
        (
            "tenant summary, bad range",
            "/stats?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_range",
        ),
    ];
    for (case, path, status, error) in table {
        let (got, body) = get_with(&node, path, &keys.own).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (*status, Some(*error)),
            "{case}: {body}"
        );
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{case}: {body}"
        );
    }
    // The same refusals over gRPC.
    let mut grpc = node.links_client().await;
    let at = |text: &str| {
        let t = chrono::DateTime::parse_from_rfc3339(text).expect("time");
        prost_types::Timestamp {
            seconds: t.timestamp(),
            nanos: 0,
        }
    };
    let range = |from: Option<&str>, to: Option<&str>, granularity: &str, top: u32| {
        Some(pb::StatsRange {
            from: from.map(at),
            to: to.map(at),
            granularity: granularity.into(),
            top,
        })
    };
    let grpc_cases = [
        (
            "from after to",
            code.clone(),
            range(
                Some("2026-02-01T00:00:00Z"),
                Some("2026-01-01T00:00:00Z"),
                "",
                0,
            ),
            &keys.own,
            Code::InvalidArgument,
        ),
        (
            "range beyond retention",
            code.clone(),
            range(Some("2001-01-01T00:00:00Z"), None, "", 0),
            &keys.own,
            Code::InvalidArgument,
        ),
        (
            "unknown granularity",
            code.clone(),
            range(None, None, "minute", 0),
            &keys.own,
            Code::InvalidArgument,
        ),
        (
            "top out of range",
            code.clone(),
            range(None, None, "", 101),
            &keys.own,
            Code::InvalidArgument,
        ),
        (
            "another tenant's code",
            theirs.clone(),
            None,
            &keys.own,
            Code::NotFound,
        ),
        (
            "a key without stats:read",
            code.clone(),
            None,
            &reader,
            Code::PermissionDenied,
        ),
    ];
    for (case, asked, range, key, want) in grpc_cases {
        let mut request = tonic::Request::new(pb::GetLinkStatsRequest {
            code: asked,
            range,
            ..Default::default()
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {key}").parse().expect("ascii"),
        );
        let status = grpc.get_link_stats(request).await.expect_err(case);
        assert_eq!(status.code(), want, "{case}: {status:?}");
        assert!(!status.message().is_empty(), "{case}");
    }

    // Scope: a key without stats:read is refused; the stats-only key may read stats.
    for path in [own.clone(), "/stats".to_string()] {
        let (status, body) = get_with(&node, &path, &reader).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert_eq!(body["error"], "forbidden");
    }
    let (status, body) = get_with(&node, &own, &keys.scopeless).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = get_with(&node, &own, "not-a-key-at-all-0123456789").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Nothing changed: the link's stats are as they were.
    let (_, body) = get_with(&node, &own, &keys.own).await;
    assert_eq!(body["totals"], json!({ "human": 0, "bot": 1, "head": 0 }));
}
on_both_stores!(bad_stats_requests_are_refused_with_a_clear_error);
