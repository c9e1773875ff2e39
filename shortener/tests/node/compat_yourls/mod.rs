//! YOURLS's API (`SHORTENER_COMPAT=yourls`): off by default; each action in each format over
//! GET and form POST; the JSON API's key check, tenancy and scopes; bad input answered in
//! YOURLS's error shape with nothing written.

mod bad_input;
mod signed;
pub(crate) mod webhooks;

use crate::helpers::{BROWSER, Backend, Node, Stack, metric, wait_for};
use crate::tenants::{TenantKeys, write_keys};
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// A node on `stack` speaking YOURLS, with the tenant table's keys.
async fn yourls_node(stack: &Stack, name: &str) -> (Node, TenantKeys) {
    yourls_node_with(stack, name, |_| {}).await
}

/// [`yourls_node`] with `edit` applied to its configuration.
async fn yourls_node_with(
    stack: &Stack,
    name: &str,
    edit: impl FnOnce(&mut shortener::Config),
) -> (Node, TenantKeys) {
    let mut config = stack.config(name);
    config.compat.compat = vec!["yourls".into()];
    edit(&mut config);
    let path = stack.dir.path().join(format!("{name}-keys.toml"));
    let keys = write_keys(&path);
    config.access.api_keys_file = Some(path);
    (Node::start(config).await, keys)
}

/// `GET /yourls-api.php?{params}`: status, content type and body.
async fn get(node: &Node, params: &[(&str, &str)]) -> (StatusCode, String, String) {
    let response = node
        .client
        .get(format!("{}/yourls-api.php", node.base))
        .query(params)
        .send()
        .await
        .expect("send");
    read(response).await
}

/// `POST /yourls-api.php` with `params` as a form body.
async fn post(node: &Node, params: &[(&str, &str)]) -> (StatusCode, String, String) {
    let response = node
        .client
        .post(format!("{}/yourls-api.php", node.base))
        .form(params)
        .send()
        .await
        .expect("send");
    read(response).await
}

async fn read(response: reqwest::Response) -> (StatusCode, String, String) {
    let status = response.status();
    let media = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, media, response.text().await.expect("body"))
}

/// A `format=json` call with `key` as the signature: status and JSON.
async fn json(node: &Node, key: &str, params: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut all = vec![("signature", key), ("format", "json")];
    all.extend_from_slice(params);
    let (status, media, body) = get(node, &all).await;
    assert_eq!(media, "application/json", "{params:?}: {body}");
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
    (status, value)
}

fn is_yourls_time(text: &Value) -> bool {
    let text = text.as_str().unwrap_or_default();
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dialect_is_off_unless_named() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("a").await;
    let params = [
        ("action", "shorturl"),
        ("url", "https://example.com/off"),
        ("signature", crate::helpers::API_KEY),
        ("format", "json"),
    ];
    let (status, _, _) = get(&node, &params).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = post(&node, &params).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(node.stored_links().await, 0);
}

async fn every_action_answers_as_yourls_does(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = yourls_node(&stack, "a").await;
    let key = keys.own.as_str();

    // shorturl without a keyword (GET, JSON).
    let (status, made) = json(
        &node,
        key,
        &[("action", "shorturl"), ("url", "https://example.com/one")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["status"], "success");
    assert_eq!(made["statusCode"], 200);
    assert_eq!(made["url"]["url"], "https://example.com/one");
    assert_eq!(made["url"]["ip"], "");
    assert!(is_yourls_time(&made["url"]["date"]), "{made}");
    let code = made["url"]["keyword"]
        .as_str()
        .expect("keyword")
        .to_string();
    assert_eq!(made["shorturl"], format!("https://sho.rt/{code}"));

    // The same link through the JSON API: the caller's tenant's, with its history.
    let link = node
        .client
        .get(format!("{}/api/v1/links/{code}", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("get");
    assert_eq!(link.status(), StatusCode::OK);
    let history = node
        .client
        .get(format!("{}/api/v1/links/{code}/history", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("history")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(history["events"].as_array().map(Vec::len), Some(1));

    // shorturl with a keyword and a title (form POST, XML, the default format).
    let (status, media, body) = post(
        &node,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/two?a=1&b=<2>"),
            ("keyword", "yourls-two"),
            ("title", "Two & <more>"),
            ("signature", key),
        ],
    )
    .await;
    assert_eq!(
        (status, media.as_str()),
        (StatusCode::OK, "application/xml")
    );
    assert!(
        body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
        "{body}"
    );
    for part in [
        "<status>success</status>",
        "<keyword>yourls-two</keyword>",
        "<url>https://example.com/two?a=1&amp;b=%3C2%3E</url>",
        "<title>Two &amp; &lt;more&gt;</title>",
        "<shorturl>https://sho.rt/yourls-two</shorturl>",
    ] {
        assert!(body.contains(part), "{part} not in {body}");
    }

    // format=simple: the short URL alone. A URL without a scheme gets YOURLS's `http://`.
    let (status, media, body) = get(
        &node,
        &[
            ("action", "shorturl"),
            ("url", "example.com/three"),
            ("signature", key),
            ("format", "simple"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(media.starts_with("text/plain"), "{media}");
    assert!(
        body.starts_with("https://sho.rt/") && !body.contains('\n'),
        "{body}"
    );
    let (_, expanded) = json(&node, key, &[("action", "expand"), ("shorturl", &body)]).await;
    assert_eq!(
        expanded["longurl"], "http://example.com/three",
        "{expanded}"
    );

    // expand by keyword and by short URL.
    for short in ["yourls-two", "https://sho.rt/yourls-two"] {
        let (status, expanded) =
            json(&node, key, &[("action", "expand"), ("shorturl", short)]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(expanded["keyword"], "yourls-two");
        // Stored as the JSON API stores it: normalised.
        assert_eq!(expanded["longurl"], "https://example.com/two?a=1&b=%3C2%3E");
        assert_eq!(expanded["shorturl"], "https://sho.rt/yourls-two");
        assert_eq!(expanded["title"], "Two & <more>");
        assert_eq!(expanded["message"], "success");
    }
    let (_, _, body) = get(
        &node,
        &[
            ("action", "expand"),
            ("shorturl", &code),
            ("signature", key),
            ("format", "simple"),
        ],
    )
    .await;
    assert_eq!(body, "https://example.com/one");

    // url-stats counts the link's visits.
    for _ in 0..2 {
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
    }
    wait_for(
        "two clicks in url-stats",
        Duration::from_secs(10),
        async || {
            let (_, stats) =
                json(&node, key, &[("action", "url-stats"), ("shorturl", &code)]).await;
            stats["link"]["clicks"] == "2"
        },
    )
    .await;
    let (status, stats) = json(&node, key, &[("action", "url-stats"), ("shorturl", &code)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stats["statusCode"], 200);
    assert_eq!(stats["message"], "success");
    assert_eq!(stats["link"]["shorturl"], format!("https://sho.rt/{code}"));
    assert_eq!(stats["link"]["url"], "https://example.com/one");
    assert_eq!(stats["link"]["ip"], "");
    assert!(is_yourls_time(&stats["link"]["timestamp"]), "{stats}");

    // stats: top, bottom, last and rand over the caller's three links.
    let listed = async |filter: &str, limit: &str| {
        let (status, body) = json(
            &node,
            key,
            &[("action", "stats"), ("filter", filter), ("limit", limit)],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["stats"]["total_links"], "3", "{body}");
        assert_eq!(body["stats"]["total_clicks"], "2", "{body}");
        assert_eq!(body["message"], "success");
        body
    };
    let top = listed("top", "2").await;
    assert_eq!(top["links"]["link_1"]["url"], "https://example.com/one");
    assert_eq!(top["links"]["link_1"]["clicks"], "2");
    assert!(top["links"]["link_2"].is_object() && top["links"]["link_3"].is_null());
    let bottom = listed("bottom", "3").await;
    assert_eq!(bottom["links"]["link_3"]["url"], "https://example.com/one");
    let last = listed("last", "1").await;
    assert_eq!(last["links"]["link_1"]["url"], "http://example.com/three");
    let rand = listed("rand", "2").await;
    assert_eq!(rand["links"].as_object().map(|m| m.len()), Some(2));
    assert!(listed("top", "0").await["links"].is_null());

    // db-stats, and version.
    let (status, db) = json(&node, key, &[("action", "db-stats")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(db["db-stats"]["total_links"], "3");
    assert_eq!(db["db-stats"]["total_clicks"], "2");
    assert_eq!(db["statusCode"], 200);
    let (status, version) = json(&node, key, &[("action", "version")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        version["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("1."))
    );

    // An unknown action.
    let (status, unknown) = json(&node, key, &[("action", "delete")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        unknown["message"],
        "Unknown or missing \"action\" parameter"
    );

    let metrics = node.metrics().await;
    let ok =
        "shortener_compat_requests_total{dialect=\"yourls\",action=\"shorturl\",outcome=\"ok\"}";
    assert_eq!(metric(&metrics, ok), 3.0);

    tenancy_and_scopes(&node, &keys, &code).await;
}
on_both_stores!(every_action_answers_as_yourls_does);

/// Another tenant's key sees none of the caller's links; a key without `links:create` cannot
/// shorten; an expired key is refused; the stats count only the caller's tenant.
async fn tenancy_and_scopes(node: &Node, keys: &TenantKeys, code: &str) {
    let other = keys.other.as_str();
    let (status, expanded) = json(node, other, &[("action", "expand"), ("shorturl", code)]).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{expanded}");
    assert_eq!(expanded["message"], "Error: short URL not found");
    assert_eq!(expanded["errorCode"], 404);
    let (status, stats) = json(node, other, &[("action", "url-stats"), ("shorturl", code)]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(stats["statusCode"], 404);
    let (status, _) = json(
        node,
        other,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/globex"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, db) = json(node, other, &[("action", "db-stats")]).await;
    assert_eq!(db["db-stats"]["total_links"], "1");
    assert_eq!(db["db-stats"]["total_clicks"], "0");
    let (_, listed) = json(node, other, &[("action", "stats"), ("limit", "5")]).await;
    assert_eq!(listed["stats"]["total_links"], "1");
    assert_eq!(
        listed["links"]["link_1"]["url"],
        "https://example.com/globex"
    );

    let stored = node.stored_links().await;
    for key in [keys.scopeless.as_str(), keys.expired.as_str()] {
        let (status, refused) = json(
            node,
            key,
            &[
                ("action", "shorturl"),
                ("url", "https://example.com/refused"),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        assert_eq!(refused["errorCode"], "403");
        assert!(refused["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(node.stored_links().await, stored);
    // The stats-only key reads its tenant's counts.
    let (status, db) = json(node, &keys.scopeless, &[("action", "db-stats")]).await;
    assert_eq!(status, StatusCode::OK, "{db}");
    assert_eq!(db["db-stats"]["total_links"], "3");
    // `version` and an action this node does not serve read nothing: any valid key (a
    // create-only one, ShareX's) gets their answers; an expired key still gets none.
    for key in [keys.creator.as_str(), keys.scopeless.as_str()] {
        let (status, version) = json(node, key, &[("action", "version")]).await;
        assert_eq!(status, StatusCode::OK, "{version}");
        assert!(version["version"].is_string(), "{version}");
        let (status, unknown) = json(node, key, &[("action", "delete")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{unknown}");
        assert_eq!(
            unknown["message"],
            "Unknown or missing \"action\" parameter"
        );
    }
    let (status, _) = json(node, &keys.expired, &[("action", "version")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// Past the key's create rate a shorten is refused as YOURLS refuses (`errorCode` 429) with
/// the JSON API's `Retry-After`, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_rate_limit_applies() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = yourls_node_with(&stack, "a", |c| {
        (
            c.limits.create_rate,
            c.limits.create_burst,
            c.limits.batch_limit,
        ) = (1, 1, 1);
    })
    .await;
    let shorten = |n: usize| {
        let url = format!("https://example.com/limited/{n}");
        let (client, base, key) = (node.client.clone(), node.base.clone(), keys.own.clone());
        async move {
            client
                .get(format!("{base}/yourls-api.php"))
                .query(&[
                    ("action", "shorturl"),
                    ("format", "json"),
                    ("url", url.as_str()),
                    ("signature", key.as_str()),
                ])
                .send()
                .await
                .expect("send")
        }
    };
    assert_eq!(shorten(1).await.status(), StatusCode::OK);
    let refused = shorten(2).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["errorCode"], "429", "{body}");
    assert_eq!(node.stored_links().await, 1);
    let metrics = node.metrics().await;
    let limited = "shortener_compat_requests_total{dialect=\"yourls\",action=\"shorturl\",outcome=\"rate_limited\"}";
    assert_eq!(metric(&metrics, limited), 1.0);
}

/// A public URL with a path: the short URL `shorturl` answers names the code after that path,
/// and `expand` and `url-stats` take it back as it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_url_under_a_public_path_reads_back() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = yourls_node_with(&stack, "pathed", |c| {
        c.listeners.public_url = Some("https://example.net/s/".into());
    })
    .await;
    let key = keys.own.as_str();
    let (status, made) = json(
        &node,
        key,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/pathed"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let code = made["url"]["keyword"]
        .as_str()
        .expect("keyword")
        .to_string();
    let short = made["shorturl"].as_str().expect("shorturl").to_string();
    assert_eq!(short, format!("https://example.net/s/{code}"));
    for shorturl in [short.as_str(), &short.replace("https://", "http://"), &code] {
        let (status, expanded) =
            json(&node, key, &[("action", "expand"), ("shorturl", shorturl)]).await;
        assert_eq!(status, StatusCode::OK, "{shorturl}: {expanded}");
        assert_eq!(expanded["longurl"], "https://example.com/pathed");
        let (status, stats) = json(
            &node,
            key,
            &[("action", "url-stats"), ("shorturl", shorturl)],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{shorturl}: {stats}");
        assert_eq!(
            stats["link"]["url"], "https://example.com/pathed",
            "{stats}"
        );
    }
}
