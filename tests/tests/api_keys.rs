//! API keys a tenant admin makes through `/api/v1/keys`, driven over the real interfaces of
//! the real binaries: a key made on one node works over HTTP and gRPC on every node sharing the
//! PostgreSQL store, is listed (never with its secret), and once revoked is refused by the
//! node that revoked it at once and by the other within the reload interval; the same on an
//! embedded (SQLite) node; a key made on one node works on another at once, whatever that
//! node's reload interval; and a table of bad requests, each refused by name with nothing
//! written.

use proto::shortener::v1::links_client::LinksClient;
use proto::shortener::v1::{CreateLinkRequest, GetLinkRequest};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tests::binaries::Binaries;
use tests::node::{Node, add_key, start_id_service};
use tokio::time::Instant;

/// How often nodes re-read their keys (`SHORTENER_RELOAD_INTERVAL_MS`).
const RELOAD: Duration = Duration::from_millis(500);
/// The code-space key both distributed nodes share.
const CODE_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// The operator's keys (secrets), from the keys file `shortener keys add` writes.
struct FileKeys {
    /// Tenant `acme`: `keys:manage`, `links:create`, `links:read`.
    lead: String,
    /// Tenant `acme`: `links:read` only.
    reader: String,
    /// Tenant `other`: `keys:manage` and every links scope.
    boss: String,
}

/// Starts a node with `env` (plus its addresses and the reload interval) and waits until it is
/// ready.
async fn start_node(name: &str, binaries: &Binaries, env: &[(&str, String)], dir: &Path) -> Node {
    let mut env = env.to_vec();
    env.push((
        "SHORTENER_RELOAD_INTERVAL_MS",
        RELOAD.as_millis().to_string(),
    ));
    tests::node::start_node(name, binaries, &env, dir).await
}

fn file_keys(binaries: &Binaries, file: &Path) -> FileKeys {
    FileKeys {
        lead: add_key(
            binaries,
            file,
            "acme",
            "lead",
            "keys:manage,links:create,links:read",
        ),
        reader: add_key(binaries, file, "acme", "reader", "links:read"),
        boss: add_key(
            binaries,
            file,
            "other",
            "boss",
            "keys:manage,links:create,links:read,links:write",
        ),
    }
}

/// A JSON API call: the status and the body (null when there is none).
async fn call(
    node: &Node,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let client = reqwest::Client::new();
    let url = format!("http://{}/api/v1{path}", node.http);
    let mut request = client.request(method.parse().expect("method"), url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Creates a link over gRPC and reads `code` back, both with `key`: the first refusal's status.
async fn grpc_use(node: &Node, key: &str, code: &str) -> Result<(), tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", node.grpc))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect over gRPC");
    let mut client = LinksClient::new(channel);
    let bearer: tonic::metadata::MetadataValue<_> =
        format!("Bearer {key}").parse().expect("header-safe");
    let mut create = tonic::Request::new(CreateLinkRequest {
        url: "https://example.com/grpc".into(),
        ..Default::default()
    });
    create
        .metadata_mut()
        .insert("authorization", bearer.clone());
    client.create_link(create).await?;
    let mut get = tonic::Request::new(GetLinkRequest {
        code: code.into(),
        ..Default::default()
    });
    get.metadata_mut().insert("authorization", bearer);
    let link = client.get_link(get).await?.into_inner();
    assert_eq!(link.code, code);
    Ok(())
}

/// Makes key `name` of `scopes` as `admin` on `node`: its answer.
async fn create_key(node: &Node, admin: &str, name: &str, scopes: &[&str]) -> Value {
    let (status, answer) = call(
        node,
        "POST",
        "/keys",
        Some(admin),
        Some(json!({ "name": name, "scopes": scopes, "expires_at": "2999-01-01T00:00:00Z" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer
}

/// The names of the keys `admin` lists on `node`.
async fn listed(node: &Node, admin: &str) -> Vec<Value> {
    let (status, answer) = call(node, "GET", "/keys", Some(admin), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["keys"].as_array().expect("keys").clone()
}

/// Whether `key` authenticates on `node` now (`GET /api/v1/me`).
async fn accepted(node: &Node, key: &str) -> bool {
    let (status, _) = call(node, "GET", "/me", Some(key), None).await;
    assert!(
        status == StatusCode::OK || status == StatusCode::UNAUTHORIZED,
        "{status}"
    );
    status == StatusCode::OK
}

/// A key made on `a`: shown once, used over HTTP and gRPC on `a` and `b`, listed, refused
/// after its revocation (by `a` at once, by `b` within `bound`).
async fn create_use_revoke(a: &Node, b: &Node, keys: &FileKeys, bound: Duration) {
    let answer = create_key(a, &keys.lead, "deploy-bot", &["links:create", "links:read"]).await;
    let secret = answer["secret"].as_str().expect("the secret").to_string();
    assert_eq!(answer["tenant"], "acme");
    assert_eq!(answer["created_by"], "acme/lead");
    assert_eq!(answer["scopes"], json!(["links:create", "links:read"]));
    assert!(answer.get("digest").is_none(), "{answer}");

    let (status, link) = call(
        a,
        "POST",
        "/links",
        Some(&secret),
        Some(json!({ "url": "https://example.com/made-with-a-stored-key" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    assert_eq!(link["owner"], "deploy-bot");
    let code = link["code"].as_str().expect("code").to_string();
    grpc_use(a, &secret, &code).await.expect("gRPC on node a");
    // The other node takes the key (at once: it looks up a key it does not hold).
    assert!(
        testkit::wait_until(bound, || async { accepted(b, &secret).await }).await,
        "node b accepts the new key"
    );
    let (status, me) = call(b, "GET", "/me", Some(&secret), None).await;
    assert_eq!((status, &me["key"]), (StatusCode::OK, &json!("deploy-bot")));
    grpc_use(b, &secret, &code).await.expect("gRPC on node b");

    let listing = listed(a, &keys.lead).await;
    let entry = listing
        .iter()
        .find(|k| k["name"] == "deploy-bot")
        .expect("listed");
    assert!(entry.get("secret").is_none() && entry.get("digest").is_none());
    assert_eq!(entry["expires_at"], "2999-01-01T00:00:00.000Z");
    assert!(
        entry["last_used_at"].is_string(),
        "its use is noted: {entry}"
    );
    assert!(entry["created_at"].is_string());
    // Another tenant's admin neither sees nor revokes it.
    assert!(
        listed(a, &keys.boss)
            .await
            .iter()
            .all(|k| k["name"] != "deploy-bot")
    );
    let (status, refused) = call(a, "DELETE", "/keys/deploy-bot", Some(&keys.boss), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert!(accepted(a, &secret).await);

    let (status, _) = call(a, "DELETE", "/keys/deploy-bot", Some(&keys.lead), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(!accepted(a, &secret).await, "refused at once where revoked");
    let revoked = Instant::now();
    assert!(
        testkit::wait_until(bound, || async { !accepted(b, &secret).await }).await,
        "node b still accepts the revoked key after {bound:?}"
    );
    eprintln!(
        "node b refused the revoked key after {:?}",
        revoked.elapsed()
    );
    let status = grpc_use(b, &secret, &code).await.expect_err("gRPC refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(
        listed(a, &keys.lead)
            .await
            .iter()
            .all(|k| k["name"] != "deploy-bot")
    );
}

/// The settings of node `node` of a deployment on PostgreSQL (`url`) with the id-service at
/// `id_grpc`, the keys file `file`, and its data under `dir`.
fn distributed(
    node: &str,
    url: &str,
    id_grpc: std::net::SocketAddr,
    file: &Path,
    dir: &Path,
) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", url.to_string()),
        ("SHORTENER_ID_SERVICE", format!("http://{id_grpc}")),
        ("SHORTENER_KEY", CODE_KEY.to_string()),
        ("SHORTENER_API_KEYS_FILE", file.display().to_string()),
        ("SHORTENER_HOLDER", node.to_string()),
        ("SHORTENER_DATA_DIR", dir.join(node).display().to_string()),
    ]
}

/// One bad request and how it must be refused.
struct Case {
    what: &'static str,
    method: &'static str,
    path: &'static str,
    key: Option<String>,
    body: Option<Value>,
    status: u16,
    code: &'static str,
    /// What the message must name (the field, or the scope).
    named: &'static str,
}

/// A create by `key` with `body`, refused with `status` and `code`, naming `named`.
fn create(
    what: &'static str,
    key: Option<&str>,
    body: Value,
    (status, code, named): (u16, &'static str, &'static str),
) -> Case {
    Case {
        what,
        method: "POST",
        path: "/keys",
        key: key.map(str::to_string),
        body: Some(body),
        status,
        code,
        named,
    }
}

/// A revocation by `key` of `path`, refused with `status` and `code`.
fn revoke(
    what: &'static str,
    key: &str,
    path: &'static str,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        what,
        method: "DELETE",
        path,
        key: Some(key.to_string()),
        body: None,
        status,
        code,
        named: "",
    }
}

fn bad_cases(keys: &FileKeys) -> Vec<Case> {
    let lead = Some(keys.lead.as_str());
    let ok = |name: &str| json!({ "name": name, "scopes": ["links:read"] });
    let scopes = |scopes: Value| json!({ "name": "x", "scopes": scopes });
    let expiry = |at: &str| json!({ "name": "x", "scopes": ["links:read"], "expires_at": at });
    vec![
        create("empty name", lead, ok(""), (422, "invalid_name", "name")),
        create(
            "long name",
            lead,
            ok(&"n".repeat(65)),
            (422, "invalid_name", "name"),
        ),
        create(
            "control character",
            lead,
            ok("bad\u{7}name"),
            (422, "invalid_name", "name"),
        ),
        create("duplicate", lead, ok("ci"), (409, "key_name_taken", "name")),
        create(
            "the file's name",
            lead,
            ok("reader"),
            (409, "key_name_taken", "keys file"),
        ),
        create(
            "unknown scope",
            lead,
            scopes(json!(["links:delete"])),
            (422, "invalid_scopes", "scopes"),
        ),
        create(
            "no scope",
            lead,
            scopes(json!([])),
            (422, "invalid_scopes", "scopes"),
        ),
        create(
            "scope not held",
            lead,
            scopes(json!(["links:write"])),
            (422, "scope_not_held", "links:write"),
        ),
        create(
            "admin not held",
            lead,
            scopes(json!(["admin"])),
            (422, "scope_not_held", "admin"),
        ),
        create(
            "past expiry",
            lead,
            expiry("2001-01-01T00:00:00Z"),
            (422, "invalid_expiry", "expires_at"),
        ),
        create(
            "malformed expiry",
            lead,
            expiry("next week"),
            (422, "invalid_expiry", "expires_at"),
        ),
        create(
            "missing scopes",
            lead,
            json!({ "name": "x" }),
            (400, "invalid_json", "scopes"),
        ),
        create(
            "unknown field",
            lead,
            json!({ "name": "x", "scopes": ["links:read"], "tenant": "other" }),
            (400, "invalid_json", "tenant"),
        ),
        create(
            "oversized body",
            lead,
            json!({ "name": "x", "scopes": ["links:read"], "pad": "p".repeat(5000) }),
            (413, "payload_too_large", ""),
        ),
        create(
            "not an admin",
            Some(&keys.reader),
            ok("x"),
            (403, "forbidden", "keys:manage"),
        ),
        create("no key", None, ok("x"), (401, "unauthorized", "")),
        revoke(
            "another tenant's key",
            &keys.lead,
            "/keys/ops",
            404,
            "not_found",
        ),
        revoke("unknown key", &keys.lead, "/keys/nobody", 404, "not_found"),
        revoke(
            "a non-admin's revoke",
            &keys.reader,
            "/keys/ci",
            403,
            "forbidden",
        ),
    ]
}

/// Every bad request is refused with its status and code, naming its field, and writes
/// nothing: the keys each admin lists are the same after as before.
async fn bad_input_is_refused(node: &Node, keys: &FileKeys) {
    create_key(node, &keys.lead, "ci", &["links:read"]).await;
    create_key(node, &keys.boss, "ops", &["links:read"]).await;
    let before = (
        listed(node, &keys.lead).await,
        listed(node, &keys.boss).await,
    );
    for case in bad_cases(keys) {
        let what = case.what;
        let (got, answer) =
            call(node, case.method, case.path, case.key.as_deref(), case.body).await;
        assert_eq!(got.as_u16(), case.status, "{what}: {answer}");
        assert_eq!(answer["error"], case.code, "{what}: {answer}");
        let message = answer["message"].as_str().unwrap_or("");
        assert!(
            message.contains(case.named),
            "{what}: {message:?} names {:?}",
            case.named
        );
    }
    let after = (
        listed(node, &keys.lead).await,
        listed(node, &keys.boss).await,
    );
    assert_eq!(before, after, "nothing was written");
    assert_eq!(before.0.len(), 1);
}

#[tokio::test]
async fn keys_made_over_http_work_everywhere_at_once_and_stop_on_every_node_once_revoked() {
    let binaries = Binaries::locate().expect("binaries");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("keys.toml");
    let keys = file_keys(&binaries, &file);
    let db = testkit::TestDb::create().await;
    let (mut id_service, id_grpc) = start_id_service(&binaries, dir.path(), db.url());
    let env = |node: &str| distributed(node, db.url(), id_grpc, &file, dir.path());
    let a = start_node("node-a", &binaries, &env("node-a"), dir.path()).await;
    let b = start_node("node-b", &binaries, &env("node-b"), dir.path()).await;
    // Twice the interval: a read may have begun just before the change committed.
    create_use_revoke(&a, &b, &keys, 2 * RELOAD + Duration::from_millis(500)).await;
    bad_input_is_refused(&a, &keys).await;
    // Only digests are stored, and the revoked key's row says when it was revoked.
    let client = db.connect().await;
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE revoked_at IS NOT NULL), count(*) FILTER (WHERE length(digest) = 32) FROM api_keys",
            &[],
        )
        .await
        .expect("read api_keys");
    let (revoked, digests): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((revoked, digests), (1, 3));
    // A third node that re-reads its keys every ten minutes, and serves Shlink's API.
    let mut slow = env("node-c");
    slow.push(("SHORTENER_RELOAD_INTERVAL_MS", "600000".to_string()));
    slow.push(("SHORTENER_COMPAT", "shlink".to_string()));
    let c = tests::node::start_node("node-c", &binaries, &slow, dir.path()).await;
    unheld_keys_are_looked_up(&a, &c, &keys).await;
    drop((a, b, c));
    id_service.kill().await;
}

/// A key made on node `a` works on node `b` at once, over gRPC, HTTP and Shlink's header, though
/// `b` re-reads its keys only every ten minutes: `b` looks a key it does not hold up in the
/// store before it refuses it. A well-formed key the store never kept, and a key revoked
/// before `b` ever saw it, are still refused.
async fn unheld_keys_are_looked_up(a: &Node, b: &Node, keys: &FileKeys) {
    let (status, link) = call(
        a,
        "POST",
        "/links",
        Some(&keys.lead),
        Some(json!({ "url": "https://example.com/looked-up" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    let code = link["code"].as_str().expect("code");
    // Each key's first use anywhere is on node b: over gRPC, HTTP, and Shlink's header.
    let answer = create_key(a, &keys.lead, "grpc-bot", &["links:create", "links:read"]).await;
    let secret = answer["secret"].as_str().expect("the secret");
    grpc_use(b, secret, code).await.expect("gRPC on node b");
    let answer = create_key(a, &keys.lead, "ci-bot", &["links:read"]).await;
    let secret = answer["secret"].as_str().expect("the secret");
    assert!(accepted(b, secret).await, "node b accepts the key at once");
    let answer = create_key(a, &keys.lead, "shlink-bot", &["links:read"]).await;
    let shlink = answer["secret"].as_str().expect("the secret").to_string();
    let response = reqwest::Client::new()
        .get(format!("http://{}/rest/v3/short-urls/{code}", b.http))
        .header("X-Api-Key", &shlink)
        .send()
        .await
        .expect("send");
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "Shlink's header on node b"
    );

    let never_made: String = {
        use rand::Rng;
        const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut rng = rand::rng();
        (0..32)
            .map(|_| BASE62[rng.random_range(0..BASE62.len())] as char)
            .collect()
    };
    assert!(!accepted(b, &never_made).await, "a key never made");
    let answer = create_key(a, &keys.lead, "gone-bot", &["links:read"]).await;
    let gone = answer["secret"].as_str().expect("the secret").to_string();
    let (status, _) = call(a, "DELETE", "/keys/gone-bot", Some(&keys.lead), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        !accepted(b, &gone).await,
        "a key revoked before node b saw it"
    );
    // Asked again, the refused keys are answered from what node b learnt: no more lookups.
    assert!(!accepted(b, &never_made).await && !accepted(b, &gone).await);
    let metrics = reqwest::get(format!("http://{}/metrics", b.admin))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("metrics");
    for (outcome, count) in [("kept", 3), ("not_kept", 2), ("unasked", 2), ("failed", 0)] {
        let series = format!("shortener_api_key_lookups_total{{outcome=\"{outcome}\"}} {count}");
        assert!(metrics.lines().any(|l| l == series), "{series}: {metrics}");
    }
}

#[tokio::test]
async fn an_embedded_node_makes_uses_lists_and_revokes_keys() {
    let binaries = Binaries::locate().expect("binaries");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("keys.toml");
    let keys = file_keys(&binaries, &file);
    let env = vec![
        ("SHORTENER_API_KEYS_FILE", file.display().to_string()),
        (
            "SHORTENER_DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
    ];
    let mut node = start_node("embedded", &binaries, &env, dir.path()).await;
    // One node: it is both the node that revokes and the one that must stop accepting.
    create_use_revoke(&node, &node, &keys, RELOAD).await;
    bad_input_is_refused(&node, &keys).await;
    node.process.kill().await;
}
