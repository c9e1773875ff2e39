//! The default bound of a tag change, at its size: a tag on 10,001 live links is refused with
//! nothing written; on 10,000 (one of them deleted since) it is renamed in one change.

use super::{node_with, rename};
use crate::helpers::{Backend, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Instant;

/// How many links `tag` is on, in the caller's list (every state).
async fn count(node: &crate::helpers::Node, key: &str, tag: &str) -> usize {
    let mut seen = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut query = format!("tag={tag}&limit=1000");
        if let Some(c) = &cursor {
            query.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = node.list_with_key(&query, key).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen += page["links"].as_array().expect("links").len();
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return seen,
        }
    }
}

async fn ten_thousand_links_change_in_one_go_and_one_more_is_refused(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |_| {}).await;
    let w = keys.writer.as_str();
    let rows: String = (0..10_001)
        .map(|i| {
            json!({ "url": format!("https://example.com/bulk/{i}"), "tags": ["bulk"] }).to_string()
                + "\n"
        })
        .collect();
    let (status, lines) = node
        .import_with_key("application/x-ndjson", rows, "results=errors", w)
        .await;
    assert_eq!(status, StatusCode::OK);
    let summary = lines.last().cloned().unwrap_or(Value::Null);
    assert_eq!(lines.len(), 1, "only the summary: {summary}");

    let (status, body) = rename(&node, w, "bulk", "big").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "too_many_links");
    assert_eq!(count(&node, w, "big").await, 0, "nothing was written");

    let (_, page) = node.list_with_key("tag=bulk&limit=1", w).await;
    let code = page["links"][0]["code"]
        .as_str()
        .expect("a code")
        .to_string();
    let deleted = node
        .client
        .delete(format!("{}/api/v1/links/{code}", node.base))
        .bearer_auth(w)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let started = Instant::now();
    let (status, body) = rename(&node, w, "bulk", "big").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "tag": "big", "links": 10_000 }))
    );
    eprintln!("renamed 10000 links in {:?}", started.elapsed());
    assert_eq!(count(&node, w, "big").await, 10_000);
    assert_eq!(
        count(&node, w, "bulk").await,
        1,
        "the deleted link keeps its tag"
    );
}
on_both_stores!(ten_thousand_links_change_in_one_go_and_one_more_is_refused);
