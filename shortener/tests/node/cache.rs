//! The redirect cache: answers it gives are the store's, and changes made on one node reach
//! every node's cache within a bound.

use crate::helpers::{BROWSER, Backend, Stack};
use reqwest::StatusCode;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_on_one_node_stops_redirects_on_the_other_within_the_bound() {
    let stack = Stack::new(Backend::Postgres).await;
    let a = stack.node("node-a").await;
    let b = stack.node("node-b").await;
    let code = a.create_url("https://example.com/cached").await;
    // Both nodes cache the link.
    for node in [&a, &b] {
        for _ in 0..3 {
            assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
        }
    }
    let hits_before = b.cache_hits();
    assert!(hits_before >= 2, "node b did not serve from its cache");
    assert_eq!(a.delete(&code).await, StatusCode::NO_CONTENT);
    // The cache TTL in the test config is 60 s; the notification must beat it by far.
    let started = std::time::Instant::now();
    let gone = testkit::wait_until(Duration::from_secs(5), || async {
        b.visit(&code).await.status() == StatusCode::GONE
    })
    .await;
    assert!(gone, "node b kept redirecting a deleted link");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A redirect answered from the cache (at once, while the server reads the request) is the
/// answer the store gave on the first visit: the same status, headers and body for a live
/// link, a `HEAD`, a deleted link and an unknown code. A generated code above the slot
/// high-water mark, refused without the cache or the store, answers as the store's unknown
/// code does.
async fn a_cached_answer_is_the_answer_the_store_gave(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let live = node.create_url("https://example.com/cached-answer").await;
    let deleted = node.create_url("https://example.com/deleted-answer").await;
    assert_eq!(node.delete(&deleted).await, StatusCode::NO_CONTENT);
    let hits = || node.cache_hits();
    for (method, code, status) in [
        (reqwest::Method::GET, live.as_str(), StatusCode::FOUND),
        (reqwest::Method::HEAD, live.as_str(), StatusCode::FOUND),
        (reqwest::Method::GET, deleted.as_str(), StatusCode::GONE),
        (reqwest::Method::GET, "no-such-code", StatusCode::NOT_FOUND),
    ] {
        let visit = || async {
            let response = node
                .client
                .request(method.clone(), format!("{}/{code}", node.base))
                .header("user-agent", BROWSER)
                .send()
                .await
                .expect("visit");
            let status = response.status();
            let headers: Vec<_> = ["location", "cache-control", "content-length"]
                .iter()
                .map(|h| response.headers().get(*h).cloned())
                .collect();
            (status, headers, response.text().await.expect("body"))
        };
        let before = hits();
        let first = visit().await;
        let second = visit().await;
        assert_eq!(first.0, status, "{method} /{code}");
        assert_eq!(second, first, "{method} /{code}: the cached answer differs");
        assert!(
            hits() > before,
            "{method} /{code}: the second visit was not answered from the cache"
        );
    }
    let answer = async |code: &str| {
        let response = node.visit(code).await;
        let headers: Vec<_> = ["location", "cache-control", "content-length"]
            .iter()
            .map(|h| response.headers().get(*h).cloned())
            .collect();
        (
            response.status(),
            headers,
            response.text().await.expect("body"),
        )
    };
    let refused = node
        .app
        .resolver
        .counters()
        .refused_impossible
        .load(std::sync::atomic::Ordering::Relaxed);
    let above = node.app.space.encode(62u64.pow(7) - 1);
    assert_eq!(answer(&above).await, answer("no-such-code").await);
    assert_eq!(
        node.app
            .resolver
            .counters()
            .refused_impossible
            .load(std::sync::atomic::Ordering::Relaxed),
        refused + 1,
        "{above} was not refused unread"
    );
}
on_both_stores!(a_cached_answer_is_the_answer_the_store_gave);

/// The store reads a node made for its redirects (cache misses).
fn misses(node: &crate::helpers::Node) -> u64 {
    node.app
        .resolver
        .counters()
        .cache_misses
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// A cached link that no change can have reached is not read again when its lifetime ends:
/// on the embedded store because the node makes every change, on PostgreSQL while the change
/// feed's probes come back. A change is still served at once, and on PostgreSQL a change made on
/// another node too.
async fn a_cached_link_is_read_again_only_for_a_change(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    config.redirects.cache_ttl = std::num::NonZeroU64::new(4).expect("nonzero");
    let a = crate::helpers::Node::start(config).await;
    // On PostgreSQL, once the change feed listens and its probes come back.
    let confirmed = testkit::wait_until(Duration::from_secs(10), || async {
        let age = crate::helpers::metric(
            &a.metrics().await,
            "shortener_cache_changes_confirmed_age_seconds",
        );
        age < 2.0
    })
    .await;
    assert!(confirmed, "changes were never confirmed");
    let code = a.create_url("https://example.com/watched").await;
    assert_eq!(a.visit(&code).await.status(), StatusCode::FOUND);
    let read = misses(&a);
    // Two and a half lifetimes. The test is about time passing, so it sleeps: a visit a
    // second, each of which must come from the cache, not the store.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (status, location) = a.location(&code).await;
        assert_eq!(status, StatusCode::FOUND);
        assert_eq!(location.as_deref(), Some("https://example.com/watched"));
    }
    assert_eq!(misses(&a), read, "an unchanged link was read again");

    let retarget = async |node: &crate::helpers::Node, url: &str| {
        let (status, body) = node.patch(&code, serde_json::json!({ "url": url })).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    };
    retarget(&a, "https://example.com/edited").await;
    let (_, location) = a.location(&code).await;
    assert_eq!(location.as_deref(), Some("https://example.com/edited"));
    if backend == Backend::Postgres {
        let b = stack.node("b").await;
        retarget(&b, "https://example.com/elsewhere").await;
        let served = testkit::wait_until(Duration::from_secs(5), || async {
            a.location(&code).await.1.as_deref() == Some("https://example.com/elsewhere")
        })
        .await;
        assert!(served, "node a kept the target node b replaced");
    }
}
on_both_stores!(a_cached_link_is_read_again_only_for_a_change);
