//! A tag renamed or deleted across a tenant (`PATCH` and `DELETE /api/v1/tags/{tag}`): every
//! live link of the caller's tenant that carries it changes, each with its history event;
//! deleted links and other tenants' links stay as they were; unknown tags, conflicts, keys
//! without `links:write`, changes past the bound and bad input are refused with nothing
//! changed (bad input in `bad_input`, the default bound at its size in `bound`). Webhook events of a change are in `webhooks::tags`;
//! Shlink's endpoints in `compat_shlink::tags`.

mod bad_input;
mod bound;

use crate::helpers::{Backend, Node, Stack};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shortener::access::{KEY_FILE_HEADER, KeyEntry, digest, generate_api_key, render};
use shortener::domain::Scopes;
use shortener::store::LinkStore;

/// The keys of these tests.
pub struct Keys {
    /// Tenant `acme`, every links scope.
    pub writer: String,
    /// Tenant `acme`, `links:read` only.
    pub reader: String,
    /// Tenant `globex`, every links scope.
    pub other: String,
}

/// A node on `stack` with [`Keys`], `edit` applied to its configuration.
pub async fn node_with(stack: &Stack, edit: impl FnOnce(&mut shortener::Config)) -> (Node, Keys) {
    let keys = Keys {
        writer: generate_api_key(),
        reader: generate_api_key(),
        other: generate_api_key(),
    };
    let entry = |tenant: &str, name: &str, key: &str, scopes: &str| KeyEntry {
        tenant: tenant.into(),
        name: name.into(),
        digest: digest(key),
        scopes: Scopes::parse_list(scopes).expect("scopes"),
        expires: None,
    };
    let all = "links:create,links:read,links:write";
    let text = [
        entry("acme", "writer", &keys.writer, all),
        entry("acme", "reader", &keys.reader, "links:read"),
        entry("globex", "writer", &keys.other, all),
    ]
    .iter()
    .map(render)
    .fold(KEY_FILE_HEADER.to_string(), |text, table| text + &table);
    let path = stack.dir.path().join("tag-keys.toml");
    std::fs::write(&path, text).expect("write keys file");
    let mut config = stack.config("a");
    config.access.api_keys_file = Some(path);
    edit(&mut config);
    (Node::start(config).await, keys)
}

/// Creates a link with `tags` as `key`; its code.
pub async fn make(node: &Node, key: &str, tags: &[&str]) -> String {
    let (status, made) = node
        .create_with_key(
            json!({ "url": "https://example.com/tagged", "tags": tags }),
            key,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["code"].as_str().expect("code").to_string()
}

/// The stored tags and number of recorded events of each of `codes` (deleted links too).
pub async fn stored(node: &Node, codes: &[&str]) -> Vec<(Vec<String>, usize)> {
    let mut all = Vec::new();
    for code in codes {
        let history = node
            .app
            .store
            .history(code, None, shortener::domain::MAX_HISTORY_EVENTS)
            .await
            .expect("history")
            .expect("stored");
        all.push((history.link.tags, history.events.len()));
    }
    all
}

/// `method` on `/api/v1/tags/{tag}` with `key` and a JSON `body`; status and JSON.
pub async fn call(
    node: &Node,
    method: Method,
    tag: &str,
    key: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = node
        .client
        .request(method, format!("{}/api/v1/tags/{tag}", node.base))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn rename(node: &Node, key: &str, from: &str, to: &str) -> (StatusCode, Value) {
    let body = json!({ "name": to }).to_string();
    call(node, Method::PATCH, from, key, Some(&body)).await
}

async fn delete(node: &Node, key: &str, tag: &str) -> (StatusCode, Value) {
    call(node, Method::DELETE, tag, key, None).await
}

async fn a_rename_and_a_delete_change_every_live_link_of_the_tenant(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |_| {}).await;
    let w = keys.writer.as_str();
    let both = make(&node, w, &["a", "x"]).await;
    let only_a = make(&node, w, &["a"]).await;
    let only_x = make(&node, w, &["x"]).await;
    let deleted = make(&node, w, &["a"]).await;
    let untagged = make(&node, w, &[]).await;
    let theirs = make(&node, &keys.other, &["a", "x"]).await;
    let response = node
        .client
        .delete(format!("{}/api/v1/links/{deleted}", node.base))
        .bearer_auth(w)
        .send()
        .await
        .expect("delete link");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let codes = [
        both.as_str(),
        &only_a,
        &only_x,
        &deleted,
        &untagged,
        &theirs,
    ];
    let before = stored(&node, &codes).await;

    // A key that may only read is refused, and so is a key of no tenant's.
    for key in [keys.reader.as_str(), "not-a-key"] {
        let (status, body) = rename(&node, key, "a", "b").await;
        assert!(
            [StatusCode::FORBIDDEN, StatusCode::UNAUTHORIZED].contains(&status),
            "{status} {body}"
        );
        assert!([403, 401].contains(&delete(&node, key, "a").await.0.as_u16()));
    }
    assert_eq!(
        stored(&node, &codes).await,
        before,
        "a refusal changes nothing"
    );

    let (status, body) = rename(&node, w, "a", "b").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({ "tag": "b", "links": 2 }));
    let after = stored(&node, &codes).await;
    let tags = |i: usize| after[i].0.clone();
    assert_eq!(tags(0), ["b", "x"]);
    assert_eq!(tags(1), ["b"]);
    assert_eq!(tags(2), ["x"], "a link without the tag is not touched");
    assert_eq!(tags(3), ["a"], "a deleted link is not touched");
    assert_eq!(tags(5), ["a", "x"], "another tenant's link is not touched");
    let added: Vec<usize> = after
        .iter()
        .zip(&before)
        .map(|(now, then)| now.1 - then.1)
        .collect();
    assert_eq!(
        added,
        [1, 1, 0, 0, 0, 0],
        "one history event per changed link"
    );
    let history: Value = node
        .client
        .get(format!("{}/api/v1/links/{both}/history", node.base))
        .bearer_auth(w)
        .send()
        .await
        .expect("history")
        .json()
        .await
        .expect("history JSON");
    let last = history["events"]
        .as_array()
        .expect("events")
        .last()
        .cloned();
    let last = last.expect("an event");
    assert_eq!(last["kind"], "update");
    assert_eq!(
        last["change"],
        json!({ "tags": { "old": ["a", "x"], "new": ["b", "x"] } })
    );
    assert_eq!(last["key"], "acme/writer");
    // Lists by tag read the new name: the tag rows changed with the links.
    let listed = |page: &Value| -> Vec<String> {
        let mut codes: Vec<String> = page["links"]
            .as_array()
            .expect("links")
            .iter()
            .map(|l| l["code"].as_str().expect("code").to_string())
            .collect();
        codes.sort();
        codes
    };
    let mut expected = vec![both.clone(), only_a.clone()];
    expected.sort();
    assert_eq!(listed(&node.list_with_key("tag=b", w).await.1), expected);
    assert_eq!(
        listed(&node.list_with_key("tag=a", w).await.1),
        [deleted.as_str()],
        "only the deleted link keeps the old name"
    );
    assert_eq!(
        listed(&node.list_with_key("tag=a", &keys.other).await.1),
        [theirs.as_str()]
    );

    // A rename onto a name links carry already is refused; so is one of a tag on no live link
    // (the deleted link's `a` counts for nothing), and the other tenant's own rename goes on.
    let (status, body) = rename(&node, w, "b", "x").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "tag_conflict");
    let (status, body) = rename(&node, w, "a", "c").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "not_found");
    assert_eq!(delete(&node, w, "nowhere").await.0, StatusCode::NOT_FOUND);
    // A peer's spelling of a tag is on no link; the refusal names the tag it is stored as.
    let (status, body) = rename(&node, w, "B%20Side", "c").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let said = body["message"].as_str().unwrap_or_default();
    assert!(said.contains("store it as \"b-side\""), "{body}");
    assert_eq!(
        stored(&node, &codes).await,
        after,
        "refusals change nothing"
    );
    // A rename onto itself changes nothing and records nothing.
    assert_eq!(
        rename(&node, w, "b", "b").await,
        (StatusCode::OK, json!({ "tag": "b", "links": 0 }))
    );
    assert_eq!(stored(&node, &codes).await, after);

    let (status, body) = delete(&node, w, "x").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "tag": "x", "links": 2 }))
    );
    let end = stored(&node, &codes).await;
    assert_eq!(end[0].0, ["b"]);
    assert_eq!(end[2].0, Vec::<String>::new());
    assert_eq!(end[5].0, ["a", "x"], "another tenant's link keeps its tag");
    let added: Vec<usize> = end.iter().zip(&after).map(|(n, t)| n.1 - t.1).collect();
    assert_eq!(added, [1, 0, 1, 0, 0, 0]);
    assert_eq!(
        rename(&node, &keys.other, "a", "b").await,
        (StatusCode::OK, json!({ "tag": "b", "links": 1 }))
    );
    assert_eq!(stored(&node, &[&theirs]).await[0].0, ["b", "x"]);
    assert_eq!(stored(&node, &[&only_a]).await[0].0, ["b"]);
    // A tag may hold dots (`v2.0`, a host name): a rename onto one, and lists by it.
    assert_eq!(
        rename(&node, w, "b", "v2.0").await,
        (StatusCode::OK, json!({ "tag": "v2.0", "links": 2 }))
    );
    let dotted = make(&node, w, &["example.com", "v2.0"]).await;
    let mut expected = vec![both.clone(), only_a.clone(), dotted.clone()];
    expected.sort();
    assert_eq!(listed(&node.list_with_key("tag=v2.0", w).await.1), expected);
    assert_eq!(
        listed(&node.list_with_key("tag=example.com", w).await.1),
        [dotted.as_str()]
    );
}
on_both_stores!(a_rename_and_a_delete_change_every_live_link_of_the_tenant);

async fn a_change_past_the_bound_is_refused_before_anything_is_written(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |c| c.limits.tag_change_max_links = 3).await;
    let w = keys.writer.as_str();
    let mut many = Vec::new();
    for _ in 0..4 {
        many.push(make(&node, w, &["many", "z"]).await);
    }
    let mut few = Vec::new();
    for _ in 0..3 {
        few.push(make(&node, w, &["few"]).await);
    }
    let codes: Vec<&str> = many.iter().chain(&few).map(String::as_str).collect();
    let before = stored(&node, &codes).await;
    for (status, body) in [
        rename(&node, w, "many", "lots").await,
        delete(&node, w, "many").await,
    ] {
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(body["error"], "too_many_links", "{body}");
    }
    assert_eq!(stored(&node, &codes).await, before, "nothing was written");
    // At the bound, the change goes through.
    assert_eq!(
        rename(&node, w, "few", "some").await,
        (StatusCode::OK, json!({ "tag": "some", "links": 3 }))
    );
    let after = stored(&node, &codes).await;
    assert_eq!(&after[..4], &before[..4]);
    assert!(
        after[4..]
            .iter()
            .all(|(tags, events)| tags == &["some"] && *events == 1)
    );
}
on_both_stores!(a_change_past_the_bound_is_refused_before_anything_is_written);

/// Makes the store fail a tag change after it has written some of it: on PostgreSQL the
/// events' insert fails (after every link row is written); on SQLite the third link's event
/// (after two links are written in full).
async fn break_the_events(stack: &Stack, backend: Backend) {
    match backend {
        Backend::Postgres => {
            let db = stack.db.as_ref().expect("a PostgreSQL stack");
            db.connect()
                .await
                .batch_execute(
                    "CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS \
                       $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$; \
                     CREATE TRIGGER refuse_update BEFORE INSERT ON link_events FOR EACH ROW \
                       WHEN (NEW.kind = 'update') EXECUTE FUNCTION refuse_update();",
                )
                .await
                .expect("trigger");
        }
        Backend::Sqlite => {
            let path = stack.dir.path().join("a").join("shortener.db");
            rusqlite::Connection::open(path)
                .expect("open the node's file")
                .execute_batch(
                    "CREATE TRIGGER refuse_update AFTER INSERT ON link_events \
                     WHEN (SELECT count(*) FROM link_events WHERE kind = 'update') >= 3 \
                     BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
                )
                .expect("trigger");
        }
    }
}

async fn a_change_that_fails_midway_changes_nothing(backend: Backend) {
    let stack = Stack::new(backend).await;
    let (node, keys) = node_with(&stack, |_| {}).await;
    let w = keys.writer.as_str();
    let mut codes = Vec::new();
    for _ in 0..4 {
        codes.push(make(&node, w, &["a", "k"]).await);
    }
    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
    let before = stored(&node, &codes).await;
    break_the_events(&stack, backend).await;
    for (status, body) in [
        rename(&node, w, "a", "b").await,
        delete(&node, w, "a").await,
    ] {
        assert!(status.is_server_error(), "{status} {body}");
    }
    assert_eq!(stored(&node, &codes).await, before, "no link changed");
    let (_, page) = node.list_with_key("tag=a", w).await;
    assert_eq!(page["links"].as_array().map(Vec::len), Some(4), "{page}");
    let (_, page) = node.list_with_key("tag=b", w).await;
    assert_eq!(page["links"].as_array().map(Vec::len), Some(0), "{page}");
}
on_both_stores!(a_change_that_fails_midway_changes_nothing);
