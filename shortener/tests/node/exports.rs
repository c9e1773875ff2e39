//! Exports to clients that read slowly or not at all: they hold no store connection and no
//! snapshot, the node's and the key's caps bound how many run (429 beyond), a client that takes
//! nothing for the send timeout is cut off, one that reads slowly but steadily gets every
//! link, and one slow enough to outlast the export's deadline is cut off there.

use crate::helpers::{Backend, Node, Stack, wait_for};
use crate::served::Served;
use proto::shortener::v1 as pb;
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::num::{NonZeroU64, NonZeroUsize};
use std::time::{Duration, Instant};

/// Target URLs this long make an export of a few thousand links many times larger than the
/// socket buffers between a node and a client that does not read.
const PADDING: usize = 1800;

/// Imports `n` links with long targets (tagged `big`), each target new.
async fn seed(node: &Node, n: usize) {
    static SEEDED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let round = SEEDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let padding = "p".repeat(PADDING);
    let rows: String = (0..n)
        .map(|i| {
            format!(
                "{}\n",
                json!({ "url": format!("https://example.com/big/{round}/{i}/{padding}"), "tags": ["big"] })
            )
        })
        .collect();
    // A chunk of 2000 generated rows can outrun the IDs a node holds on a loaded machine
    // (503 per row, by design); importing the same rows again creates only what is missing.
    for _ in 0..5 {
        let (status, answers) = node
            .import("application/x-ndjson", rows.clone(), "results=errors")
            .await;
        assert_eq!(status, StatusCode::OK);
        let summary = &answers.last().expect("a summary")["summary"];
        if summary["errors"] == 0 {
            return;
        }
        let first = answers.first();
        assert!(
            answers[..answers.len() - 1]
                .iter()
                .all(|a| a["error"] == "unavailable"),
            "{summary}: {first:?}"
        );
    }
    panic!("the seed import kept failing");
}

/// Opens an export and reads nothing of its body.
async fn open_export(node: &Node, query: &str) -> reqwest::Response {
    node.api(Method::GET, &format!("/links/export?{query}"))
        .send()
        .await
        .expect("export")
}

fn nonzero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("non-zero")
}

async fn unread_exports_leave_the_store_to_redirects_and_creates(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    // The test pool has 8 connections; one more export than it has would have taken them all.
    config.limits.export_max_concurrent = nonzero(7);
    config.limits.export_max_per_key = nonzero(32);
    config.limits.export_max_per_tenant = nonzero(32);
    let node = Node::start(config).await;
    seed(&node, 6000).await;

    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..32 {
        let response = open_export(&node, "").await;
        match response.status() {
            StatusCode::OK => held.push(response),
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(response.headers().contains_key("retry-after"));
                let body: serde_json::Value = response.json().await.expect("json error");
                assert_eq!(body["error"], "rate_limited");
                refused += 1;
            }
            other => panic!("an export answered {other}"),
        }
    }
    assert_eq!((held.len(), refused), (7, 25), "the node's export cap");
    // The held exports are far larger than the sockets hold: they stay open, unread, while
    // the node is asked for other work below (whether they have filled the sockets yet or not,
    // none may hold a store connection).

    // Cache misses (codes nobody holds) are store reads; creates are store writes. Each
    // answers at once, as if no export were open (the pool's wait alone is 3 s).
    for i in 0..20 {
        let code = format!("Zq{i:05}");
        let started = Instant::now();
        let (status, _) = node.location(&code).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "a miss while exports are held"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a miss waited on the pool"
        );
    }
    for i in 0..20 {
        let started = Instant::now();
        let (status, body) = node
            .create(json!({ "url": format!("https://example.com/during/{i}") }))
            .await;
        assert_eq!(
            status,
            StatusCode::CREATED,
            "a create while exports are held: {body}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a create waited on the pool"
        );
    }
    drop(held);
}
on_both_stores!(unread_exports_leave_the_store_to_redirects_and_creates);

async fn an_export_nobody_reads_is_cut_after_the_send_timeout_and_frees_its_place(
    backend: Backend,
) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    config.limits.export_max_per_key = nonzero(1);
    config.listeners.send_timeout = NonZeroU64::new(2).expect("non-zero");
    let node = Node::start(config).await;
    seed(&node, 6000).await;

    let stalled = open_export(&node, "").await;
    assert_eq!(stalled.status(), StatusCode::OK);
    // The key's one place is taken, on both transports.
    assert_eq!(
        open_export(&node, "").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let mut client = node.links_client().await;
    let refused = client
        .export_links(crate::helpers::authed(pb::ExportLinksRequest::default()))
        .await
        .expect_err("a second export of the key");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);

    // The reader takes nothing: the node closes the connection after the send timeout, and
    // the export's place is free again.
    wait_for(
        "the stalled export's place is given back",
        Duration::from_secs(30),
        async || {
            let small = open_export(&node, "tag=none").await;
            small.status() == StatusCode::OK && small.text().await.is_ok()
        },
    )
    .await;
    // What the stalled client finally reads ends in a broken transfer, never as if whole.
    let mut stalled = stalled;
    let mut lines = 0;
    let cut = loop {
        match stalled.chunk().await {
            Ok(Some(chunk)) => lines += chunk.iter().filter(|&&b| b == b'\n').count(),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(
        cut,
        "the stalled export ended as if complete after {lines} lines"
    );
    assert!(lines < 6000, "a cut export cannot hold every link");
}
on_both_stores!(an_export_nobody_reads_is_cut_after_the_send_timeout_and_frees_its_place);

async fn a_slow_but_steady_export_reader_gets_every_link(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    // A short header timeout: a connection streaming a body for several of them stays open.
    config.listeners.header_read_timeout = std::num::NonZero::new(1).expect("non-zero");
    let node = Node::start(config).await;
    seed(&node, 3000).await;

    let mut export = open_export(&node, "").await;
    assert_eq!(export.status(), StatusCode::OK);
    let mut body = Vec::new();
    let slow_until = Instant::now() + Duration::from_secs(4);
    while let Some(chunk) = export.chunk().await.expect("the export goes on") {
        body.extend_from_slice(&chunk);
        if Instant::now() < slow_until {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let text = String::from_utf8(body).expect("utf-8");
    let codes: std::collections::HashSet<String> = text
        .lines()
        .map(|line| {
            let link: serde_json::Value = serde_json::from_str(line).expect("a link per line");
            assert!(link.get("error").is_none(), "{line}");
            link["code"].as_str().expect("code").to_string()
        })
        .collect();
    assert_eq!(codes.len(), 3000, "every link once");
}
on_both_stores!(a_slow_but_steady_export_reader_gets_every_link);

/// A reader slow enough to keep an export past its deadline gets a broken transfer, never one
/// that looks whole, and the export's place is given back.
async fn an_export_past_its_deadline_ends_as_failed(backend: Backend) {
    let stack = Stack::new(backend).await;
    let mut config = stack.config("a");
    config.limits.export_max_per_key = nonzero(1);
    config.limits.export_max_seconds = NonZeroU64::new(1).expect("non-zero");
    config.listeners.send_timeout = NonZeroU64::new(30).expect("non-zero");
    let node = Node::start(config).await;
    seed(&node, 6000).await;

    let mut slow = open_export(&node, "").await;
    assert_eq!(slow.status(), StatusCode::OK);
    let mut body = slow
        .chunk()
        .await
        .expect("a first page")
        .expect("not the end")
        .to_vec();
    // A pause longer than the deadline; then the reader goes on as fast as it can.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cut = loop {
        match slow.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    let text = String::from_utf8_lossy(&body);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        cut,
        "an export past its deadline ended as if whole ({} lines)",
        lines.len()
    );
    assert!(lines.len() < 6000, "{}", lines.len());
    let last: serde_json::Value =
        serde_json::from_str(lines.last().expect("a line")).expect("json");
    assert_eq!(last["error"], "export_ended", "{last}");
    let again = open_export(&node, "tag=none").await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the key's one place is free"
    );
}
on_both_stores!(an_export_past_its_deadline_ends_as_failed);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_exports_do_not_stop_sqlite_checkpoints() {
    let stack = Stack::new(Backend::Sqlite).await;
    let mut config = stack.config("a");
    config.limits.export_max_per_key = nonzero(4);
    config.limits.export_max_per_tenant = nonzero(4);
    let data_dir = config.store.data_dir.clone();
    let node = Node::start(config).await;
    seed(&node, 3000).await;
    let held: Vec<reqwest::Response> =
        futures::future::join_all((0..4).map(|_| open_export(&node, ""))).await;
    assert!(held.iter().all(|r| r.status() == StatusCode::OK));

    // About 12 MB of creates while the exports are held. Checkpoints recycle the log from its
    // start, so it keeps the size it had; a reader pinning a snapshot would make it grow by
    // all of it.
    let wal = || {
        std::fs::metadata(data_dir.join("shortener.db-wal"))
            .expect("the write-ahead log")
            .len()
    };
    let before = wal();
    let mut client = node.links_client().await;
    let padding = "c".repeat(PADDING);
    for batch in 0..12 {
        let items = (0..500)
            .map(|i| pb::CreateLinkRequest {
                url: format!("https://example.com/created/{batch}/{i}/{padding}"),
                ..Default::default()
            })
            .collect();
        let answer = client
            .batch_create_links(crate::helpers::authed(pb::BatchCreateLinksRequest {
                items,
            }))
            .await
            .expect("batch create")
            .into_inner();
        assert!(
            answer
                .results
                .iter()
                .all(|r| matches!(r.outcome, Some(pb::batch_create_result::Outcome::Link(_))))
        );
    }
    let grown = wal().saturating_sub(before);
    assert!(
        grown < 6 * 1024 * 1024,
        "the write-ahead log grew by {grown} bytes (from {before}) while exports were held"
    );
    drop(held);
}

/// The `shortener` process's open file descriptors.
fn open_files(served: &Served) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", served.pid()))
        .expect("read /proc fd")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_unread_exports_leave_an_embedded_nodes_memory_and_files_flat() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The key may hold all 200: only the node's own cap (4 by default) stands in the way.
    let served = Served::start(
        &dir.path().join("data"),
        &[
            ("SHORTENER_API_KEYS", crate::helpers::API_KEY.into()),
            ("SHORTENER_EXPORT_MAX_PER_KEY", "200".into()),
            ("SHORTENER_EXPORT_MAX_PER_TENANT", "200".into()),
        ],
        None,
    )
    .await;
    let client = Served::client();
    let padding = "p".repeat(PADDING);
    let rows: String = (0..3000)
        .map(|i| {
            format!(
                "{}\n",
                json!({ "url": format!("https://example.com/big/{i}/{padding}") })
            )
        })
        .collect();
    let imported = client
        .post(format!(
            "http://{}/api/v1/links/import?results=errors",
            served.http
        ))
        .bearer_auth(crate::helpers::API_KEY)
        .header("content-type", "application/x-ndjson")
        .body(rows)
        .send()
        .await
        .expect("import");
    assert_eq!(imported.status(), StatusCode::OK);
    let answers = imported.text().await.expect("import answers");
    assert!(answers.contains("\"errors\":0"), "{answers:.300}");

    let (memory_before, files_before) = (served.peak_rss_kib(), open_files(&served));
    // Each export is over 5 MB; none is read. Before the caps and the keyset walk, each held a
    // snapshot, a connection and its buffers: 200 of them took the node past a gigabyte.
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        let response = client
            .get(format!("http://{}/api/v1/links/export", served.http))
            .bearer_auth(crate::helpers::API_KEY)
            .send()
            .await
            .expect("export");
        match response.status() {
            StatusCode::OK => held.push(response),
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("an export answered {other}"),
        }
    }
    assert_eq!((held.len(), refused), (4, 196), "the node's export cap");
    // Let the held ones fill their sockets and stall: until the node's peak memory holds still
    // for three readings in a row (at most ten seconds).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (mut peak, mut still) = (served.peak_rss_kib(), 0);
    while still < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = served.peak_rss_kib();
        still = if now == peak { still + 1 } else { 0 };
        peak = now;
    }
    let grown_mib = served.peak_rss_kib().saturating_sub(memory_before) / 1024;
    let more_files = open_files(&served).saturating_sub(files_before);
    // The four exports the cap lets through are served at once, each with its page of rows and
    // its write buffers: 48 to 72 MiB for the four, measured on a two-core machine. The bound
    // is what they may take; uncapped, the same run grows past a gigabyte.
    assert!(
        grown_mib < 128,
        "the node's peak memory grew by {grown_mib} MiB"
    );
    assert!(
        more_files < 40,
        "the node holds {more_files} more open files"
    );
    // A redirect still answers from the store meanwhile.
    let code = served
        .create(&client, "https://example.com/meanwhile")
        .await;
    let answer = client
        .get(format!("http://{}/{code}", served.http))
        .send()
        .await
        .expect("redirect");
    assert!(answer.status().is_redirection());
    drop(held);
}
