//! Flush marks: a batch of click counts or rollups sent again with its mark (after a write
//! whose outcome the flush could not know) is added once, on both stores; and the mark of a
//! writer gone for a week is forgotten, with analytics on or off (each node process is a writer
//! of its own, so a fleet that restarts every day must not grow the table without end), while a
//! live writer's mark stays.

use crate::analytics::stats;
use crate::helpers::{Backend, Node, Stack, wait_for};
use serde_json::{Value, json};
use shortener::domain::{ClickCounts, CompactCode};
use shortener::store::{BatchMark, FlushStream, RollupRow, VisitStore};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

fn clicks(code: &str, human: u64) -> shortener::store::ClickRows {
    Arc::from(vec![(
        CompactCode::new(code),
        ClickCounts {
            human,
            ..Default::default()
        },
    )])
}

fn rollup(code: &str, bucket: i64, bot: u64) -> shortener::store::RollupRows {
    Arc::from(vec![RollupRow {
        tenant: "default".into(),
        code: code.into(),
        bucket,
        referrer: String::new(),
        device: "bot",
        country: String::new(),
        route: String::new(),
        counts: ClickCounts {
            bot,
            ..Default::default()
        },
    }])
}

fn mark(writer: i64, stream: FlushStream, seq: i64) -> BatchMark {
    BatchMark {
        writer,
        stream,
        seq,
    }
}

async fn a_batch_sent_again_with_its_mark_is_added_once(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("marks").await;
    let store = node.app.store.clone();
    let code = node.create_url("https://example.com/marked").await;
    let human = |link: Value| link["clicks"]["human"].clone();
    // (writer, seq, humans added) in the order sent, and the total after each.
    let sends = [
        (7, 1, 5, 5),
        // The same batch again: already added.
        (7, 1, 5, 5),
        (7, 2, 3, 8),
        // An earlier batch of the writer, sent late: added before it, so nothing.
        (7, 1, 5, 8),
        // Another writer starts its own sequence; the first one's is untouched.
        (8, 1, 2, 10),
        (7, 3, 1, 11),
        (7, 3, 1, 11),
    ];
    for (writer, seq, added, total) in sends {
        store
            .add_clicks(mark(writer, FlushStream::Clicks, seq), clicks(&code, added))
            .await
            .expect("add clicks");
        let (_, link) = node.get(&code).await;
        assert_eq!(
            human(link),
            json!(total),
            "after writer {writer}'s batch {seq}"
        );
    }
    // A writer's clicks and rollups are two sequences: its rollup batch 1 is still to come.
    let hour = chrono::Utc::now().timestamp().div_euclid(3600) * 3600;
    let path = format!("/links/{code}/stats?granularity=hour");
    for (seq, added, total) in [(1, 4, 4), (1, 4, 4), (2, 6, 10), (2, 6, 10)] {
        store
            .add_rollups(
                mark(7, FlushStream::Rollups, seq),
                rollup(&code, hour, added),
            )
            .await
            .expect("add rollups");
        let (_, body) = stats(&node, &path).await;
        assert_eq!(
            body["totals"],
            json!({ "human": 0, "bot": total, "head": 0 }),
            "after rollup batch {seq}: {body}"
        );
    }
}
on_both_stores!(a_batch_sent_again_with_its_mark_is_added_once);

/// A writer whose last batch was eight days ago (a process gone for good).
const GONE: i64 = 41;
/// A writer whose last batch was six days ago (within the week a mark is kept).
const RECENT: i64 = 42;

/// The writers with a mark in `stack`'s store (the node's data directory `a`).
async fn writers(stack: &Stack, backend: Backend) -> BTreeSet<i64> {
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("a database").connect().await;
            let rows = db
                .query("SELECT writer FROM flush_marks", &[])
                .await
                .expect("read the marks");
            rows.iter().map(|row| row.get::<_, i64>(0)).collect()
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut statement = conn
                .prepare("SELECT writer FROM flush_marks")
                .expect("prepare");
            statement
                .query_map([], |row| row.get::<_, i64>(0))
                .expect("read the marks")
                .map(|writer| writer.expect("a writer"))
                .collect()
        }
    }
}

/// Plants the marks of [`GONE`] and [`RECENT`], stamped as each store stamps its marks.
async fn plant(stack: &Stack, backend: Backend) {
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("a database").connect().await;
            db.batch_execute(&format!(
                "INSERT INTO flush_marks (writer, stream, seq, at) VALUES \
                 ({GONE}, 'clicks', 7, now() - interval '8 days'), \
                 ({RECENT}, 'rollups', 3, now() - interval '6 days')"
            ))
            .await
            .expect("plant the marks");
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join(shortener::app::DB_FILE);
            let conn = rusqlite::Connection::open(path).expect("open");
            let ago =
                |days: i64| (chrono::Utc::now() - chrono::Duration::days(days)).timestamp_millis();
            conn.execute(
                "INSERT INTO flush_marks (writer, stream, seq, at) VALUES \
                 (?1, 'clicks', 7, ?2), (?3, 'rollups', 3, ?4)",
                rusqlite::params![GONE, ago(8), RECENT, ago(6)],
            )
            .expect("plant the marks");
        }
    }
}

async fn a_writer_gone_for_a_week_is_forgotten_with_analytics_on_or_off(backend: Backend) {
    for analytics in [false, true] {
        let stack = Stack::new(backend).await;
        let mut config = stack.config("a");
        config.visits.analytics = analytics;
        // A first run makes the schema, and its click flush (at stop) a mark of its own.
        let node = Node::start(config.clone()).await;
        let code = node.create_url("https://example.com/marks").await;
        assert_eq!(node.visit(&code).await.status(), reqwest::StatusCode::FOUND);
        node.stop().await;
        let first = writers(&stack, backend).await;
        assert!(
            !first.is_empty(),
            "analytics {analytics}: the first run's flush left no mark"
        );
        plant(&stack, backend).await;
        // Maintenance runs as the node starts.
        let node = Node::start(config).await;
        wait_for(
            "the mark of a writer gone for a week to be forgotten",
            Duration::from_secs(20),
            async || !writers(&stack, backend).await.contains(&GONE),
        )
        .await;
        let kept = writers(&stack, backend).await;
        assert!(
            kept.contains(&RECENT) && first.is_subset(&kept),
            "analytics {analytics}: a mark younger than a week was forgotten: {kept:?} (before: {first:?})"
        );
        node.stop().await;
    }
}
on_both_stores!(a_writer_gone_for_a_week_is_forgotten_with_analytics_on_or_off);
