//! The admin API's blocklist: entries added and removed by an admin key take effect on every
//! node within the reload interval (at once on the node that took the change), beside the
//! file's entries, which it shows but cannot remove.

use crate::helpers::{Backend, Node, Stack};
use crate::tenants::write_keys;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

async fn blocklist(node: &Node, key: &str) -> (StatusCode, Value) {
    let response = node
        .client
        .get(format!("{}/api/v1/admin/blocklist", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn block(node: &Node, key: &str, domain: &str) -> (StatusCode, Value) {
    let response = node
        .client
        .post(format!("{}/api/v1/admin/blocklist", node.base))
        .bearer_auth(key)
        .json(&json!({ "domain": domain }))
        .send()
        .await
        .expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn unblock(node: &Node, key: &str, domain: &str) -> StatusCode {
    node.client
        .delete(format!("{}/api/v1/admin/blocklist/{domain}", node.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("send")
        .status()
}

async fn an_admin_blocks_and_unblocks_domains_on_every_node(backend: Backend) {
    let stack = Stack::new(backend).await;
    let keys_path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&keys_path);
    let file = stack.dir.path().join("blocklist");
    std::fs::write(&file, "from-file.test\n").expect("write blocklist");
    let config = |name: &str| {
        let mut config = stack.config(name);
        config.access.api_keys_file = Some(keys_path.clone());
        config.redirects.blocklist_file = Some(file.clone());
        config.access.reload_interval_ms = std::num::NonZero::new(200).expect("non-zero");
        config
    };
    let a = Node::start(config("a")).await;
    let (status, made) = a
        .create_with_key(
            json!({ "url": "https://www.phish.example/login" }),
            &keys.own,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let code = made["code"].as_str().expect("code").to_string();
    assert_eq!(a.visit(&code).await.status(), StatusCode::FOUND);

    // Only admin keys, and only domains.
    assert_eq!(
        block(&a, &keys.own, ".phish.example").await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(blocklist(&a, &keys.own).await.0, StatusCode::FORBIDDEN);
    for bad in [
        "",
        "not a domain",
        "http://x.test/",
        "a..b",
        "x.test\ny.test",
    ] {
        let (status, body) = block(&a, &keys.admin, bad).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_domain")),
            "{bad:?}"
        );
    }
    let (status, body) = block(&a, &keys.admin, "*.Phish.Example.").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["domain"], ".phish.example");
    assert_eq!(
        block(&a, &keys.admin, ".phish.example").await.0,
        StatusCode::OK,
        "twice is not an error"
    );

    // In force at once here: new links refused, the existing one answers as blocked.
    assert_eq!(a.visit(&code).await.status(), StatusCode::GONE);
    let (status, body) = a
        .create_with_key(json!({ "url": "https://cdn.phish.example/x" }), &keys.own)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("blocked_target"))
    );
    let (_, list) = blocklist(&a, &keys.admin).await;
    let entries: Vec<(String, String)> = list["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["domain"].as_str().expect("domain").into(),
                e["source"].as_str().expect("source").into(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("from-file.test".into(), "file".into()),
            (".phish.example".into(), "api".into())
        ]
    );
    assert_eq!(list["entries"][1]["added_by"], "ops/root");

    // A second node (one store) takes the list at start, and later changes within the interval.
    if backend == Backend::Postgres {
        let b = Node::start(config("b")).await;
        assert_eq!(
            b.visit(&code).await.status(),
            StatusCode::GONE,
            "in force before the first request"
        );
        assert_eq!(
            unblock(&a, &keys.admin, ".phish.example").await,
            StatusCode::NO_CONTENT
        );
        assert_eq!(a.visit(&code).await.status(), StatusCode::FOUND);
        let lifted = testkit::wait_until(Duration::from_secs(5), || async {
            b.visit(&code).await.status() == StatusCode::FOUND
        })
        .await;
        assert!(lifted, "node B still blocks after the entry was removed");
        assert_eq!(
            block(&a, &keys.admin, ".phish.example").await.0,
            StatusCode::CREATED
        );
        let blocked = testkit::wait_until(Duration::from_secs(5), || async {
            b.visit(&code).await.status() == StatusCode::GONE
        })
        .await;
        assert!(blocked, "node B does not block the new entry");
    }
    assert_eq!(
        unblock(&a, &keys.admin, "from-file.test").await,
        StatusCode::CONFLICT,
        "the file's entries stay"
    );
    assert_eq!(
        unblock(&a, &keys.admin, "never-blocked.test").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        unblock(&a, &keys.admin, "a%20b").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        unblock(&a, &keys.other, ".phish.example").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        unblock(&a, &keys.admin, ".phish.example").await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(a.visit(&code).await.status(), StatusCode::FOUND);
}
on_both_stores!(an_admin_blocks_and_unblocks_domains_on_every_node);

/// A blocked host stops every link that may send a visit there, not only those whose own URL
/// names it: a split's variant, a rule's target or an app target blocks the whole link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_blocked_in_any_target_of_a_link_blocks_the_link() {
    let stack = Stack::new(Backend::Sqlite).await;
    let keys_path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&keys_path);
    let mut config = stack.config("targets");
    config.access.api_keys_file = Some(keys_path);
    let node = Node::start(config).await;
    let mut codes = Vec::new();
    for body in [
        json!({ "url": "https://ok.example/", "variants": [
            { "url": "https://evil.example/a", "weight": 50 },
            { "url": "https://ok.example/b", "weight": 50 },
        ] }),
        json!({ "url": "https://ok.example/", "rules": [
            { "url": "https://evil.example/de", "conditions": [{ "type": "language", "value": "de" }] },
        ] }),
        json!({ "url": "https://ok.example/", "android": "https://evil.example/app" }),
    ] {
        let (status, made) = node.create_with_key(body.clone(), &keys.own).await;
        assert_eq!(status, StatusCode::CREATED, "{body}: {made}");
        codes.push(made["code"].as_str().expect("code").to_string());
    }
    let plain = node
        .create_with_key(json!({ "url": "https://ok.example/plain" }), &keys.own)
        .await
        .1["code"]
        .as_str()
        .expect("code")
        .to_string();
    assert_eq!(
        block(&node, &keys.admin, "evil.example").await.0,
        StatusCode::CREATED
    );
    for code in &codes {
        for _ in 0..6 {
            assert_eq!(node.visit(code).await.status(), StatusCode::GONE, "{code}");
        }
    }
    assert_eq!(node.visit(&plain).await.status(), StatusCode::FOUND);
}
