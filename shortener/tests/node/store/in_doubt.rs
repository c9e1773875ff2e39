//! A flush write whose answer was lost after PostgreSQL committed it (the connection cut while
//! the answer was on its way) is sent again with its mark and counted once: the click totals
//! and the rollups stay exact (without the marks, the batch was put back and written twice).
//! A create batch whose read after its commit is cut answers its creates as "outcome unknown".

use crate::analytics::stats;
use crate::helpers::{BROWSER, Backend, Node, Stack, metric, proxied_database};
use reqwest::StatusCode;
use serde_json::json;
use std::num::NonZeroU64;
use std::time::Duration;
use testkit::proxy::Proxy;

/// A node of `stack` whose database connections go through a proxy the test controls, with
/// click counts and rollups flushed every `click_ms` and `rollup_ms`.
async fn proxied(stack: &Stack, name: &str, click_ms: u64, rollup_ms: u64) -> (Node, Proxy) {
    // In plain text, so that the proxy can tell the flush's requests apart.
    let (url, proxy) = proxied_database(stack, true).await;
    let mut config = stack.config(name);
    config.store.database_url = Some(url);
    config.visits.click_flush_interval_ms = NonZeroU64::new(click_ms).expect("interval");
    config.visits.analytics_flush_interval_ms = NonZeroU64::new(rollup_ms).expect("interval");
    (Node::start(config).await, proxy)
}

async fn visit(node: &Node, code: &str, times: usize) {
    for _ in 0..times {
        let response = node
            .client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", BROWSER)
            .send()
            .await
            .expect("visit");
        assert_eq!(response.status(), StatusCode::FOUND);
    }
}

async fn resent(node: &Node, name: &str) -> f64 {
    metric(&node.metrics().await, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn click_counts_whose_commit_went_unheard_are_counted_once() {
    let stack = Stack::new(Backend::Postgres).await;
    // Rollups flush rarely, so the click flush is the only write that names the code.
    let (node, proxy) = proxied(&stack, "clicks-in-doubt", 100, 50_000).await;
    let code = node.create_url("https://example.com/in-doubt").await;
    let humans = || async { node.get(&code).await.1["clicks"]["human"].clone() };
    visit(&node, &code, 10).await;
    assert!(
        testkit::wait_until(Duration::from_secs(10), || async {
            humans().await == json!(10)
        })
        .await,
        "the first visits were never counted"
    );
    // The next write naming the code commits; its answer never arrives.
    proxy.cut_answer_to(&[code.as_bytes()]);
    visit(&node, &code, 5).await;
    let settled = testkit::wait_until(Duration::from_secs(10), || async {
        resent(&node, "shortener_clicks_chunks_resent_total").await >= 1.0
            && humans().await == json!(15)
    })
    .await;
    assert_eq!(proxy.answers_cut(), 1, "the flush's answer was cut");
    assert!(
        settled,
        "the chunk in doubt was not sent again, or counted twice: {} humans",
        humans().await
    );
    // Later flushes leave the total as it is, and count what comes after.
    visit(&node, &code, 2).await;
    assert!(
        testkit::wait_until(Duration::from_secs(10), || async {
            humans().await == json!(17)
        })
        .await,
        "the total went astray after the chunk in doubt: {}",
        humans().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollups_whose_commit_went_unheard_are_counted_once() {
    let stack = Stack::new(Backend::Postgres).await;
    let (node, proxy) = proxied(&stack, "rollups-in-doubt", 100, 100).await;
    let code = node.create_url("https://example.com/rollup-in-doubt").await;
    let path = format!("/links/{code}/stats?granularity=hour");
    let humans = || async { stats(&node, &path).await.1["totals"]["human"].clone() };
    visit(&node, &code, 6).await;
    assert!(
        testkit::wait_until(Duration::from_secs(10), || async {
            humans().await == json!(6)
        })
        .await,
        "the first visits never reached the rollups"
    );
    // The rollup transaction's COMMIT goes through; its answer never arrives.
    proxy.cut_answer_to(&[b"rollups", b"COMMIT"]);
    visit(&node, &code, 4).await;
    let settled = testkit::wait_until(Duration::from_secs(10), || async {
        resent(&node, "shortener_analytics_batches_resent_total").await >= 1.0
            && humans().await == json!(10)
    })
    .await;
    assert_eq!(proxy.answers_cut(), 1, "the flush's answer was cut");
    assert!(
        settled,
        "the batch in doubt was not sent again, or counted twice: {} humans",
        humans().await
    );
    visit(&node, &code, 3).await;
    assert!(
        testkit::wait_until(Duration::from_secs(10), || async {
            humans().await == json!(13)
        })
        .await,
        "the rollups went astray after the batch in doubt: {}",
        humans().await
    );
}

/// The bytes the rollups' aggregator holds, as `/metrics` reports them.
async fn aggregated(node: &Node) -> f64 {
    metric(
        &node.metrics().await,
        "shortener_memory_bytes{structure=\"analytics_counters\"}",
    )
}

/// While the batch in doubt fails again (its answer lost once more), each rollups flush still
/// takes the counts cached links' words stand for into the aggregator (bounded, and counted
/// where it drops), so that no word keeps a cell's hour through a long outage (a word holds its
/// hour modulo 1024 hours); once the batch goes through, every visit is in the rollups once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_links_words_are_taken_while_a_batch_in_doubt_keeps_failing() {
    let stack = Stack::new(Backend::Postgres).await;
    // Neither flush runs by itself: the test calls the rollups' flush.
    let (node, proxy) = proxied(&stack, "words-in-outage", 50_000, 50_000).await;
    let (store, analytics) = (&node.app.store, node.app.visits.analytics());
    let code = node.create_url("https://example.com/outage").await;
    let path = format!("/links/{code}/stats?granularity=hour");
    visit(&node, &code, 2).await;
    proxy.cut_answer_to(&[b"rollups", b"COMMIT"]);
    assert!(
        !analytics.flush(store).await,
        "the flush's answer was cut, so its batch is in doubt"
    );
    // The totals' flush clears the word (the rollups' flush left it standing for no cell), so
    // that it counts the next visits' rollups itself; the batch in doubt fails again.
    node.app.visits.clicks().flush(store).await;
    visit(&node, &code, 3).await;
    assert_eq!(
        analytics.aggregator().entries(),
        0,
        "the visits' rollup counts are in the cached link's word, not the aggregator"
    );
    proxy.cut_answer_to(&[b"rollups", b"COMMIT"]);
    assert!(
        !analytics.flush(store).await,
        "the batch in doubt was sent again and its answer cut again"
    );
    assert_eq!(proxy.answers_cut(), 2, "both answers were cut");
    assert!(
        analytics.aggregator().entries() > 0,
        "the word's rollup counts were left in the word while the batch in doubt failed"
    );
    let settled = testkit::wait_until(Duration::from_secs(20), || async {
        analytics.flush(store).await && stats(&node, &path).await.1["totals"]["human"] == json!(5)
    })
    .await;
    assert!(
        settled,
        "the visits were lost or counted twice: {}",
        stats(&node, &path).await.1
    );
}

/// While a rollups flush writes what it took, the aggregator is empty and fills again beside it:
/// the `analytics_counters` gauge counts what the flush holds until it ends, then only what the
/// aggregator holds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gauge_counts_what_a_rollups_flush_holds_while_it_writes() {
    let stack = Stack::new(Backend::Postgres).await;
    // Neither flush runs by itself: the test calls the rollups' flush.
    let (node, proxy) = proxied(&stack, "taken-gauge", 50_000, 50_000).await;
    let code = node.create_url("https://example.com/taken").await;
    visit(&node, &code, 3).await;
    assert_eq!(
        node.app.visits.analytics().aggregator().entries(),
        0,
        "the visits wait in the cached link"
    );
    // The database stops answering: the flush takes the counters and waits on its write.
    proxy.set_mode(testkit::proxy::Mode::Blackhole);
    let flush = tokio::spawn({
        let app = std::sync::Arc::clone(&node.app);
        async move { app.visits.analytics().flush(&app.store).await }
    });
    let analytics = node.app.visits.analytics();
    assert!(
        testkit::wait_until(Duration::from_secs(10), || async {
            analytics.aggregator().entries() == 0
                && aggregated(&node).await > analytics.aggregator().bytes() as f64
        })
        .await,
        "the counters a flush holds are not on the gauge: {}",
        aggregated(&node).await
    );
    proxy.set_mode(testkit::proxy::Mode::Open);
    let _ = flush.await.expect("the flush ends");
    assert_eq!(
        aggregated(&node).await,
        analytics.aggregator().bytes() as f64,
        "once the flush ends, the gauge is the aggregator's again"
    );
}

/// Deduplicated creates racing for one URL: the batch whose insert found the URL taken reads
/// the twin after its commit. When that read's answer is lost (the connection cut), every
/// create of the batch is answered as a write whose outcome is unknown (503, retry with the same
/// key), never as "not written" nor a plain error; a retry finds the one link, and the URL keeps
/// exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_creates_whose_twin_read_is_cut_are_answered_as_unknown() {
    let stack = Stack::new(Backend::Postgres).await;
    let (node, proxy) = proxied(&stack, "twin-cut", 50_000, 50_000).await;
    proxy.cut_answer_to(&[b"dedup_key = ANY"]);
    // Racing creates find no twin before they insert only if they race: a few rounds, each on
    // a URL of its own, until one batch reads a twin.
    let mut rounds = 0;
    while proxy.answers_cut() == 0 && rounds < 10 {
        rounds += 1;
        let body = json!({ "url": format!("https://example.com/twin-{rounds}"), "dedup": true });
        let answers = futures::future::join_all((0..16).map(|_| node.create(body.clone()))).await;
        let mut codes = std::collections::HashSet::new();
        let mut unknown = 0;
        for (status, answer) in &answers {
            match *status {
                StatusCode::CREATED | StatusCode::OK => {
                    codes.insert(answer["code"].as_str().expect("a code").to_string());
                }
                StatusCode::SERVICE_UNAVAILABLE => {
                    assert!(
                        answer
                            .to_string()
                            .contains("may or may not have been stored"),
                        "{answer}"
                    );
                    unknown += 1;
                }
                other => panic!("{other} {answer}"),
            }
        }
        assert_eq!(
            unknown > 0,
            proxy.answers_cut() > 0,
            "answered unknown iff cut"
        );
        let (status, again) = node.create(body).await;
        // Whatever the racing creates were told, the URL's link was committed: a twin.
        assert_eq!(status, StatusCode::OK, "{again}");
        codes.insert(again["code"].as_str().expect("a code").to_string());
        assert_eq!(codes.len(), 1, "one link for the URL: {codes:?}");
        assert_eq!(node.stored_links().await, rounds, "one link per URL");
    }
    assert_eq!(
        proxy.answers_cut(),
        1,
        "no batch read a twin in {rounds} rounds"
    );
}

/// The last flushes at stop are tried again while the database refuses them (a switchover
/// pauses writes for seconds): visits counted before a stop that meets a short outage are in
/// the totals and the rollups afterwards, once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_flushes_outlast_a_short_outage_at_stop() {
    let stack = Stack::new(Backend::Postgres).await;
    // Neither flush runs by itself: the last ones at stop write everything.
    let (node, proxy) = proxied(&stack, "last-flush", 50_000, 50_000).await;
    let code = node.create_url("https://example.com/last-flush").await;
    visit(&node, &code, 7).await;

    proxy.set_mode(testkit::proxy::Mode::Reset);
    node.begin_shutdown();
    // Both flushes failed once and are being tried again (the admin port serves to the end).
    let retried = testkit::wait_until(Duration::from_secs(10), || async {
        resent(&node, "shortener_clicks_chunks_resent_total").await >= 1.0
            && resent(&node, "shortener_analytics_batches_resent_total").await >= 1.0
    })
    .await;
    assert!(
        retried,
        "a last flush the database refused was not tried again"
    );
    proxy.set_mode(testkit::proxy::Mode::Open);
    node.stop().await;

    let after = stack.node("after").await;
    let (status, link) = after.get(&code).await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert_eq!(link["clicks"]["human"], 7, "{link}");
    let path = format!("/links/{code}/stats?granularity=hour");
    let (status, report) = stats(&after, &path).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["totals"]["human"], 7, "{report}");
    after.stop().await;
}
