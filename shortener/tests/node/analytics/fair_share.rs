//! The analytics ceiling is shared between tenants: one tenant's flood of visits that each
//! need a new counter (random referrers) fills no more than its share, and another tenant's
//! visits are all counted in its rollups; the drops are told by tenant in the metrics.

use super::{BROWSER, get_with};
use crate::helpers::{Backend, Node, Stack, metric};
use crate::tenants::write_keys;
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// The ceiling of the test's node.
const CEILING: usize = 40;
/// Visits of the flood, each from a referrer host of its own.
const FLOOD: usize = 200;

async fn one_tenants_flood_leaves_another_tenants_visits_counted(backend: Backend) {
    let stack = Stack::new(backend).await;
    let keys_file = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&keys_file);
    let mut config = stack.config("fair");
    config.access.api_keys_file = Some(keys_file);
    config.visits.analytics_max_entries = std::num::NonZero::new(CEILING).expect("non-zero");
    config.visits.analytics_referrers_per_hour = std::num::NonZero::new(10_000).expect("non-zero");
    // The longest interval: the test flushes by hand once the traffic is in.
    config.visits.analytics_flush_interval_ms = std::num::NonZero::new(50_000).expect("non-zero");
    let node = Node::start(config).await;
    let create = |key: String, url: &'static str| {
        let node = &node;
        async move {
            let (status, body) = node.create_with_key(json!({ "url": url }), &key).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            body["code"].as_str().expect("code").to_string()
        }
    };
    let flooded = create(keys.own.clone(), "https://example.com/flooded").await;
    let quiet = [
        create(keys.other.clone(), "https://example.com/quiet-1").await,
        create(keys.other.clone(), "https://example.com/quiet-2").await,
        create(keys.other.clone(), "https://example.com/quiet-3").await,
    ];
    let visit = |code: String, referer: String| {
        let node = &node;
        async move {
            let response = node
                .client
                .get(format!("{}/{code}", node.base))
                .header("user-agent", BROWSER)
                .header("referer", referer)
                .send()
                .await
                .expect("visit");
            assert_eq!(response.status(), StatusCode::FOUND);
        }
    };
    // Tenant acme floods, every visit from a new referrer host: a new counter each.
    futures::stream::iter(0..FLOOD)
        .map(|i| visit(flooded.clone(), format!("https://r{i}.flood.example/")))
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    // Then tenant globex: 30 visits in 9 counters (3 links, 3 referrer hosts each).
    for round in 0..10 {
        for code in &quiet {
            visit(code.clone(), format!("https://site{}.example/", round % 3)).await;
        }
    }
    assert!(
        node.app.visits.analytics().flush(&node.app.store).await,
        "the flush failed"
    );

    let totals = |key: String| {
        let node = &node;
        async move {
            let (status, body) = get_with(node, "/stats", &key).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["totals"]["human"].as_u64().expect("human visits")
        }
    };
    assert_eq!(
        totals(keys.other.clone()).await,
        30,
        "the quiet tenant's visits were dropped"
    );
    // The flood itself took half the ceiling (acme alone held counters then): the rest of its
    // visits were left out, and told as acme's.
    let counted = totals(keys.own.clone()).await;
    assert_eq!(counted, (CEILING / 2) as u64);
    let metrics = node.metrics().await;
    let dropped = metric(
        &metrics,
        r#"shortener_analytics_dropped_by_tenant_total{tenant="acme",reason="tenant_share"}"#,
    );
    assert_eq!(dropped as u64, FLOOD as u64 - counted, "{metrics}");
    assert!(
        !metrics.contains(r#"shortener_analytics_dropped_by_tenant_total{tenant="globex""#),
        "the quiet tenant was dropped: {metrics}"
    );
    assert_eq!(
        metric(&metrics, "shortener_analytics_dropped_total") as u64,
        FLOOD as u64 - counted
    );
    // The link's totals count every visit, as ever.
    let path = format!("/links/{flooded}");
    let exact = testkit::wait_until(Duration::from_secs(10), || async {
        get_with(&node, &path, &keys.own).await.1["clicks"]["human"] == FLOOD
    })
    .await;
    assert!(exact, "{}", get_with(&node, &path, &keys.own).await.1);
}
on_both_stores!(one_tenants_flood_leaves_another_tenants_visits_counted);
