//! A node killed with SIGKILL loses at most the visits of its last flush interval (and of a
//! flush that was writing them): everything counted earlier is in the rollups after a restart,
//! on both stores.

use super::get_at;
use crate::helpers::{API_KEY, BROWSER, Backend, Stack};
use crate::served::Served;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

/// The flush interval of the killed node.
const INTERVAL: Duration = Duration::from_millis(300);

async fn a_node_killed_mid_traffic_loses_at_most_one_flush_interval_of_visits(backend: Backend) {
    let stack = Stack::new(backend).await;
    let data = stack.dir.path().join("data");
    let mut env = vec![
        ("SHORTENER_API_KEYS", API_KEY.to_string()),
        (
            "SHORTENER_CLICK_FLUSH_INTERVAL_MS",
            INTERVAL.as_millis().to_string(),
        ),
    ];
    env.extend(stack.env());
    let served = Served::start(&data, &env, None).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let created = client
        .post(format!("http://{}/api/v1/links", served.http))
        .bearer_auth(API_KEY)
        .json(&json!({ "url": "https://example.com/crash" }))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), StatusCode::CREATED);
    let code = created.json::<serde_json::Value>().await.expect("json")["code"]
        .as_str()
        .expect("code")
        .to_string();
    // Steady traffic over several flush intervals; when each visit was answered.
    let mut answered = Vec::new();
    let until = Instant::now() + INTERVAL * 10;
    while Instant::now() < until {
        let response = client
            .get(format!("http://{}/{code}", served.http))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
        assert_eq!(response.status(), StatusCode::FOUND);
        answered.push(Instant::now());
    }
    // What the node says it has written, read just before the kill.
    let metrics = client
        .get(format!("http://{}/metrics", served.admin))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let flushed = crate::helpers::metric(&metrics, "shortener_analytics_flushed_total") as u64;
    served.signal("KILL");
    let killed = Instant::now();
    drop(served);
    let restarted = Served::start(&data, &env, None).await;
    // A visit is taken by the next flush (within one interval) and lost only if the node dies
    // before that flush has written it. Visits answered four intervals before the kill were
    // taken by a flush that had three intervals to write one row: on a busy test machine too,
    // it had finished.
    let safe = answered
        .iter()
        .filter(|at| killed.duration_since(**at) > INTERVAL * 4)
        .count() as u64;
    let total = answered.len() as u64;
    assert!(
        safe > 0,
        "no visit old enough to be safe: the test proves nothing"
    );
    let base = format!("http://{}", restarted.http);
    let path = format!("/links/{code}/stats?granularity=hour");
    let (status, body) = get_at(&client, &base, &path, API_KEY).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = body["totals"]["human"].as_u64().expect("human");
    assert!(
        stored >= flushed,
        "stored {stored}, but the node had reported {flushed} written before it was killed"
    );
    assert!(
        (safe..=total).contains(&stored),
        "stored {stored} of {total} visits; every one of the {safe} older than four flush intervals must be"
    );
}
on_both_stores!(a_node_killed_mid_traffic_loses_at_most_one_flush_interval_of_visits);
