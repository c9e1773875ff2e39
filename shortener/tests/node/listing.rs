//! Lists and exports: newest first by keyset, every filter, tamper-evident cursors confined to
//! their tenant, and exports that agree with the list.

use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;

/// Creates a link with `body` and returns its code.
async fn make(node: &Node, body: Value) -> String {
    let (status, made) = node.create(body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["code"].as_str().expect("code").to_string()
}

async fn pages_return_every_link_that_existed_throughout_exactly_once(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut before = Vec::new();
    for i in 0..30 {
        before.push(make(&node, json!({ "url": format!("https://example.com/{i}") })).await);
    }
    // Newest first: the reverse of creation (ties in time broken by code, also descending).
    let all = node.list_all("state=all", 1000).await;
    assert_eq!(all.len(), 30);
    let (_, page) = node.list("limit=1000").await;
    let times: Vec<(String, String)> = page["links"]
        .as_array()
        .expect("links")
        .iter()
        .map(|l| {
            (
                l["created_at"].as_str().expect("t").to_string(),
                l["code"].as_str().expect("c").to_string(),
            )
        })
        .collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first, then by code descending");

    // Page through seven at a time while links are created and deleted between pages.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut created_during = Vec::new();
    let mut deleted = HashSet::new();
    for round in 0.. {
        let query = match &cursor {
            Some(c) => format!("state=active&limit=7&cursor={c}"),
            None => "state=active&limit=7".to_string(),
        };
        let (status, page) = node.list(&query).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for link in page["links"].as_array().expect("links") {
            seen.push(link["code"].as_str().expect("code").to_string());
        }
        created_during.push(
            make(
                &node,
                json!({ "url": format!("https://example.com/new/{round}") }),
            )
            .await,
        );
        // Delete one link no page has shown yet (the oldest one left).
        if let Some(victim) = before
            .iter()
            .find(|c| !seen.contains(c) && !deleted.contains(*c))
        {
            assert_eq!(node.delete(victim).await, StatusCode::NO_CONTENT);
            deleted.insert(victim.clone());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a link appeared twice: {seen:?}");
    for code in before.iter().filter(|c| !deleted.contains(*c)) {
        assert!(
            seen.contains(code),
            "{code} existed throughout and was not listed"
        );
    }
    for code in &created_during {
        assert!(
            !seen.contains(code),
            "{code} was created behind the cursor and listed"
        );
    }
}
on_both_stores!(pages_return_every_link_that_existed_throughout_exactly_once);

async fn every_filter_selects_what_it_names(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let spring = make(
        &node,
        json!({ "url": "https://shop.example.com/spring?utm=x", "tags": ["spring", "sale"] }),
    )
    .await;
    let summer = make(
        &node,
        json!({ "url": "https://example.com/summer", "tags": ["summer"] }),
    )
    .await;
    let other = make(
        &node,
        json!({ "url": "https://other.test/page", "max_visits": 5 }),
    )
    .await;
    let used = make(
        &node,
        json!({ "url": "https://other.test/used", "max_visits": 1 }),
    )
    .await;
    // A person's visit each: `used` has had its one, `other` has four left.
    for code in [&used, &other] {
        let visit = node
            .client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", crate::helpers::BROWSER)
            .send()
            .await
            .expect("visit");
        assert_eq!(visit.status(), StatusCode::FOUND, "{code}");
    }
    let soon = make(&node, json!({ "url": "https://other.test/soon", "expires_at": (chrono::Utc::now() + chrono::Duration::seconds(1)).to_rfc3339() })).await;
    let off = make(&node, json!({ "url": "https://other.test/off" })).await;
    let gone = make(&node, json!({ "url": "https://other.test/gone" })).await;
    assert_eq!(
        node.patch(&off, json!({ "disabled": true })).await.0,
        StatusCode::OK
    );
    assert_eq!(node.delete(&gone).await, StatusCode::NO_CONTENT);
    let expired = testkit::wait_until(std::time::Duration::from_secs(5), || async {
        node.get(&soon).await.1["state"] == "expired"
    })
    .await;
    assert!(expired, "{soon} never expired");
    // Once the node has flushed the visit, the link says it is used up.
    let used_up = testkit::wait_until(std::time::Duration::from_secs(20), || async {
        node.get(&used).await.1["state"] == "used_up"
    })
    .await;
    assert!(used_up, "{used} never showed as used up");
    assert_eq!(node.get(&other).await.1["state"], "active");
    let midpoint = chrono::Utc::now();
    let late = make(
        &node,
        json!({ "url": "https://late.example.com/x", "tags": ["spring"] }),
    )
    .await;

    let cases: Vec<(String, Vec<&String>)> = vec![
        ("tag=spring".into(), vec![&late, &spring]),
        ("tag=summer".into(), vec![&summer]),
        ("tag=none".into(), vec![]),
        ("host=example.com".into(), vec![&summer]),
        ("host=.example.com".into(), vec![&late, &summer, &spring]),
        ("host=shop.example.com".into(), vec![&spring]),
        ("q=utm%3Dx".into(), vec![&spring]),
        ("q=other.test%2Fo".into(), vec![&off]),
        ("state=active".into(), vec![&late, &other, &summer, &spring]),
        ("state=expired".into(), vec![&soon]),
        ("state=used_up".into(), vec![&used]),
        ("state=disabled".into(), vec![&off]),
        ("state=deleted".into(), vec![&gone]),
        (
            "state=all&tag=spring&host=.example.com".into(),
            vec![&late, &spring],
        ),
        (
            format!("created_after={}", urlencode(&midpoint.to_rfc3339())),
            vec![&late],
        ),
        (
            format!(
                "created_before={}&host=other.test",
                urlencode(&midpoint.to_rfc3339())
            ),
            vec![&gone, &off, &soon, &used, &other],
        ),
    ];
    for (query, want) in cases {
        let mut got = node.list_all(&query, 2).await;
        let mut want: Vec<String> = want.into_iter().cloned().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{query}");
    }
    // A listed link says what it is.
    let (_, page) = node.list("tag=summer").await;
    let link = &page["links"][0];
    assert_eq!(link["tags"], json!(["summer"]));
    assert_eq!(link["state"], "active");
    assert_eq!(link["tenant"], "default");
    let (_, page) = node.list("state=disabled").await;
    assert_eq!(page["links"][0]["state"], "disabled");
    assert!(page["links"][0]["disabled_at"].is_string());
}
on_both_stores!(every_filter_selects_what_it_names);

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}

async fn cursors_are_tamper_evident_and_confined_to_their_tenant_and_filters(backend: Backend) {
    let stack = Stack::new(backend).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("tenants");
    config.access.api_keys_file = Some(path);
    let node = Node::start(config).await;
    for i in 0..5 {
        for key in [&keys.own, &keys.other] {
            let (status, _) = node
                .create_with_key(
                    json!({ "url": format!("https://example.com/{i}"), "tags": ["t"] }),
                    key,
                )
                .await;
            assert_eq!(status, StatusCode::CREATED);
        }
    }
    let (status, first) = node.list_with_key("limit=2&tag=t", &keys.own).await;
    assert_eq!(status, StatusCode::OK);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    // The cursor continues its own list, with any page size.
    let (status, next) = node
        .list_with_key(&format!("limit=3&tag=t&cursor={cursor}"), &keys.own)
        .await;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next["links"].as_array().expect("links").len(), 3);
    assert!(
        next["links"]
            .as_array()
            .expect("links")
            .iter()
            .all(|l| l["tenant"] == "acme")
    );
    // Another tenant, other filters, a changed cursor: 400 invalid_cursor, never rows.
    let mut changed = cursor.clone().into_bytes();
    changed[5] = if changed[5] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).expect("ascii");
    for (query, key) in [
        (format!("limit=2&tag=t&cursor={cursor}"), &keys.other),
        (format!("limit=2&cursor={cursor}"), &keys.own),
        (
            format!("limit=2&tag=t&state=active&cursor={cursor}"),
            &keys.own,
        ),
        (format!("limit=2&tag=t&cursor={changed}"), &keys.own),
        (
            format!("limit=2&tag=t&cursor={}", &cursor[..cursor.len() - 2]),
            &keys.own,
        ),
        ("limit=2&tag=t&cursor=AAAA".to_string(), &keys.own),
    ] {
        let (status, body) = node.list_with_key(&query, key).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"], "invalid_cursor", "{query}");
    }
    // Each tenant lists its own; admin lists every tenant's.
    for (key, tenants) in [
        (&keys.own, vec!["acme"]),
        (&keys.other, vec!["globex"]),
        (&keys.admin, vec!["acme", "globex"]),
    ] {
        let (_, page) = node.list_with_key("limit=1000", key).await;
        let mut seen: Vec<&str> = page["links"]
            .as_array()
            .expect("links")
            .iter()
            .map(|l| l["tenant"].as_str().expect("tenant"))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, tenants);
    }
    // A key without links:read may not list.
    let (status, _) = node.list_with_key("", &keys.scopeless).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
on_both_stores!(cursors_are_tamper_evident_and_confined_to_their_tenant_and_filters);

async fn bad_list_and_export_queries_are_refused_with_their_codes(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    make(&node, json!({ "url": "https://example.com/x" })).await;
    let long_q = "q=".to_string() + &"a".repeat(300);
    for (query, code) in [
        ("limit=0", "invalid_limit"),
        ("limit=1001", "invalid_limit"),
        ("limit=ten", "invalid_limit"),
        ("limit=-1", "invalid_limit"),
        ("state=gone", "invalid_state"),
        ("created_after=yesterday", "invalid_date"),
        ("created_before=2026-13-01T00:00:00Z", "invalid_date"),
        (
            "created_after=2027-01-01T00:00:00Z&created_before=2026-01-01T00:00:00Z",
            "invalid_range",
        ),
        ("tag=Bad!", "invalid_tag"),
        ("tag=", "invalid_tag"),
        ("host=a%20b", "invalid_host"),
        ("q=", "invalid_query"),
        ("q=ab", "invalid_query"),
        (long_q.as_str(), "invalid_query"),
        ("cursor=%FF%FE", "invalid_cursor"),
        ("sort=asc", "invalid_query_parameter"),
        ("format=csv", "invalid_query_parameter"),
    ] {
        let (status, body) = node.list(query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"], code, "{query}: {body}");
    }
    for (query, code) in [
        ("format=xml", "invalid_format"),
        ("limit=10", "invalid_query_parameter"),
        ("cursor=abc", "invalid_query_parameter"),
        ("state=gone", "invalid_state"),
    ] {
        let (status, body) = node.export(query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.contains(code), "{query}: {body}");
    }
    // Without a key: 401, nothing listed.
    let response = node
        .client
        .get(format!("{}/api/v1/links", node.base))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
on_both_stores!(bad_list_and_export_queries_are_refused_with_their_codes);

async fn an_export_holds_every_link_of_the_list_in_both_formats(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut made = Vec::new();
    for i in 0..40 {
        let tags = if i % 2 == 0 {
            json!(["even"])
        } else {
            json!([])
        };
        made.push(
            make(
                &node,
                json!({ "url": format!("https://example.com/{i}?a=1,2"), "tags": tags }),
            )
            .await,
        );
    }
    assert_eq!(node.delete(&made[3]).await, StatusCode::NO_CONTENT);
    let listed = node.list_all("state=all", 7).await;

    // NDJSON: one link per line, in list order, with what a list shows.
    let (status, text) = node.export("").await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let codes: Vec<String> = lines
        .iter()
        .map(|l| l["code"].as_str().expect("code").to_string())
        .collect();
    assert_eq!(codes, listed);
    assert_eq!(lines.iter().filter(|l| l["state"] == "deleted").count(), 1);
    // Filters as in a list.
    let (_, even) = node.export("tag=even&state=active").await;
    assert_eq!(
        even.lines().count(),
        node.list_all("tag=even&state=active", 100).await.len()
    );
    assert_eq!(even.lines().count(), 20);

    // CSV: a header row, then one row per link; quoted fields survive.
    let (status, csv_text) = node.export("format=csv").await;
    assert_eq!(status, StatusCode::OK);
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let headers = reader.headers().expect("headers").clone();
    assert_eq!(&headers[0], "code");
    assert_eq!(&headers[1], "url");
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    assert_eq!(rows.len(), listed.len());
    assert_eq!(
        rows.iter().map(|r| r[0].to_string()).collect::<Vec<_>>(),
        listed
    );
    assert!(rows.iter().all(|r| r[1].ends_with("?a=1,2")));

    // The CSV export imports into another deployment with every active link's code kept; the
    // deleted one is refused (`not_active`), not brought back.
    let target = Stack::new(Backend::Sqlite).await;
    let fresh = target.node("b").await;
    let (status, answer) = fresh.import("text/csv", csv_text.clone(), "").await;
    assert_eq!(status, StatusCode::OK);
    let summary = &answer.last().expect("summary")["summary"];
    assert_eq!(summary["created"], listed.len() - 1, "{summary}");
    assert_eq!(summary["errors"], 1, "{summary}");
    assert_eq!(
        answer.iter().filter(|l| l["error"] == "not_active").count(),
        1,
        "{answer:?}"
    );
    assert_eq!(fresh.get(&made[3]).await.0, StatusCode::NOT_FOUND);
    for code in made[..5].iter().filter(|c| **c != made[3]) {
        let (status, link) = fresh.get(code).await;
        assert_eq!(status, StatusCode::OK, "{code}");
        assert!(
            link["url"]
                .as_str()
                .expect("url")
                .starts_with("https://example.com/")
        );
    }
    // Without a key: 401.
    let response = node
        .client
        .get(format!("{}/api/v1/links/export", node.base))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
on_both_stores!(an_export_holds_every_link_of_the_list_in_both_formats);

async fn an_export_is_one_snapshot_while_creates_continue(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let mut before = HashSet::new();
    for i in 0..300 {
        before.insert(make(&node, json!({ "url": format!("https://example.com/{i}") })).await);
    }
    let writer = async {
        for i in 0..100 {
            make(
                &node,
                json!({ "url": format!("https://example.com/during/{i}") }),
            )
            .await;
        }
    };
    let (exported, ()) = tokio::join!(node.export(""), writer);
    let (status, text) = exported;
    assert_eq!(status, StatusCode::OK);
    let codes: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("line")["code"]
                .as_str()
                .expect("code")
                .to_string()
        })
        .collect();
    let unique: HashSet<&String> = codes.iter().collect();
    assert_eq!(unique.len(), codes.len(), "a link exported twice");
    for code in &before {
        assert!(
            unique.contains(code),
            "{code} existed before the export began and is missing"
        );
    }
}
on_both_stores!(an_export_is_one_snapshot_while_creates_continue);
