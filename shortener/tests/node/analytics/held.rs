//! Rollup counts a cached link's word stands for (visits of one cell) reach the rollups exactly
//! once, whichever takes them: the rollups' flush, a visit of another cell, the totals' flush,
//! a word spilling at its field's top, or the last flushes of a graceful stop.

use super::{BROWSER, SLACK, stats, visit};
use crate::helpers::{Backend, Node, Stack};
use futures::StreamExt;
use serde_json::{Value, json};
use std::num::NonZero;

/// A link's rollup totals and device counts, as its stats answer them.
async fn counted(node: &Node, code: &str) -> (Value, Value) {
    let (status, body) = stats(node, &format!("/links/{code}/stats")).await;
    assert_eq!(status, 200, "{body}");
    (body["totals"].clone(), body["devices"].clone())
}

async fn held_rollup_counts_are_flushed_exactly_once_whoever_takes_them(backend: Backend) {
    let stack = Stack::new(backend).await;
    let config = || {
        let mut config = stack.config("a");
        // Neither flush runs by itself within the test: each is called below.
        config.visits.click_flush_interval_ms = NonZero::new(50_000).expect("non-zero");
        config.visits.analytics_flush_interval_ms = NonZero::new(50_000).expect("non-zero");
        config
    };
    let node = Node::start(config()).await;
    let (store, visits) = (&node.app.store, &node.app.visits);
    let code = node.create_url("https://example.com/held").await;
    let ip = "198.51.100.7";

    // People on desktops: the link's word stands for their rollup counts, and the rollups'
    // flush takes them from it, the totals' flush not having run.
    for _ in 0..3 {
        visit(&node, &code, false, BROWSER, None, ip).await;
    }
    assert!(visits.analytics().flush(store).await);
    let (totals, devices) = counted(&node, &code).await;
    assert_eq!(totals, json!({ "human": 3, "bot": 0, "head": 0 }));
    assert_eq!(devices, json!([{ "device": "desktop", "visits": 3 }]));

    // A person, then bots, a HEAD request and a referred visit beside them: the word hands
    // its count over at the first other cell, and the rest go to the aggregator. The rollups'
    // flush above left the word standing for no cell until the totals' flush clears it.
    visits.clicks().flush(store).await;
    visit(&node, &code, false, BROWSER, None, ip).await;
    for _ in 0..2 {
        visit(&node, &code, false, SLACK, None, ip).await;
    }
    visit(&node, &code, true, BROWSER, None, ip).await;
    visit(
        &node,
        &code,
        false,
        BROWSER,
        Some("https://news.example/"),
        ip,
    )
    .await;
    assert!(visits.analytics().flush(store).await);
    let (totals, devices) = counted(&node, &code).await;
    assert_eq!(totals, json!({ "human": 5, "bot": 2, "head": 1 }));
    assert_eq!(
        devices,
        json!([
            { "device": "desktop", "visits": 6 },
            { "device": "bot", "visits": 2 },
        ])
    );

    // The totals' flush clears the word; the next visits fill it again, and the totals' next
    // flush takes the list, handing the word's rollup counts to the aggregator on the way:
    // the rollups' flush writes them, once.
    visits.clicks().flush(store).await;
    for _ in 0..4 {
        visit(&node, &code, false, BROWSER, None, ip).await;
    }
    visits.clicks().flush(store).await;
    assert!(visits.analytics().flush(store).await);
    assert!(
        visits.analytics().flush(store).await,
        "a flush with nothing"
    );
    let (totals, _) = counted(&node, &code).await;
    assert_eq!(totals, json!({ "human": 9, "bot": 2, "head": 1 }));

    // At a field's top (255 bots) the word spills its click and rollup counts and starts
    // again, several times over.
    let bots = 2_100;
    let answered: Vec<u16> = futures::stream::iter(0..bots)
        .map(|_| async {
            let response = node
                .client
                .get(format!("{}/{code}", node.base))
                .header("user-agent", SLACK)
                .send()
                .await
                .expect("visit");
            response.status().as_u16()
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(
        answered.iter().all(|s| *s == 302),
        "every bot is redirected"
    );
    assert!(visits.analytics().flush(store).await);
    let (totals, _) = counted(&node, &code).await;
    assert_eq!(totals, json!({ "human": 9, "bot": 2 + bots, "head": 1 }));
    visits.clicks().flush(store).await;
    let (_, link) = node.get(&code).await;
    assert_eq!(
        link["clicks"],
        json!({ "human": 9, "head": 1, "bot": 2 + bots }),
        "the totals agree"
    );

    // A graceful stop hands every word's rollup counts to the aggregator, then flushes the
    // totals and the rollups side by side: the words go with them.
    for _ in 0..3 {
        visit(&node, &code, false, BROWSER, None, ip).await;
    }
    node.stop().await;
    let node = Node::start(config()).await;
    let (totals, devices) = counted(&node, &code).await;
    assert_eq!(totals, json!({ "human": 12, "bot": 2 + bots, "head": 1 }));
    assert_eq!(
        devices,
        json!([
            { "device": "bot", "visits": 2 + bots },
            { "device": "desktop", "visits": 13 },
        ])
    );
}
on_both_stores!(held_rollup_counts_are_flushed_exactly_once_whoever_takes_them);
