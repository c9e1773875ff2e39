//! Rollup revisions under races and upgrades: several nodes telling one hour at once record
//! each revision once, and a store upgraded from the release before revisions takes each hour
//! it told as that hour's revision 0.

use super::rollups::{Acme, acme, acme_hour, clicks_at, time_of, told};
use crate::helpers::{Backend, Node, Stack};
use serde_json::Value;

/// The `clicks.rollup` events recorded for tenant acme, as (revision, bot) in revision order,
/// read from the store itself, so an event recorded twice shows whether or not it was sent.
async fn recorded(stack: &Stack, backend: Backend) -> Vec<(i64, i64)> {
    const EVENTS: &str =
        "SELECT data FROM webhook_events WHERE kind = 'clicks.rollup' AND tenant = 'acme'";
    let data: Vec<String> = match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            let rows = db.query(EVENTS, &[]).await.expect("events");
            rows.iter().map(|r| r.get(0)).collect()
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut query = conn.prepare(EVENTS).expect("prepare");
            query
                .query_map([], |r| r.get(0))
                .expect("events")
                .collect::<Result<_, _>>()
                .expect("rows")
        }
    };
    let mut events: Vec<(i64, i64)> = data
        .iter()
        .map(|d| {
            let v: Value = serde_json::from_str(d).expect("json");
            (
                v["revision"].as_i64().expect("revision"),
                v["bot"].as_i64().expect("bot"),
            )
        })
        .collect();
    events.sort_unstable();
    events
}

/// Several nodes tell one hour at once, again and again, while late clicks of the hour keep
/// reaching the store: each revision is recorded once, the revisions run from 0 without a gap,
/// each tells more clicks than the one before, and once the clicks stop the last one tells the
/// hour's final totals. On PostgreSQL the runs come from three nodes' stores (three pools); the
/// embedded store has one node, whose runs meet in its writer.
async fn nodes_telling_one_hour_at_once_record_each_revision_once(backend: Backend) {
    use shortener::domain::ClickCounts;
    use shortener::store::{BatchMark, FlushStream, OutboxStore, RollupRow, VisitStore};
    const ROUNDS: i64 = 8;
    const RUNS_PER_ROUND: usize = 6;
    let stack = Stack::new(backend).await;
    let Acme {
        node,
        clock,
        code,
        config,
        ..
    } = acme(&stack, 200, 1000, |_| {}).await;
    let mut others = Vec::new();
    if matches!(backend, Backend::Postgres) {
        for name in ["b", "c"] {
            // Alike in all but name: their deliveries reach the same receiver.
            let mut other = stack.config(name);
            other.clock = clock.clone();
            other.webhooks = config.webhooks.clone();
            others.push(Node::start(other).await);
        }
    }
    let stores: Vec<_> = std::iter::once(&node)
        .chain(&others)
        .map(|n| n.app.store.clone())
        .collect();
    let hour = time_of("2026-01-10T10:00:00Z");
    let late = |seq: i64| {
        let rows = vec![RollupRow {
            tenant: "acme".into(),
            code: code.clone(),
            bucket: hour,
            referrer: String::new(),
            device: "bot",
            country: String::new(),
            route: String::new(),
            counts: ClickCounts {
                bot: seq as u64,
                ..Default::default()
            },
        }];
        let mark = BatchMark {
            writer: 9001,
            stream: FlushStream::Rollups,
            seq,
        };
        (mark, std::sync::Arc::from(rows))
    };
    let mut clicks = 0;
    for round in 1..=ROUNDS {
        let (mark, rows) = late(round);
        let added = stores[0].add_rollups(mark, rows);
        let runs = (0..RUNS_PER_ROUND).map(|i| stores[i % stores.len()].record_rollup_events(hour));
        let (added, runs) = futures::join!(added, futures::future::join_all(runs));
        added.expect("add late clicks");
        for run in runs {
            run.expect("record");
        }
        clicks += round;
    }
    // The clicks have stopped: one more run tells what the last round's runs may have missed,
    // and a run after it has nothing left to tell.
    stores[0].record_rollup_events(hour).await.expect("record");
    for store in &stores {
        assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);
    }
    let events = recorded(&stack, backend).await;
    let revisions: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        revisions,
        (0..events.len() as i64).collect::<Vec<_>>(),
        "each revision once, none skipped: {events:?}"
    );
    assert!(
        events.windows(2).all(|w| w[0].1 < w[1].1),
        "each revision tells more clicks than the one before: {events:?}"
    );
    assert_eq!(
        events.last().map(|e| e.1),
        Some(clicks),
        "the last revision tells the final totals: {events:?}"
    );
    for other in others {
        other.stop().await;
    }
    node.stop().await;
}
on_both_stores!(nodes_telling_one_hour_at_once_record_each_revision_once);

/// Takes the rollup revisions' migration away from `stack`'s store (node `a`), as the release
/// before left it: its events told, no `rollup_told`.
async fn forget_revisions(stack: &Stack, backend: Backend) {
    const UNDO: &str = "DROP TABLE rollup_told;";
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            db.batch_execute(&format!(
                "{UNDO} DELETE FROM shortener_schema_migrations WHERE version = 28;"
            ))
            .await
            .expect("undo the migration");
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.execute_batch(&format!(
                "{UNDO} DELETE FROM shortener_schema_migrations WHERE version = 30;"
            ))
            .expect("undo the migration");
        }
    }
}

/// What `rollup_told` holds for tenant acme: (hour, revision, bot) per hour.
async fn told_rows(stack: &Stack, backend: Backend) -> Vec<(i64, i64, i64)> {
    const TOLD: &str =
        "SELECT hour, revision, bot FROM rollup_told WHERE tenant = 'acme' ORDER BY hour";
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("PostgreSQL").connect().await;
            let rows = db.query(TOLD, &[]).await.expect("told");
            rows.iter()
                .map(|r| (r.get(0), i64::from(r.get::<_, i32>(1)), r.get(2)))
                .collect()
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut query = conn.prepare(TOLD).expect("prepare");
            query
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .expect("told")
                .collect::<Result<_, _>>()
                .expect("rows")
        }
    }
}

/// A store upgraded from the release before revisions: the migration makes each hour it told
/// that hour's revision 0, so the hour is not told again, and its late clicks make revision 1.
async fn hours_told_before_the_upgrade_are_their_revision_0(backend: Backend) {
    use shortener::store::OutboxStore;
    let stack = Stack::new(backend).await;
    let Acme {
        node,
        receiver,
        clock,
        start,
        code,
        config,
    } = acme(&stack, 200, 10, |_| {}).await;
    clicks_at(&node, &clock, &code, 1, start).await;
    clock.set(start + chrono::Duration::minutes(95)); // 12:05
    node.maintain_rollups().await;
    let hour = time_of("2026-01-10T10:00:00Z");
    let first = acme_hour("2026-01-10T10:00:00Z", 1, 0);
    assert_eq!(told(&receiver, 1, "the 10:00 hour").await, first);
    node.stop().await;
    forget_revisions(&stack, backend).await;

    // Started at 10:30 again, so that its first maintenance run has no ended 10:00 hour to
    // tell before the test's own runs do.
    clock.set(start);
    let node = Node::start(config).await;
    assert_eq!(
        told_rows(&stack, backend).await,
        [(hour, 0, 1)],
        "the migration records the told event as the hour's revision 0"
    );
    let store = &node.app.store;
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 0);

    clicks_at(
        &node,
        &clock,
        &code,
        1,
        start + chrono::Duration::minutes(20),
    )
    .await; // 10:50, late
    clock.set(start + chrono::Duration::minutes(100)); // 12:10
    assert_eq!(store.record_rollup_events(hour).await.expect("record"), 1);
    assert_eq!(
        told(&receiver, 2, "the 10:00 hour's correction").await,
        acme_hour("2026-01-10T10:00:00Z", 2, 1)
    );
    assert_eq!(told_rows(&stack, backend).await, [(hour, 1, 2)]);
    node.stop().await;
}
on_both_stores!(hours_told_before_the_upgrade_are_their_revision_0);
