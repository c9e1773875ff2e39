//! Tenants and scoped keys: every operation checks tenant and scope, over HTTP and gRPC alike;
//! another tenant's link answers as an unknown code does, and a refused call changes nothing.

use crate::helpers::{Backend, Node, Stack};
use chrono::{Duration as ChronoDuration, Utc};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::json;
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use shortener::store::LinkStore;
use std::path::Path;
use tonic::Code;

/// The keys of the table: who holds them and what they may do.
pub struct TenantKeys {
    /// Tenant `acme`, every scope but admin.
    pub own: String,
    /// Tenant `globex`, every scope but admin.
    pub other: String,
    /// Tenant `acme`, `stats:read` only: no links scope.
    pub scopeless: String,
    /// Tenant `acme`, `links:create` only: makes links, reads none.
    pub creator: String,
    /// Tenant `acme`, every scope but admin, expired an hour ago.
    pub expired: String,
    /// Tenant `ops`, `admin`.
    pub admin: String,
}

/// Writes a keys file at `path` holding the table's keys.
pub fn write_keys(path: &Path) -> TenantKeys {
    let keys = TenantKeys {
        own: generate_api_key(),
        other: generate_api_key(),
        scopeless: generate_api_key(),
        creator: generate_api_key(),
        expired: generate_api_key(),
        admin: generate_api_key(),
    };
    let entry = |tenant: &str, name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: tenant.into(),
        name: name.into(),
        digest: digest(key),
        scopes: Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let all = "links:create,links:read,links:write,stats:read";
    let mut expired = entry("acme", "old", &keys.expired, all);
    expired.expires = Some(Utc::now() - ChronoDuration::hours(1));
    let text = [
        entry("acme", "writer", &keys.own, all),
        entry("globex", "writer", &keys.other, all),
        entry("acme", "stats", &keys.scopeless, "stats:read"),
        entry("acme", "creator", &keys.creator, "links:create"),
        expired,
        entry("ops", "root", &keys.admin, "admin"),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    std::fs::write(path, text).expect("write keys file");
    keys
}

/// A node of `stack` that accepts the table's keys.
async fn node_with_keys(stack: &Stack) -> (Node, TenantKeys) {
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("tenants");
    config.access.api_keys_file = Some(path);
    (Node::start(config).await, keys)
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Get,
    Delete,
}

/// The status `op` gets over HTTP with `key` (none: no `Authorization` header) on `code`.
async fn http(node: &Node, op: Op, key: Option<&str>, code: &str) -> u16 {
    let request = match op {
        Op::Create => node
            .client
            .post(format!("{}/api/v1/links", node.base))
            .json(&json!({ "url": "https://example.com/tenant-create" })),
        Op::Get => node
            .client
            .get(format!("{}/api/v1/links/{code}", node.base)),
        Op::Delete => node
            .client
            .delete(format!("{}/api/v1/links/{code}", node.base)),
    };
    let request = match key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    request.send().await.expect("send").status().as_u16()
}

/// The code `op` gets over gRPC with `key` on `code`.
async fn grpc(node: &Node, op: Op, key: Option<&str>, code: &str) -> Code {
    let mut client = node.links_client().await;
    fn with<T>(message: T, key: Option<&str>) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(key) = key {
            let value = format!("Bearer {key}").parse().expect("ascii");
            request.metadata_mut().insert("authorization", value);
        }
        request
    }
    let code = code.to_string();
    let result = match op {
        Op::Create => {
            let message = pb::CreateLinkRequest {
                url: "https://example.com/tenant-create".into(),
                ..Default::default()
            };
            client.create_link(with(message, key)).await.map(drop)
        }
        Op::Get => client
            .get_link(with(
                pb::GetLinkRequest {
                    code,
                    ..Default::default()
                },
                key,
            ))
            .await
            .map(drop),
        Op::Delete => client
            .delete_link(with(
                pb::DeleteLinkRequest {
                    code,
                    ..Default::default()
                },
                key,
            ))
            .await
            .map(drop),
    };
    match result {
        Ok(()) => Code::Ok,
        Err(status) => status.code(),
    }
}

async fn every_operation_checks_tenant_and_scope_on_both_transports(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_keys(&stack).await;
    let k = &keys;
    // (operation, key, HTTP status, gRPC code, whether the store changes)
    #[rustfmt::skip]
    let table: Vec<(Op, Option<&str>, u16, Code, bool)> = vec![
        (Op::Create, Some(&k.own), 201, Code::Ok, true),
        (Op::Create, Some(&k.other), 201, Code::Ok, true),
        (Op::Create, Some(&k.scopeless), 403, Code::PermissionDenied, false),
        (Op::Create, Some(&k.expired), 401, Code::Unauthenticated, false),
        (Op::Create, Some(&k.admin), 201, Code::Ok, true),
        (Op::Create, None, 401, Code::Unauthenticated, false),
        (Op::Get, Some(&k.own), 200, Code::Ok, false),
        (Op::Get, Some(&k.other), 404, Code::NotFound, false),
        (Op::Get, Some(&k.scopeless), 403, Code::PermissionDenied, false),
        (Op::Get, Some(&k.expired), 401, Code::Unauthenticated, false),
        (Op::Get, Some(&k.admin), 200, Code::Ok, false),
        (Op::Get, None, 401, Code::Unauthenticated, false),
        (Op::Delete, Some(&k.own), 204, Code::Ok, true),
        (Op::Delete, Some(&k.other), 404, Code::NotFound, false),
        (Op::Delete, Some(&k.scopeless), 403, Code::PermissionDenied, false),
        (Op::Delete, Some(&k.expired), 401, Code::Unauthenticated, false),
        (Op::Delete, Some(&k.admin), 204, Code::Ok, true),
        (Op::Delete, None, 401, Code::Unauthenticated, false),
    ];
    let store = &node.app.store;
    for transport in ["http", "grpc"] {
        for (op, key, status, code, changes) in &table {
            // A fresh link of tenant acme for each case, so a delete never meets a deleted one.
            let (created, body) = node
                .create_with_key(
                    json!({ "url": "https://example.com/acme-secret?token=s3cr3t" }),
                    &k.own,
                )
                .await;
            assert_eq!(created, StatusCode::CREATED, "{body}");
            let target = body["code"].as_str().expect("code").to_string();
            let before = store.count_links().await.expect("count");
            let case = format!("{transport} {op:?} with {key:?}");
            if transport == "http" {
                assert_eq!(http(&node, *op, *key, &target).await, *status, "{case}");
            } else {
                assert_eq!(grpc(&node, *op, *key, &target).await, *code, "{case}");
            }
            let after = store.count_links().await.expect("count");
            let link = store
                .get(&target)
                .await
                .expect("get")
                .expect("the link exists");
            let changed = after != before || link.deleted_at.is_some();
            assert_eq!(changed, *changes, "{case}: the store changed = {changed}");
            assert_eq!(link.tenant, "acme", "{case}");
        }
    }
    // Links belong to the tenant of the key that made them.
    let (_, made_by_other) = node
        .create_with_key(json!({ "url": "https://example.com/globex" }), &k.other)
        .await;
    let code = made_by_other["code"].as_str().expect("code");
    let link = store.get(code).await.expect("get").expect("exists");
    assert_eq!(link.tenant, "globex");
    // Metrics count by tenant, with the names of configured tenants only.
    let metrics = node.metrics().await;
    for series in [
        r#"shortener_api_requests_total{tenant="acme",operation="create",outcome="admitted"}"#,
        r#"shortener_api_requests_total{tenant="acme",operation="read",outcome="forbidden"}"#,
        r#"shortener_api_requests_total{tenant="globex",operation="delete",outcome="admitted"}"#,
        r#"shortener_api_unauthenticated_total{operation="create"}"#,
    ] {
        assert!(metrics.contains(series), "{series} missing");
    }
}
on_both_stores!(every_operation_checks_tenant_and_scope_on_both_transports);

/// Dedup and idempotency are per tenant: the same URL and the same idempotency key in two
/// tenants make two links.
async fn dedup_and_idempotency_stay_within_a_tenant(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_keys(&stack).await;
    let body = json!({ "url": "https://example.com/shared", "dedup": true });
    let (_, first) = node.create_with_key(body.clone(), &keys.own).await;
    let (_, again) = node.create_with_key(body.clone(), &keys.own).await;
    let (_, other) = node.create_with_key(body, &keys.other).await;
    assert_eq!(first["code"], again["code"]);
    assert_ne!(first["code"], other["code"]);
    let idem = [("Idempotency-Key", "same-key-1")];
    let body = json!({ "url": "https://example.com/idem" });
    let (_, a) = node
        .create_with_key_and(body.clone(), &keys.own, &idem)
        .await;
    let (_, b) = node.create_with_key_and(body, &keys.other, &idem).await;
    assert_ne!(a["code"], b["code"]);
}
on_both_stores!(dedup_and_idempotency_stay_within_a_tenant);

/// A new password is hashed only for a link the caller may change: an edit of another
/// tenant's link, of a code nobody holds or of a deleted link is refused before it costs an
/// Argon2 hash (counted by `shortener_link_password_hashes_total`), and changes nothing.
async fn a_password_edit_is_hashed_only_for_the_callers_live_link(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with_keys(&stack).await;
    let (_, theirs) = node
        .create_with_key(json!({ "url": "https://example.com/theirs" }), &keys.other)
        .await;
    let (_, gone) = node
        .create_with_key(json!({ "url": "https://example.com/gone" }), &keys.own)
        .await;
    let (_, mine) = node
        .create_with_key(json!({ "url": "https://example.com/mine" }), &keys.own)
        .await;
    let code = |link: &serde_json::Value| link["code"].as_str().expect("code").to_string();
    let deleted = node
        .client
        .delete(format!("{}/api/v1/links/{}", node.base, code(&gone)))
        .bearer_auth(&keys.own)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let hashes =
        |metrics: &str| crate::helpers::metric(metrics, "shortener_link_password_hashes_total");
    let before = hashes(&node.metrics().await);
    let patch_with = |code: String, body: serde_json::Value| {
        node.client
            .patch(format!("{}/api/v1/links/{code}", node.base))
            .bearer_auth(&keys.own)
            .json(&body)
            .send()
    };
    let patch = |code: String| patch_with(code, json!({ "password": "a new password" }));
    let cases = [
        (
            "another tenant's link",
            code(&theirs),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "a code nobody holds",
            "zzzzzzz".to_string(),
            None,
            StatusCode::NOT_FOUND,
        ),
        ("a deleted link", code(&gone), None, StatusCode::GONE),
        (
            "a move to a domain that is not the tenant's",
            code(&mine),
            Some("elsewhere.example"),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (case, code, domain, status) in cases {
        let mut body = json!({ "password": "a new password" });
        if let Some(domain) = domain {
            body["domain"] = json!(domain);
        }
        let answer = patch_with(code, body).await.expect("patch");
        assert_eq!(answer.status(), status, "{case}");
    }
    assert_eq!(
        hashes(&node.metrics().await),
        before,
        "a refused edit hashed"
    );
    let theirs_now = node
        .client
        .get(format!("{}/api/v1/links/{}", node.base, code(&theirs)))
        .bearer_auth(&keys.other)
        .send()
        .await
        .expect("get")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(theirs_now["protected"], false, "{theirs_now}");
    // The caller's own live link is hashed, once, and protected.
    let answer = patch(code(&mine)).await.expect("patch");
    assert_eq!(answer.status(), StatusCode::OK);
    let answer: serde_json::Value = answer.json().await.expect("json");
    assert_eq!(answer["protected"], true, "{answer}");
    assert_eq!(hashes(&node.metrics().await), before + 1.0);
}
on_both_stores!(a_password_edit_is_hashed_only_for_the_callers_live_link);
