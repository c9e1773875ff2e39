//! Reads from a real streaming replica (`pg_basebackup` of a cluster the test makes, replaying
//! with `recovery_min_apply_delay`, so it lags on purpose): what it has not replayed is read
//! from the primary, a node reads its own writes, a change reported by another node is never
//! served stale, a replica that goes down sends reads to the primary, and a read URL that is not
//! a replica of the database is refused at start-up.

use crate::helpers::{Node, Stack, metric, wait_for};
use reqwest::StatusCode;
use serde_json::json;
use shortener::Config;
use std::time::{Duration, Instant};
use testkit::cluster::Cluster;

/// How far behind the replica replays. Every "at once" check below finishes well within it.
const DELAY: Duration = Duration::from_secs(3);

fn with_replica(stack: &Stack, name: &str, read_url: &str) -> Config {
    let mut config = stack.config(name);
    config.store.database_read_url = Some(read_url.to_string());
    config
}

/// A primary with a database `links`, its replica replaying [`DELAY`] behind, a stack on the
/// primary's database, and the replica's URL of it (the clusters run while they are held).
async fn lagging() -> (Cluster, Cluster, Stack, String) {
    let primary = Cluster::start(&[]).await;
    let url = primary.create_database("links").await;
    let delay = format!("recovery_min_apply_delay = '{}s'", DELAY.as_secs());
    let standby = primary.start_standby(&[&delay]).await;
    let read_url = standby.database_url("links");
    let stack = Stack::on_database(&url).await;
    (primary, standby, stack, read_url)
}

async fn value(node: &Node, name: &str) -> f64 {
    metric(&node.metrics().await, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lagging_replica_serves_reads_without_ever_misleading() {
    let (primary, standby, stack, read_url) = lagging().await;
    let url = primary.database_url("links");
    // Node a holds blocks large enough for the bulk import below in one go.
    let mut config = with_replica(&stack, "a", &read_url);
    config.ids.min_block = 8000;
    let a = Node::start(config).await;
    let b = Node::start(with_replica(&stack, "b", &read_url)).await;
    // Until the replica has replayed what the nodes wrote at start (migrations, their change
    // feeds' first connection), they read from the primary; then lists go to the replica.
    for node in [&a, &b] {
        wait_for("a list answered by the replica", DELAY * 4, async || {
            let before = value(node, "shortener_replica_reads_total").await;
            assert_eq!(node.list("limit=1").await.0, StatusCode::OK);
            value(node, "shortener_replica_reads_total").await > before
        })
        .await;
        assert_eq!(value(node, "shortener_replica_available").await, 1.0);
        let pool = "shortener_db_connections{pool=\"replica\",state=\"max\"}";
        assert!(
            value(node, pool).await >= 1.0,
            "the replica's pool is reported"
        );
    }

    // A fresh link, unknown to the lagging replica: node b (which never cached it) finds it on
    // the primary instead of answering 404.
    let started = Instant::now();
    let code = a.create_url("https://example.com/fresh").await;
    let unknown_before = value(&b, "shortener_replica_fallbacks_total{reason=\"unknown\"}").await;
    assert_eq!(
        b.location(&code).await,
        (StatusCode::FOUND, Some("https://example.com/fresh".into()))
    );
    let (status, link) = b.get(&code).await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert!(
        value(&b, "shortener_replica_fallbacks_total{reason=\"unknown\"}").await > unknown_before,
        "b should have asked the replica first"
    );

    // Node a reads its own writes: the list has the new link, an edit shows at once.
    let (status, page) = a.list("limit=10").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page["links"]
            .as_array()
            .expect("links")
            .iter()
            .any(|l| l["code"] == code.as_str()),
        "the writer's list misses its own link: {page}"
    );
    assert!(
        started.elapsed() < DELAY,
        "the checks above must finish before the replica replays them ({:?})",
        started.elapsed()
    );

    // Once the replica has replayed the link, b reads it there.
    wait_for(
        "b's get is answered by the replica",
        DELAY * 4,
        async || {
            let before = value(&b, "shortener_replica_reads_total").await;
            assert_eq!(b.get(&code).await.0, StatusCode::OK);
            value(&b, "shortener_replica_reads_total").await > before
        },
    )
    .await;
    assert_eq!(
        b.location(&code).await.1.as_deref(),
        Some("https://example.com/fresh")
    );

    // An edit on a: a reads its own write at once, from its cache and its store alike.
    let edited = Instant::now();
    let (status, _) = a
        .patch(&code, json!({ "url": "https://example.com/edited" }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(a.get(&code).await.1["url"], "https://example.com/edited");
    assert_eq!(
        a.location(&code).await.1.as_deref(),
        Some("https://example.com/edited")
    );
    // Node b learns of the edit from the change feed and refills its cache from a store that
    // has it: the new target, long before the replica replays the edit.
    wait_for("b redirects to the edited target", DELAY / 2, async || {
        b.location(&code).await.1.as_deref() == Some("https://example.com/edited")
    })
    .await;
    assert_eq!(b.get(&code).await.1["url"], "https://example.com/edited");
    assert!(
        edited.elapsed() < DELAY,
        "the checks above must finish before the replica replays the edit ({:?})",
        edited.elapsed()
    );
    assert!(value(&b, "shortener_replica_fallbacks_total{reason=\"fresh\"}").await >= 1.0);

    // Once the replica has replayed the edit, reads go to it again, and never read stale.
    let reads_before = value(&b, "shortener_replica_reads_total").await;
    wait_for(
        "b's reads are answered by the replica",
        DELAY * 4,
        async || {
            let (status, link) = b.get(&code).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(link["url"], "https://example.com/edited", "a stale read");
            value(&b, "shortener_replica_reads_total").await > reads_before
        },
    )
    .await;
    let (status, page) = b.list("limit=10").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["links"][0]["url"], "https://example.com/edited");
    // Exports are read from the replica too.
    let reads_before = value(&b, "shortener_replica_reads_total").await;
    let (status, export) = b.export("").await;
    assert_eq!(status, StatusCode::OK, "{export}");
    assert!(
        export.contains("https://example.com/edited"),
        "the export misses the edit: {export}"
    );
    assert!(value(&b, "shortener_replica_reads_total").await > reads_before);

    // An export in progress on the replica when it goes down goes on from the primary, after
    // the last link it had sent: every link once, no error. Long URLs make the export far
    // larger than the socket buffers, so the replica's stream is cut in the middle.
    const BIG: usize = 6000;
    let padding = "p".repeat(1800);
    let rows: String = (0..BIG)
        .map(|i| {
            format!(
                "{}\n",
                json!({ "url": format!("https://example.com/big/{i}/{padding}") })
            )
        })
        .collect();
    let (status, answers) = a.import("application/x-ndjson", rows, "").await;
    assert_eq!(status, StatusCode::OK);
    let summary = &answers.last().expect("a summary")["summary"];
    assert_eq!(summary["created"], BIG, "{summary}");
    let total: i64 = tokio_postgres_count(&url).await;
    wait_for("the replica has the import", DELAY * 10, async || {
        tokio_postgres_count(&read_url).await == total
    })
    .await;
    // The export reads a page at a time: the page after the stop finds the replica failing
    // (error) or already seen down by its poll (down). Either is a fallback mid-stream.
    let fallbacks = async |node: &Node| {
        value(node, "shortener_replica_fallbacks_total{reason=\"error\"}").await
            + value(node, "shortener_replica_fallbacks_total{reason=\"down\"}").await
    };
    let fallbacks_before = fallbacks(&b).await;
    let mut export = b
        .api(reqwest::Method::GET, "/links/export?")
        .send()
        .await
        .expect("export");
    assert_eq!(export.status(), StatusCode::OK);
    let mut body = Vec::new();
    while body.len() < 64 * 1024 {
        let chunk = export
            .chunk()
            .await
            .expect("read")
            .expect("more of the export");
        body.extend_from_slice(&chunk);
    }
    standby.stop().await;
    while let Some(chunk) = export.chunk().await.expect("the rest of the export") {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).expect("utf-8");
    let codes: Vec<String> = text
        .lines()
        .map(|line| {
            let link: serde_json::Value = serde_json::from_str(line).expect("a link per line");
            link["code"].as_str().expect("code").to_string()
        })
        .collect();
    let unique: std::collections::HashSet<&String> = codes.iter().collect();
    assert_eq!(unique.len(), codes.len(), "a link was exported twice");
    assert_eq!(codes.len() as i64, total, "links missing from the export");
    assert!(
        fallbacks(&b).await > fallbacks_before,
        "the export never fell back: the replica's stream was not cut"
    );

    // The replica is down: reads go to the primary, no client sees an error, the node stays
    // ready.
    let other = a.create_url("https://example.com/while-down").await;
    // An export that finds the replica gone is answered whole from the primary.
    let (status, export) = b.export("").await;
    assert_eq!(status, StatusCode::OK, "{export}");
    for wanted in [code.as_str(), other.as_str()] {
        assert!(
            export.lines().any(|l| l.contains(wanted)),
            "the export misses {wanted}: {export}"
        );
    }
    assert!(!export.contains("\"error\""), "{export}");
    for node in [&a, &b] {
        assert_eq!(node.get(&code).await.0, StatusCode::OK);
        assert_eq!(
            node.location(&other).await,
            (
                StatusCode::FOUND,
                Some("https://example.com/while-down".into())
            )
        );
        let (status, _) = node.list("limit=5").await;
        assert_eq!(status, StatusCode::OK);
        wait_for(
            "the replica is seen down",
            Duration::from_secs(10),
            async || value(node, "shortener_replica_available").await == 0.0,
        )
        .await;
        assert_eq!(node.get(&code).await.0, StatusCode::OK);
        assert!(value(node, "shortener_replica_fallbacks_total{reason=\"down\"}").await >= 1.0);
        let ready = node
            .client
            .get(format!("{}/readyz", node.admin))
            .send()
            .await
            .expect("readyz");
        assert_eq!(ready.status(), StatusCode::OK);
    }

    // It comes back and is read again.
    standby.restart().await;
    wait_for("the replica is back", Duration::from_secs(20), async || {
        value(&b, "shortener_replica_available").await == 1.0
    })
    .await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_url_that_is_not_a_replica_of_the_database_is_refused_at_start() {
    let primary = Cluster::start(&[]).await;
    let url = primary.create_database("links").await;
    primary.create_database("elsewhere").await;
    let standby = primary.start_standby(&[]).await;
    let stack = Stack::on_database(&url).await;

    for (read_url, expected) in [
        (url.clone(), "not in recovery"),
        (
            standby.database_url("elsewhere"),
            "names database \"elsewhere\"",
        ),
    ] {
        let error = match shortener::App::build(with_replica(&stack, "refused", &read_url)).await {
            Ok(_) => panic!("a node started with SHORTENER_DATABASE_READ_URL={read_url}"),
            Err(error) => format!("{error:#}"),
        };
        assert!(
            error.contains("SHORTENER_DATABASE_READ_URL") && error.contains(expected),
            "{read_url}: {error}"
        );
    }

    // The real replica of the database is accepted; one that does not answer is not an error
    // (reads go to the primary until it does).
    let node = Node::start(with_replica(
        &stack,
        "accepted",
        &standby.database_url("links"),
    ))
    .await;
    node.stop().await;
    standby.stop().await;
    let node = Node::start(with_replica(
        &stack,
        "replica-down",
        &standby.database_url("links"),
    ))
    .await;
    let code = node.create_url("https://example.com/no-replica").await;
    assert_eq!(node.get(&code).await.0, StatusCode::OK);
    assert_eq!(
        metric(&node.metrics().await, "shortener_replica_available"),
        0.0
    );
    node.stop().await;
}

/// The links in the database at `url`.
async fn tokio_postgres_count(url: &str) -> i64 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .query_one("SELECT count(*) FROM links", &[])
        .await
        .expect("count")
        .get(0)
}

/// A standby promoted under a node's read pool (a failover elsewhere, a mistake) stops following
/// the primary: its rows may change on their own from then on. The node notices within a poll
/// and reads from the primary only, so a link changed on the promoted server alone is never
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_promoted_under_the_read_pool_is_no_longer_read() {
    let primary = Cluster::start(&[]).await;
    let url = primary.create_database("links").await;
    let standby = primary.start_standby(&[]).await;
    let read_url = standby.database_url("links");
    let stack = Stack::on_database(&url).await;
    let node = Node::start(with_replica(&stack, "promoted", &read_url)).await;
    wait_for("a list answered by the replica", DELAY * 4, async || {
        let before = value(&node, "shortener_replica_reads_total").await;
        assert_eq!(node.list("limit=1").await.0, StatusCode::OK);
        value(&node, "shortener_replica_reads_total").await > before
    })
    .await;
    // Created, replayed by the standby, and never read through the node (so never cached).
    let code = node.create_url("https://example.com/primary").await;
    let (replica, connection) = tokio_postgres::connect(&read_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the standby");
    tokio::spawn(connection);
    wait_for("the standby to replay the link", DELAY * 4, async || {
        replica
            .query_opt("SELECT 1 FROM links WHERE code = $1", &[&code])
            .await
            .expect("read the standby")
            .is_some()
    })
    .await;

    standby.promote().await;
    wait_for(
        "the node to stop reading the promoted server",
        DELAY * 4,
        async || value(&node, "shortener_replica_available").await == 0.0,
    )
    .await;
    // The promoted server goes its own way: the link's target changes there and only there.
    let changed = replica
        .execute(
            "UPDATE links SET long_url = 'https://example.com/split-brain' WHERE code = $1",
            &[&code],
        )
        .await
        .expect("write to the promoted server");
    assert_eq!(changed, 1);

    let refused = "shortener_replica_fallbacks_total{reason=\"refused\"}";
    let refused_before = value(&node, refused).await;
    assert_eq!(
        node.location(&code).await,
        (
            StatusCode::FOUND,
            Some("https://example.com/primary".into())
        )
    );
    let (status, link) = node.get(&code).await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert_eq!(link["url"], "https://example.com/primary", "{link}");
    let (status, page) = node.list("limit=10").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.to_string().contains("https://example.com/primary")
            && !page.to_string().contains("split-brain"),
        "{page}"
    );
    assert!(
        value(&node, refused).await > refused_before,
        "the reads should have been counted as refused by the replica"
    );
    // Writes and reads of new links go on against the primary.
    let fresh = node.create_url("https://example.com/after").await;
    assert_eq!(
        node.location(&fresh).await,
        (StatusCode::FOUND, Some("https://example.com/after".into()))
    );
    node.stop().await;
}

/// A visit limit counts from the primary: a node that reads a limited link just after another
/// node flushed visits of it finds them there, though the lagging replica has not replayed the
/// flush, so the two serve no more visits than the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_visit_limit_counts_from_the_primary() {
    use shortener::store::LinkStore;
    let (_primary, _standby, stack, read_url) = lagging().await;
    let a = Node::start(with_replica(&stack, "a", &read_url)).await;
    let b = Node::start(with_replica(&stack, "b", &read_url)).await;
    let (status, made) = a
        .create_with(
            json!({ "url": "https://example.com/limited", "max_visits": 10 }),
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["code"].as_str().expect("code").to_string();
    // B reads the link from the replica once it has replayed it (without caching it: the API
    // read is not the redirect cache).
    wait_for("b reads the link from the replica", DELAY * 4, async || {
        let before = value(&b, "shortener_replica_reads_total").await;
        assert_eq!(b.get(&code).await.0, StatusCode::OK);
        value(&b, "shortener_replica_reads_total").await > before
    })
    .await;
    let visit = async |node: &Node| {
        node.client
            .get(format!("{}/{code}", node.base))
            .header("user-agent", crate::helpers::BROWSER)
            .send()
            .await
            .expect("visit")
            .status()
    };
    for _ in 0..6 {
        assert_eq!(visit(&a).await, StatusCode::FOUND);
    }
    // A's six reach the primary with its next flush (every 200 ms here); the replica replays
    // them seconds later.
    let flushed = Instant::now();
    wait_for("a's visits are flushed", DELAY / 2, async || {
        a.app.store.stored_visits(&code).await.expect("read") == 6
    })
    .await;
    let mut served = 0;
    for _ in 0..10 {
        if visit(&b).await == StatusCode::FOUND {
            served += 1;
        }
    }
    assert!(
        flushed.elapsed() < DELAY,
        "b's visits must be made before the replica replays the flush ({:?})",
        flushed.elapsed()
    );
    assert_eq!(
        served,
        4,
        "the limit of 10 let {} visits through",
        6 + served
    );
}
