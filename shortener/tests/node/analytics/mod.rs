//! Click analytics through the stats API: exact counts by referrer, device and country (from a
//! MaxMind-format file the test writes), hour buckets, compaction and retention driven by a
//! clock set by hand, and bad requests refused without a change.

mod crash;
mod fair_share;
mod freshness;
mod held;
pub(crate) mod mmdb;
mod places;
mod privacy;
mod refusals;
mod tenant_rollups;

pub use crate::helpers::BROWSER;
use crate::helpers::{API_KEY, Backend, Node, Stack, authed};
use chrono::{DateTime, Utc};
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortener::clock::Clock;
use shortener::domain::{Granularity, StatsQuery, StatsScope};
use shortener::store::VisitStore;
use std::time::Duration;

pub const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
pub const SLACK: &str = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)";

/// `GET /api/v1{path}` with `key`: status and JSON (or text, as a JSON string).
pub async fn get_with(node: &Node, path: &str, key: &str) -> (StatusCode, Value) {
    get_at(&node.client, &node.base, path, key).await
}

/// `GET {base}/api/v1{path}` with `key` through `client`.
pub async fn get_at(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
) -> (StatusCode, Value) {
    let response = client
        .get(format!("{base}/api/v1{path}"))
        .bearer_auth(key)
        .send()
        .await
        .expect("send stats");
    let status = response.status();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub async fn stats(node: &Node, path: &str) -> (StatusCode, Value) {
    get_with(node, path, API_KEY).await
}

pub fn time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect("time").to_utc()
}

pub async fn visit(
    node: &Node,
    code: &str,
    head: bool,
    agent: &str,
    referer: Option<&str>,
    ip: &str,
) {
    let url = format!("{}/{code}", node.base);
    let mut request = if head {
        node.client.head(&url)
    } else {
        node.client.get(&url)
    }
    .header("user-agent", agent)
    .header("x-forwarded-for", ip);
    if let Some(referer) = referer {
        request = request.header("referer", referer);
    }
    let response = request.send().await.expect("visit");
    assert_eq!(response.status(), StatusCode::FOUND);
}

async fn stats_count_exactly_the_visits_by_referrer_device_and_country(backend: Backend) {
    let stack = Stack::new(backend).await;
    let geoip = stack.dir.path().join("countries.mmdb");
    std::fs::write(
        &geoip,
        mmdb::country_db(&[([81, 0, 0, 0], 8, "DE"), ([2, 0, 0, 0], 8, "FR")]),
    )
    .expect("write GeoIP file");
    let mut config = stack.config("a");
    config.visits.geoip_db = Some(geoip);
    config.listeners.client_ip_header = Some("x-forwarded-for".into());
    config.listeners.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/analytics").await;
    let other = node.create_url("https://example.com/quiet").await;
    // N = 6 people: 4 from news.example on desktops in Germany, 2 from blog.example on
    // phones in France; M = 3 bots and K = 2 HEAD requests, with no referrer and an address
    // the database does not know.
    for i in 0..4 {
        let referer = format!("https://www.news.example/story/{i}");
        visit(&node, &code, false, BROWSER, Some(&referer), "81.2.69.160").await;
    }
    for _ in 0..2 {
        visit(
            &node,
            &code,
            false,
            PHONE,
            Some("https://blog.example/p"),
            "2.2.2.2",
        )
        .await;
    }
    for _ in 0..3 {
        visit(&node, &code, false, SLACK, None, "198.51.100.7").await;
    }
    for _ in 0..2 {
        visit(&node, &code, true, BROWSER, None, "198.51.100.7").await;
    }
    visit(&node, &other, false, BROWSER, None, "81.2.69.160").await;
    let path = format!("/links/{code}/stats?granularity=hour");
    let expected = json!({ "human": 6, "bot": 3, "head": 2 });
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        stats(&node, &path).await.1["totals"] == expected
    })
    .await;
    let (status, body) = stats(&node, &path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(counted, "totals never reached 6/3/2: {body}");
    assert_eq!(
        body["referrers"],
        json!([
            { "host": null, "visits": 5 },
            { "host": "news.example", "visits": 4 },
            { "host": "blog.example", "visits": 2 },
        ])
    );
    assert_eq!(
        body["devices"],
        json!([
            { "device": "desktop", "visits": 6 },
            { "device": "bot", "visits": 3 },
            { "device": "mobile", "visits": 2 },
        ])
    );
    assert_eq!(
        body["countries"],
        json!([
            { "country": null, "visits": 5 },
            { "country": "DE", "visits": 4 },
            { "country": "FR", "visits": 2 },
        ])
    );
    let series = body["series"].as_array().expect("series");
    assert_eq!(series.len(), 1, "{body}");
    assert_eq!(
        (&series[0]["human"], &series[0]["bot"], &series[0]["head"]),
        (&json!(6), &json!(3), &json!(2))
    );
    let at = time(series[0]["at"].as_str().expect("at"));
    assert_eq!(at.timestamp() % 3600, 0, "an hour's start");
    // The link's own totals are as exact as ever.
    let (_, link) = node.get(&code).await;
    assert_eq!(link["clicks"], json!({ "human": 6, "head": 2, "bot": 3 }));

    // The tenant's summary adds the other link and ranks the links.
    let tenant_expected = json!({ "human": 7, "bot": 3, "head": 2 });
    let summed = testkit::wait_until(Duration::from_secs(10), || async {
        stats(&node, "/stats").await.1["totals"] == tenant_expected
    })
    .await;
    let (status, tenant) = stats(&node, "/stats").await;
    assert!(summed && status == StatusCode::OK, "{tenant}");
    assert_eq!(
        tenant["links"],
        json!([{ "code": code, "visits": 11 }, { "code": other, "visits": 1 }])
    );
    // A tie is broken by the key: no country sorts first.
    assert_eq!(
        tenant["countries"],
        json!([
            { "country": null, "visits": 5 },
            { "country": "DE", "visits": 5 },
            { "country": "FR", "visits": 2 },
        ])
    );

    // CSV: the series, for spreadsheets.
    let (status, csv) = stats(&node, &format!("{path}&format=csv")).await;
    assert_eq!(status, StatusCode::OK);
    let csv = csv.as_str().expect("text");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "at,human,bot,head");
    assert_eq!(
        lines[1],
        format!("{},6,3,2", series[0]["at"].as_str().expect("at"))
    );
    assert_eq!(lines.len(), 2, "{csv}");

    // gRPC answers the same numbers.
    let mut grpc = node.links_client().await;
    let hourly = || pb::StatsRange {
        granularity: "hour".into(),
        ..Default::default()
    };
    let stats = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            range: Some(hourly()),
            ..Default::default()
        }))
        .await
        .expect("GetLinkStats")
        .into_inner();
    let totals = stats.totals.expect("totals");
    assert_eq!((totals.human, totals.bot, totals.head), (6, 3, 2));
    let referrers: Vec<(&str, u64)> = stats
        .referrers
        .iter()
        .map(|e| (e.key.as_str(), e.visits))
        .collect();
    assert_eq!(
        referrers,
        [("", 5), ("news.example", 4), ("blog.example", 2)]
    );
    let entries = |list: &[pb::StatsEntry]| -> Vec<(String, u64)> {
        list.iter().map(|e| (e.key.clone(), e.visits)).collect()
    };
    let owned = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    assert_eq!(
        entries(&stats.devices),
        owned(&[("desktop", 6), ("bot", 3), ("mobile", 2)])
    );
    assert_eq!(
        entries(&stats.countries),
        owned(&[("", 5), ("DE", 4), ("FR", 2)])
    );
    assert_eq!(stats.series.len(), 1);
    // A range given by its ends, and a shorter top list.
    let hour = stats.series[0].at.expect("at");
    let bounded = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            domain: String::new(),
            range: Some(pb::StatsRange {
                from: Some(hour),
                to: Some(prost_types::Timestamp {
                    seconds: hour.seconds + 3600,
                    nanos: 0,
                }),
                granularity: "hour".into(),
                top: 1,
            }),
        }))
        .await
        .expect("GetLinkStats over one hour")
        .into_inner();
    assert_eq!(bounded.totals, stats.totals);
    assert_eq!(entries(&bounded.referrers), owned(&[("", 5)]));
    let before = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            domain: String::new(),
            range: Some(pb::StatsRange {
                to: Some(hour),
                granularity: "hour".into(),
                ..Default::default()
            }),
        }))
        .await
        .expect("GetLinkStats before the hour")
        .into_inner();
    assert!(before.series.is_empty(), "{before:?}");
    let tenant = grpc
        .get_tenant_stats(authed(pb::GetTenantStatsRequest {
            tag: String::new(),
            range: Some(hourly()),
        }))
        .await
        .expect("GetTenantStats")
        .into_inner();
    assert_eq!(
        (tenant.links[0].key.as_str(), tenant.links[0].visits),
        (code.as_str(), 11)
    );
    let refused = grpc
        .get_link_stats(authed(pb::GetLinkStatsRequest {
            code: code.clone(),
            domain: String::new(),
            range: Some(pb::StatsRange {
                granularity: "week".into(),
                ..Default::default()
            }),
        }))
        .await
        .expect_err("an unknown granularity");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    // The metrics tell what the aggregator did: 12 visits written, none folded or dropped.
    let metrics = node.metrics().await;
    for line in [
        "shortener_analytics_flushed_total 12",
        "shortener_analytics_dropped_total 0",
        "shortener_analytics_folded_total 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} missing");
    }
    let entries = metrics
        .lines()
        .find_map(|l| l.strip_prefix("shortener_analytics_entries "))
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(entries, Some(0.0), "nothing pending after the flush");
}
on_both_stores!(stats_count_exactly_the_visits_by_referrer_device_and_country);

async fn hours_compaction_and_retention_follow_the_clock(backend: Backend) {
    let stack = Stack::new(backend).await;
    let start = time("2026-01-10T10:58:00Z");
    let clock = Clock::manual(start);
    let mut config = stack.config("a");
    config.clock = clock.clone();
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/hours").await;
    for _ in 0..2 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    node.app.visits.analytics().flush(&node.app.store).await;
    clock.advance(chrono::Duration::minutes(3)); // 11:01, the next hour
    for _ in 0..3 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    let hourly = format!(
        "/links/{code}/stats?granularity=hour&from=2026-01-10T10:00:00Z&to=2026-01-10T12:00:00Z"
    );
    let (status, body) = stats(&node, &hourly).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The visits carry no User-Agent, so they count as bots (as the totals do).
    assert_eq!(
        body["series"],
        json!([
            { "at": "2026-01-10T10:00:00Z", "human": 0, "bot": 2, "head": 0 },
            { "at": "2026-01-10T11:00:00Z", "human": 0, "bot": 3, "head": 0 },
        ])
    );

    // 31 days on, the day is compacted: one daily point, the same count.
    clock.advance(chrono::Duration::days(31));
    let outcome = node.maintain_rollups().await;
    assert!(outcome.compacted > 0, "{outcome:?}");
    let day = format!("/links/{code}/stats?from=2026-01-10T00:00:00Z&to=2026-01-11T00:00:00Z");
    for path in [day.clone(), format!("{day}&granularity=hour")] {
        let (status, body) = stats(&node, &path).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["series"],
            json!([{ "at": "2026-01-10T00:00:00Z", "human": 0, "bot": 5, "head": 0 }]),
            "{path}"
        );
    }
    // Maintenance again changes nothing.
    let again = node.maintain_rollups().await;
    assert_eq!(again.compacted, 0);

    // Past retention (400 days) the rollups are gone, and asking for them is refused.
    clock.advance(chrono::Duration::days(420));
    let outcome = node.maintain_rollups().await;
    assert!(outcome.expired > 0, "{outcome:?}");
    let everything = StatsQuery {
        scope: StatsScope::Link(code.clone()),
        start: 0,
        end: i64::MAX / 2,
        granularity: Granularity::Day,
        top: 10,
    };
    let report = node.app.store.stats(&everything).await.expect("stats");
    assert!(report.series.is_empty(), "{report:?}");
    let (status, body) = stats(&node, &day).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "range_beyond_retention");
    // The link's totals are not rollups: they stay (once their own flush has run).
    let kept = testkit::wait_until(Duration::from_secs(10), || async {
        node.get(&code).await.1["clicks"]["bot"] == 5
    })
    .await;
    assert!(kept, "the link's totals: {}", node.get(&code).await.1);
}
on_both_stores!(hours_compaction_and_retention_follow_the_clock);

async fn retention_zero_keeps_rollups_forever(backend: Backend) {
    let stack = Stack::new(backend).await;
    let clock = Clock::manual(time("2026-01-10T10:30:00Z"));
    let mut config = stack.config("a");
    config.clock = clock.clone();
    config.visits.analytics_retention_days = 0;
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/forever").await;
    for _ in 0..2 {
        assert_eq!(node.visit(&code).await.status(), StatusCode::FOUND);
    }
    assert!(node.app.visits.analytics().flush(&node.app.store).await);
    // Five years on: compacted into a day, never expired, and still asked for.
    clock.advance(chrono::Duration::days(5 * 365));
    let outcome = node.maintain_rollups().await;
    assert!(outcome.compacted > 0, "{outcome:?}");
    assert_eq!(outcome.expired, 0, "{outcome:?}");
    let (status, body) = stats(
        &node,
        &format!("/links/{code}/stats?from=2026-01-10T00:00:00Z&to=2026-01-11T00:00:00Z"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["series"],
        json!([{ "at": "2026-01-10T00:00:00Z", "human": 0, "bot": 2, "head": 0 }])
    );
}
on_both_stores!(retention_zero_keeps_rollups_forever);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_geoip_file_leaves_the_node_ready_without_countries_until_it_is_fixed() {
    let stack = Stack::new(Backend::Sqlite).await;
    let geoip = stack.dir.path().join("countries.mmdb");
    let good = mmdb::country_db(&[([81, 0, 0, 0], 8, "DE")]);
    let mut config = stack.config("a");
    config.visits.geoip_db = Some(geoip.clone());
    config.listeners.client_ip_header = Some("x-forwarded-for".into());
    config.listeners.trusted_proxies = vec!["127.0.0.0/8".parse().expect("net")];
    // Missing at start: the node starts and is ready (Node::start waits for /readyz).
    let node = Node::start(config).await;
    let code = node.create_url("https://example.com/geo").await;
    let path = format!("/links/{code}/stats");
    for bad in [
        b"not a MaxMind database at all".to_vec(),
        good[..good.len() / 2].to_vec(),
    ] {
        std::fs::write(&geoip, &bad).expect("write bad file");
        visit(&node, &code, false, BROWSER, None, "81.2.69.160").await;
        let ready = node
            .client
            .get(format!("{}/readyz", node.admin))
            .send()
            .await
            .expect("readyz");
        assert_eq!(ready.status(), StatusCode::OK);
    }
    let counted = testkit::wait_until(Duration::from_secs(10), || async {
        stats(&node, &path).await.1["totals"]["human"] == 2
    })
    .await;
    let (_, body) = stats(&node, &path).await;
    assert!(counted, "{body}");
    assert_eq!(body["countries"], json!([{ "country": null, "visits": 2 }]));
    // Fixed: the file is re-read and the next visits have a country.
    std::fs::write(&geoip, &good).expect("write good file");
    let located = testkit::wait_until(Duration::from_secs(10), || async {
        visit(&node, &code, false, BROWSER, None, "81.2.69.160").await;
        node.app.visits.analytics().flush(&node.app.store).await;
        stats(&node, &path).await.1["countries"]
            .as_array()
            .is_some_and(|c| c.iter().any(|e| e["country"] == "DE"))
    })
    .await;
    assert!(located, "{}", stats(&node, &path).await.1);
}
