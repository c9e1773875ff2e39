//! Codes that cannot exist are refused without a lookup (docs/design.md, I9): a generated code
//! that decodes above every ID a stored code decodes to answers 404 without the store, on
//! SQLite from the mark the one writer keeps, on PostgreSQL after a coalesced, rate-bounded
//! read of `max(slot)` that started after the request. So is a code of generated shape that
//! decodes to no ID while no imported legacy code is such a code. Links another node has just
//! made, and imported legacy codes of generated shape, are never refused.

use crate::helpers::{Backend, Node, Stack};
use reqwest::StatusCode;
use serde_json::json;
use shortener::store::{LinkStore, Mark, SlotBound, undecodable};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Refusals counted so far.
fn refused(node: &Node) -> u64 {
    node.app
        .resolver
        .counters()
        .refused_impossible
        .load(Ordering::Relaxed)
}

/// Store lookups counted so far.
fn misses(node: &Node) -> u64 {
    node.app
        .resolver
        .counters()
        .cache_misses
        .load(Ordering::Relaxed)
}

/// The ID `code` decodes to.
fn id_of(node: &Node, code: &str) -> i64 {
    node.app.space.decode(code).expect("a generated code") as i64
}

/// `count` random base62 codes of `length` characters that `keep` keeps.
fn random_codes(length: usize, count: usize, keep: impl Fn(&str) -> bool) -> Vec<String> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut codes = Vec::new();
    while codes.len() < count {
        let code: String = (0..length)
            .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
            .collect();
        if keep(&code) {
            codes.push(code);
        }
    }
    codes
}

/// `count` random seven-character base62 codes that decode more than a million above `mark`.
fn codes_above(node: &Node, mark: i64, count: usize) -> Vec<String> {
    random_codes(7, count, |code| id_of(node, code) > mark + 1_000_000)
}

/// The configuration of a node whose 404 budget never runs out in these tests.
fn unlimited(stack: &Stack, name: &str) -> shortener::config::Config {
    let mut config = stack.config(name);
    config.limits.not_found_rate = 1_000_000;
    config.limits.not_found_burst = 1_000_000;
    config
}

/// A node whose 404 budget never runs out in these tests.
async fn node(stack: &Stack, name: &str) -> Node {
    Node::start(unlimited(stack, name)).await
}

/// Every code in `codes` answers `want`, asked 50 at a time.
async fn all_answer(node: &Node, codes: &[String], want: StatusCode) {
    for chunk in codes.chunks(50) {
        let answers = futures::future::join_all(chunk.iter().map(|c| node.visit(c))).await;
        for (code, answer) in chunk.iter().zip(answers) {
            assert_eq!(answer.status(), want, "/{code}");
        }
    }
}

async fn unknown_codes_above_the_mark_are_refused_without_a_lookup(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = node(&stack, "edge").await;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(
            node.create_url_owned(format!("https://example.com/{i}"))
                .await,
        );
    }
    let mark = made.iter().map(|c| id_of(&node, c)).max().expect("links");
    let scan = codes_above(&node, mark, 300);
    let (lookups, reads, began) = (
        misses(&node),
        node.app.resolver.high_water_reads(),
        Instant::now(),
    );
    all_answer(&node, &scan, StatusCode::NOT_FOUND).await;
    let (elapsed, reads) = (
        began.elapsed(),
        node.app.resolver.high_water_reads() - reads,
    );
    assert_eq!(
        misses(&node),
        lookups,
        "a code above the mark was looked up"
    );
    assert_eq!(refused(&node), 300);
    match backend {
        Backend::Sqlite => assert_eq!(reads, 0, "the embedded mark is never read"),
        // At most 50 a second (the default), plus the one under way when the scan began.
        Backend::Postgres => assert!(
            reads as f64 <= 2.0 + elapsed.as_secs_f64() * 50.0,
            "{reads} reads of the mark in {elapsed:?}"
        ),
    }
    let refusals = node.metrics().await;
    assert!(
        refusals.contains("shortener_redirects_refused_impossible_total 300"),
        "{refusals}"
    );
    // A link made after the scan is above the mark the scan saw, and is served at once; the
    // links made before still are, from the store.
    let new = node.create_url("https://example.com/after").await;
    assert!(id_of(&node, &new) > mark);
    for code in made.iter().chain([&new]) {
        let (status, _) = node.location(code).await;
        assert_eq!(status, StatusCode::FOUND, "/{code}");
    }
    assert_eq!(refused(&node), 300, "a stored code was refused");
}
on_both_stores!(unknown_codes_above_the_mark_are_refused_without_a_lookup);

async fn imported_legacy_codes_above_the_mark_still_redirect(backend: Backend) {
    let stack = Stack::new(backend).await;
    let config = unlimited(&stack, "importer");
    let node = Node::start(config.clone()).await;
    node.create_url("https://example.com/made").await;
    // Legacy codes of generated shape whose IDs no lease will reach for a long time: seven
    // characters near the top of the space, and eight (an ID past 62^7).
    let space = Arc::clone(&node.app.space);
    let top = 62u64.pow(7);
    let legacy = [
        (space.encode(top - 12_345), "https://example.com/legacy-7"),
        (space.encode(top + 6_789), "https://example.com/legacy-8"),
    ];
    let rows: String = legacy
        .iter()
        .map(|(code, url)| format!("{}\n", json!({ "url": url, "code": code })))
        .collect();
    let (status, lines) = node.import("application/x-ndjson", rows, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.last().expect("summary")["summary"]["created"], 2);
    let check = async |node: &Node| {
        for (code, url) in &legacy {
            assert_eq!(
                node.location(code).await,
                (StatusCode::FOUND, Some(url.to_string())),
                "/{code}"
            );
        }
        // A code between the two legacy ones has no row: it is looked up (it is below the
        // mark the eight-character one raised), and a code above both is refused unread.
        let (lookups, refusals) = (misses(node), refused(node));
        let between = space.encode(top - 1);
        assert_eq!(node.visit(&between).await.status(), StatusCode::NOT_FOUND);
        assert_eq!(misses(node), lookups + 1, "{between} was not looked up");
        let above = space.encode(top + 1_000_000);
        assert_eq!(node.visit(&above).await.status(), StatusCode::NOT_FOUND);
        assert_eq!(refused(node), refusals + 1, "{above} was looked up");
    };
    check(&node).await;
    match backend {
        // The mark the next start reads covers them too.
        Backend::Sqlite => {
            node.stop().await;
            let node = Node::start(config).await;
            check(&node).await;
        }
        // So does the mark another node reads.
        Backend::Postgres => {
            let other = stack.node("other").await;
            check(&other).await;
        }
    }
}
on_both_stores!(imported_legacy_codes_above_the_mark_still_redirect);

/// Node B has read the mark; node A (leasing after B, so above it) makes links, and B serves
/// each one at once: it reads the mark again before refusing a code above what it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_made_on_another_node_above_the_mark_redirects_at_once() {
    let stack = Stack::new(Backend::Postgres).await;
    let b = node(&stack, "node-b").await;
    let a = node(&stack, "node-a").await;
    let own = b.create_url("https://example.com/b").await;
    // B refuses a code above the mark, reading it once.
    let probe = codes_above(&b, id_of(&b, &own), 1);
    all_answer(&b, &probe, StatusCode::NOT_FOUND).await;
    assert_eq!(refused(&b), 1);
    for i in 0..20 {
        let url = format!("https://example.com/a/{i}");
        let code = a.create_url(&url).await;
        let SlotBound::Stale(Mark { slot: mark, .. }) = b.app.store.slot_bound() else {
            panic!("a PostgreSQL node in the slot layout has a mark to read again");
        };
        assert!(
            id_of(&a, &code) > mark,
            "A's link {code} is not above B's mark {mark}"
        );
        let (lookups, reads) = (misses(&b), b.app.resolver.high_water_reads());
        assert_eq!(b.location(&code).await, (StatusCode::FOUND, Some(url)));
        assert!(
            b.app.resolver.high_water_reads() > reads,
            "no read of the mark"
        );
        assert_eq!(misses(&b), lookups + 1, "the link was read from the store");
    }
    assert_eq!(refused(&b), 1, "a link of node A was refused");
}

/// A mark read on a connection that turns out read-only (a primary demoted under a full pool,
/// whose rows may be behind the new primary's) refuses nothing: the code is looked up, and the
/// pool's connections are marked for eviction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_read_from_a_read_only_server_refuses_nothing() {
    let cluster = testkit::cluster::Cluster::start(&[]).await;
    cluster.create_database("links").await;
    let stack = Stack::on_database(&cluster.database_url("links")).await;
    let mut config = unlimited(&stack, "edge");
    config.ids.min_block = 1000;
    let node = Node::start(config).await;
    let own = node.create_url("https://example.com/made").await;
    let mark = id_of(&node, &own);
    all_answer(&node, &codes_above(&node, mark, 1), StatusCode::NOT_FOUND).await;
    assert_eq!(refused(&node), 1, "a primary's mark refuses");
    cluster.set_read_only(true).await;
    let lookups = misses(&node);
    all_answer(&node, &codes_above(&node, mark, 1), StatusCode::NOT_FOUND).await;
    assert_eq!(
        refused(&node),
        1,
        "a read-only server's mark refused a code"
    );
    assert_eq!(misses(&node), lookups + 1, "the code was looked up");
}

/// `count` random eleven-character base62 codes that decode to no ID.
fn undecodable_codes(node: &Node, count: usize) -> Vec<String> {
    random_codes(11, count, |code| undecodable(&node.app.space, code))
}

/// Codes of generated shape that decode to no ID (most random eleven-character ones) are
/// refused without a lookup while no legacy code is one; once an import brings such a code,
/// that code redirects at once, on this node and (PostgreSQL) another, or after a restart
/// (SQLite), and codes of that kind are looked up from then on.
async fn codes_that_decode_to_no_id_are_refused_until_a_legacy_one_is_imported(backend: Backend) {
    let stack = Stack::new(backend).await;
    let config = unlimited(&stack, "undecodable");
    let node = Node::start(config.clone()).await;
    node.create_url("https://example.com/made").await;
    // Another PostgreSQL node reads the mark before the import: what it knows goes stale.
    let other = match backend {
        Backend::Postgres => Some(stack.node("other").await),
        Backend::Sqlite => None,
    };
    let scan = undecodable_codes(&node, 100);
    let (lookups, refusals) = (misses(&node), refused(&node));
    all_answer(&node, &scan, StatusCode::NOT_FOUND).await;
    assert_eq!(misses(&node), lookups, "an undecodable code was looked up");
    assert_eq!(refused(&node), refusals + 100);
    if let Some(other) = &other {
        all_answer(other, &scan[..10], StatusCode::NOT_FOUND).await;
        assert_eq!(refused(other), 10, "the other node refuses them too");
    }

    let legacy = undecodable_codes(&node, 1).remove(0);
    let url = "https://example.com/legacy-11";
    let rows = format!("{}\n", json!({ "url": url, "code": legacy }));
    let (status, lines) = node.import("application/x-ndjson", rows, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.last().expect("summary")["summary"]["created"], 1);
    let check = async |node: &Node| {
        assert_eq!(
            node.location(&legacy).await,
            (StatusCode::FOUND, Some(url.to_string())),
            "/{legacy}"
        );
        // Another code of that kind is looked up now.
        let (lookups, refusals) = (misses(node), refused(node));
        let unknown = undecodable_codes(node, 1).remove(0);
        assert_eq!(node.visit(&unknown).await.status(), StatusCode::NOT_FOUND);
        assert_eq!(misses(node), lookups + 1, "{unknown} was not looked up");
        assert_eq!(refused(node), refusals, "{unknown} was refused unread");
    };
    check(&node).await;
    match (backend, other) {
        (Backend::Postgres, Some(other)) => check(&other).await,
        _ => {
            node.stop().await;
            let node = Node::start(config).await;
            check(&node).await;
        }
    }
}
on_both_stores!(codes_that_decode_to_no_id_are_refused_until_a_legacy_one_is_imported);
