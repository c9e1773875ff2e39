//! The audit log, driven over the real interfaces of the real binaries on both stores: changes
//! to links (create, update, disable, enable, delete, a tag rename, an import), domains, API
//! keys, webhooks and the blocklist made over HTTP (behind a trusted proxy that forwards the
//! client's address) and a create over gRPC are each read back from `GET /api/v1/audit` with
//! who made it, from where, in which tenant and what changed, never a secret; tenants see only
//! their own entries and an admin sees all; the filters, the cursor and the NDJSON and CSV
//! exports agree; a table of bad queries is refused by name; and entries past a short
//! retention are purged.

use proto::shortener::v1::CreateLinkRequest;
use proto::shortener::v1::links_client::LinksClient;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tests::binaries::Binaries;
use tests::node::{Node, add_key, start_id_service};
use tests::process::Process;

const CODE_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/// The client address the trusted proxy forwards for every HTTP change.
const CLIENT: &str = "203.0.113.7";
/// Values that must never reach the log.
const LINK_PASSWORD: &str = "first-link-password";
const NEW_PASSWORD: &str = "second-link-password";
const WEBHOOK_SECRET: &str = "webhook-signing-secret-0123456789";

/// The operator's keys (secrets).
struct Keys {
    /// Tenant `acme`: manages keys, writes links, reads the audit log.
    lead: String,
    /// Tenant `acme`: writes links, no `audit:read`.
    writer: String,
    /// Tenant `other`: writes links, reads the audit log.
    boss: String,
    /// Tenant `ops`: `admin`.
    root: String,
}

fn keys(binaries: &Binaries, file: &Path) -> Keys {
    let writes = "links:create,links:read,links:write";
    Keys {
        lead: add_key(
            binaries,
            file,
            "acme",
            "lead",
            &format!("{writes},keys:manage,audit:read"),
        ),
        writer: add_key(binaries, file, "acme", "writer", writes),
        boss: add_key(
            binaries,
            file,
            "other",
            "boss",
            &format!("{writes},audit:read"),
        ),
        root: add_key(binaries, file, "ops", "root", "admin"),
    }
}

/// Starts a node with `env` (plus its addresses, a trusted proxy on loopback forwarding the
/// client's address, and `acme`'s domain suffix) and waits until it is ready.
async fn start_node(name: &str, binaries: &Binaries, env: &[(&str, String)], dir: &Path) -> Node {
    let mut env = env.to_vec();
    env.extend([
        ("SHORTENER_CLIENT_IP_HEADER", "x-forwarded-for".to_string()),
        ("SHORTENER_TRUSTED_PROXIES", "127.0.0.0/8".into()),
        ("SHORTENER_DOMAIN_SUFFIXES", "acme=acme.test".into()),
    ]);
    tests::node::start_node(name, binaries, &env, dir).await
}

/// A JSON API call through the trusted proxy (which forwards [`CLIENT`]): the status and the
/// body as text.
async fn raw(
    node: &Node,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let url = format!("http://{}/api/v1{path}", node.http);
    let mut request = reqwest::Client::new()
        .request(method.parse().expect("method"), url)
        .bearer_auth(key)
        .header("x-forwarded-for", CLIENT);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.text().await.expect("body"))
}

async fn call(
    node: &Node,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, text) = raw(node, method, path, key, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A call that must answer `expected`: its body.
async fn ok(
    node: &Node,
    (method, path): (&str, &str),
    key: &str,
    body: Option<Value>,
    expected: u16,
) -> Value {
    let (status, answer) = call(node, method, path, key, body).await;
    assert_eq!(status.as_u16(), expected, "{method} {path}: {answer}");
    answer
}

/// Creates a link over gRPC as `key`: its code.
async fn grpc_create(node: &Node, key: &str) -> String {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", node.grpc))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect over gRPC");
    let mut client = LinksClient::new(channel);
    let mut create = tonic::Request::new(CreateLinkRequest {
        url: "https://example.com/over-grpc".into(),
        ..Default::default()
    });
    let bearer = format!("Bearer {key}").parse().expect("header-safe");
    create.metadata_mut().insert("authorization", bearer);
    client
        .create_link(create)
        .await
        .expect("create over gRPC")
        .into_inner()
        .code
}

/// The changes the scenario makes, as (action, object kind, object id) of each entry it
/// expects in tenant `acme`, oldest first; and the codes it made.
struct Made {
    expected: Vec<(&'static str, &'static str, String)>,
    code: String,
    grpc_code: String,
}

/// Makes one change of every kind as `lead` (tenant `acme`) over HTTP and one over gRPC, a
/// link as `boss` (tenant `other`), and blocklist changes as `root` (tenant `ops`).
async fn make_changes(node: &Node, keys: &Keys) -> Made {
    let lead = &keys.lead;
    let body = json!({ "url": "https://example.com/a", "tags": ["spring"], "password": LINK_PASSWORD,
            "ios": "https://apps.apple.com/app/id1", "utm_source": "news",
            "rules": [{"url": "https://example.com/m", "conditions": [{"type": "device", "value": "mobile"}]}] });
    let link = ok(node, ("POST", "/links"), lead, Some(body), 201).await;
    let code = link["code"].as_str().expect("code").to_string();
    let path = format!("/links/{code}");
    let patch = json!({ "url": "https://example.com/b", "password": NEW_PASSWORD });
    ok(node, ("PATCH", &path), lead, Some(patch), 200).await;
    ok(
        node,
        ("PATCH", &path),
        lead,
        Some(json!({ "disabled": true })),
        200,
    )
    .await;
    ok(
        node,
        ("PATCH", &path),
        lead,
        Some(json!({ "disabled": false })),
        200,
    )
    .await;
    let rename = json!({ "name": "summer" });
    ok(node, ("PATCH", "/tags/spring"), lead, Some(rename), 200).await;
    let claim = json!({ "host": "go.acme.test" });
    ok(node, ("POST", "/domains"), lead, Some(claim), 201).await;
    let robots = json!({ "robots": "allow" });
    ok(
        node,
        ("PATCH", "/domains/go.acme.test"),
        lead,
        Some(robots),
        200,
    )
    .await;
    ok(node, ("DELETE", "/domains/go.acme.test"), lead, None, 204).await;
    let key = json!({ "name": "bot", "scopes": ["links:read"] });
    let made = ok(node, ("POST", "/keys"), lead, Some(key), 201).await;
    let secret = made["secret"].as_str().expect("secret").to_string();
    ok(node, ("DELETE", "/keys/bot"), lead, None, 204).await;
    ok(node, ("DELETE", &path), lead, None, 204).await;
    let imported = reqwest::Client::new()
        .post(format!("http://{}/api/v1/links/import", node.http))
        .bearer_auth(lead)
        .header("x-forwarded-for", CLIENT)
        .header("content-type", "application/x-ndjson")
        .body("{\"url\": \"https://example.com/imported\"}\n")
        .send()
        .await
        .expect("import");
    let status = imported.status();
    // Read to its end: the import's summary comes after its rows are written.
    let summary = imported.text().await.expect("the import's answer");
    assert!(summary.contains("created"), "{summary}");
    assert_eq!(status, StatusCode::OK);
    let grpc_code = grpc_create(node, lead).await;
    let hook =
        json!({ "tenant": "acme", "url": "https://hooks.invalid/x", "secret": WEBHOOK_SECRET });
    let hook = ok(node, ("POST", "/webhooks"), &keys.root, Some(hook), 201).await;
    let hook_id = hook["id"].to_string();
    let hook_path = format!("/webhooks/{hook_id}");
    let off = json!({ "enabled": false });
    ok(node, ("PATCH", &hook_path), &keys.root, Some(off), 200).await;
    ok(node, ("DELETE", &hook_path), &keys.root, None, 204).await;
    let theirs = json!({ "url": "https://example.com/theirs" });
    ok(node, ("POST", "/links"), &keys.boss, Some(theirs), 201).await;
    let block = json!({ "domain": "evil.test" });
    ok(
        node,
        ("POST", "/admin/blocklist"),
        &keys.root,
        Some(block),
        201,
    )
    .await;
    ok(
        node,
        ("DELETE", "/admin/blocklist/evil.test"),
        &keys.root,
        None,
        204,
    )
    .await;
    assert!(!secret.is_empty());
    let c = || code.clone();
    Made {
        expected: vec![
            ("link.create", "link", c()),
            ("link.update", "link", c()),
            ("link.disable", "link", c()),
            ("link.enable", "link", c()),
            ("tag.rename", "tag", "spring".into()),
            ("domain.claim", "domain", "go.acme.test".into()),
            ("domain.update", "domain", "go.acme.test".into()),
            ("domain.delete", "domain", "go.acme.test".into()),
            ("key.create", "key", "bot".into()),
            ("key.revoke", "key", "bot".into()),
            ("link.delete", "link", c()),
            ("link.import", "import", String::new()),
            ("link.create", "link", grpc_code.clone()),
            ("webhook.create", "webhook", hook_id.clone()),
            ("webhook.update", "webhook", hook_id.clone()),
            ("webhook.delete", "webhook", hook_id),
        ],
        code,
        grpc_code,
    }
}

/// Every entry `key` reads with `query`, following the cursor `limit` at a time.
async fn read_all(node: &Node, key: &str, query: &str, limit: usize) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/audit?limit={limit}{query}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = ok(node, ("GET", &path), key, None, 200).await;
        let got = page["entries"].as_array().expect("entries");
        assert!(got.len() <= limit);
        entries.extend(got.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return entries,
        }
    }
}

/// `lead` reads tenant `acme`'s entries: exactly the changes made, newest first, each naming
/// who, from where and what, with no secret anywhere.
async fn entries_name_who_what_and_where(node: &Node, keys: &Keys, made: &Made) -> Vec<Value> {
    let entries = read_all(node, &keys.lead, "", 500).await;
    let mut expected = made.expected.clone();
    expected.reverse();
    let got: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("").into(),
                e["object"]["kind"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(a, k, _)| (a.to_string(), k.to_string()))
        .collect();
    assert_eq!(got, want, "{entries:#?}");
    for (entry, (action, _, id)) in entries.iter().zip(&expected) {
        assert_eq!(entry["tenant"], "acme", "{entry}");
        if !id.is_empty() {
            assert_eq!(entry["object"]["id"], id.as_str(), "{entry}");
        }
        let webhook = action.starts_with("webhook.");
        let (tenant, key) = if webhook {
            ("ops", "root")
        } else {
            ("acme", "lead")
        };
        assert_eq!(entry["actor"]["tenant"], tenant, "{entry}");
        assert_eq!(entry["actor"]["key"], key, "{entry}");
        assert!(entry["actor"]["subject"].is_null() && entry["actor"]["email"].is_null());
        let grpc = entry["object"]["id"] == made.grpc_code.as_str();
        let address = if grpc { "127.0.0.1" } else { CLIENT };
        assert_eq!(entry["address"], address, "{entry}");
        assert!(entry["at"].is_string() && entry["id"].is_i64(), "{entry}");
    }
    let by = |action: &str| {
        entries
            .iter()
            .find(|e| e["action"] == action)
            .expect(action)["change"]
            .clone()
    };
    let created = entries
        .iter()
        .rev()
        .find(|e| e["action"] == "link.create")
        .expect("create");
    assert_eq!(created["change"]["url"], "https://example.com/a");
    // Routing by field name, as a patch's.
    assert_eq!(
        created["change"]["routing"],
        json!(["rules", "ios", "utm_source"]),
        "{created}"
    );
    assert_eq!(created["change"]["protected"], true);
    assert_eq!(by("link.update")["url"], "https://example.com/b");
    assert_eq!(by("link.update")["password"], "(set)");
    assert_eq!(by("link.disable")["disabled"], true);
    assert_eq!(by("tag.rename")["to"], "summer");
    assert_eq!(by("tag.rename")["links"], 1);
    assert_eq!(by("domain.update")["robots"], "allow");
    assert_eq!(by("key.create")["scopes"], "links:read");
    assert_eq!(by("link.import")["created"], 1);
    assert_eq!(by("webhook.create")["url"], "https://hooks.invalid/x");
    let text = serde_json::to_string(&entries).expect("json");
    for secret in [LINK_PASSWORD, NEW_PASSWORD, WEBHOOK_SECRET] {
        assert!(!text.contains(secret), "{secret} leaked into the audit log");
    }
    // The link's history names the key that made each change.
    let history = ok(
        node,
        ("GET", &format!("/links/{}/history", made.code)),
        &keys.lead,
        None,
        200,
    )
    .await;
    for event in history["events"].as_array().expect("events").iter().skip(1) {
        assert_eq!(event["key"], "acme/lead", "{event}");
    }
    entries
}

/// Each tenant sees only its own entries; the admin sees every tenant's.
async fn tenants_are_isolated(node: &Node, keys: &Keys, acme: &[Value]) {
    let theirs = read_all(node, &keys.boss, "", 500).await;
    assert_eq!(theirs.len(), 1, "{theirs:#?}");
    assert_eq!(
        (&theirs[0]["tenant"], &theirs[0]["action"]),
        (&json!("other"), &json!("link.create"))
    );
    let all = read_all(node, &keys.root, "", 500).await;
    assert_eq!(all.len(), acme.len() + 3, "{all:#?}");
    let ops: Vec<&Value> = all.iter().filter(|e| e["tenant"] == "ops").collect();
    assert_eq!(ops.len(), 2);
    assert_eq!(
        (&ops[0]["action"], &ops[1]["action"]),
        (&json!("blocklist.remove"), &json!("blocklist.add"))
    );
    assert_eq!(ops[0]["object"]["id"], "evil.test");
    // An admin narrows to one tenant.
    let only = read_all(node, &keys.root, "&tenant=other", 500).await;
    assert_eq!(only, theirs);
}

/// The filters each narrow to what they name; a cursor walked 3 at a time reads the same
/// entries as one page; the exports hold them all.
async fn filters_cursor_and_exports_agree(node: &Node, keys: &Keys, made: &Made, acme: &[Value]) {
    let lead = &keys.lead;
    let updates = read_all(node, lead, "&action=link.update", 500).await;
    assert_eq!(updates.len(), 1);
    let domains = read_all(node, lead, "&kind=domain", 500).await;
    assert_eq!(domains.len(), 3);
    let link = read_all(node, lead, &format!("&object={}", made.code), 500).await;
    assert_eq!(link.len(), 5, "create, update, disable, enable, delete");
    let by_root = read_all(node, lead, "&actor=root", 500).await;
    assert_eq!(by_root.len(), 3);
    let future = read_all(node, lead, "&since=2999-01-01T00:00:00Z", 500).await;
    let past = read_all(node, lead, "&until=2000-01-01T00:00:00Z", 500).await;
    assert!(future.is_empty() && past.is_empty());
    let window = read_all(
        node,
        lead,
        "&since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z",
        500,
    )
    .await;
    assert_eq!(window.len(), acme.len());
    let walked = read_all(node, lead, "", 3).await;
    assert_eq!(walked, acme);

    let (status, ndjson) = raw(node, "GET", "/audit?format=ndjson", lead, None).await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = ndjson
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines, acme);
    let (status, csv) = raw(node, "GET", "/audit?format=csv&kind=domain", lead, None).await;
    assert_eq!(status, StatusCode::OK);
    let rows: Vec<&str> = csv.lines().collect();
    assert!(
        rows[0].starts_with(
            "id,at,tenant,actor_tenant,actor_key,actor_subject,actor_email,address,action"
        ),
        "{csv}"
    );
    assert_eq!(rows.len(), 4, "{csv}");
    assert!(
        rows[1].contains("domain.delete") && rows[1].contains(CLIENT),
        "{csv}"
    );
}

/// Every bad query is refused with its status and code, naming its field (or the scope).
async fn bad_queries_are_refused(node: &Node, keys: &Keys) {
    let cases: &[(&str, &str, u16, &str, &str)] = &[
        (
            "a bad cursor",
            "cursor=nonsense",
            400,
            "invalid_cursor",
            "cursor",
        ),
        (
            "an unknown action",
            "action=link.explode",
            400,
            "invalid_query_parameter",
            "action",
        ),
        (
            "an unknown kind",
            "kind=planet",
            400,
            "invalid_query_parameter",
            "kind",
        ),
        (
            "a bad since",
            "since=yesterday",
            400,
            "invalid_date",
            "since",
        ),
        (
            "a bad until",
            "until=2024-13-01",
            400,
            "invalid_date",
            "until",
        ),
        (
            "since after until",
            "since=2025-01-02T00:00:00Z&until=2025-01-01T00:00:00Z",
            400,
            "invalid_range",
            "since",
        ),
        ("a zero limit", "limit=0", 400, "invalid_limit", "limit"),
        (
            "a limit too large",
            "limit=501",
            400,
            "invalid_limit",
            "limit",
        ),
        (
            "a limit not a number",
            "limit=ten",
            400,
            "invalid_limit",
            "limit",
        ),
        (
            "another tenant",
            "tenant=other",
            400,
            "invalid_tenant",
            "tenant",
        ),
        (
            "an unknown parameter",
            "bogus=1",
            400,
            "invalid_query_parameter",
            "bogus",
        ),
        (
            "a repeated parameter",
            "action=key.create&action=key.revoke",
            400,
            "invalid_query_parameter",
            "action",
        ),
        (
            "an unknown format",
            "format=xml",
            400,
            "invalid_query_parameter",
            "format",
        ),
        (
            "an object too long",
            &format!("object={}", "x".repeat(300)),
            400,
            "invalid_query_parameter",
            "object",
        ),
    ];
    for (what, query, status, code, named) in cases {
        let (got, answer) = call(node, "GET", &format!("/audit?{query}"), &keys.lead, None).await;
        assert_eq!(got.as_u16(), *status, "{what}: {answer}");
        assert_eq!(answer["error"], *code, "{what}: {answer}");
        let message = answer["message"].as_str().unwrap_or("");
        assert!(
            message.contains(named),
            "{what}: {message:?} names {named:?}"
        );
    }
    let (got, answer) = call(node, "GET", "/audit", &keys.writer, None).await;
    assert_eq!(
        (got.as_u16(), &answer["error"]),
        (403, &json!("forbidden")),
        "{answer}"
    );
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or("")
            .contains("audit:read"),
        "{answer}"
    );
    let (got, _) = call(
        node,
        "GET",
        "/audit?format=ndjson&tenant=other",
        &keys.lead,
        None,
    )
    .await;
    assert_eq!(got.as_u16(), 400, "an export is refused before it starts");
}

async fn scenario(node: &Node, keys: &Keys) {
    let made = make_changes(node, keys).await;
    let acme = entries_name_who_what_and_where(node, keys, &made).await;
    tenants_are_isolated(node, keys, &acme).await;
    filters_cursor_and_exports_agree(node, keys, &made, &acme).await;
    bad_queries_are_refused(node, keys).await;
    creates_are_audited_once(node, keys).await;
}

/// The `link.create` entries of tenant `acme`: (object, actor key), oldest first.
async fn create_entries(node: &Node, keys: &Keys) -> Vec<(String, String)> {
    let entries = read_all(node, &keys.lead, "&action=link.create", 500).await;
    let mut got: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&e["object"]["id"]), text(&e["actor"]["key"]))
        })
        .collect();
    got.reverse();
    got
}

/// A create's entry is written with its row, in the same transaction: concurrent creates by
/// two keys (which the PostgreSQL store writes in shared batches) each get one entry naming
/// their own key; a create that makes nothing new (a dedup hit, an idempotent retry, a taken
/// alias) writes none; and of concurrent creates of one alias by both keys, only the one that
/// made the link has an entry.
async fn creates_are_audited_once(node: &Node, keys: &Keys) {
    let before = create_entries(node, keys).await;
    let key_of = |i: usize| {
        if i.is_multiple_of(2) {
            (&keys.lead, "lead")
        } else {
            (&keys.writer, "writer")
        }
    };
    let creates = (0..24).map(|i| async move {
        let (key, name) = key_of(i);
        let body = json!({ "url": format!("https://example.com/many/{i}") });
        let link = ok(node, ("POST", "/links"), key, Some(body), 201).await;
        (link["code"].as_str().expect("code").to_string(), name)
    });
    let mut expected: Vec<(String, String)> = futures::future::join_all(creates)
        .await
        .into_iter()
        .map(|(code, name)| (code, name.to_string()))
        .collect();
    // A dedup create makes its link once; the second finds it.
    let dedup = json!({ "url": "https://example.com/deduplicated", "dedup": true });
    let first = ok(
        node,
        ("POST", "/links"),
        &keys.lead,
        Some(dedup.clone()),
        201,
    )
    .await;
    let again = ok(node, ("POST", "/links"), &keys.lead, Some(dedup), 200).await;
    assert_eq!(first["code"], again["code"]);
    expected.push((first["code"].as_str().expect("code").into(), "lead".into()));
    // An idempotent retry answers the link it made.
    let retried = |key: &'static str| async move {
        let response = reqwest::Client::new()
            .post(format!("http://{}/api/v1/links", node.http))
            .bearer_auth(&keys.lead)
            .header("idempotency-key", key)
            .json(&json!({ "url": "https://example.com/idempotent" }))
            .send()
            .await
            .expect("send");
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.expect("json"))
    };
    let (status, made) = retried("audit-retry").await;
    assert_eq!(status, 201, "{made}");
    let (status, replayed) = retried("audit-retry").await;
    assert_eq!((status, &replayed["code"]), (200, &made["code"]));
    expected.push((made["code"].as_str().expect("code").into(), "lead".into()));
    // Both keys race for one alias: one link, one entry, the winner's.
    let race = (0..6).map(|i| async move {
        let (key, name) = key_of(i);
        let body = json!({ "url": "https://example.com/raced", "alias": "raced-alias" });
        let (status, _) = call(node, "POST", "/links", key, Some(body)).await;
        (status.as_u16(), name)
    });
    let outcomes = futures::future::join_all(race).await;
    let winners: Vec<&str> = outcomes
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, name)| *name)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|(s, _)| *s == 201 || *s == 409),
        "{outcomes:?}"
    );
    expected.push(("raced-alias".into(), winners[0].into()));
    let after = create_entries(node, keys).await;
    assert_eq!(after[..before.len()], before[..], "earlier entries stay");
    let mut added = after[before.len()..].to_vec();
    added.sort();
    expected.sort();
    assert_eq!(added, expected, "one entry per link made, by its own key");
}

/// The PostgreSQL store with an id-service; returns them with the node's environment.
async fn postgres(
    binaries: &Binaries,
    dir: &Path,
    db: &testkit::TestDb,
) -> (Process, Vec<(&'static str, String)>) {
    let (id_service, id_grpc) = start_id_service(binaries, dir, db.url());
    let env = vec![
        ("DATABASE_URL", db.url().to_string()),
        ("SHORTENER_ID_SERVICE", format!("http://{id_grpc}")),
        ("SHORTENER_KEY", CODE_KEY.to_string()),
        (
            "SHORTENER_DATA_DIR",
            dir.join("pg-node").display().to_string(),
        ),
    ];
    (id_service, env)
}

/// A node on its own PostgreSQL database with an id-service, and the operator's keys.
struct PgNode {
    node: Node,
    id_service: Process,
    keys: Keys,
    db: testkit::TestDb,
    _dir: tempfile::TempDir,
}

impl PgNode {
    async fn start(name: &str) -> PgNode {
        let binaries = Binaries::locate().expect("binaries");
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("keys.toml");
        let keys = keys(&binaries, &file);
        let db = testkit::TestDb::create().await;
        let (id_service, mut env) = postgres(&binaries, dir.path(), &db).await;
        env.push(("SHORTENER_API_KEYS_FILE", file.display().to_string()));
        let node = start_node(name, &binaries, &env, dir.path()).await;
        PgNode {
            node,
            id_service,
            keys,
            db,
            _dir: dir,
        }
    }

    async fn stop(mut self) {
        self.node.process.kill().await;
        self.id_service.kill().await;
    }
}

#[tokio::test]
async fn every_change_is_audited_on_postgres() {
    let pg = PgNode::start("pg-node").await;
    scenario(&pg.node, &pg.keys).await;
    pg.stop().await;
}

#[tokio::test]
async fn every_change_is_audited_on_an_embedded_node() {
    let binaries = Binaries::locate().expect("binaries");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("keys.toml");
    let keys = keys(&binaries, &file);
    let env = vec![
        ("SHORTENER_API_KEYS_FILE", file.display().to_string()),
        (
            "SHORTENER_DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
    ];
    let mut node = start_node("embedded", &binaries, &env, dir.path()).await;
    scenario(&node, &keys).await;
    node.process.kill().await;
}

/// With a retention of two seconds, a new entry is read back and then purged by the periodic
/// task; the change it recorded stands.
async fn purged_after_retention(node: &Node, keys: &Keys) {
    let body = json!({ "url": "https://example.com/short-lived-entry" });
    let link = ok(node, ("POST", "/links"), &keys.lead, Some(body), 201).await;
    let code = link["code"].as_str().expect("code");
    let query = format!("&object={code}");
    assert_eq!(read_all(node, &keys.lead, &query, 10).await.len(), 1);
    let purged = testkit::wait_until(Duration::from_secs(20), || async {
        read_all(node, &keys.lead, &query, 10).await.is_empty()
    })
    .await;
    assert!(purged, "the entry outlived its retention");
    ok(
        node,
        ("GET", &format!("/links/{code}")),
        &keys.lead,
        None,
        200,
    )
    .await;
}

#[tokio::test]
async fn entries_past_their_retention_are_purged_on_both_stores() {
    let binaries = Binaries::locate().expect("binaries");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("keys.toml");
    let keys = keys(&binaries, &file);
    let short = [
        ("SHORTENER_API_KEYS_FILE", file.display().to_string()),
        ("SHORTENER_AUDIT_RETENTION_SECONDS", "2".to_string()),
        ("SHORTENER_AUDIT_PURGE_INTERVAL_MS", "200".to_string()),
    ];
    let mut env = vec![(
        "SHORTENER_DATA_DIR",
        dir.path().join("data").display().to_string(),
    )];
    env.extend(short.iter().cloned());
    let mut embedded = start_node("embedded", &binaries, &env, dir.path()).await;
    purged_after_retention(&embedded, &keys).await;
    embedded.process.kill().await;

    let db = testkit::TestDb::create().await;
    let (mut id_service, mut env) = postgres(&binaries, dir.path(), &db).await;
    env.extend(short.iter().cloned());
    let mut node = start_node("pg-node", &binaries, &env, dir.path()).await;
    purged_after_retention(&node, &keys).await;
    node.process.kill().await;
    id_service.kill().await;
}

/// An audit export whose reader takes nothing holds its place, and only one of its tenant's:
/// a second export of that tenant is refused (`429`) while another tenant's runs; once the
/// first reader goes away, its tenant exports again.
#[tokio::test]
async fn a_tenant_holds_one_audit_export_place_at_a_time() {
    let pg = PgNode::start("pg-exports").await;
    let (node, keys) = (&pg.node, &pg.keys);
    // Far more than the socket buffers hold: an export of them waits on its reader.
    pg.db
        .connect()
        .await
        .batch_execute(
            "INSERT INTO audit_log (tenant, actor_tenant, actor_key, action, object_kind, object_id, change) \
             SELECT 'acme', 'acme', 'acme/lead', 'link.update', 'link', 'code' || n, \
                    jsonb_build_object('note', repeat('x', 200)) \
             FROM generate_series(1, 90000) AS n",
        )
        .await
        .expect("seed the log");
    let client = reqwest::Client::new();
    let url = format!("http://{}/api/v1/audit?format=ndjson", node.http);
    let export = |key: &str| {
        client
            .get(&url)
            .bearer_auth(key)
            .header("x-forwarded-for", CLIENT)
            .send()
    };
    let held = export(&keys.lead).await.expect("first export");
    assert_eq!(held.status(), StatusCode::OK);
    let second = export(&keys.lead).await.expect("second export");
    assert_eq!(
        second.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a tenant's second export at once"
    );
    let other = export(&keys.boss).await.expect("another tenant's export");
    assert_eq!(other.status(), StatusCode::OK, "another tenant exports");
    let lines = other.text().await.expect("its body");
    assert!(lines.is_empty() || lines.ends_with('\n'), "{lines}");
    drop(held);
    let freed = testkit::wait_until(Duration::from_secs(20), || async {
        export(&keys.lead)
            .await
            .is_ok_and(|answer| answer.status() == StatusCode::OK)
    })
    .await;
    assert!(freed, "the place of a reader that went away is given back");
    pg.stop().await;
}

/// A person's name or address from a sign-in is the issuer's text: in the CSV export, a cell a
/// spreadsheet would compute (`=…`, `+…`, `-…`, `@…`) leaves with a `'` in front, which
/// spreadsheets show as text; NDJSON carries the values as they are.
#[tokio::test]
async fn audit_csv_cells_are_never_formulas() {
    let pg = PgNode::start("pg-formulas").await;
    let (node, keys) = (&pg.node, &pg.keys);
    let subject = r#"=HYPERLINK("https://evil.example/","Open")"#;
    pg.db
        .connect()
        .await
        .execute(
            "INSERT INTO audit_log (tenant, actor_tenant, actor_key, actor_subject, actor_email, \
             action, object_kind, object_id, change) \
             VALUES ('acme', 'acme', 'acme/lead', $1, '+1@example.com', 'link.update', 'link', \
             '-promo', '{}')",
            &[&subject],
        )
        .await
        .expect("an entry");
    let (status, csv) = raw(node, "GET", "/audit?format=csv", &keys.lead, None).await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().expect("header").clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    assert_eq!(rows.len(), 1, "{csv}");
    let cell = |name: &str| &rows[0][header.iter().position(|h| h == name).expect(name)];
    assert_eq!(cell("actor_subject"), format!("'{subject}"));
    assert_eq!(cell("actor_email"), "'+1@example.com");
    assert_eq!(cell("object_id"), "'-promo");
    assert!(
        rows[0]
            .iter()
            .all(|c| !c.starts_with(['=', '+', '-', '@', '\t', '\r'])),
        "{csv}"
    );
    let (_, ndjson) = raw(node, "GET", "/audit?format=ndjson", &keys.lead, None).await;
    let entry: Value = serde_json::from_str(ndjson.lines().next().expect("a line")).expect("JSON");
    assert_eq!(entry["actor"]["subject"], subject);
    pg.stop().await;
}
