//! A rule's own split, and visits counted by the target they went to: the stats of a link say
//! how many visits each rule, app target and variant got (over HTTP and gRPC, both stores), so a
//! split can be judged.

use crate::analytics::stats;
use crate::helpers::{Backend, Stack, authed};
use crate::rules::{IPHONE, WINDOWS_CHROME, node};
use crate::splits::visit;
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where each route of the test's link sends its visitors.
const ROUTES: &[(&str, &str)] = &[
    ("https://de-a.example/", "rules[0].variants[0]"),
    ("https://de-b.example/", "rules[0].variants[1]"),
    ("https://ios.example/", "rules[1]"),
    ("https://c.example/", "variants[0]"),
    ("https://d.example/", "variants[1]"),
    ("https://plain.example/", "url"),
];

fn route_of(location: &str) -> &'static str {
    ROUTES
        .iter()
        .find(|(target, _)| *target == location)
        .map_or("unexpected", |(_, route)| route)
}

/// A link whose German visitors are split 50/50 by its first rule, whose iPhones go to its
/// second, and whose other visitors are split 60/40 by the link itself.
fn routed_link() -> Value {
    json!({
        "url": "https://plain.example/",
        "rules": [
            {"conditions": [{"type": "country", "value": "DE"}], "variants": [
                {"url": "https://de-a.example/", "weight": 50},
                {"url": "https://de-b.example/", "weight": 50}]},
            {"conditions": [{"type": "os", "value": "ios"}], "url": "https://ios.example/"},
        ],
        "variants": [
            {"url": "https://c.example/", "weight": 60},
            {"url": "https://d.example/", "weight": 40}],
    })
}

async fn a_rules_split_is_kept_and_stats_count_each_route(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "routes").await;
    let (status, made) = node.create(routed_link()).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["code"].as_str().expect("code").to_string();
    assert_eq!(
        made["rules"][0]["variants"][1]["weight"],
        json!(50),
        "{made}"
    );
    assert!(made["rules"][0].get("url").is_none(), "{made}");

    // What each visitor got, tallied by route: German visitors (81.0.0.0/8) over the rule's
    // split, iPhones elsewhere to the second rule, everyone else over the link's split.
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    let mut cookies = Vec::new();
    for i in 0..120u32 {
        let german = format!("81.1.{}.{}", i / 200, i % 200);
        let (status, location, cookie, _) =
            visit(&node, &code, &german, &[("user-agent", WINDOWS_CHROME)]).await;
        assert_eq!(status, 302, "{german}");
        *seen.entry(route_of(&location)).or_default() += 1;
        let cookie = cookie.expect("a new visitor of the rule's split gets a cookie");
        assert!(
            cookie.starts_with("sv0=") && cookie.contains(&format!("Path=/{code}")),
            "{cookie}"
        );
        cookies.push((
            location,
            cookie.split(';').next().expect("pair").to_string(),
        ));
        let elsewhere = format!("198.51.{}.{}", i / 200, i % 200);
        let (_, location, cookie, _) =
            visit(&node, &code, &elsewhere, &[("user-agent", WINDOWS_CHROME)]).await;
        *seen.entry(route_of(&location)).or_default() += 1;
        assert!(
            cookie.is_some_and(|c| c.starts_with("sv=")),
            "the link's split cookie"
        );
    }
    for i in 0..3 {
        let (_, location, _, _) = visit(
            &node,
            &code,
            &format!("203.0.113.{i}"),
            &[("user-agent", IPHONE)],
        )
        .await;
        assert_eq!(location, "https://ios.example/");
        *seen.entry("rules[1]").or_default() += 1;
    }
    // A returning German visitor stays on its variant of the rule's split from anywhere in
    // Germany.
    for (i, (location, pair)) in cookies.iter().take(10).enumerate() {
        let headers = [("user-agent", WINDOWS_CHROME), ("cookie", pair.as_str())];
        let (_, again, cookie, _) = visit(&node, &code, &format!("81.9.9.{i}"), &headers).await;
        assert_eq!(
            (&again, cookie),
            (location, None),
            "a returning visitor moved"
        );
        *seen.entry(route_of(&again)).or_default() += 1;
    }
    assert!(!seen.contains_key("unexpected"), "{seen:?}");
    for route in [
        "rules[0].variants[0]",
        "rules[0].variants[1]",
        "variants[0]",
        "variants[1]",
    ] {
        let n = seen.get(route).copied().unwrap_or(0);
        assert!(
            (20..=110).contains(&n),
            "{route} got {n} of its split: {seen:?}"
        );
    }

    // The stats count each route exactly as the visitors were sent.
    let total: u64 = seen.values().sum();
    let path = format!("/links/{code}/stats");
    let counted = testkit::wait_until(Duration::from_secs(15), || async {
        stats(&node, &path).await.1["totals"]["human"] == json!(total)
    })
    .await;
    let (status, body) = stats(&node, &path).await;
    assert!(counted && status == StatusCode::OK, "{body}");
    let routes: BTreeMap<&str, u64> = body["routes"]
        .as_array()
        .expect("routes")
        .iter()
        .map(|e| {
            (
                e["route"].as_str().expect("route"),
                e["visits"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(routes, seen, "{body}");
    assert!(body.get("links").is_none(), "{body}");

    // gRPC answers the same.
    let mut grpc = node.links_client().await;
    let answer = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            ..Default::default()
        }))
        .await
        .expect("GetLinkStats")
        .into_inner();
    let over_grpc: BTreeMap<&str, u64> = answer
        .routes
        .iter()
        .map(|e| (e.key.as_str(), e.visits))
        .collect();
    assert_eq!(over_grpc, seen);
    // ... and shows the rule's split on the link.
    let link = grpc
        .get_link(authed(pb::GetLinkRequest {
            code: code.clone(),
            ..Default::default()
        }))
        .await
        .expect("GetLink")
        .into_inner();
    let rule = &link.rules[0];
    assert_eq!((rule.url.as_str(), rule.variants.len()), ("", 2));

    // A link that does not route has one route, its URL.
    let plain = node.create_url("https://plain.example/only").await;
    visit(
        &node,
        &plain,
        "198.51.100.1",
        &[("user-agent", WINDOWS_CHROME)],
    )
    .await;
    let path = format!("/links/{plain}/stats");
    let plain_counted = testkit::wait_until(Duration::from_secs(15), || async {
        stats(&node, &path).await.1["routes"] == json!([{"route": "url", "visits": 1}])
    })
    .await;
    assert!(plain_counted, "{}", stats(&node, &path).await.1);
}

crate::on_both_stores!(a_rules_split_is_kept_and_stats_count_each_route);
