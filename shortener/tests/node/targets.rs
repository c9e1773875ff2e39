//! What a node refuses to link to: itself in any spelling, private ranges when configured, and
//! the operator's blocklist, which also takes existing links down without a restart.

use crate::helpers::{Backend, Node, Stack, authed, create};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use tonic::Code;

/// Creates a link to `url`; returns the status and the error code (if any).
async fn try_create(node: &Node, url: &str) -> (StatusCode, String) {
    let (status, body) = node.create(json!({ "url": url })).await;
    (status, body["error"].as_str().unwrap_or("").to_string())
}

async fn a_node_refuses_links_to_itself_in_every_spelling(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("own");
    config.listeners.short_domains = vec!["go.example".into()];
    let node = Node::start(config).await;
    let own_ip = node.base.trim_start_matches("http://").to_string();
    let cases = [
        "https://sho.rt/abcdefg".to_string(),
        "https://SHO.RT./abcdefg".into(),
        "https://www.sho.rt/x".into(),
        "https://go.example/x".into(),
        "https://a.go.example./x".into(),
        format!("http://{own_ip}/abcdefg"),
        "http://[::1]/x".into(),
        "http://2130706433/x".into(),
        "http://0x7f.0.0.1/x".into(),
        "http://sub.localhost/x".into(),
        "http://localhost./x".into(),
        "http://[::ffff:127.0.0.1]/x".into(),
    ];
    for url in &cases {
        assert_eq!(
            try_create(&node, url).await,
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_url".into()),
            "{url}"
        );
    }
    // A two-link loop through this node cannot be made.
    let (status, first) = node
        .create(json!({ "url": "https://example.com/", "alias": "loop-a" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(
        try_create(&node, "https://sho.rt/loop-a").await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let mut client = node.links_client().await;
    let refused = client
        .create_link(authed(create("http://2130706433/x")))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(node.stored_links().await, 1, "a refused target was stored");
}
on_both_stores!(a_node_refuses_links_to_itself_in_every_spelling);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_when_the_deployment_says_so() {
    let stack = Stack::new(Backend::Sqlite).await;
    let open = stack.node("open").await;
    assert_eq!(
        try_create(&open, "http://10.0.0.1/").await.0,
        StatusCode::CREATED
    );
    let mut config = stack.config("closed");
    config.redirects.refuse_private_targets = true;
    let closed = Node::start(config).await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://kubernetes.default.svc.cluster.local/",
    ] {
        assert_eq!(
            try_create(&closed, url).await,
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_url".into()),
            "{url}"
        );
    }
    assert_eq!(
        try_create(&closed, "https://example.com/").await.0,
        StatusCode::CREATED
    );
}

async fn a_blocklisted_domain_is_refused_and_its_links_go_down_without_a_restart(backend: Backend) {
    let stack = Stack::new(backend).await;
    let blocklist = stack.dir.path().join("blocked-domains");
    std::fs::write(&blocklist, "# nothing yet\n").expect("write");
    let mut config = stack.config("blocklist");
    config.redirects.blocklist_file = Some(blocklist.clone());
    let node = Node::start(config).await;
    let phish = node.create_url("https://login.phish.test/account").await;
    let fine = node.create_url("https://example.com/fine").await;
    // Cached on this node before the block.
    assert_eq!(node.visit(&phish).await.status(), StatusCode::FOUND);
    assert_eq!(node.visit(&phish).await.status(), StatusCode::FOUND);
    std::fs::write(&blocklist, ".phish.test\n").expect("write");
    let down = testkit::wait_until(Duration::from_secs(10), || async {
        node.visit(&phish).await.status() == StatusCode::GONE
    })
    .await;
    assert!(
        down,
        "the blocked link kept redirecting: {:?}",
        node.metrics()
            .await
            .lines()
            .filter(|l| l.contains("blocklist"))
            .collect::<Vec<_>>()
    );
    assert_eq!(node.visit(&fine).await.status(), StatusCode::FOUND);
    assert_eq!(
        try_create(&node, "https://other.phish.test/").await,
        (StatusCode::UNPROCESSABLE_ENTITY, "blocked_target".into())
    );
    // The link itself is untouched: unblocked, it redirects again.
    let (status, link) = node.get(&phish).await;
    assert_eq!(
        (status, link["deleted_at"].is_null()),
        (StatusCode::OK, true)
    );
    std::fs::write(&blocklist, "\n").expect("write");
    let back = testkit::wait_until(Duration::from_secs(10), || async {
        node.visit(&phish).await.status() == StatusCode::FOUND
    })
    .await;
    assert!(back, "the unblocked link stayed down");
}
on_both_stores!(a_blocklisted_domain_is_refused_and_its_links_go_down_without_a_restart);

/// Every name and address that means "this machine" is refused with the default settings, as
/// a new link's target and as an edit's, over HTTP and gRPC, and nothing is stored or changed.
async fn loopback_names_and_addresses_are_refused_by_default(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("loopback").await;
    let kept = node.create_url("https://example.com/kept").await;
    let bad = [
        "http://localhost/x",
        "http://localhost./x",
        "http://LocalHost:8080/x",
        "http://api.localhost/x",
        "http://localhost.localdomain/x",
        "http://localhost.localdomain./x",
        "http://app.localhost.localdomain/x",
        "http://localhost4/x",
        "http://localhost6.localdomain6/x",
        "http://ip6-localhost/x",
        "http://ip6-loopback/x",
        "http://127.0.0.1/x",
        "http://127.1/x",
        "http://127.255.255.254/x",
        "http://0x7f.1/x",
        "http://017700000001/x",
        "http://2130706433/x",
        "http://[::1]/x",
        "http://[0:0:0:0:0:0:0:1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[::ffff:7f00:1]/x",
        "http://0.0.0.0/x",
        "http://0/x",
        "http://[::]/x",
    ];
    let mut client = node.links_client().await;
    for url in bad {
        let (status, body) = node.create(json!({ "url": url })).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {body}");
        assert_eq!(body["error"], "invalid_url", "{url}: {body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("loopback")),
            "{url}: {body}"
        );
        let (status, body) = node.patch(&kept, json!({ "url": url })).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_url")),
            "edit to {url}: {body}"
        );
        let refused = client
            .create_link(authed(create(url)))
            .await
            .expect_err(url);
        assert_eq!(refused.code(), Code::InvalidArgument, "{url}");
    }
    assert_eq!(node.stored_links().await, 1, "a refused target was stored");
    assert_eq!(
        node.location(&kept).await.1.as_deref(),
        Some("https://example.com/kept"),
        "a refused edit changed the link"
    );
    // Names that only look alike are ordinary targets.
    for url in [
        "https://notlocalhost.example/",
        "https://localhost.example.com/",
        "https://ip6-localhost.example/",
    ] {
        assert_eq!(try_create(&node, url).await.0, StatusCode::CREATED, "{url}");
    }
}
on_both_stores!(loopback_names_and_addresses_are_refused_by_default);
