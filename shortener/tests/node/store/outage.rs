//! A database that goes away under a node: the links it has cached keep answering, what it
//! would have to read answers 503 with `Retry-After`, and once the database is back the node
//! forgets what it cached (changes may have gone unheard meanwhile) and serves what changed.
//! A database that refuses connections for a reason of its own is unavailable too, not an
//! internal error.

use crate::helpers::{Backend, Node, Stack, proxied_database};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use testkit::proxy::Mode;

/// Cuts `node` off its database at `proxy`, and waits until its readiness says so: still
/// ready (200: what it has cached it serves, and every node meets the outage alike), with the
/// store named as what it lacks.
async fn cut_off(node: &Node, proxy: &testkit::proxy::Proxy) {
    proxy.set_mode(Mode::Reset);
    let down = testkit::wait_until(Duration::from_secs(20), || async {
        readiness(node)
            .await
            .is_some_and(|(_, body, _)| body.starts_with("ready, degraded: store:"))
    })
    .await;
    let last = readiness(node).await;
    assert!(
        down,
        "the node never noticed its database was away: {last:?}"
    );
    assert_eq!(last.map(|(status, _, _)| status), Some(StatusCode::OK));
}

/// The node's readiness: status, body and how long it took to answer.
async fn readiness(node: &Node) -> Option<(StatusCode, String, Duration)> {
    let started = std::time::Instant::now();
    let response = node
        .client
        .get(format!("{}/readyz", node.admin))
        .send()
        .await
        .ok()?;
    let status = response.status();
    Some((status, response.text().await.ok()?, started.elapsed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_links_keep_answering_while_the_database_is_away() {
    let stack = Stack::new(Backend::Postgres).await;
    let (url, proxy) = proxied_database(&stack, false).await;
    let mut config = stack.config("cut-off");
    config.store.database_url = Some(url);
    let node = Node::start(config).await;
    // A node that keeps its own connection, to change the link while the first is cut off.
    let other = stack.node("other").await;
    let code = node.create_url("https://example.com/before").await;
    let before = Some("https://example.com/before".to_string());
    assert_eq!(
        node.location(&code).await,
        (StatusCode::FOUND, before.clone())
    );

    cut_off(&node, &proxy).await;
    let (status, _) = other
        .patch(&code, json!({ "url": "https://example.com/after" }))
        .await;
    assert_eq!(status, StatusCode::OK);
    // The cached link answers as it did; a code that needs a read cannot be answered.
    for _ in 0..5 {
        assert_eq!(
            node.location(&code).await,
            (StatusCode::FOUND, before.clone())
        );
    }
    let unknown = node.visit("not-cached-anywhere").await;
    assert_eq!(unknown.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(unknown.headers().contains_key("retry-after"));

    // Back: the change it never heard of is served once the feed is listening again.
    proxy.set_mode(Mode::Open);
    let after = Some("https://example.com/after".to_string());
    let caught_up = testkit::wait_until(Duration::from_secs(30), || async {
        node.location(&code).await == (StatusCode::FOUND, after.clone())
    })
    .await;
    assert!(caught_up, "{:?}", node.location(&code).await);
}

/// A node's readiness through a database outage lasts as long as its cache can answer: a
/// database that goes silent (packets dropped, not refused) leaves the node ready and
/// degraded, within the probe's deadline, until the cache's lifetime has passed since the
/// store last answered; then the node is taken out (one cut off on its own would otherwise
/// answer 503 to its share of traffic for as long as it is cut off). Back, it is ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_outlasts_a_silent_database_by_the_caches_lifetime_only() {
    let stack = Stack::new(Backend::Postgres).await;
    let (url, proxy) = proxied_database(&stack, false).await;
    let mut config = stack.config("silent");
    config.store.database_url = Some(url);
    config.redirects.cache_ttl = std::num::NonZeroU64::new(3).expect("non-zero");
    let node = Node::start(config).await;
    assert_eq!(readiness(&node).await.map(|r| r.0), Some(StatusCode::OK));
    proxy.set_mode(Mode::Blackhole);
    let (status, body, took) = readiness(&node).await.expect("an answer");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.starts_with("ready, degraded: store:"), "{body}");
    assert!(
        took < Duration::from_secs(3),
        "readiness took {took:?}: {body}"
    );
    let out = testkit::wait_until(Duration::from_secs(20), || async {
        readiness(&node)
            .await
            .is_some_and(|(status, _, _)| status == StatusCode::SERVICE_UNAVAILABLE)
    })
    .await;
    let last = readiness(&node).await;
    assert!(out, "still ready past the cache's lifetime: {last:?}");
    assert!(
        last.as_ref()
            .is_some_and(|(_, body, _)| body.contains("SHORTENER_CACHE_TTL")),
        "{last:?}"
    );
    proxy.set_mode(Mode::Open);
    let back = testkit::wait_until(Duration::from_secs(20), || async {
        readiness(&node)
            .await
            .is_some_and(|(status, body, _)| status == StatusCode::OK && body == "ready\n")
    })
    .await;
    assert!(back, "{:?}", readiness(&node).await);
}

/// A database that refuses new connections for a reason of its own (`ALLOW_CONNECTIONS
/// false`: SQLSTATE 55000) is unavailable to the node, `503` with `Retry-After`, as one that
/// is down: not an internal error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_refusing_connections_is_unavailable_not_an_internal_error() {
    let stack = Stack::new(Backend::Postgres).await;
    let node = stack.node("refused").await;
    let code = node.create_url("https://example.com/first").await;
    let db = stack.db.as_ref().expect("a database");
    let (admin, connection) = tokio_postgres::connect(&testkit::admin_url(), tokio_postgres::NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    let name = db.name();
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = '{name}' AND pid <> pg_backend_pid();"
        ))
        .await
        .expect("refuse connections");
    // Three 503s in a row: past any pooled connection that was closed under it, each a new
    // connection the database refuses.
    let answers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let refused = testkit::wait_until(Duration::from_secs(20), || {
        let (node, answers) = (&node, std::sync::Arc::clone(&answers));
        async move {
            let (status, body) = node
                .create(json!({ "url": "https://example.com/refused" }))
                .await;
            let mut answers = answers.lock().expect("lock");
            answers.push((status, body));
            answers.len() >= 3
                && answers[answers.len() - 3..]
                    .iter()
                    .all(|(s, _)| *s == StatusCode::SERVICE_UNAVAILABLE)
        }
    })
    .await;
    let answers = answers.lock().expect("lock").clone();
    let last: Vec<_> = answers.iter().rev().take(3).collect();
    assert!(refused, "{} answers, the last {last:?}", answers.len());
    assert!(
        answers
            .iter()
            .all(|(s, _)| *s != StatusCode::INTERNAL_SERVER_ERROR),
        "{answers:?}"
    );
    let (_, body) = answers.last().expect("an answer");
    assert_eq!(body["error"], "unavailable", "{body}");
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .await
        .expect("allow connections");
    let back = testkit::wait_until(Duration::from_secs(30), || async {
        node.get(&code).await.0 == StatusCode::OK
    })
    .await;
    assert!(back, "the node never came back to its database");
}

/// A branded domain whose cached settings have aged out while the database is away answers
/// with what was last read of it (its root redirect here), and so does a host that is no
/// domain: the store cannot tell otherwise, and every domain failing at once is worse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branded_domains_keep_answering_while_the_database_is_away() {
    let stack = Stack::new(Backend::Postgres).await;
    let (url, proxy) = proxied_database(&stack, false).await;
    let keys = crate::tenants::write_keys(&stack.dir.path().join("api-keys.toml"));
    let mut config = stack.config("domains-cut-off");
    config.store.database_url = Some(url);
    config.access.api_keys_file = Some(stack.dir.path().join("api-keys.toml"));
    config.access.domain_suffixes = vec!["acme=acme.example".into()];
    // Entries age out within the outage below: a second for a domain, at once for a non-one.
    config.redirects.cache_ttl = std::num::NonZeroU64::new(1).expect("non-zero");
    config.redirects.negative_cache_ttl_ms = 1;
    let node = Node::start(config).await;
    let (status, claimed) = crate::domains::claim(&node, &keys.own, "go.acme.example").await;
    assert_eq!(status, 201, "{claimed}");
    let (status, patched) = crate::domains::call(
        &node,
        reqwest::Method::PATCH,
        "/domains/go.acme.example",
        &keys.own,
        Some(json!({ "root_url": "https://example.com/root" })),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let branded = node.on_host("go.acme.example", "").await;
    assert_eq!(
        branded,
        (StatusCode::FOUND, Some("https://example.com/root".into()))
    );
    let unknown = node.on_host("elsewhere.example", "").await;

    cut_off(&node, &proxy).await;
    // Past both lifetimes, every answer is what it was.
    let outage = std::time::Instant::now();
    while outage.elapsed() < Duration::from_millis(1_500) {
        assert_eq!(node.on_host("go.acme.example", "").await, branded);
        assert_eq!(node.on_host("elsewhere.example", "").await, unknown);
    }
}
