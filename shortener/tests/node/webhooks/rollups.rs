//! The hourly `clicks.rollup` event: told once per tenant and hour, whatever the number of
//! maintenance runs and nodes.

use super::{SECRET, config, receiver, register, verified};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

async fn an_hourly_rollup_event_tells_a_tenant_its_clicks_once(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (mut config, keys) = config(&stack, 10);
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-10T10:30:00Z")
        .expect("time")
        .to_utc();
    let clock = shortener::clock::Clock::manual(start);
    config.clock = clock.clone();
    let node = Node::start(config).await;
    let (status, _) = register(
        &node,
        &keys.admin,
        json!({ "tenant": "acme", "url": receiver.url, "secret": SECRET }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, link) = node
        .create_with_key(json!({ "url": "https://example.com/rolled" }), &keys.own)
        .await;
    let code = link["code"].as_str().expect("code").to_string();
    for _ in 0..2 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    clock.set(start + chrono::Duration::minutes(95)); // 12:05: the 10:00 hour has ended
    node.maintain_rollups().await;
    let rolled = testkit::wait_until(Duration::from_secs(10), || async {
        verified(&receiver)
            .iter()
            .any(|(_, kind, _)| kind == "clicks.rollup")
    })
    .await;
    assert!(
        rolled,
        "no clicks.rollup arrived: {:?}",
        receiver.requests()
    );
    let rollups: Vec<Value> = receiver
        .requests()
        .iter()
        .map(|(_, body)| serde_json::from_str::<Value>(body).expect("json"))
        .filter(|e| e["type"] == "clicks.rollup")
        .collect();
    assert_eq!(rollups.len(), 1, "{rollups:?}");
    assert_eq!(
        rollups[0]["data"],
        json!({ "tenant": "acme", "hour": "2026-01-10T10:00:00Z", "human": 0, "bot": 2, "head": 0 })
    );
    // Asked again (another run, another node), the hour is not told twice.
    let hour = time_of("2026-01-10T10:00:00Z");
    use shortener::store::OutboxStore;
    assert_eq!(
        node.app
            .store
            .record_rollup_events(hour)
            .await
            .expect("record"),
        0
    );

    // Visits in the 12:00 hour, then no maintenance run for eight hours (every node down):
    // the next run still tells the 12:00 hour, and only it.
    for _ in 0..3 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    clock.set(start + chrono::Duration::minutes(95 + 8 * 60)); // 20:05
    node.maintain_rollups().await;
    let rollups = || {
        receiver
            .requests()
            .iter()
            .map(|(_, body)| serde_json::from_str::<Value>(body).expect("json"))
            .filter(|e| e["type"] == "clicks.rollup")
            .collect::<Vec<Value>>()
    };
    let caught_up =
        testkit::wait_until(Duration::from_secs(10), || async { rollups().len() >= 2 }).await;
    assert!(caught_up, "the 12:00 hour was never told: {:?}", rollups());
    assert_eq!(
        rollups()[1]["data"],
        json!({ "tenant": "acme", "hour": "2026-01-10T12:00:00Z", "human": 0, "bot": 3, "head": 0 })
    );
    assert_eq!(rollups().len(), 2, "{:?}", rollups());
    assert_eq!(
        node.app
            .store
            .record_rollup_events(time_of("2026-01-10T12:00:00Z"))
            .await
            .expect("record"),
        0,
        "the caught-up hour would be told twice"
    );
}
on_both_stores!(an_hourly_rollup_event_tells_a_tenant_its_clicks_once);

fn time_of(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("time")
        .timestamp()
}
