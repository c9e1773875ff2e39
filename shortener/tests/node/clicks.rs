//! Click counts: people, HEAD requests and bots counted apart, on both transports' reads.

use crate::helpers::{BROWSER, Backend, Stack, authed};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use std::time::Duration;

async fn clicks_are_counted_apart_for_people_head_requests_and_bots(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let code = node.create_url("https://example.com/clicks").await;
    let url = format!("{}/{code}", node.base);
    let human = (0..25).map(|_| node.client.get(&url).header("user-agent", BROWSER).send());
    let head = (0..7).map(|_| node.client.head(&url).header("user-agent", BROWSER).send());
    let bots = (0..4).map(|_| {
        node.client
            .get(&url)
            .header(
                "user-agent",
                "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            )
            .send()
    });
    for response in futures::future::join_all(human.chain(head).chain(bots)).await {
        assert_eq!(response.expect("visit").status(), StatusCode::FOUND);
    }
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        let (_, link) = node.get(&code).await;
        link["clicks"] == serde_json::json!({ "human": 25, "head": 7, "bot": 4 })
    })
    .await;
    let (_, link) = node.get(&code).await;
    assert!(
        counted,
        "click counts never reached 25/7/4: {}",
        link["clicks"]
    );
    let mut client = node.links_client().await;
    let clicks = client
        .get_link(authed(pb::GetLinkRequest {
            code,
            ..Default::default()
        }))
        .await
        .expect("get")
        .into_inner()
        .clicks
        .expect("clicks");
    assert_eq!((clicks.human, clicks.head, clicks.bot), (25, 7, 4));
}
on_both_stores!(clicks_are_counted_apart_for_people_head_requests_and_bots);
