//! Shlink's tags, domains, redirect rules and visits over the caller's links and domains.

use super::{assert_problem, call, shlink_node, shlink_node_with};
use crate::helpers::{BROWSER, Backend, Stack, wait_for};
use crate::rules::know_countries;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

async fn tags_domains_rules_and_visits(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = shlink_node_with(&stack, "a", |c| know_countries(&stack, c)).await;
    let key = Some(keys.own.as_str());
    for (slug, tags) in [
        ("t-one", json!(["news", "blue"])),
        ("t-two", json!(["news"])),
    ] {
        let body = json!({"longUrl": format!("https://example.com/{slug}"), "customSlug": slug, "tags": tags});
        assert_eq!(
            call(&node, Method::POST, "/v3/short-urls", key, Some(body))
                .await
                .0,
            200
        );
    }
    let other = json!({"longUrl": "https://example.com/theirs", "customSlug": "t-theirs", "tags": ["secret"]});
    assert_eq!(
        call(
            &node,
            Method::POST,
            "/v3/short-urls",
            Some(&keys.other),
            Some(other)
        )
        .await
        .0,
        200
    );
    for _ in 0..2 {
        node.client
            .get(format!("{}/t-one", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
    }
    node.client
        .get(format!("{}/t-one", node.base))
        .header("user-agent", "curl/8.0")
        .send()
        .await
        .expect("visit");

    // Visits overview: the caller's links' counts; orphan visits are not counted.
    wait_for(
        "three visits in the overview",
        Duration::from_secs(10),
        async || {
            let (_, _, overview) = call(&node, Method::GET, "/v3/visits", key, None).await;
            overview["visits"]["nonOrphanVisits"]["total"] == 3
        },
    )
    .await;
    let (_, _, overview) = call(&node, Method::GET, "/v3/visits", key, None).await;
    assert_eq!(
        overview["visits"]["nonOrphanVisits"],
        json!({"total": 3, "nonBots": 2, "bots": 1})
    );
    assert_eq!(
        overview["visits"]["orphanVisits"],
        json!({"total": 0, "nonBots": 0, "bots": 0})
    );
    let (status, _, page) = call(
        &node,
        Method::GET,
        "/v3/short-urls/t-one/visits?page=2&itemsPerPage=5",
        key,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(page["visits"]["data"], json!([]));
    assert_eq!(page["visits"]["pagination"]["totalItems"], 0);
    assert_eq!(page["visits"]["pagination"]["currentPage"], 2);
    assert_problem(
        &call(
            &node,
            Method::GET,
            "/v3/short-urls/t-theirs/visits",
            key,
            None,
        )
        .await,
        404,
        "short-url-not-found",
    );
    for path in [
        "/v3/tags/news/visits",
        "/v3/visits/orphan",
        "/v3/visits/non-orphan",
        "/v3/domains/sho.rt/visits",
    ] {
        let (status, _, page) = call(&node, Method::GET, path, key, None).await;
        assert_eq!(
            (status.as_u16(), &page["visits"]["data"]),
            (200, &json!([])),
            "{path}"
        );
    }

    // Tags: the caller's only, with their counts.
    let (_, _, tags) = call(&node, Method::GET, "/v3/tags", key, None).await;
    assert_eq!(tags["tags"]["data"], json!(["blue", "news"]));
    let (_, _, stats) = call(&node, Method::GET, "/v3/tags/stats", key, None).await;
    assert_eq!(
        stats["tags"]["data"],
        json!([
            {"tag": "blue", "shortUrlsCount": 1, "visitsSummary": {"total": 3, "nonBots": 2, "bots": 1}},
            {"tag": "news", "shortUrlsCount": 2, "visitsSummary": {"total": 3, "nonBots": 2, "bots": 1}},
        ])
    );
    // Renaming onto a tag that links carry already is Shlink's conflict (the rest of renames
    // and deletes is in `tags`).
    let renamed = call(
        &node,
        Method::PUT,
        "/v3/tags",
        key,
        Some(json!({"oldName": "news", "newName": "blue"})),
    )
    .await;
    assert_problem(&renamed, 409, "tag-conflict");
    assert_eq!(
        call(&node, Method::GET, "/v3/tags", key, None).await.2,
        tags
    );

    // Domains: the default one and the caller's, with redirects set through Shlink.
    assert_eq!(
        crate::domains::claim(&node, &keys.own, "go.acme.example")
            .await
            .0,
        201
    );
    assert_eq!(
        crate::domains::claim(&node, &keys.other, "go.globex.example")
            .await
            .0,
        201
    );
    let redirects = json!({"domain": "go.acme.example", "baseUrlRedirect": "https://acme.example/", "regular404Redirect": "https://acme.example/404"});
    let (status, _, set) = call(
        &node,
        Method::PATCH,
        "/v3/domains/redirects",
        key,
        Some(redirects),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    let expected = json!({"baseUrlRedirect": "https://acme.example/", "regular404Redirect": "https://acme.example/404", "invalidShortUrlRedirect": null});
    assert_eq!(set, expected);
    let (_, _, domains) = call(&node, Method::GET, "/v3/domains", key, None).await;
    let none = json!({"baseUrlRedirect": null, "regular404Redirect": null, "invalidShortUrlRedirect": null});
    assert_eq!(
        domains["domains"]["data"],
        json!([
            {"domain": "sho.rt", "isDefault": true, "redirects": none},
            {"domain": "go.acme.example", "isDefault": false, "redirects": expected},
        ])
    );
    // A short URL on the branded domain is found with `domain`, listed under it.
    let branded = json!({"longUrl": "https://example.com/branded", "customSlug": "on-brand", "domain": "go.acme.example"});
    let (status, _, made) = call(&node, Method::POST, "/v3/short-urls", key, Some(branded)).await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(
        (&made["domain"], &made["shortUrl"]),
        (
            &json!("go.acme.example"),
            &json!("https://go.acme.example/on-brand")
        )
    );
    let (status, _, got) = call(
        &node,
        Method::GET,
        "/v3/short-urls/on-brand?domain=go.acme.example",
        key,
        None,
    )
    .await;
    assert_eq!(
        (status.as_u16(), &got["longUrl"]),
        (200, &json!("https://example.com/branded"))
    );
    assert_problem(
        &call(&node, Method::GET, "/v3/short-urls/on-brand", key, None).await,
        404,
        "short-url-not-found",
    );
    let (_, _, listed) = call(
        &node,
        Method::GET,
        "/v3/short-urls?domain=go.acme.example",
        key,
        None,
    )
    .await;
    assert_eq!(listed["shortUrls"]["pagination"]["totalItems"], 1);
    let (_, _, listed) = call(
        &node,
        Method::GET,
        "/v3/short-urls?domain=DEFAULT",
        key,
        None,
    )
    .await;
    assert_eq!(listed["shortUrls"]["pagination"]["totalItems"], 2);
    // A generated short code on the branded domain: found without a domain, and not on the
    // default domain when a call names it (by its host or `DEFAULT`): a delete scoped there
    // leaves it be.
    let generated =
        json!({"longUrl": "https://example.com/generated", "domain": "go.acme.example"});
    let (status, _, made) = call(&node, Method::POST, "/v3/short-urls", key, Some(generated)).await;
    assert_eq!(status, 200, "{made}");
    let code = made["shortCode"].as_str().expect("short code").to_string();
    for domain in ["sho.rt", "DEFAULT"] {
        let path = format!("/v3/short-urls/{code}?domain={domain}");
        assert_problem(
            &call(&node, Method::DELETE, &path, key, None).await,
            404,
            "short-url-not-found",
        );
    }
    for path in [
        format!("/v3/short-urls/{code}"),
        format!("/v3/short-urls/{code}?domain=go.acme.example"),
    ] {
        let (status, _, got) = call(&node, Method::GET, &path, key, None).await;
        assert_eq!(status.as_u16(), 200, "{path}: {got}");
    }
    let theirs = call(
        &node,
        Method::PATCH,
        "/v3/domains/redirects",
        key,
        Some(json!({"domain": "go.globex.example", "baseUrlRedirect": "https://x.example/"})),
    )
    .await;
    assert_problem(&theirs, 404, "domain-not-found");
    let default = call(
        &node,
        Method::PATCH,
        "/v3/domains/redirects",
        key,
        Some(json!({"domain": "sho.rt", "baseUrlRedirect": "https://x.example/"})),
    )
    .await;
    assert_problem(&default, 400, "invalid-data");
    let bad = call(
        &node,
        Method::PATCH,
        "/v3/domains/redirects",
        key,
        Some(json!({"domain": "go.acme.example", "regular404Redirect": "not a url"})),
    )
    .await;
    assert_problem(&bad, 400, "invalid-data");
    assert_eq!(bad.2["invalidElements"], json!(["regular404Redirect"]));

    // Redirect rules, set and read back.
    let rules = json!({"redirectRules": [
        {"longUrl": "https://example.com/mobile", "conditions": [
            {"type": "device", "matchKey": null, "matchValue": "android"},
            {"type": "language", "matchKey": null, "matchValue": "de"},
        ]},
        {"longUrl": "https://example.com/campaign", "conditions": [
            {"type": "query-param", "matchKey": "c", "matchValue": "spring"},
            {"type": "ip-address", "matchKey": null, "matchValue": "10.0.0.0/8"},
            {"type": "geolocation-country-code", "matchKey": null, "matchValue": "FR"},
            {"type": "before-date", "matchKey": null, "matchValue": "2099-01-01T00:00:00+00:00"},
        ]},
    ]});
    let (status, _, set) = call(
        &node,
        Method::POST,
        "/v3/short-urls/t-two/redirect-rules",
        key,
        Some(rules),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    let (_, _, read) = call(
        &node,
        Method::GET,
        "/v3/short-urls/t-two/redirect-rules",
        key,
        None,
    )
    .await;
    assert_eq!(read, set);
    assert_eq!(read["defaultLongUrl"], "https://example.com/t-two");
    let rules = read["redirectRules"].as_array().expect("rules");
    assert_eq!(
        (rules[0]["priority"].clone(), rules[1]["priority"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(
        rules[0]["conditions"][0],
        json!({"type": "device", "matchKey": null, "matchValue": "android"})
    );
    assert_eq!(
        rules[1]["conditions"][0],
        json!({"type": "query-param", "matchKey": "c", "matchValue": "spring"})
    );
    assert_eq!(
        rules[1]["conditions"][3]["matchValue"],
        "2099-01-01T00:00:00.000Z"
    );
    let (_, _, link) = call(&node, Method::GET, "/v3/short-urls/t-two", key, None).await;
    assert_eq!(link["hasRedirectRules"], true);
    let rule_of = |page: &Value| page["redirectRules"].clone();
    let theirs = call(
        &node,
        Method::GET,
        "/v3/short-urls/t-theirs/redirect-rules",
        key,
        None,
    )
    .await;
    assert_problem(&theirs, 404, "short-url-not-found");
    let (_, _, cleared) = call(
        &node,
        Method::POST,
        "/v3/short-urls/t-two/redirect-rules",
        key,
        Some(json!({"redirectRules": []})),
    )
    .await;
    assert_eq!(rule_of(&cleared), json!([]));

    // A rule Shlink cannot show (a split) is never dropped by a Shlink client saving what it
    // read: the save is refused, and the rule stays.
    let split = json!({"rules": [{"conditions": [{"type": "device", "value": "mobile"}],
        "variants": [{"url": "https://example.com/a", "weight": 50},
                     {"url": "https://example.com/b", "weight": 50}]}]});
    let patched = node
        .client
        .patch(format!("{}/api/v1/links/t-two", node.base))
        .bearer_auth(&keys.own)
        .json(&split)
        .send()
        .await
        .expect("patch");
    assert_eq!(patched.status(), 200);
    let refused = call(
        &node,
        Method::POST,
        "/v3/short-urls/t-two/redirect-rules",
        key,
        Some(json!({"redirectRules": []})),
    )
    .await;
    assert_problem(&refused, 400, "invalid-data");
    let kept = node
        .client
        .get(format!("{}/api/v1/links/t-two", node.base))
        .bearer_auth(&keys.own)
        .send()
        .await
        .expect("get")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(kept["rules"], split["rules"], "{kept}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_domains_rules_and_visits_on_sqlite() {
    tags_domains_rules_and_visits(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_domains_rules_and_visits_on_postgres() {
    tags_domains_rules_and_visits(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dialects_are_served_side_by_side() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node_with(&stack, "a", |c| {
        c.compat.compat = vec!["yourls".into(), "shlink".into()];
    })
    .await;
    let (status, _, _) = call(&node, Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
    for (method, path) in [
        (Method::GET, "/v3/mercure-info"),
        (Method::GET, "/v2/short-urls"),
        (Method::GET, "/"),
        (Method::GET, ""),
        // The SDK's deleteShortUrlVisits and deleteOrphanVisits: unserved, not a wrong method.
        (Method::DELETE, "/v3/short-urls/abc/visits"),
        (Method::DELETE, "/v3/visits/orphan"),
    ] {
        let answer = call(&node, method, path, Some(&keys.own), None).await;
        assert_problem(&answer, 404, "not-found");
    }
    let wrong = call(&node, Method::PUT, "/v3/short-urls", Some(&keys.own), None).await;
    assert_eq!(
        (wrong.0.as_u16(), wrong.1.as_str()),
        (405, "application/problem+json")
    );
    assert_eq!(wrong.2["type"], "about:blank");
    let made = node
        .client
        .get(format!("{}/yourls-api.php", node.base))
        .query(&[
            ("action", "shorturl"),
            ("format", "json"),
            ("url", "https://example.com/y"),
            ("keyword", "from-yourls"),
            ("signature", keys.own.as_str()),
        ])
        .send()
        .await
        .expect("send");
    assert_eq!(made.status(), StatusCode::OK);
    let (status, _, got) = call(
        &node,
        Method::GET,
        "/v3/short-urls/from-yourls",
        Some(&keys.own),
        None,
    )
    .await;
    assert_eq!(
        (status, &got["longUrl"]),
        (StatusCode::OK, &json!("https://example.com/y"))
    );
}

/// `findIfExists` with a `customSlug`: Shlink answers the slug's link when it goes to the same
/// URL, and refuses the slug (`non-unique-slug`) when it goes elsewhere or is another tenant's
/// (an admin key's included), and to a key that may not read links, which would otherwise
/// learn where the slug leads by guessing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_if_exists_with_a_custom_slug_answers_the_slugs_link_to_the_same_url() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node(&stack, "a").await;
    let (own, other) = (Some(keys.own.as_str()), Some(keys.other.as_str()));
    // An admin key (tenant `ops`) sees every tenant's links, but its slug is its own tenant's.
    let admin = Some(keys.admin.as_str());
    let body = |url: &str, find: bool| json!({"longUrl": url, "customSlug": "launch", "findIfExists": find, "tags": ["x"]});
    let post = |key, body| call(&node, Method::POST, "/v3/short-urls", key, Some(body));
    let (status, _, made) = post(own, body("https://example.com/launch", true)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["shortCode"], "launch");
    // Again: the same link, not a refusal and not a second link.
    let (status, _, found) = post(own, body("https://example.com/launch", true)).await;
    assert_eq!(
        (status, &found["shortCode"]),
        (StatusCode::OK, &json!("launch"))
    );
    assert_eq!(found["longUrl"], made["longUrl"]);
    assert_eq!(found["dateCreated"], made["dateCreated"]);
    // Without findIfExists, or to another URL, or by another tenant: the slug is taken.
    for (key, url, find) in [
        (own, "https://example.com/launch", false),
        (own, "https://example.com/elsewhere", true),
        (other, "https://example.com/launch", true),
        (admin, "https://example.com/launch", true),
        (
            Some(keys.creator.as_str()),
            "https://example.com/launch",
            true,
        ),
    ] {
        let answer = post(key, body(url, find)).await;
        assert_problem(&answer, 400, "non-unique-slug");
    }
    assert_eq!(node.stored_links().await, 1);
}

/// `shortCodeLength`: the node's own length (7 here) is served, as is any length beside a
/// `customSlug` (Shlink ignores it there); another length is refused naming the one served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_code_length_is_served_at_the_nodes_length() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node(&stack, "a").await;
    let key = Some(keys.own.as_str());
    let post = |body| call(&node, Method::POST, "/v3/short-urls", key, Some(body));
    for length in [json!(7), json!("7")] {
        let (status, _, made) =
            post(json!({"longUrl": "https://example.com/seven", "shortCodeLength": length})).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        assert_eq!(made["shortCode"].as_str().map(str::len), Some(7), "{made}");
    }
    let (status, _, made) = post(json!({"longUrl": "https://example.com/slug", "customSlug": "my-slug", "shortCodeLength": 5})).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["shortCode"], "my-slug");
    let answer = post(json!({"longUrl": "https://example.com/five", "shortCodeLength": 5})).await;
    assert_problem(&answer, 400, "invalid-data");
    let detail = answer.2["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("7 characters"), "{}", answer.2);
    assert_eq!(node.stored_links().await, 3);
    // An edit does not take it, as Shlink's does not: ignored, the edit made.
    let (status, _, edited) = call(
        &node,
        Method::PATCH,
        "/v3/short-urls/my-slug",
        key,
        Some(json!({"shortCodeLength": 5, "title": "Edited"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["shortCode"], "my-slug");
    assert_eq!(edited["title"], "Edited");
}

/// Shlink's list dates: `endDate` includes the instant it names, as `startDate` does, and a
/// range that ends before it starts lists nothing (an empty page, as Shlink answers it).
async fn list_dates_include_both_ends(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = shlink_node(&stack, "dates").await;
    let rows = [
        json!({"url": "https://example.com/march-1", "code": "march-1", "created_at": "2024-03-01T10:00:00Z"}),
        json!({"url": "https://example.com/march-2", "code": "march-2", "created_at": "2024-03-02T10:00:00Z"}),
    ];
    let body: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let (status, lines) = node
        .import_with_key("application/x-ndjson", body, "", &keys.own)
        .await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    let listed = |query: &'static str| {
        let node = &node;
        let key = keys.own.clone();
        async move {
            let path = format!("/v3/short-urls?{query}");
            let (status, _, page) = call(node, Method::GET, &path, Some(&key), None).await;
            assert_eq!(status, StatusCode::OK, "{query}: {page}");
            let mut codes: Vec<String> = page["shortUrls"]["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(|u| u["shortCode"].as_str().expect("code").to_string())
                .collect();
            codes.sort();
            codes
        }
    };
    let at_ten = "startDate=2024-03-01T10:00:00%2B00:00&endDate=2024-03-01T10:00:00%2B00:00";
    assert_eq!(listed(at_ten).await, ["march-1"], "both ends included");
    let until = "endDate=2024-03-02T10:00:00Z";
    assert_eq!(listed(until).await, ["march-1", "march-2"]);
    let before = "endDate=2024-03-02T09:59:59.999Z";
    assert_eq!(listed(before).await, ["march-1"]);
    let reversed = "startDate=2024-03-02T00:00:00Z&endDate=2024-03-01T00:00:00Z";
    assert!(
        listed(reversed).await.is_empty(),
        "a reversed range lists nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dates_include_both_ends_on_sqlite() {
    list_dates_include_both_ends(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dates_include_both_ends_on_postgres() {
    list_dates_include_both_ends(Backend::Postgres).await;
}

/// `findIfExists` answers an existing link only when it is the link asked for: the same URL
/// with the same tags and `maxVisits` (as Shlink matches them); one that differs in either
/// makes a link of its own, which the same request then finds.
async fn find_if_exists_matches_tags_and_max_visits(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = shlink_node(&stack, "find").await;
    let key = Some(keys.own.as_str());
    let post = |body: Value| call(&node, Method::POST, "/v3/short-urls", key, Some(body));
    let asked = |tags: Value, max: Value| json!({"longUrl": "https://example.com/found", "findIfExists": true, "tags": tags, "maxVisits": max});
    let code = |answer: (StatusCode, String, Value)| {
        assert_eq!(answer.0, StatusCode::OK, "{}", answer.2);
        answer.2["shortCode"].as_str().expect("code").to_string()
    };
    let first = code(post(asked(json!(["a"]), Value::Null)).await);
    assert_eq!(
        code(post(asked(json!(["a"]), Value::Null)).await),
        first,
        "found"
    );
    let tagged_b = code(post(asked(json!(["b"]), Value::Null)).await);
    assert_ne!(tagged_b, first, "other tags are another link");
    let limited = code(post(asked(json!(["a"]), json!(5))).await);
    assert_ne!(limited, first, "a visit limit is another link");
    assert_eq!(
        code(post(asked(json!(["b"]), Value::Null)).await),
        tagged_b,
        "found"
    );
    let (_, _, shown) = call(
        &node,
        Method::GET,
        &format!("/v3/short-urls/{limited}"),
        key,
        None,
    )
    .await;
    assert_eq!(shown["meta"]["maxVisits"], 5, "{shown}");
    assert_eq!(shown["tags"], json!(["a"]), "{shown}");

    // Without tags or a limit it finds the JSON API's dedup link, and the other way round.
    let (status, made) = node
        .create_with_key(
            json!({"url": "https://example.com/plain", "dedup": true, "tags": ["z"]}),
            &keys.own,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let plain = json!({"longUrl": "https://example.com/plain", "findIfExists": true});
    assert_eq!(
        code(post(plain).await),
        made["code"].as_str().expect("code")
    );
    assert_eq!(node.stored_links().await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_if_exists_matches_tags_and_max_visits_on_sqlite() {
    find_if_exists_matches_tags_and_max_visits(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_if_exists_matches_tags_and_max_visits_on_postgres() {
    find_if_exists_matches_tags_and_max_visits(Backend::Postgres).await;
}

/// An admin key's Shlink tags are its own tenant's, the tags its renames and deletes act on,
/// though it reads every tenant's links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_keys_tags_are_its_own_tenants() {
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = shlink_node(&stack, "admin-tags").await;
    for (key, slug, tag) in [
        (&keys.admin, "ops-link", "ops-tag"),
        (&keys.other, "their-link", "theirs"),
    ] {
        let body = json!({"longUrl": format!("https://example.com/{slug}"), "customSlug": slug, "tags": [tag]});
        let (status, _, made) =
            call(&node, Method::POST, "/v3/short-urls", Some(key), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{made}");
    }
    let (status, _, answer) = call(&node, Method::GET, "/v3/tags", Some(&keys.admin), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["tags"]["data"], json!(["ops-tag"]));
    // It still reads the other tenant's link.
    let (status, _, link) = call(
        &node,
        Method::GET,
        "/v3/short-urls/their-link",
        Some(&keys.admin),
        None,
    )
    .await;
    assert_eq!(
        (status, &link["tags"]),
        (StatusCode::OK, &json!(["theirs"]))
    );
}
