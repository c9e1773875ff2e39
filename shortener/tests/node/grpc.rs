//! The gRPC API: the same create, get and delete as the JSON API, batches, and health and
//! reflection on the same port.

use crate::helpers::{Backend, Stack, authed, create};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use tonic::Code;

async fn grpc_create_get_delete_and_batch(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut client = node.links_client().await;

    let link = client
        .create_link(authed(create("https://example.com/grpc")))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(link.code.len(), 7);
    assert_eq!(link.url, "https://example.com/grpc");
    assert_eq!(link.short_url, format!("https://sho.rt/{}", link.code));
    assert_eq!(
        node.visit(&link.code).await.headers()["location"],
        "https://example.com/grpc"
    );

    let got = client
        .get_link(authed(pb::GetLinkRequest {
            code: link.code.clone(),
            ..Default::default()
        }))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.code, link.code);
    assert!(got.deleted_at.is_none());

    // Alias, dedup, private, expiry and idempotency behave as over HTTP.
    let alias = pb::CreateLinkRequest {
        alias: Some("grpc-alias".into()),
        ..create("https://example.com/a")
    };
    assert_eq!(
        client
            .create_link(authed(alias.clone()))
            .await
            .expect("alias")
            .into_inner()
            .code,
        "grpc-alias"
    );
    let taken = client.create_link(authed(alias)).await.expect_err("taken");
    assert_eq!(taken.code(), Code::AlreadyExists);
    let dedup = pb::CreateLinkRequest {
        dedup: true,
        ..create("https://example.com/d")
    };
    let d1 = client
        .create_link(authed(dedup.clone()))
        .await
        .expect("dedup")
        .into_inner();
    let d2 = client
        .create_link(authed(dedup))
        .await
        .expect("dedup")
        .into_inner();
    assert_eq!(d1.code, d2.code);
    let private = pb::CreateLinkRequest {
        private: true,
        ..create("https://example.com/p")
    };
    assert_eq!(
        client
            .create_link(authed(private))
            .await
            .expect("private")
            .into_inner()
            .code
            .len(),
        16
    );
    let idem = pb::CreateLinkRequest {
        idempotency_key: Some("k-1".into()),
        ..create("https://example.com/i")
    };
    let i1 = client
        .create_link(authed(idem.clone()))
        .await
        .expect("idem")
        .into_inner();
    let i2 = client
        .create_link(authed(idem))
        .await
        .expect("idem")
        .into_inner();
    assert_eq!(i1.code, i2.code);
    let past = pb::CreateLinkRequest {
        expires_at: Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 0,
        }),
        ..create("https://example.com/e")
    };
    assert_eq!(
        client
            .create_link(authed(past))
            .await
            .expect_err("past")
            .code(),
        Code::InvalidArgument
    );

    // Errors follow gRPC conventions and carry the machine code.
    let bad = client
        .create_link(authed(create("javascript:alert(1)")))
        .await
        .expect_err("bad url");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(
        bad.metadata()
            .get("error-code")
            .and_then(|v| v.to_str().ok()),
        Some("invalid_url")
    );
    let unauth = client
        .create_link(tonic::Request::new(create("https://example.com/")))
        .await
        .expect_err("no key");
    assert_eq!(unauth.code(), Code::Unauthenticated);
    let missing = client
        .get_link(authed(pb::GetLinkRequest {
            code: "zzzzzzz".into(),
            ..Default::default()
        }))
        .await
        .expect_err("missing");
    assert_eq!(missing.code(), Code::NotFound);

    client
        .delete_link(authed(pb::DeleteLinkRequest {
            code: link.code.clone(),
            ..Default::default()
        }))
        .await
        .expect("delete");
    assert_eq!(node.visit(&link.code).await.status(), StatusCode::GONE);
    let deleted = client
        .get_link(authed(pb::GetLinkRequest {
            code: link.code.clone(),
            ..Default::default()
        }))
        .await
        .expect("get")
        .into_inner();
    assert!(deleted.deleted_at.is_some());

    // A batch: one bad item does not fail the others; results keep request order.
    let items = vec![
        create("https://example.com/b/1"),
        create("ftp://example.com/nope"),
        pb::CreateLinkRequest {
            alias: Some("grpc-alias".into()),
            ..create("https://example.com/b/taken")
        },
        create("https://example.com/b/4"),
    ];
    let results = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items }))
        .await
        .expect("batch")
        .into_inner()
        .results;
    assert_eq!(results.len(), 4);
    let outcome = |i: usize| results[i].outcome.clone().expect("outcome");
    use pb::batch_create_result::Outcome;
    assert!(matches!(outcome(0), Outcome::Link(l) if l.url == "https://example.com/b/1"));
    assert!(
        matches!(outcome(1), Outcome::Error(e) if e.status == Code::InvalidArgument as i32 && e.error == "invalid_url")
    );
    assert!(
        matches!(outcome(2), Outcome::Error(e) if e.status == Code::AlreadyExists as i32 && e.error == "alias_taken")
    );
    let Outcome::Link(fourth) = outcome(3) else {
        panic!("item 4 failed: {:?}", outcome(3))
    };
    assert_eq!(
        node.visit(&fourth.code).await.headers()["location"],
        "https://example.com/b/4"
    );
    let empty = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: vec![] }))
        .await
        .expect_err("empty");
    assert_eq!(empty.code(), Code::InvalidArgument);
    let too_many = vec![create("https://example.com/x"); 1001];
    let over = client
        .batch_create_links(authed(pb::BatchCreateLinksRequest { items: too_many }))
        .await
        .expect_err("over");
    assert_eq!(over.code(), Code::InvalidArgument);

    // Health and reflection on the same port.
    let status = node
        .health_client()
        .await
        .check(tonic_health::pb::HealthCheckRequest {
            service: "shortener.v1.Links".into(),
        })
        .await
        .expect("health")
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}
on_both_stores!(grpc_create_get_delete_and_batch);

/// A URL as long as `SHORTENER_MAX_URL_LENGTH` allows is taken by a JSON create and patch as
/// by a gRPC create: both transports read a link's body by the same bound; one byte past the
/// limit is refused by both, as a URL too long rather than a body too large.
#[tokio::test]
async fn a_url_the_limit_allows_is_taken_over_both_transports() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("long");
    config.redirects.max_url_length = 65_536;
    let node = crate::helpers::Node::start(config).await;
    let url = |len: usize| {
        let head = "https://example.com/";
        format!("{head}{}", "a".repeat(len - head.len()))
    };
    let (longest, over) = (url(65_536), url(65_537));

    let response = node
        .api(reqwest::Method::POST, "/links")
        .json(&serde_json::json!({"url": longest}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::CREATED);
    let made: serde_json::Value = response.json().await.expect("json");
    let code = made["code"].as_str().expect("code");
    let response = node
        .api(reqwest::Method::PATCH, &format!("/links/{code}"))
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::json!({"url": url(65_000)}).to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::OK);
    let response = node
        .api(reqwest::Method::POST, "/links")
        .json(&serde_json::json!({"url": over}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let refused: serde_json::Value = response.json().await.expect("json");
    assert_eq!(refused["error"], "invalid_url", "{refused}");

    let mut client = node.links_client().await;
    let link = client
        .create_link(authed(create(&longest)))
        .await
        .expect("a gRPC create at the limit")
        .into_inner();
    assert_eq!(link.url.len(), 65_536);
    let refused = client
        .create_link(authed(create(&over)))
        .await
        .expect_err("over the limit");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
}
