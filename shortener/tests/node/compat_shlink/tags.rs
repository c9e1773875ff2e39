//! Shlink's tag rename (`PUT /rest/v3/tags`) and delete (`DELETE /rest/v3/tags?tags[]=`): every
//! live link of the caller's tenant changes, the others stay; Shlink's problems for an unknown
//! tag, a conflict and bad input, each with nothing changed.

use super::{assert_problem, call};
use crate::helpers::{Backend, Stack};
use crate::tags::{make, node_with, stored};
use reqwest::Method;
use serde_json::{Value, json};

async fn tags_are_renamed_and_deleted_as_shlink_does(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |c| {
        c.compat.compat = vec!["shlink".into()];
        c.limits.tag_change_max_links = 3;
    })
    .await;
    let w = keys.writer.as_str();
    let codes = [
        make(&node, w, &["blue", "news", "k"]).await,
        make(&node, w, &["news", "k"]).await,
        make(&node, w, &["blue", "k"]).await,
        make(&node, w, &["k"]).await,
        make(&node, &keys.other, &["news"]).await,
    ];
    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
    let tags = async |key: &str| -> Value {
        let (status, _, answer) = call(&node, Method::GET, "/v3/tags", Some(key), None).await;
        assert_eq!(status, 200, "{answer}");
        answer["tags"]["data"].clone()
    };
    let put = async |key: &str, body: Value| {
        call(&node, Method::PUT, "/v3/tags", Some(key), Some(body)).await
    };
    let before = stored(&node, &codes).await;

    // A key that may only read is refused, with nothing changed.
    let refused = put(&keys.reader, json!({"oldName": "news", "newName": "old"})).await;
    assert_eq!(refused.0, 403, "{}", refused.2);
    let refused = call(
        &node,
        Method::DELETE,
        "/v3/tags?tags%5B%5D=news",
        Some(&keys.reader),
        None,
    )
    .await;
    assert_eq!(refused.0, 403, "{}", refused.2);
    assert_eq!(stored(&node, &codes).await, before);

    // Both names read as Shlink stores a tag: lower case, a dash for each space.
    let renamed = put(w, json!({"oldName": "News", "newName": "Old Times"})).await;
    assert_eq!((renamed.0.as_u16(), &renamed.2), (204, &Value::Null));
    assert_eq!(tags(w).await, json!(["blue", "k", "old-times"]));
    assert_eq!(
        tags(&keys.other).await,
        json!(["news"]),
        "another tenant's tag stays"
    );
    let after = stored(&node, &codes).await;
    assert_eq!(after[0].0, ["blue", "k", "old-times"]);
    assert_eq!(after[1].0, ["k", "old-times"]);
    assert_eq!(after[2].0, ["blue", "k"]);

    // Unknown, conflicting and too widely used tags: Shlink's problems, nothing changed.
    let unknown = put(w, json!({"oldName": "news", "newName": "x"})).await;
    assert_problem(&unknown, 404, "tag-not-found");
    assert_eq!(unknown.2["tag"], "news");
    let conflict = put(w, json!({"oldName": "old-times", "newName": "blue"})).await;
    assert_problem(&conflict, 409, "tag-conflict");
    assert_eq!(
        (&conflict.2["oldName"], &conflict.2["newName"]),
        (&json!("old-times"), &json!("blue"))
    );
    let (status, _, problem) = put(w, json!({"oldName": "k", "newName": "kk"})).await;
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("more than 3 links")),
        "{problem}"
    );
    let (status, _, _) = call(
        &node,
        Method::DELETE,
        "/v3/tags?tags%5B%5D=k",
        Some(w),
        None,
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(
        stored(&node, &codes).await,
        after,
        "refusals change nothing"
    );

    // A delete of several tags, unknown ones ignored.
    let deleted = call(
        &node,
        Method::DELETE,
        "/v3/tags?tags%5B%5D=blue&tags%5B%5D=unknown&tags%5B%5D=Old%20Times",
        Some(w),
        None,
    )
    .await;
    assert_eq!((deleted.0.as_u16(), &deleted.2), (204, &Value::Null));
    assert_eq!(tags(w).await, json!(["k"]));
    let end = stored(&node, &codes).await;
    let added: Vec<usize> = end.iter().zip(&after).map(|(n, t)| n.1 - t.1).collect();
    assert_eq!(added, [1, 1, 1, 0, 0], "one history event per changed link");
    for query in ["?tags%5B%5D=unknown", "", "?tags%5B%5D=Not%20A%20Tag"] {
        let (status, _, body) = call(
            &node,
            Method::DELETE,
            &format!("/v3/tags{query}"),
            Some(w),
            None,
        )
        .await;
        assert_eq!((status.as_u16(), &body), (204, &Value::Null), "{query}");
    }
    assert_eq!(stored(&node, &codes).await, end);
}
on_both_stores!(tags_are_renamed_and_deleted_as_shlink_does);

async fn bad_tag_changes_are_refused_naming_their_field(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |c| c.compat.compat = vec!["shlink".into()]).await;
    let w = keys.writer.as_str();
    let codes = [
        make(&node, w, &["keep"]).await,
        make(&node, w, &["keep", "b"]).await,
    ];
    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
    let before = stored(&node, &codes).await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "oldName"),
        (json!({"newName": "new"}), "oldName"),
        (json!({"oldName": null, "newName": "new"}), "oldName"),
        (json!({"oldName": 5, "newName": "new"}), "oldName"),
        (json!({"oldName": "keep"}), "newName"),
        (json!({"oldName": "keep", "newName": ["new"]}), "newName"),
        (json!({"oldName": "keep", "newName": ""}), "newName"),
        (json!({"oldName": "keep", "newName": "q&a"}), "newName"),
        (
            json!({"oldName": "keep", "newName": "a".repeat(65)}),
            "newName",
        ),
        (json!(["keep", "new"]), "body"),
        (json!("keep"), "body"),
    ];
    for (body, field) in cases {
        let answer = call(&node, Method::PUT, "/v3/tags", Some(w), Some(body.clone())).await;
        assert_problem(&answer, 400, "invalid-data");
        assert_eq!(answer.2["invalidElements"], json!([field]), "{body}");
        assert_eq!(
            stored(&node, &codes).await,
            before,
            "{body} changed something"
        );
    }
    let many: String = (0..101).map(|i| format!("tags%5B%5D=t{i}&")).collect();
    let answer = call(
        &node,
        Method::DELETE,
        &format!("/v3/tags?{many}tags%5B%5D=keep"),
        Some(w),
        None,
    )
    .await;
    assert_problem(&answer, 400, "invalid-data");
    assert_eq!(answer.2["invalidElements"], json!(["tags"]));
    assert_eq!(stored(&node, &codes).await, before);
}
on_both_stores!(bad_tag_changes_are_refused_naming_their_field);

/// The tag list and its stats hold at most `MAX_LISTED_TAGS` distinct tags: one tag more is a
/// `422` naming the bound, not an answer as large as the tenant's tags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_list_past_its_bound_is_refused() {
    use shortener::domain::MAX_TAGS;
    // The node's bound (`MAX_LISTED_TAGS` in the Shlink tag endpoints).
    const MAX_LISTED_TAGS: usize = 10_000;
    let stack = Stack::new(Backend::Sqlite).await;
    let (node, keys) = node_with(&stack, |c| {
        c.compat.compat = vec!["shlink".into()];
    })
    .await;
    let w = keys.writer.as_str();
    let links = MAX_LISTED_TAGS / MAX_TAGS;
    let node = &node;
    for chunk in (0..links).collect::<Vec<_>>().chunks(50) {
        futures::future::join_all(chunk.iter().map(|link| async move {
            let tags: Vec<String> = (0..MAX_TAGS)
                .map(|t| format!("t{link:04}-{t:02}"))
                .collect();
            let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
            make(node, w, &tags).await
        }))
        .await;
    }
    let (status, _, listed) = call(node, Method::GET, "/v3/tags", Some(w), None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        listed["tags"]["data"].as_array().map(Vec::len),
        Some(MAX_LISTED_TAGS),
        "as many as the bound"
    );
    make(node, w, &["one-more"]).await;
    for path in ["/v3/tags", "/v3/tags/stats"] {
        let answer = call(node, Method::GET, path, Some(w), None).await;
        assert_eq!(answer.0, 422, "{path}: {}", answer.2);
        assert!(
            answer.2["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&MAX_LISTED_TAGS.to_string())),
            "{path}: {}",
            answer.2
        );
    }
}
