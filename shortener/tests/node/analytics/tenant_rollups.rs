//! The tenant-level rollups agree with the per-link rows. A tenant's summary reads them (and
//! each day's busiest links); the same summary over a tag that every link of the tenant
//! carries reads the per-link rows. Both must answer the same, whatever the range's shape,
//! after flushes, after compaction and after retention.

use super::{BROWSER, PHONE, SLACK, stats, time, visit};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::json;
use shortener::clock::Clock;
use shortener::domain::{Granularity, StatsQuery, StatsScope};
use shortener::store::VisitStore;

/// The tenant's summary and the tag's over the same `range`: both answered, and the same.
async fn agree(node: &Node, range: &str) -> serde_json::Value {
    let (status, tenant) = stats(node, &format!("/stats?top=100&{range}")).await;
    assert_eq!(status, StatusCode::OK, "{range}: {tenant}");
    let (status, tag) = stats(node, &format!("/stats?top=100&tag=every&{range}")).await;
    assert_eq!(status, StatusCode::OK, "{range}: {tag}");
    assert_eq!(
        tenant, tag,
        "{range}: tenant-level rows against per-link rows"
    );
    tenant
}

/// Visits to each of `codes` (more to later links, so the top links are not a tie), from
/// three kinds of agent and three referrers, then a flush.
async fn traffic(node: &Node, codes: &[String], round: usize) {
    let agents = [BROWSER, PHONE, SLACK];
    let referrers = [
        Some("https://news.example/a"),
        None,
        Some("https://blog.example/b"),
    ];
    for (i, code) in codes.iter().enumerate() {
        for n in 0..(i + round + 1) {
            visit(
                node,
                code,
                n % 4 == 3,
                agents[(i + n) % 3],
                referrers[(n + round) % 3],
                "198.51.100.7",
            )
            .await;
        }
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
}

async fn tenant_rollups_agree_with_the_per_link_rows(backend: Backend) {
    let stack = Stack::new(backend).await;
    let clock = Clock::manual(time("2026-03-10T09:30:00Z"));
    let mut config = stack.config("a");
    config.clock = clock.clone();
    let node = Node::start(config).await;
    let mut codes = Vec::new();
    for i in 0..4 {
        let (status, made) = node
            .create(json!({ "url": format!("https://example.com/t{i}"), "tags": ["every"] }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        codes.push(made["code"].as_str().expect("code").to_string());
    }
    // Three hours of traffic: 09:30, 10:30 and 11:30; now is 11:30.
    for round in 0..3 {
        if round > 0 {
            clock.advance(chrono::Duration::hours(1));
        }
        traffic(&node, &codes, round).await;
    }
    let whole = agree(&node, "").await;
    assert_eq!(
        whole["totals"]["human"].as_u64().unwrap_or(0)
            + whole["totals"]["bot"].as_u64().unwrap_or(0)
            + whole["totals"]["head"].as_u64().unwrap_or(0),
        (1..=4).sum::<u64>() * 3 + 4 * 3,
        "{whole}"
    );
    assert_eq!(whole["links"][0]["code"], codes[3].as_str(), "{whole}");
    for range in [
        "granularity=hour",
        // Both ends inside a day, with hours after the end: the last day from the per-link rows.
        "from=2026-03-10T10:00:00Z&to=2026-03-10T11:00:00Z&granularity=hour",
        "from=2026-03-10T10:15:00Z&to=2026-03-10T11:45:00Z&granularity=hour",
        "from=2026-03-09T12:00:00Z&to=2026-03-10T10:30:00Z&granularity=hour",
        "from=2026-03-10T00:00:00Z&to=2026-03-11T00:00:00Z",
        "from=2026-03-01T00:00:00Z&to=2026-03-10T10:00:00Z",
    ] {
        agree(&node, range).await;
    }

    // 31 days on, with new traffic: 2026-03-10 is compacted into one daily row per link.
    clock.advance(chrono::Duration::days(31));
    traffic(&node, &codes[..2], 5).await;
    let outcome = node.maintain_rollups().await;
    assert!(outcome.compacted > 0, "{outcome:?}");
    for range in [
        "from=2026-03-01T00:00:00Z&to=2026-04-20T00:00:00Z",
        "from=2026-03-01T00:00:00Z&to=2026-04-20T00:00:00Z&granularity=hour",
        // Inside the compacted day: its daily rows start before `from`, so nothing.
        "from=2026-03-10T10:00:00Z&to=2026-03-10T11:00:00Z&granularity=hour",
        "from=2026-03-10T05:00:00Z&to=2026-04-10T12:00:00Z&granularity=hour",
        "",
    ] {
        agree(&node, range).await;
    }
    let compacted = agree(
        &node,
        "from=2026-03-10T00:00:00Z&to=2026-03-11T00:00:00Z&granularity=hour",
    )
    .await;
    assert_eq!(
        compacted["series"].as_array().map(Vec::len),
        Some(1),
        "one point per compacted day: {compacted}"
    );

    // Past retention, with new traffic: the old rows are gone from both.
    clock.advance(chrono::Duration::days(420));
    traffic(&node, &codes[1..], 7).await;
    let outcome = node.maintain_rollups().await;
    assert!(outcome.expired > 0, "{outcome:?}");
    agree(&node, "").await;
    agree(&node, "granularity=hour").await;
    let everything = |tag: Option<&str>| StatsQuery {
        scope: StatsScope::Links {
            tenant: Some("default".into()),
            tag: tag.map(str::to_string),
        },
        start: 0,
        end: i64::MAX / 2,
        granularity: Granularity::Day,
        top: 100,
    };
    let tenant = node
        .app
        .store
        .stats(&everything(None))
        .await
        .expect("tenant stats");
    let tag = node
        .app
        .store
        .stats(&everything(Some("every")))
        .await
        .expect("tag stats");
    assert_eq!(tenant, tag);
    // March is gone on both stores (PostgreSQL keeps whole months until they end before the
    // boundary, so April's day may stay).
    let april = time("2026-04-01T00:00:00Z").timestamp();
    assert!(
        !tenant.series.is_empty() && tenant.series.iter().all(|p| p.at >= april),
        "{tenant:?}"
    );
    // An admin's view of every tenant reads the same tenant-level rows.
    let mut all = everything(None);
    all.scope = StatsScope::Links {
        tenant: None,
        tag: None,
    };
    assert_eq!(
        node.app.store.stats(&all).await.expect("all tenants"),
        tenant
    );
}
on_both_stores!(tenant_rollups_agree_with_the_per_link_rows);

/// Makes the store look as it did before the tenant-level tables existed: drops them and
/// forgets their migration (PostgreSQL 9, SQLite 11), so the next start fills them again from
/// the per-link rows.
async fn forget_tenant_rollups(stack: &Stack, backend: Backend) {
    const TABLES: &str =
        "DROP TABLE tenant_hourly; DROP TABLE tenant_daily; DROP TABLE link_day_totals;";
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("a database").connect().await;
            db.batch_execute(&format!(
                "{TABLES} DELETE FROM shortener_schema_migrations WHERE version = 9"
            ))
            .await
            .expect("forget the tenant rollups");
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.execute_batch(&format!(
                "{TABLES} DELETE FROM shortener_schema_migrations WHERE version = 11"
            ))
            .expect("forget the tenant rollups");
        }
    }
}

/// A database upgraded from before the tenant-level tables gets them filled from its per-link
/// rows, hourly and compacted daily alike: a tenant's summary answers after the upgrade
/// exactly as it did when the flushes and compaction kept the tables.
async fn an_upgrade_fills_the_tenant_rollups_from_the_per_link_rows(backend: Backend) {
    let stack = Stack::new(backend).await;
    let clock = Clock::manual(time("2026-03-10T09:30:00Z"));
    let mut config = stack.config("a");
    config.clock = clock.clone();
    let node = Node::start(config.clone()).await;
    let mut codes = Vec::new();
    for i in 0..3 {
        let (status, made) = node
            .create(json!({ "url": format!("https://example.com/u{i}"), "tags": ["every"] }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        codes.push(made["code"].as_str().expect("code").to_string());
    }
    traffic(&node, &codes, 0).await;
    clock.advance(chrono::Duration::hours(1));
    traffic(&node, &codes, 1).await;
    // 31 days on: the first day is compacted into daily rows, and a new day has hourly rows.
    clock.advance(chrono::Duration::days(31));
    traffic(&node, &codes[1..], 2).await;
    let outcome = node.maintain_rollups().await;
    assert!(outcome.compacted > 0, "{outcome:?}");
    let ranges = [
        "",
        "granularity=hour",
        "from=2026-03-10T00:00:00Z&to=2026-03-11T00:00:00Z",
        "from=2026-04-10T00:00:00Z&to=2026-04-11T00:00:00Z&granularity=hour",
    ];
    let mut before = Vec::new();
    for range in ranges {
        before.push(agree(&node, range).await);
    }
    assert!(
        before[0]["totals"]["bot"].as_u64().unwrap_or(0) > 0,
        "{}",
        before[0]
    );
    node.stop().await;

    forget_tenant_rollups(&stack, backend).await;
    let node = Node::start(config).await;
    for (range, before) in ranges.iter().zip(&before) {
        assert_eq!(&agree(&node, range).await, before, "{range}");
    }
}
on_both_stores!(an_upgrade_fills_the_tenant_rollups_from_the_per_link_rows);
