//! Shlink's REST API (`SHORTENER_COMPAT=shlink`): off by default; health; short URLs created,
//! listed, read, edited and deleted in Shlink's shapes; the JSON API's key check, tenancy and
//! scopes with Shlink's problem+json; bad input refused naming its field, nothing written.

mod bad_input;
mod js_sdk;
mod limits;
mod more;
mod tags;

use crate::helpers::{Backend, Node, Stack, metric};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A node on `stack` speaking Shlink, with the tenant table's keys (`acme` may claim domains
/// under `acme.example`, `globex` under `globex.example`).
pub async fn shlink_node(stack: &Stack, name: &str) -> (Node, TenantKeys) {
    shlink_node_with(stack, name, |_| {}).await
}

/// [`shlink_node`] with `edit` applied to its configuration.
pub async fn shlink_node_with(
    stack: &Stack,
    name: &str,
    edit: impl FnOnce(&mut shortener::Config),
) -> (Node, TenantKeys) {
    let mut config = stack.config(name);
    config.compat.compat = vec!["shlink".into()];
    let path = stack.dir.path().join(format!("{name}-keys.toml"));
    let keys = write_keys(&path);
    config.access.api_keys_file = Some(path);
    config.access.domain_suffixes = ["acme=acme.example", "globex=globex.example"]
        .map(String::from)
        .to_vec();
    edit(&mut config);
    (Node::start(config).await, keys)
}

/// A call to `path` (under `/rest`) with `key` as `X-Api-Key`: status, content type, JSON
/// (`null` for an empty body).
pub async fn call(
    node: &Node,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String, Value) {
    let mut request = node
        .client
        .request(method, format!("{}/rest{path}", node.base));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    let media = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = response.text().await.expect("body");
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, media, value)
}

/// Asserts a problem+json answer of `status` and Shlink's error `kind`.
pub fn assert_problem(answer: &(StatusCode, String, Value), status: u16, kind: &str) {
    let (got, media, body) = answer;
    assert_eq!(got.as_u16(), status, "{body}");
    assert_eq!(media, "application/problem+json", "{body}");
    assert_eq!(
        body["type"],
        format!("https://shlink.io/api/error/{kind}"),
        "{body}"
    );
    assert_eq!(body["status"], status, "{body}");
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dialect_is_off_unless_named() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("a").await;
    let (status, _, _) = call(&node, Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let made = call(
        &node,
        Method::POST,
        "/v3/short-urls",
        Some(crate::helpers::API_KEY),
        Some(json!({"longUrl": "https://example.com/off"})),
    )
    .await;
    assert_eq!(made.0, StatusCode::NOT_FOUND);
    assert_eq!(node.stored_links().await, 0);
}

async fn short_urls_answer_as_shlink_does(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = shlink_node(&stack, "a").await;
    let key = Some(keys.own.as_str());

    // Health, without a key, at both paths.
    for path in ["/health", "/v3/health"] {
        let (status, media, health) = call(&node, Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(media, "application/health+json");
        assert_eq!(health["status"], "pass");
        assert!(
            health["version"]
                .as_str()
                .unwrap_or_default()
                .starts_with("4.")
        );
        assert!(health["links"].is_object(), "{health}");
    }

    // No key, a wrong key, an expired key.
    let path = "/v3/short-urls";
    assert_problem(
        &call(&node, Method::GET, path, None, None).await,
        401,
        "missing-authentication",
    );
    for bad in ["nope", keys.expired.as_str()] {
        let answer = call(&node, Method::GET, path, Some(bad), None).await;
        assert_problem(&answer, 401, "invalid-api-key");
        assert_eq!(answer.2["title"], "Invalid API key");
    }

    // Create with everything Shlink sends.
    let (status, _, made) = call(
        &node,
        Method::POST,
        path,
        key,
        Some(json!({
            "longUrl": "https://example.com/one",
            "customSlug": "shlink-one",
            // Shlink lower-cases a tag and makes each space a dash.
            "tags": ["News", "blue"],
            "title": "One",
            "validSince": "2020-01-01T00:00:00+00:00",
            "validUntil": "2099-01-01T00:00:00+00:00",
            "maxVisits": 100,
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["shortCode"], "shlink-one");
    assert_eq!(made["shortUrl"], "https://sho.rt/shlink-one");
    assert_eq!(made["longUrl"], "https://example.com/one");
    assert_eq!(made["tags"], json!(["blue", "news"]));
    assert_eq!(made["title"], "One");
    assert_eq!(made["meta"]["validUntil"], "2099-01-01T00:00:00+00:00");
    assert_eq!(made["meta"]["validSince"], Value::Null);
    assert_eq!(made["meta"]["maxVisits"], 100);
    assert_eq!(
        made["visitsSummary"],
        json!({"total": 0, "nonBots": 0, "bots": 0})
    );
    assert_eq!(made["forwardQuery"], true);
    assert_eq!(made["hasRedirectRules"], false);
    assert_eq!(made["domain"], Value::Null);
    assert!(
        made["dateCreated"]
            .as_str()
            .unwrap_or_default()
            .ends_with("+00:00")
    );

    // The same link through the JSON API: the caller's tenant's, with its history.
    let history = node
        .client
        .get(format!("{}/api/v1/links/shlink-one/history", node.base))
        .bearer_auth(&keys.own)
        .send()
        .await
        .expect("history")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(history["events"].as_array().map(Vec::len), Some(1));

    // A taken slug.
    let taken = call(
        &node,
        Method::POST,
        path,
        key,
        Some(json!({"longUrl": "https://example.com/x", "customSlug": "shlink-one"})),
    )
    .await;
    assert_problem(&taken, 400, "non-unique-slug");
    assert_eq!(taken.2["customSlug"], "shlink-one");

    for (i, tag) in ["news", "red"].iter().enumerate() {
        let (status, _, _) = call(
            &node,
            Method::POST,
            path,
            key,
            Some(json!({"longUrl": format!("https://example.org/{i}"), "tags": [tag]})),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    list_pages(&node, key).await;
    tenancy(&node, &keys).await;

    // Edit, then read back.
    let (status, _, edited) = call(
        &node,
        Method::PATCH,
        "/v3/short-urls/shlink-one",
        key,
        Some(json!({"longUrl": "https://example.com/edited", "title": null, "tags": ["z"], "maxVisits": null, "forwardQuery": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let (_, _, read) = call(&node, Method::GET, "/v3/short-urls/shlink-one", key, None).await;
    assert_eq!(read, edited);
    assert_eq!(read["longUrl"], "https://example.com/edited");
    assert_eq!(
        (&read["title"], &read["tags"], &read["meta"]["maxVisits"]),
        (&Value::Null, &json!(["z"]), &Value::Null)
    );
    assert_eq!(read["forwardQuery"], false);

    // The legacy shorten, in txt and json.
    let shorten = |format: &str| {
        node.client
            .get(format!("{}/rest/v3/short-urls/shorten", node.base))
            .query(&[
                ("apiKey", keys.own.as_str()),
                ("longUrl", "https://example.com/legacy"),
                ("format", format),
            ])
            .send()
    };
    let text = shorten("txt")
        .await
        .expect("txt")
        .text()
        .await
        .expect("text");
    assert!(
        text.starts_with("https://sho.rt/") && !text.contains('{'),
        "{text}"
    );
    let made: Value = shorten("json")
        .await
        .expect("json")
        .json()
        .await
        .expect("json");
    assert_eq!(made["longUrl"], "https://example.com/legacy");

    // Delete: gone for Shlink's reads, 410 on the JSON API.
    let (status, _, _) = call(
        &node,
        Method::DELETE,
        "/v3/short-urls/shlink-one",
        key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for method in [Method::GET, Method::DELETE] {
        assert_problem(
            &call(&node, method, "/v3/short-urls/shlink-one", key, None).await,
            404,
            "short-url-not-found",
        );
    }
    // The problem names the code and the domain asked for, a generated code's as an alias's.
    for (path, code) in [
        ("/v3/short-urls/abc1234?domain=go.acme.example", "abc1234"),
        (
            "/v3/short-urls/no-such-alias?domain=go.acme.example",
            "no-such-alias",
        ),
    ] {
        for method in [Method::GET, Method::PATCH, Method::DELETE] {
            let body = (method == Method::PATCH).then(|| json!({"title": "x"}));
            let answer = call(&node, method.clone(), path, key, body).await;
            assert_problem(&answer, 404, "short-url-not-found");
            assert_eq!(
                (&answer.2["shortCode"], &answer.2["domain"]),
                (&json!(code), &json!("go.acme.example")),
                "{method} {path}: {}",
                answer.2
            );
        }
    }
    let metrics = node.metrics().await;
    for (action, outcome, count) in [
        ("create", "ok", 3.0),
        ("create", "conflict", 1.0),
        ("health", "ok", 2.0),
        ("delete", "ok", 1.0),
    ] {
        let name = format!(
            "shortener_compat_requests_total{{dialect=\"shlink\",action=\"{action}\",outcome=\"{outcome}\"}}"
        );
        assert_eq!(metric(&metrics, &name), count, "{name}");
    }
}

/// The three links of the caller, listed as Shlink pages them.
async fn list_pages(node: &Node, key: Option<&str>) {
    let list = async |query: &str| {
        let (status, _, body) = call(
            node,
            Method::GET,
            &format!("/v3/short-urls{query}"),
            key,
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        let codes: Vec<String> = body["shortUrls"]["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|u| u["longUrl"].as_str().unwrap_or_default().to_string())
            .collect();
        (codes, body["shortUrls"]["pagination"].clone())
    };
    let (all, pages) = list("").await;
    assert_eq!(
        all,
        [
            "https://example.org/1",
            "https://example.org/0",
            "https://example.com/one"
        ]
    );
    assert_eq!(
        pages,
        json!({"currentPage": 1, "pagesCount": 1, "itemsPerPage": 10, "itemsInCurrentPage": 3, "totalItems": 3})
    );
    let (second, pages) = list("?page=2&itemsPerPage=2").await;
    assert_eq!(second, ["https://example.com/one"]);
    assert_eq!(
        pages,
        json!({"currentPage": 2, "pagesCount": 2, "itemsPerPage": 2, "itemsInCurrentPage": 1, "totalItems": 3})
    );
    let (found, _) = list("?searchTerm=EXAMPLE.COM").await;
    assert_eq!(found, ["https://example.com/one"]);
    let (tagged, _) = list("?tags%5B%5D=news").await;
    assert_eq!(tagged, ["https://example.org/0", "https://example.com/one"]);
    assert_eq!(list("?tags%5B%5D=NEWS").await.0, tagged);
    let (any, _) = list("?tags%5B%5D=red&tags%5B%5D=blue").await;
    assert_eq!(any.len(), 2);
    let (both, _) = list("?tags%5B%5D=news&tags%5B%5D=blue&tagsMode=all").await;
    assert_eq!(both, ["https://example.com/one"]);
    // A tag no link can carry (an `&`) matches nothing, as a tag nobody used: an empty page,
    // not a refusal; beside others in `any` mode it is left out.
    let empty = json!({"currentPage": 1, "pagesCount": 0, "itemsPerPage": 10, "itemsInCurrentPage": 0, "totalItems": 0});
    for query in [
        "?tags%5B%5D=q%26a",
        "?tags%5B%5D=news&tags%5B%5D=q%26a&tagsMode=all",
    ] {
        let (none, pages) = list(query).await;
        assert!(none.is_empty(), "{query}: {none:?}");
        assert_eq!(pages, empty, "{query}");
    }
    let (any, _) = list("?tags%5B%5D=q%26a&tags%5B%5D=news").await;
    assert_eq!(any, tagged, "an impossible tag beside a real one");
    let (ordered, _) = list("?orderBy=longUrl-ASC").await;
    assert_eq!(
        ordered,
        [
            "https://example.com/one",
            "https://example.org/0",
            "https://example.org/1"
        ]
    );
}

/// Another tenant's short code is unknown; a key without `links:create` cannot create.
async fn tenancy(node: &Node, keys: &TenantKeys) {
    let other = Some(keys.other.as_str());
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        let body = (method == Method::PATCH).then(|| json!({"title": "theirs"}));
        let answer = call(node, method, "/v3/short-urls/shlink-one", other, body).await;
        assert_problem(&answer, 404, "short-url-not-found");
        assert_eq!(answer.2["shortCode"], "shlink-one");
    }
    let (_, _, listed) = call(node, Method::GET, "/v3/short-urls", other, None).await;
    assert_eq!(listed["shortUrls"]["pagination"]["totalItems"], 0);
    let stored = node.stored_links().await;
    let refused = call(
        node,
        Method::POST,
        "/v3/short-urls",
        Some(&keys.scopeless),
        Some(json!({"longUrl": "https://example.com/no"})),
    )
    .await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN, "{}", refused.2);
    assert_eq!(refused.1, "application/problem+json");
    assert_eq!(node.stored_links().await, stored);
    // The admin key sees every tenant's.
    let (status, _, _) = call(
        node,
        Method::GET,
        "/v3/short-urls/shlink-one",
        Some(&keys.admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_urls_answer_as_shlink_does_on_sqlite() {
    short_urls_answer_as_shlink_does(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_urls_answer_as_shlink_does_on_postgres() {
    short_urls_answer_as_shlink_does(Backend::Postgres).await;
}
