//! Fair delivery: one tenant's hanging receiver, or its burst of events to a slow one, does not
//! hold up another tenant's events; an endpoint disabled by its run of failures gets no further
//! attempt; a tenant's outbox is bounded, what goes past the bound is dropped and counted, and
//! the changes still succeed; two nodes never deliver to one endpoint at once.

use super::{HANG, SECRET, api, config, deliveries, receiver, register, verified};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A receiver on 127.0.0.2 that answers every request 200 after `delay`; counts them.
async fn slow_receiver(delay: Duration) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let seen = Arc::clone(&seen);
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

/// The number in the metric line `name value`, if there is one.
async fn metric_of(node: &Node, name: &str) -> Option<f64> {
    let text = node.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
}

async fn endpoint(node: &Node, key: &str, id: i64) -> Value {
    let (_, list) = api(node, reqwest::Method::GET, "/webhooks", key).await;
    list["webhooks"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["id"] == id).cloned())
        .unwrap_or(Value::Null)
}

async fn register_for(node: &Node, key: &str, tenant: &str, url: &str) -> i64 {
    let (status, endpoint) = register(
        node,
        key,
        json!({ "tenant": tenant, "url": url, "secret": SECRET }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{endpoint}");
    endpoint["id"].as_i64().expect("id")
}

/// `PATCH /api/v1/webhooks/{id}` `{"enabled": true}`.
async fn enable(node: &Node, key: &str, id: i64) -> (StatusCode, Value) {
    let response = node
        .client
        .patch(format!("{}/api/v1/webhooks/{id}", node.base))
        .bearer_auth(key)
        .json(&json!({ "enabled": true }))
        .send()
        .await
        .expect("enable");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn create(node: &Node, key: &str, url: &str) {
    let (status, link) = node.create_with_key(json!({ "url": url }), key).await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
}

async fn a_hanging_receiver_of_one_tenant_holds_up_no_other_tenant(backend: Backend) {
    let stack = Stack::new(backend).await;
    let hanging = receiver(HANG, Duration::ZERO).await;
    let prompt = receiver(200, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 100);
    // Every attempt at the hanging receiver takes this long.
    config.webhooks.webhook_timeout_ms = std::num::NonZero::new(20_000).expect("non-zero");
    let node = Node::start(config).await;
    register_for(&node, &keys.admin, "acme", &hanging.url).await;
    register_for(&node, &keys.admin, "globex", &prompt.url).await;
    for n in 0..3 {
        create(&node, &keys.own, &format!("https://example.com/acme/{n}")).await;
    }
    let held = testkit::wait_until(Duration::from_secs(10), || async {
        !hanging.requests().is_empty()
    })
    .await;
    assert!(held, "the hanging receiver was never tried");
    // acme's receiver now holds an attempt open; globex's event is not behind it.
    create(&node, &keys.other, "https://example.com/globex").await;
    let arrived = testkit::wait_until(Duration::from_secs(3), || async {
        !prompt.requests().is_empty()
    })
    .await;
    assert!(
        arrived,
        "another tenant's event waited for the hanging receiver"
    );
    let events = verified(&prompt);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1, "link.created");
    // The hanging receiver's own queue waits behind its open attempt: one at a time.
    assert_eq!(hanging.requests().len(), 1);
}
on_both_stores!(a_hanging_receiver_of_one_tenant_holds_up_no_other_tenant);

async fn a_burst_of_one_tenants_events_holds_up_no_other_tenant(backend: Backend) {
    let stack = Stack::new(backend).await;
    // 64 events at 100 ms each: over six seconds of deliveries for acme's receiver.
    let (slow, slow_got) = slow_receiver(Duration::from_millis(100)).await;
    let prompt = receiver(200, Duration::ZERO).await;
    let (config, keys) = config(&stack, 100);
    let node = Node::start(config).await;
    register_for(&node, &keys.admin, "acme", &slow).await;
    register_for(&node, &keys.admin, "globex", &prompt.url).await;
    for n in 0..64 {
        create(&node, &keys.own, &format!("https://example.com/burst/{n}")).await;
    }
    create(&node, &keys.other, "https://example.com/globex").await;
    let arrived = testkit::wait_until(Duration::from_secs(2), || async {
        !prompt.requests().is_empty()
    })
    .await;
    assert!(
        arrived,
        "another tenant's event waited behind the burst ({} of 64 sent)",
        slow_got.load(Ordering::SeqCst)
    );
    assert!(
        slow_got.load(Ordering::SeqCst) < 64,
        "the burst was over before the other tenant's event arrived: nothing was shown"
    );
}
on_both_stores!(a_burst_of_one_tenants_events_holds_up_no_other_tenant);

async fn an_endpoint_disabled_by_its_failures_gets_no_further_attempt(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(500, Duration::ZERO).await;
    // A receiver that fails is tried once, then held for its backoff (a minute here): the
    // other five deliveries wait behind it rather than failing one after another.
    let (mut config, keys) = config(&stack, 100);
    config.webhooks.webhook_retry_base_ms = std::num::NonZero::new(60_000).expect("non-zero");
    let node = Node::start(config.clone()).await;
    let id = register_for(&node, &keys.admin, "acme", &receiver.url).await;
    for n in 0..6 {
        create(
            &node,
            &keys.own,
            &format!("https://example.com/failing/{n}"),
        )
        .await;
    }
    let tried = testkit::wait_until(Duration::from_secs(15), || async {
        !receiver.requests().is_empty()
    })
    .await;
    assert!(tried, "{:?}", deliveries(&node, id, &keys.admin).await);
    let more = testkit::wait_until(Duration::from_secs(2), || async {
        receiver.requests().len() > 1
    })
    .await;
    assert!(
        !more,
        "{} attempts within the backoff",
        receiver.requests().len()
    );
    assert_eq!(endpoint(&node, &keys.admin, id).await["failures"], 1);
    node.stop().await;
    // Then a node with a short backoff that disables the endpoint at its third failure in a
    // row, all six due at once (enabling an endpoint makes its pending deliveries due).
    config.webhooks.webhook_retry_base_ms = std::num::NonZero::new(50).expect("non-zero");
    config.webhooks.webhook_max_failures = std::num::NonZero::new(3).expect("non-zero");
    let node = Node::start(config).await;
    let (status, enabled) = enable(&node, &keys.admin, id).await;
    assert_eq!(status, StatusCode::OK, "{enabled}");
    assert_eq!(enabled["failures"], 0, "{enabled}");
    let disabled = testkit::wait_until(Duration::from_secs(15), || async {
        !endpoint(&node, &keys.admin, id).await["disabled_at"].is_null()
    })
    .await;
    assert!(disabled, "{}", endpoint(&node, &keys.admin, id).await);
    // Nothing more is sent: the deliveries claimed with the third are let go unsent.
    let more = testkit::wait_until(Duration::from_secs(2), || async {
        receiver.requests().len() > 1 + 3
    })
    .await;
    assert!(!more, "{} requests", receiver.requests().len());
    assert_eq!(receiver.requests().len(), 1 + 3);
    let after = endpoint(&node, &keys.admin, id).await;
    assert_eq!(after["failures"], 3, "{after}");
    let attempts: u64 = deliveries(&node, id, &keys.admin)
        .await
        .iter()
        .map(|d| d["attempts"].as_u64().expect("attempts"))
        .sum();
    assert_eq!(attempts, 1 + 3);
}
on_both_stores!(an_endpoint_disabled_by_its_failures_gets_no_further_attempt);

async fn a_full_outbox_drops_its_tenants_events_and_counts_them(backend: Backend) {
    let stack = Stack::new(backend).await;
    let failing = receiver(500, Duration::ZERO).await;
    let other = receiver(200, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 100);
    config.webhooks.webhook_retry_base_ms = std::num::NonZero::new(60_000).expect("non-zero");
    config.webhooks.webhook_max_pending = std::num::NonZero::new(3).expect("non-zero");
    let node = Node::start(config).await;
    let acme = register_for(&node, &keys.admin, "acme", &failing.url).await;
    let globex = register_for(&node, &keys.admin, "globex", &other.url).await;
    for n in 0..3 {
        create(&node, &keys.own, &format!("https://example.com/kept/{n}")).await;
    }
    let full = testkit::wait_until(Duration::from_secs(15), || async {
        metric_of(&node, "shortener_webhook_outbox_full_tenants ").await == Some(1.0)
    })
    .await;
    assert!(full, "{}", node.metrics().await);
    // Past the bound the changes still succeed; their events are dropped and counted.
    for n in 0..2 {
        create(
            &node,
            &keys.own,
            &format!("https://example.com/dropped/{n}"),
        )
        .await;
    }
    let (status, listed) = node.list_with_key("limit=100", &keys.own).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        listed["links"].as_array().map(Vec::len),
        Some(5),
        "{listed}"
    );
    let dropped_name = "shortener_webhook_events_dropped_total{tenant=\"acme\"} ";
    let counted = testkit::wait_until(Duration::from_secs(15), || async {
        metric_of(&node, dropped_name).await == Some(2.0)
    })
    .await;
    assert!(counted, "{}", node.metrics().await);
    assert_eq!(deliveries(&node, acme, &keys.admin).await.len(), 3);
    // Another tenant is not bounded by acme's outbox.
    create(&node, &keys.other, "https://example.com/globex").await;
    let delivered = testkit::wait_until(Duration::from_secs(10), || async {
        deliveries(&node, globex, &keys.admin)
            .await
            .first()
            .is_some_and(|d| d["state"] == "delivered")
    })
    .await;
    assert!(delivered);
    assert_eq!(
        metric_of(
            &node,
            "shortener_webhook_events_dropped_total{tenant=\"globex\"} "
        )
        .await,
        None
    );
    // Once the receiver takes what waited, acme's events are recorded again.
    failing.answer(200);
    let (status, _) = enable(&node, &keys.admin, acme).await;
    assert_eq!(status, StatusCode::OK);
    let room = testkit::wait_until(Duration::from_secs(15), || async {
        metric_of(&node, "shortener_webhook_outbox_full_tenants ").await == Some(0.0)
    })
    .await;
    assert!(room, "{}", node.metrics().await);
    create(&node, &keys.own, "https://example.com/after").await;
    let told = testkit::wait_until(Duration::from_secs(10), || async {
        let log = deliveries(&node, acme, &keys.admin).await;
        log.len() == 4 && log.iter().all(|d| d["state"] == "delivered")
    })
    .await;
    assert!(told, "{:?}", deliveries(&node, acme, &keys.admin).await);
    assert_eq!(metric_of(&node, dropped_name).await, Some(2.0));
}
on_both_stores!(a_full_outbox_drops_its_tenants_events_and_counts_them);

/// A receiver on 127.0.0.2 that answers 200 after `delay` and records the most requests it
/// held at once, and every event id it got.
async fn watching_receiver(
    delay: Duration,
) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let most = Arc::new(AtomicUsize::new(0));
    let ids: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let holding = Arc::new(AtomicUsize::new(0));
    let (most_seen, ids_seen) = (Arc::clone(&most), Arc::clone(&ids));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let (most, ids, holding) = (
                Arc::clone(&most_seen),
                Arc::clone(&ids_seen),
                Arc::clone(&holding),
            );
            async move {
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let id = headers[shortener::webhooks::sign::ID_HEADER]
                    .to_str()
                    .expect("id")
                    .to_string();
                ids.lock().expect("lock").push(id);
                tokio::time::sleep(delay).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, most, ids)
}

/// Two nodes on one PostgreSQL database: an endpoint is delivered to by one of them at a time
/// (the endpoint's lease, taken with `SKIP LOCKED`), so its receiver never holds two requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_never_deliver_to_one_endpoint_at_once() {
    let stack = Stack::new(Backend::Postgres).await;
    let (url, most, ids) = watching_receiver(Duration::from_millis(40)).await;
    let (config, keys) = config(&stack, 100);
    let mut second = stack.config("b");
    second.access.api_keys_file = config.access.api_keys_file.clone();
    second.webhooks.webhook_allow_private = true;
    let first = Node::start(config).await;
    let second = Node::start(second).await;
    register_for(&first, &keys.admin, "acme", &url).await;
    for n in 0..40 {
        let node = if n % 2 == 0 { &first } else { &second };
        create(node, &keys.own, &format!("https://example.com/shared/{n}")).await;
    }
    let all = testkit::wait_until(Duration::from_secs(20), || async {
        ids.lock().expect("lock").len() >= 40
    })
    .await;
    assert!(all, "{} of 40 arrived", ids.lock().expect("lock").len());
    assert_eq!(most.load(Ordering::SeqCst), 1, "two requests at once");
    let mut got = ids.lock().expect("lock").clone();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 40, "each event once");
}
