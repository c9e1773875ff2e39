//! A node killed with SIGKILL loses at most the visits its flushes had not written yet (those
//! of the last flush interval, and of a flush that was writing them): everything a finished
//! flush reported written is in the rollups after a restart, on both stores.

use super::get_at;
use crate::helpers::{API_KEY, BROWSER, Backend, Stack};
use crate::served::Served;
use reqwest::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
        (
            "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS",
            INTERVAL.as_millis().to_string(),
        ),
    ];
    env.extend(stack.env());
    let served = Served::start(&data, &env, None).await;
    let client = Served::client();
    let code = served.create(&client, "https://example.com/crash").await;
    // Steady traffic from a task of its own, counting the visits answered.
    let answered = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let traffic = tokio::spawn({
        let (client, answered, stop) = (client.clone(), Arc::clone(&answered), stop.clone());
        let url = format!("http://{}/{code}", served.http);
        async move {
            while !stop.is_cancelled() {
                let response = client.get(&url).header("user-agent", BROWSER).send().await;
                match response {
                    Ok(r) if r.status() == StatusCode::FOUND => {
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                    // The node is gone: the kill.
                    _ => break,
                }
            }
        }
    });
    let flowing = testkit::wait_until(Duration::from_secs(10), || async {
        answered.load(Ordering::SeqCst) >= 500
    })
    .await;
    assert!(flowing, "the traffic never got going");
    // The visits answered so far must be taken and written by the node's own flushes while the
    // traffic goes on; then the node dies in the middle of it.
    let early = answered.load(Ordering::SeqCst);
    assert!(early > 0, "no traffic was answered");
    let admin = served.admin;
    let flushed = || async {
        let metrics = client
            .get(format!("http://{admin}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        crate::helpers::metric(&metrics, "shortener_analytics_flushed_total") as u64
    };
    let caught_up = testkit::wait_until(Duration::from_secs(30), || async {
        flushed().await >= early
    })
    .await;
    assert!(
        caught_up,
        "the flushes never wrote the first {early} visits"
    );
    // More traffic after the catch-up, so the kill comes in the middle of it.
    let more = early + 200;
    let went_on = testkit::wait_until(Duration::from_secs(10), || async {
        answered.load(Ordering::SeqCst) >= more
    })
    .await;
    assert!(went_on, "the traffic stopped");
    // What the node says it has written, read just before the kill.
    let reported = flushed().await;
    served.signal("KILL");
    stop.cancel();
    drop(served);
    traffic.await.expect("traffic task");
    let total = answered.load(Ordering::SeqCst);
    let restarted = Served::start(&data, &env, None).await;
    let base = format!("http://{}", restarted.http);
    let path = format!("/links/{code}/stats?granularity=hour");
    let (status, body) = get_at(&client, &base, &path, API_KEY).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = body["totals"]["human"].as_u64().expect("human");
    // Everything a finished flush wrote survived the kill; what was lost was still in memory
    // (taken by no flush yet, or by the one that was writing); nothing was invented.
    assert!(
        (reported..=total).contains(&stored),
        "stored {stored} of {total} visits; the node had reported {reported} written before it was killed"
    );
    assert!(reported >= early);
}
on_both_stores!(a_node_killed_mid_traffic_loses_at_most_one_flush_interval_of_visits);
