//! Bitly's API v4 (`SHORTENER_COMPAT=bitly`): off by default; shorten (new and again, on the
//! node's host and a tenant's domain), expand, a bitlink and its clicks from the rollups; the
//! JSON API's key check, tenancy and scopes answered in Bitly's error shape.

mod bad_input;
mod webhooks;

use crate::domains::claim;
use crate::helpers::{BROWSER, Backend, Node, Stack, metric, wait_for};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

/// A node on `stack` speaking Bitly, with the tenant table's keys, `acme` allowed the suffix
/// `acme.example` and `.evil.example` blocked; `edit` is applied to its configuration.
async fn bitly_node(
    stack: &Stack,
    name: &str,
    edit: impl FnOnce(&mut shortener::Config),
) -> (Node, TenantKeys) {
    let mut config = stack.config(name);
    config.compat.compat = vec!["bitly".into()];
    let path = stack.dir.path().join(format!("{name}-keys.toml"));
    let keys = write_keys(&path);
    config.access.api_keys_file = Some(path);
    config.access.domain_suffixes = vec!["acme=acme.example".into()];
    let blocklist = stack.dir.path().join(format!("{name}-blocklist"));
    std::fs::write(&blocklist, ".evil.example\n").expect("write blocklist");
    config.redirects.blocklist_file = Some(blocklist);
    edit(&mut config);
    (Node::start(config).await, keys)
}

/// `method` on `/v4{path}` with `key` as the bearer token and an optional JSON body: the
/// status, the `Retry-After` header and the JSON answer.
async fn call(
    node: &Node,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let mut request = node
        .client
        .request(method, format!("{}/v4{path}", node.base));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = response.text().await.expect("body");
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {text}: {e}"));
    (status, retry, value)
}

/// `POST /v4/shorten` with `body`: status and answer.
async fn shorten(node: &Node, key: &str, body: Value) -> (StatusCode, Value) {
    let (status, _, value) = call(node, Method::POST, "/shorten", Some(key), Some(body)).await;
    (status, value)
}

/// `GET /v4/bitlinks/{rest}`: status and answer.
async fn get(node: &Node, key: &str, rest: &str) -> (StatusCode, Value) {
    let (status, _, value) = call(
        node,
        Method::GET,
        &format!("/bitlinks/{rest}"),
        Some(key),
        None,
    )
    .await;
    (status, value)
}

fn is_bitly_time(text: &Value) -> bool {
    let text = text.as_str().unwrap_or_default();
    chrono::DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%z").is_ok() && text.ends_with("+0000")
}

/// Asserts `body` is Bitly's error `message`.
fn assert_error(body: &Value, message: &str) {
    assert_eq!(body["message"], message, "{body}");
    assert!(
        body["description"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    assert!(body["resource"].is_string(), "{body}");
}

/// What a tool asks before it shortens: its user (the key, its tenant the default group) and
/// its groups (the tenant, the one group), with any valid key, a `links:create` one included;
/// the `group_guid` found shortens, and Bitly's own `bit.ly`, as Bitly's examples send it, is
/// the default domain. No or an expired key is 401; another tenant's group is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_finds_its_group_and_shortens_with_it() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = bitly_node(&stack, "groups", |_| {}).await;
    let creator = keys.creator.as_str();
    let (status, _, user) = call(&node, Method::GET, "/user", Some(creator), None).await;
    assert_eq!(status, StatusCode::OK, "{user}");
    assert_eq!(user["default_group_guid"], "acme", "{user}");
    assert_eq!(user["is_active"], true, "{user}");
    let (status, _, groups) = call(&node, Method::GET, "/groups", Some(creator), None).await;
    assert_eq!(status, StatusCode::OK, "{groups}");
    let guid = groups["groups"][0]["guid"]
        .as_str()
        .expect("a guid")
        .to_string();
    assert_eq!(
        (guid.as_str(), groups["groups"].as_array().map(Vec::len)),
        ("acme", Some(1))
    );
    let (status, _, group) = call(&node, Method::GET, "/groups/acme", Some(creator), None).await;
    assert_eq!(
        (status, &group["guid"]),
        (StatusCode::OK, &json!("acme")),
        "{group}"
    );
    let (status, _, body) = call(&node, Method::GET, "/groups/globex", Some(creator), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_error(&body, "NOT_FOUND");
    let (status, made) = shorten(
        &node,
        creator,
        json!({ "long_url": "https://example.com/tool", "domain": "bit.ly", "group_guid": guid }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert!(
        made["link"]
            .as_str()
            .is_some_and(|l| l.starts_with("https://sho.rt/")),
        "{made}"
    );
    // A tenant that has claimed a domain of that name gets its own.
    assert_eq!(
        crate::domains::claim(&node, &keys.admin, "bit.ly").await.0,
        201
    );
    let (status, made) = shorten(
        &node,
        &keys.admin,
        json!({ "long_url": "https://example.com/claimed", "domain": "bit.ly" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert!(
        made["link"]
            .as_str()
            .is_some_and(|l| l.starts_with("https://bit.ly/")),
        "{made}"
    );
    for key in [None, Some(keys.expired.as_str())] {
        for path in ["/user", "/groups"] {
            let (status, _, body) = call(&node, Method::GET, path, key, None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {key:?}: {body}");
            assert_error(&body, "UNAUTHORIZED");
        }
    }
    let (status, _, body) = call(&node, Method::POST, "/groups", Some(creator), None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dialect_is_off_unless_named() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("a").await;
    let response = node
        .client
        .post(format!("{}/v4/shorten", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .json(&json!({ "long_url": "https://example.com/off" }))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = node
        .client
        .get(format!("{}/v4/bitlinks/sho.rt/abc", node.base))
        .bearer_auth(crate::helpers::API_KEY)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(node.stored_links().await, 0);
}

async fn every_endpoint_answers_as_bitly_does(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = bitly_node(&stack, "a", |_| {}).await;
    let key = keys.own.as_str();

    // A new long URL is 201, the same one again 200 with the same bitlink.
    let (status, made) =
        shorten(&node, key, json!({ "long_url": "https://example.com/one" })).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let code = id.strip_prefix("sho.rt/").expect("host/code").to_string();
    assert_eq!(made["link"], format!("https://sho.rt/{code}"));
    assert_eq!(made["long_url"], "https://example.com/one");
    assert!(is_bitly_time(&made["created_at"]), "{made}");
    assert_eq!(made["archived"], false);
    for empty in ["custom_bitlinks", "tags", "deeplinks"] {
        assert_eq!(made[empty], json!([]), "{made}");
    }
    assert_eq!(made["references"]["group"], "https://sho.rt/v4/groups/acme");
    let (status, again) = shorten(
        &node,
        key,
        json!({ "long_url": "https://example.com/one", "domain": "sho.rt", "group_guid": "acme" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], id.as_str());
    assert_eq!(node.stored_links().await, 1);

    // The link is the caller's tenant's in the JSON API, with its history.
    let (status, history) = crate::domains::call(
        &node,
        Method::GET,
        &format!("/links/{code}/history"),
        key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["events"].as_array().map(Vec::len), Some(1));

    // On a domain of the tenant's.
    let (status, claimed) = claim(&node, key, "go.acme.example").await;
    assert_eq!(status, 201, "{claimed}");
    let (status, branded) = shorten(
        &node,
        key,
        json!({ "long_url": "https://example.com/branded", "domain": "go.acme.example" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{branded}");
    let branded_id = branded["id"].as_str().expect("id");
    assert!(branded_id.starts_with("go.acme.example/"), "{branded}");
    assert_eq!(branded["link"], format!("https://{branded_id}"));

    // expand, by the id and by the short URL.
    for bitlink in [id.clone(), format!("https://sho.rt/{code}")] {
        let (status, _, expanded) = call(
            &node,
            Method::POST,
            "/expand",
            Some(key),
            Some(json!({ "bitlink_id": bitlink })),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{expanded}");
        assert_eq!(expanded["long_url"], "https://example.com/one");
        assert_eq!(expanded["id"], id.as_str());
        assert_eq!(expanded["link"], made["link"]);
        assert!(is_bitly_time(&expanded["created_at"]), "{expanded}");
    }

    // A bitlink, its `/` as is or encoded; title and tags are the link's.
    let (_, titled) = node
        .create_with_key(
            json!({ "url": "https://example.com/titled", "title": "Titled", "tags": ["b", "a"] }),
            key,
        )
        .await;
    let titled_code = titled["code"].as_str().expect("code");
    for rest in [
        format!("sho.rt/{titled_code}"),
        format!("sho.rt%2F{titled_code}"),
    ] {
        let (status, bitlink) = get(&node, key, &rest).await;
        assert_eq!(status, StatusCode::OK, "{bitlink}");
        assert_eq!(bitlink["id"], format!("sho.rt/{titled_code}"));
        assert_eq!(bitlink["title"], "Titled");
        assert_eq!(bitlink["tags"], json!(["a", "b"]));
        assert_eq!(bitlink["long_url"], "https://example.com/titled");
    }
    let (_, plain) = get(&node, key, &id).await;
    assert_eq!(plain["title"], Value::Null);

    clicks(&node, key, &code).await;
    tenancy_and_scopes(&node, &keys, &id).await;

    let metrics = node.metrics().await;
    let ok = "shortener_compat_requests_total{dialect=\"bitly\",action=\"shorten\",outcome=\"ok\"}";
    assert_eq!(metric(&metrics, ok), 3.0);
}
on_both_stores!(every_endpoint_answers_as_bitly_does);

/// Two visits, read back per day, hour, week and month and as a summary.
async fn clicks(node: &Node, key: &str, code: &str) {
    for _ in 0..2 {
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
    }
    let summary = format!("sho.rt/{code}/clicks/summary");
    wait_for(
        "two clicks in the summary",
        Duration::from_secs(15),
        async || get(node, key, &summary).await.1["total_clicks"] == 2,
    )
    .await;
    let (status, body) = get(node, key, &summary).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (body["unit"].clone(), body["units"].clone()),
        (json!("day"), json!(-1))
    );
    assert!(is_bitly_time(&body["unit_reference"]), "{body}");

    for (unit, units) in [("day", 3), ("hour", 5), ("week", 2), ("month", 2)] {
        let (status, body) = get(
            node,
            key,
            &format!("sho.rt/{code}/clicks?unit={unit}&units={units}"),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["unit"], unit);
        assert_eq!(body["units"], units);
        let list = body["link_clicks"].as_array().expect("link_clicks");
        assert_eq!(list.len(), units as usize, "{body}");
        // Newest first: the current unit holds both clicks (or, when an hour, day, week or
        // month began since the visits, the unit before it some of them), the earlier ones none.
        let recent: u64 = list[..2].iter().filter_map(|c| c["clicks"].as_u64()).sum();
        assert_eq!(recent, 2, "{body}");
        assert!(list[2..].iter().all(|c| c["clicks"] == 0), "{body}");
        assert!(list.iter().all(|c| is_bitly_time(&c["date"])), "{body}");
        let first = chrono::DateTime::parse_from_str(
            list[0]["date"].as_str().unwrap_or_default(),
            "%Y-%m-%dT%H:%M:%S%z",
        )
        .expect("date");
        let now = chrono::Utc::now();
        assert!(
            first <= now && now - first.to_utc() < chrono::Duration::days(32),
            "{body}"
        );
    }
    // Every unit since the link was made, and a past reference with no clicks.
    let (_, all) = get(node, key, &format!("sho.rt/{code}/clicks")).await;
    let total: u64 = all["link_clicks"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["clicks"].as_u64())
        .sum();
    assert_eq!(total, 2, "{all}");
    let (status, before) = get(
        node,
        key,
        &format!("sho.rt/{code}/clicks/summary?units=2&unit_reference=2026-01-01T00:00:00%2B0000"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{before}");
    assert_eq!(before["total_clicks"], 0);
    assert_eq!(before["unit_reference"], "2026-01-01T00:00:00+0000");
}

/// Another tenant's bitlink is NOT_FOUND; a key without `links:create` cannot shorten (403);
/// no, an unknown or an expired key is 401; nothing is written by a refusal.
async fn tenancy_and_scopes(node: &Node, keys: &TenantKeys, id: &str) {
    let other = keys.other.as_str();
    let (status, body) = get(node, other, id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_error(&body, "NOT_FOUND");
    let (status, _, body) = call(
        node,
        Method::POST,
        "/expand",
        Some(other),
        Some(json!({ "bitlink_id": id })),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = get(node, other, &format!("{id}/clicks")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // The admin key sees every tenant's.
    let (status, _) = get(node, &keys.admin, id).await;
    assert_eq!(status, StatusCode::OK);

    let stored = node.stored_links().await;
    let (status, body) = shorten(
        node,
        &keys.scopeless,
        json!({ "long_url": "https://example.com/no" }),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_error(&body, "FORBIDDEN");
    // The stats-only key reads its tenant's clicks.
    let (status, _) = get(node, &keys.scopeless, &format!("{id}/clicks/summary")).await;
    assert_eq!(status, StatusCode::OK);
    for key in [None, Some("not-a-key"), Some(keys.expired.as_str())] {
        let (status, _, body) = call(
            node,
            Method::POST,
            "/shorten",
            key,
            Some(json!({ "long_url": "https://example.com/no" })),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}: {body}");
        assert_error(&body, "UNAUTHORIZED");
    }
    assert_eq!(node.stored_links().await, stored);
    let (status, _, body) =
        call(node, Method::GET, "/shorten", Some(keys.own.as_str()), None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_error(&body, "METHOD_NOT_ALLOWED");
    // A bitlink is read here, never created, changed or deleted (docs/compat.md), and nothing
    // changes.
    for (method, path) in [
        (Method::POST, "/bitlinks"),
        (Method::PATCH, "/bitlinks/sho.rt/abc1234"),
        (Method::DELETE, "/bitlinks/sho.rt/abc1234"),
    ] {
        let (status, _, body) = call(
            node,
            method.clone(),
            path,
            Some(keys.own.as_str()),
            Some(json!({ "long_url": "https://example.com/no", "title": "x" })),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}: {body}"
        );
        assert_error(&body, "METHOD_NOT_ALLOWED");
    }
    assert_eq!(node.stored_links().await, stored);
    // Unserved paths, sub-resources of a bitlink among them, are Bitly's 404, not a bad id.
    for path in [
        "/organizations",
        "/groups/acme/bitlinks",
        "/bitlinks/sho.rt/abc/countries",
        "/bitlinks/sho.rt%2Fabc/referrers",
        "/bitlinks/sho.rt/abc/referring_domains",
    ] {
        let (status, _, body) = call(node, Method::GET, path, Some(keys.own.as_str()), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_error(&body, "NOT_FOUND");
    }
}
