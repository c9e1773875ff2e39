//! The metrics endpoint: every series present, and moving as requests are served.

use crate::helpers::{BROWSER, Backend, Stack};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_present_and_move() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("metrics").await;
    let before = node.metrics().await;
    for name in [
        "shortener_ids_in_hand",
        "shortener_runway_seconds",
        "shortener_leases_total",
        "shortener_generated_code_conflicts_total 0",
        "shortener_code_space_utilisation",
        "shortener_cache_hits_total",
        "shortener_clicks_flushed_total",
    ] {
        assert!(before.contains(name), "{name} missing from:\n{before}");
    }
    let code = node.create_url("https://example.com/m").await;
    for _ in 0..3 {
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
    }
    node.visit("zzzzzzz").await;
    let moved = testkit::wait_until(Duration::from_secs(5), || async {
        let after = node.metrics().await;
        after.contains("shortener_creates_total{outcome=\"created\"} 1")
            && after.contains("shortener_redirects_total{status=\"302\"} 3")
            && after.contains("shortener_redirects_total{status=\"404\"} 1")
            && after.contains("shortener_create_duration_seconds_count{outcome=\"created\"} 1")
            && after.contains("shortener_cache_hits_total 2")
            && after.contains("shortener_clicks_flushed_total 3")
    })
    .await;
    assert!(
        moved,
        "metrics did not move as expected:\n{}",
        node.metrics().await
    );
}

/// A PostgreSQL node reports its pool: the most it makes (the setting), the connections open
/// (a create opened at least one) and idle, and the requests waiting for one. An embedded node
/// has no pool and no such series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_node_reports_its_pool() {
    let stack = Stack::new(Backend::Postgres).await;
    let mut config = stack.config("pool");
    config.store.database_max_connections = 5;
    let node = crate::helpers::Node::start(config).await;
    node.create_url("https://example.com/pool").await;
    let text = node.metrics().await;
    let state = |state: &str| {
        crate::helpers::metric(
            &text,
            &format!("shortener_db_connections{{pool=\"primary\",state=\"{state}\"}}"),
        )
    };
    assert_eq!(state("max"), 5.0);
    assert!(state("open") >= 1.0, "{text}");
    for series in ["idle", "waiting"] {
        assert!(state(series) >= 0.0, "{series}: {text}");
    }
    assert!(!text.contains("pool=\"replica\""), "no replica is set");

    let embedded_stack = Stack::new(Backend::Sqlite).await;
    let embedded = embedded_stack.node("no-pool").await;
    assert!(
        !embedded
            .metrics()
            .await
            .contains("shortener_db_connections{")
    );
}

/// The value of the series `name{structure="…"}` in `text`.
fn structure_value(text: &str, name: &str, structure: &str) -> Option<f64> {
    let prefix = format!("{name}{{structure=\"{structure}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_structure_reports_its_bytes_and_budget_and_the_bytes_move() {
    let stack = Stack::new(Backend::Sqlite).await;
    let node = stack.node("memory").await;
    let text = node.metrics().await;
    for structure in [
        "limits_not_found",
        "limits_spent",
        "limits_password",
        "limits_api_keys",
        "password_checks",
        "agent_profiles",
        "click_counts",
        "analytics_counters",
        "domain_cache",
        "connection_gates",
        "connection_buffers",
    ] {
        let budget = structure_value(&text, "shortener_memory_budget_bytes", structure);
        assert!(
            budget.is_some_and(|b| b > 0.0),
            "{structure}: no budget in:\n{text}"
        );
        let bytes = structure_value(&text, "shortener_memory_bytes", structure);
        assert!(
            bytes.is_some_and(|b| b <= budget.unwrap_or(0.0)),
            "{structure}: bytes missing or past the budget in:\n{text}"
        );
    }
    // An unknown code is a 404 charged to the client's budget: the limiter now holds it.
    node.visit("zzzzzzz").await;
    let moved = testkit::wait_until(Duration::from_secs(5), || async {
        let text = node.metrics().await;
        structure_value(&text, "shortener_memory_bytes", "limits_not_found")
            .is_some_and(|b| b > 0.0)
    })
    .await;
    assert!(
        moved,
        "the 404 budget's bytes did not move:\n{}",
        node.metrics().await
    );
}
