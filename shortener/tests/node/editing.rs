//! Edits: JSON merge patches with a recorded history, disable and enable, visit limits, bad
//! patches that change nothing, and every node serving an edit within its bound.

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn make(node: &Node, body: Value) -> String {
    let (status, made) = node.create(body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["code"].as_str().expect("code").to_string()
}

fn events(history: &Value) -> Vec<(String, Value)> {
    history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().expect("kind").to_string(),
                e["change"].clone(),
            )
        })
        .collect()
}

async fn a_patch_changes_what_it_names_and_history_records_every_change(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let code = make(
        &node,
        json!({ "url": "https://example.com/first", "tags": ["a"] }),
    )
    .await;
    assert_eq!(
        node.location(&code).await.1.as_deref(),
        Some("https://example.com/first")
    );

    let expiry = "2031-01-02T03:04:05.000Z";
    let (status, link) = node
        .patch(&code, json!({ "url": "https://example.com/second", "tags": ["b", "a"], "expires_at": expiry, "max_visits": 50 }))
        .await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert_eq!(link["url"], "https://example.com/second");
    assert_eq!(link["tags"], json!(["a", "b"]));
    assert_eq!(link["expires_at"], expiry);
    assert_eq!(link["max_visits"], 50);
    // This node serves the new target at once (its cache dropped the old one).
    assert_eq!(
        node.location(&code).await.1.as_deref(),
        Some("https://example.com/second")
    );
    // Absent fields stay; null clears; a patch asking for what is there records nothing.
    let (status, link) = node
        .patch(&code, json!({ "expires_at": null, "max_visits": null }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (link["expires_at"].clone(), link["max_visits"].clone()),
        (Value::Null, Value::Null)
    );
    assert_eq!(link["url"], "https://example.com/second");
    assert_eq!(
        node.patch(&code, json!({ "url": "https://example.com/second" }))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(node.patch(&code, json!({})).await.0, StatusCode::OK);
    assert_eq!(
        node.patch(&code, json!({ "disabled": true })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        node.location(&code).await.0,
        StatusCode::GONE,
        "a disabled link answers 410"
    );
    let (_, link) = node.get(&code).await;
    assert_eq!(link["state"], "disabled");
    assert_eq!(
        node.patch(&code, json!({ "disabled": false })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        node.location(&code).await.0,
        StatusCode::FOUND,
        "enabled again, it redirects"
    );
    assert_eq!(node.delete(&code).await, StatusCode::NO_CONTENT);

    let (status, history) = node.history(&code).await;
    assert_eq!(status, StatusCode::OK);
    let events = events(&history);
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["create", "update", "update", "disable", "enable", "delete"]
    );
    // The creation shows what the link was made with, though it has changed since.
    assert_eq!(
        events[0].1["url"],
        json!({ "old": null, "new": "https://example.com/first" })
    );
    assert_eq!(events[0].1["tags"], json!({ "old": null, "new": ["a"] }));
    assert_eq!(
        events[1].1["url"],
        json!({ "old": "https://example.com/first", "new": "https://example.com/second" })
    );
    assert_eq!(
        events[1].1["tags"],
        json!({ "old": ["a"], "new": ["a", "b"] })
    );
    assert_eq!(events[1].1["expires_at"]["new"], expiry);
    assert_eq!(
        events[2].1,
        json!({ "expires_at": { "old": expiry, "new": null }, "max_visits": { "old": 50, "new": null } })
    );
    // Every event names the key that made it, as `tenant/name`.
    let key = format!(
        "default/{}",
        history["events"][0]["key"]
            .as_str()
            .expect("key")
            .trim_start_matches("default/")
    );
    for event in history["events"].as_array().expect("events") {
        assert_eq!(event["key"], key.as_str(), "{event}");
        assert!(event["at"].is_string());
    }
    // The URLs of the history chain: each change starts where the one before ended, and the
    // last ends at the stored URL.
    let mut url = events[0].1["url"]["new"].clone();
    for (_, change) in &events[1..] {
        if let Some(step) = change.get("url") {
            assert_eq!(step["old"], url, "{history}");
            url = step["new"].clone();
        }
    }
    assert_eq!(url, node.get(&code).await.1["url"]);
    // Deletes are for good: a patch of a deleted link is 410 and changes nothing.
    let (status, body) = node.patch(&code, json!({ "disabled": false })).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::GONE, json!("gone"))
    );
    assert_eq!(
        node.history(&code).await.1["events"]
            .as_array()
            .expect("events")
            .len(),
        6
    );
    assert_eq!(node.location(&code).await.0, StatusCode::GONE);
}
on_both_stores!(a_patch_changes_what_it_names_and_history_records_every_change);

async fn a_bad_patch_is_refused_with_its_code_and_changes_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let code = make(
        &node,
        json!({ "url": "https://example.com/kept", "tags": ["k"] }),
    )
    .await;
    let (_, before) = node.get(&code).await;
    let own_host = format!("{}/x", node.base);
    let many_tags: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (
            json!({ "nope": 1 }),
            StatusCode::BAD_REQUEST,
            "unknown_field",
        ),
        (
            json!({ "code": "other" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "read_only_field",
        ),
        (
            json!({ "created_at": "2020-01-01T00:00:00Z" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "read_only_field",
        ),
        (
            json!({ "clicks": {} }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "read_only_field",
        ),
        (
            json!({ "url": "ftp://example.com/" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_url",
        ),
        (
            json!({ "url": "not a url" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_url",
        ),
        (
            json!({ "url": own_host }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_url",
        ),
        (json!({ "url": 5 }), StatusCode::BAD_REQUEST, "invalid_json"),
        (
            json!({ "url": null }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            json!({ "expires_at": "2001-01-01T00:00:00Z" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_expiry",
        ),
        (
            json!({ "expires_at": "tomorrow" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_expiry",
        ),
        (
            json!({ "tags": ["Bad Tag"] }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_tag",
        ),
        (
            json!({ "tags": many_tags }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_tag",
        ),
        (
            json!({ "tags": "a" }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            json!({ "tags": [1] }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            json!({ "disabled": "yes" }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            json!({ "max_visits": 0 }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_max_visits",
        ),
        (
            json!({ "max_visits": u64::MAX }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_max_visits",
        ),
        (
            json!({ "max_visits": -3 }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_max_visits",
        ),
        (
            json!({ "max_visits": 1.5 }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_max_visits",
        ),
        (
            json!({ "max_visits": "5" }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (json!(["url"]), StatusCode::BAD_REQUEST, "invalid_json"),
        // A refused field refuses the whole patch: the valid one beside it is not applied.
        (
            json!({ "url": "https://example.com/new", "tags": ["Bad"] }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_tag",
        ),
    ];
    for (body, status, error) in cases {
        let (got, answer) = node.patch(&code, body.clone()).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(error)),
            "{body}: {answer}"
        );
    }
    // Not JSON, the wrong media type, too large, an unknown code, another code shape.
    let raw = |body: &'static str, content_type: &'static str| {
        node.api(reqwest::Method::PATCH, &format!("/links/{code}"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_eq!(
        raw("{", "application/merge-patch+json")
            .await
            .expect("send")
            .status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        raw("{}", "text/plain").await.expect("send").status(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let big = format!(
        "{{\"url\": \"https://example.com/{}\"}}",
        "a".repeat(20_000)
    );
    let response = node
        .api(reqwest::Method::PATCH, &format!("/links/{code}"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        node.patch("zzzzzzz", json!({ "disabled": true })).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        node.patch("bad%20code", json!({ "disabled": true }))
            .await
            .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );

    let (_, after) = node.get(&code).await;
    assert_eq!(before, after, "a refused patch changed the link");
    assert_eq!(
        events(&node.history(&code).await.1).len(),
        1,
        "a refused patch left an event"
    );
}
on_both_stores!(a_bad_patch_is_refused_with_its_code_and_changes_nothing);

async fn a_visit_limit_ends_redirects_after_that_many_human_visits(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let code = make(
        &node,
        json!({ "url": "https://example.com/limited", "max_visits": 3 }),
    )
    .await;
    // HEAD requests and bots do not count.
    for _ in 0..3 {
        let head = node
            .client
            .head(format!("{}/{code}", node.base))
            .send()
            .await
            .expect("head");
        assert_eq!(head.status(), StatusCode::FOUND);
        let bot = node
            .client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", "Googlebot/2.1")
            .send()
            .await
            .expect("bot");
        assert_eq!(bot.status(), StatusCode::FOUND);
    }
    for i in 0..3 {
        assert_eq!(node.location(&code).await.0, StatusCode::FOUND, "visit {i}");
    }
    for _ in 0..3 {
        assert_eq!(
            node.location(&code).await.0,
            StatusCode::GONE,
            "past the limit"
        );
    }
    let bot = node
        .client
        .get(format!("{}/{code}", node.base))
        .header("user-agent", "Googlebot/2.1")
        .send()
        .await
        .expect("bot");
    assert_eq!(
        bot.status(),
        StatusCode::GONE,
        "past the limit, nothing is served"
    );
    // The counts reach the store, and a fresh cache entry still refuses.
    let flushed = testkit::wait_until(Duration::from_secs(5), || async {
        node.get(&code).await.1["clicks"]["human"] == 3
    })
    .await;
    assert!(flushed, "{}", node.get(&code).await.1);
    node.app.cache.clear();
    assert_eq!(node.location(&code).await.0, StatusCode::GONE);
    // Raising the limit lets it serve again, up to the new one.
    assert_eq!(
        node.patch(&code, json!({ "max_visits": 4 })).await.0,
        StatusCode::OK
    );
    assert_eq!(node.location(&code).await.0, StatusCode::FOUND);
    assert_eq!(node.location(&code).await.0, StatusCode::GONE);
    assert_eq!(
        node.patch(&code, json!({ "max_visits": null })).await.0,
        StatusCode::OK
    );
    assert_eq!(node.location(&code).await.0, StatusCode::FOUND);
}
on_both_stores!(a_visit_limit_ends_redirects_after_that_many_human_visits);

/// A visit limit counts the visits a running flush has taken but not yet written: the link's
/// entry, read again while a flush is held up by the database (here by a lock on the totals'
/// table), waits for the flush rather than reading neither count, so the limit holds.
#[tokio::test]
async fn a_visit_limit_counts_the_visits_a_running_flush_holds() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("a").await;
    let code = make(
        &node,
        json!({ "url": "https://example.com/held", "max_visits": 3 }),
    )
    .await;
    for i in 0..2 {
        assert_eq!(node.location(&code).await.0, StatusCode::FOUND, "visit {i}");
    }
    let locker = stack.db.as_ref().expect("a database").connect().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE link_clicks IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    // The periodic flush (every 200 ms here) takes the two visits and waits on the lock; the
    // link's entry (kept one flush interval) runs out meanwhile.
    let admin = stack.db.as_ref().expect("a database").connect().await;
    let held = testkit::wait_until(Duration::from_secs(10), || async {
        let waiting = admin
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE '%link_clicks%'",
                &[],
            )
            .await
            .expect("activity");
        !waiting.is_empty()
            && node
                .app
                .cache
                .get(&code, std::time::Instant::now())
                .is_none()
    })
    .await;
    assert!(
        held,
        "the flush never waited on the lock with the entry gone"
    );
    let misses = node.lookups_seen() - node.cache_hits();
    let third = tokio::spawn(
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", crate::helpers::BROWSER)
            .send(),
    );
    // The visit has missed the cache and gone on to rebuild the link's limit.
    let missed = testkit::wait_until(Duration::from_secs(10), || async {
        node.lookups_seen() - node.cache_hits() > misses
    })
    .await;
    assert!(missed, "the third visit never missed the cache");
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    let third = third.await.expect("join").expect("visit");
    assert_eq!(third.status(), StatusCode::FOUND, "the third visit");
    let mut served = 0;
    for _ in 0..4 {
        if node.location(&code).await.0 == StatusCode::FOUND {
            served += 1;
        }
    }
    assert_eq!(served, 0, "visits past the limit of 3 were served");
}

/// Two nodes on one PostgreSQL: a change made on one stops the other serving the old version
/// within the change feed's delivery (measured; the bound without the feed is the cache TTL,
/// 60 s here), and visits served on one count against the other's visit limit once flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_serves_an_edit_within_the_bound() {
    let stack = Stack::new(Backend::Postgres).await;
    let a = stack.node("node-a").await;
    let b = stack.node("node-b").await;
    let mut waits = Vec::new();
    for round in 0..5 {
        let code = make(
            &a,
            json!({ "url": format!("https://example.com/{round}/old") }),
        )
        .await;
        // B caches the old target.
        assert_eq!(
            b.location(&code).await.1,
            Some(format!("https://example.com/{round}/old"))
        );
        assert_eq!(
            b.location(&code).await.1,
            Some(format!("https://example.com/{round}/old"))
        );
        let new = format!("https://example.com/{round}/new");
        let (status, _) = a.patch(&code, json!({ "url": new })).await;
        assert_eq!(status, StatusCode::OK);
        let acknowledged = Instant::now();
        let served = testkit::wait_until(Duration::from_secs(5), || async {
            b.location(&code).await.1.as_deref() == Some(new.as_str())
        })
        .await;
        assert!(
            served,
            "node B still serves the old target 5 s after the edit"
        );
        waits.push(acknowledged.elapsed());
        // Disabled and deleted on A: B answers 410 as soon.
        let what = if round % 2 == 0 {
            json!({ "disabled": true })
        } else {
            Value::Null
        };
        if what.is_null() {
            assert_eq!(a.delete(&code).await, StatusCode::NO_CONTENT);
        } else {
            assert_eq!(a.patch(&code, what).await.0, StatusCode::OK);
        }
        let gone = testkit::wait_until(Duration::from_secs(5), || async {
            b.location(&code).await.0 == StatusCode::GONE
        })
        .await;
        assert!(gone, "node B still redirects a disabled or deleted link");
    }
    waits.sort();
    eprintln!("edit propagation to the other node: {waits:?}");
    assert!(waits.last().expect("waits") < &Duration::from_secs(5));

    // A visit limit across nodes: once A's visits are flushed and B's entry refreshed (a
    // flush interval each), B counts them.
    let code = make(
        &a,
        json!({ "url": "https://example.com/limited", "max_visits": 3 }),
    )
    .await;
    assert_eq!(a.location(&code).await.0, StatusCode::FOUND);
    assert_eq!(a.location(&code).await.0, StatusCode::FOUND);
    let flushed = testkit::wait_until(Duration::from_secs(5), || async {
        a.get(&code).await.1["clicks"]["human"] == 2
    })
    .await;
    assert!(flushed);
    assert_eq!(
        b.location(&code).await.0,
        StatusCode::FOUND,
        "the third visit"
    );
    assert_eq!(
        b.location(&code).await.0,
        StatusCode::GONE,
        "B knows of A's two visits"
    );
    // A may serve once more if B's visit has not reached the store yet: the overshoot, at
    // most the visits other nodes served in a flush interval.
    let overshoot = u64::from(a.location(&code).await.0 == StatusCode::FOUND);
    let flushed = testkit::wait_until(Duration::from_secs(5), || async {
        a.get(&code).await.1["clicks"]["human"] == 3 + overshoot
    })
    .await;
    assert!(flushed);
    let stopped = testkit::wait_until(Duration::from_secs(2), || async {
        a.location(&code).await.0 == StatusCode::GONE
    })
    .await;
    assert!(stopped, "within a flush interval, A stops too");
}
