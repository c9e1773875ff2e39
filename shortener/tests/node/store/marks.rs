//! Flush marks: a batch of click counts or rollups sent again with its mark (after a write
//! whose outcome the flush could not know) is added once, on both stores.

use crate::analytics::stats;
use crate::helpers::{Backend, Stack};
use serde_json::{Value, json};
use shortener::domain::{ClickCounts, CompactCode};
use shortener::store::{BatchMark, FlushStream, RollupRow, VisitStore};
use std::sync::Arc;

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
