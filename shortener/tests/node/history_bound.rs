//! A link's history answer is bounded: a link changed more often than an answer holds answers
//! with its latest changes, says so, and leaves out the creation event it can no longer make.

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Patches `code` to `https://example.com/v{i}` for each `i` in `range`, a few at a time (the
/// store applies patches of one link one after another, in whichever order they come).
async fn patch_many(node: &Node, code: &str, range: std::ops::Range<usize>) {
    let all: Vec<usize> = range.collect();
    for chunk in all.chunks(8) {
        let answers = futures::future::join_all(
            chunk
                .iter()
                .map(|i| node.patch(code, json!({ "url": format!("https://example.com/v{i}") }))),
        )
        .await;
        for (status, body) in answers {
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }
}

fn kinds(history: &Value) -> Vec<&str> {
    history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect()
}

async fn a_history_answer_holds_the_latest_changes_of_a_busy_link(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let (status, made) = node
        .create(json!({ "url": "https://example.com/start" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["code"].as_str().expect("code");
    let max = shortener::domain::MAX_HISTORY_EVENTS;

    // Every change still fits: the creation event, then each change.
    patch_many(&node, code, 0..max).await;
    let (status, history) = node.history(code).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let all = kinds(&history);
    assert_eq!(all.len(), max + 1);
    assert_eq!((all[0], all[1]), ("create", "update"));
    assert_eq!(history["truncated"], false);
    assert_eq!(
        history["events"][0]["change"]["url"]["new"], "https://example.com/start",
        "the creation event holds the values it was made with"
    );
    assert_eq!(
        history["events"][1]["change"]["url"]["old"], "https://example.com/start",
        "and the first change starts from them"
    );

    // Two more: the latest `max` changes, no creation event, and the answer says so.
    patch_many(&node, code, max..max + 2).await;
    let (status, history) = node.history(code).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let latest = kinds(&history);
    assert_eq!(latest.len(), max);
    assert!(latest.iter().all(|kind| *kind == "update"), "{latest:?}");
    assert_eq!(history["truncated"], true);
    // Each change starts where the one before it ended, and the newest ends at the link.
    let events = history["events"].as_array().expect("events");
    let url = |at: usize, side: &str| events[at]["change"]["url"][side].clone();
    for at in 1..max {
        assert_eq!(url(at, "old"), url(at - 1, "new"), "change {at}");
    }
    assert_ne!(
        url(0, "old"),
        json!("https://example.com/start"),
        "left out"
    );
    let (_, link) = node.get(code).await;
    assert_eq!(url(max - 1, "new"), link["url"]);
}
crate::on_both_stores!(a_history_answer_holds_the_latest_changes_of_a_busy_link);
