//! A tag renamed or deleted across a tenant tells the tenant's webhooks of every link it
//! changed, one `link.updated` each carrying the link's new tags, and of no other link.

use super::{config, receiver, registered, verified};
use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

async fn a_tag_change_announces_each_changed_link(backend: Backend) {
    let stack = Stack::new(backend).await;
    let receiver = receiver(200, Duration::ZERO).await;
    let (config, keys) = config(&stack, 10);
    let node = Node::start(config).await;
    registered(&node, &keys, &receiver).await;
    let make = async |tags: Value| {
        let (status, made) = node
            .create_with_key(
                json!({ "url": "https://example.com/t", "tags": tags }),
                &keys.own,
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        made["code"].as_str().expect("code").to_string()
    };
    let tagged = [make(json!(["a", "k"])).await, make(json!(["a"])).await];
    let plain = make(json!(["k"])).await;
    let created = testkit::wait_until(Duration::from_secs(10), || async {
        verified(&receiver).len() == 3
    })
    .await;
    assert!(
        created,
        "the creations were never told: {:?}",
        verified(&receiver)
    );

    let renamed = node
        .client
        .patch(format!("{}/api/v1/tags/a", node.base))
        .bearer_auth(&keys.own)
        .json(&json!({ "name": "b" }))
        .send()
        .await
        .expect("rename");
    assert_eq!(renamed.status(), StatusCode::OK);
    let told = testkit::wait_until(Duration::from_secs(10), || async {
        verified(&receiver).len() >= 5
    })
    .await;
    assert!(told, "the rename was never told: {:?}", verified(&receiver));
    // Nothing more arrives: the untouched link is not announced.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut updates: Vec<(String, Value)> = receiver
        .requests()
        .iter()
        .map(|(_, body)| serde_json::from_str::<Value>(body).expect("JSON event"))
        .filter(|event| event["type"] == "link.updated")
        .map(|event| {
            let code = event["data"]["code"].as_str().expect("code").to_string();
            (code, event["data"]["tags"].clone())
        })
        .collect();
    updates.sort_by(|x, y| x.0.cmp(&y.0));
    let mut expected = vec![
        (tagged[0].clone(), json!(["b", "k"])),
        (tagged[1].clone(), json!(["b"])),
    ];
    expected.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(updates, expected, "one update per changed link");
    assert!(updates.iter().all(|(code, _)| *code != plain));
    assert_eq!(verified(&receiver).len(), 5);
}
on_both_stores!(a_tag_change_announces_each_changed_link);
