//! Stats say how far they reach: `as_of`, before which every visit the node counted is in the
//! counts, and how often newer visits are written (`flush_interval_ms`). Visits counted since
//! the last flush are missing until the next one, which moves `as_of` past them; over HTTP (a
//! link's and the tenant's stats) and gRPC, on both stores, and for a node with analytics off.

use super::{stats, time};
use crate::helpers::{Backend, Node, Stack, authed};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::json;
use shortener::clock::Clock;

async fn stats_say_up_to_when_their_counts_are_complete(backend: Backend) {
    let stack = Stack::new(backend).await;
    let clock = Clock::manual(time("2026-03-02T09:15:00Z"));
    let mut config = stack.config("a");
    config.clock = clock.clone();
    // Only the flush at start runs by itself within the test; the others are called below.
    config.visits.analytics_flush_interval_ms = std::num::NonZero::new(50_000).expect("non-zero");
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/fresh").await;
    let path = format!("/links/{code}/stats?granularity=hour&from=2026-03-02T00:00:00Z");
    let zero = json!({ "human": 0, "bot": 0, "head": 0 });

    // Nothing flushed since the start: the counts are complete up to the start, and say how
    // often they are brought up to date.
    let (status, body) = stats(&node, &path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["totals"], zero);
    assert_eq!(body["as_of"], "2026-03-02T09:15:00Z", "{body}");
    assert_eq!(body["flush_interval_ms"], 50_000, "{body}");

    // Two visits 20 s on are counted in memory only: the answer still says 09:15:00, which
    // is why it shows no visit yet.
    clock.advance(chrono::Duration::seconds(20));
    for _ in 0..2 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    let (_, body) = stats(&node, &path).await;
    assert_eq!(body["totals"], zero, "{body}");
    assert_eq!(body["as_of"], "2026-03-02T09:15:00Z", "{body}");

    // A flush at 09:15:30 writes them: the counts hold them and reach up to then.
    clock.advance(chrono::Duration::seconds(10));
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    let counted = json!({ "human": 0, "bot": 2, "head": 0 });
    for path in [
        path.as_str(),
        "/stats?granularity=hour&from=2026-03-02T00:00:00Z",
    ] {
        let (status, body) = stats(&node, path).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["totals"], counted, "{path}: {body}");
        assert_eq!(body["as_of"], "2026-03-02T09:15:30Z", "{path}: {body}");
        assert_eq!(body["flush_interval_ms"], 50_000, "{path}: {body}");
    }
    // CSV stays the bare series.
    let (_, csv) = stats(&node, &format!("{path}&format=csv")).await;
    assert_eq!(
        csv.as_str().expect("text").lines().next(),
        Some("at,human,bot,head")
    );

    // gRPC says the same.
    let mut grpc = node.links_client().await;
    let answer = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            range: None,
            ..Default::default()
        }))
        .await
        .expect("GetLinkStats")
        .into_inner();
    assert_eq!(
        answer.as_of.map(|t| t.seconds),
        Some(time("2026-03-02T09:15:30Z").timestamp())
    );
    assert_eq!(answer.flush_interval_ms, 50_000);
    let tenant = grpc
        .get_tenant_stats(authed(pb::GetTenantStatsRequest::default()))
        .await
        .expect("GetTenantStats")
        .into_inner();
    assert_eq!(tenant.as_of, answer.as_of);

    // With analytics off nothing newer will come: no interval, and the counts reach up to the
    // node's start.
    let mut config = stack.config("off");
    config.clock = clock.clone();
    config.visits.analytics = false;
    let off = Node::start(config).await;
    clock.advance(chrono::Duration::seconds(5));
    let (status, body) = stats(&off, "/stats").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["as_of"], "2026-03-02T09:15:30Z", "{body}");
    assert_eq!(body["flush_interval_ms"], json!(null), "{body}");
    let mut grpc = off.links_client().await;
    let answer = grpc
        .get_tenant_stats(authed(pb::GetTenantStatsRequest::default()))
        .await
        .expect("GetTenantStats")
        .into_inner();
    assert_eq!(answer.flush_interval_ms, 0);
}
on_both_stores!(stats_say_up_to_when_their_counts_are_complete);
