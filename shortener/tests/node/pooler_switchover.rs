//! A planned Patroni switchover under create load, with two nodes behind a real PgBouncer in
//! transaction mode that reaches the leader through a router following Patroni's checks (as
//! HAProxy does), and their direct URL through the same router. Creates pause for the
//! switchover and go on: none fails once the new leader serves (no stale server connection is
//! handed out), every acknowledged create is on the new leader afterwards, and no code is
//! given twice.

use crate::helpers::{Node, Stack};
use pgtls::pooler::PoolMode;
use reqwest::StatusCode;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use testkit::patroni::router::{follow_leader, member};
use testkit::patroni::switchover::{Judging, Outcomes, record, switch_over_under_load};
use testkit::patroni::{Patroni, Replication};
use testkit::pgbouncer::{Mode, PgBouncer};
use testkit::proxy::Proxy;

/// How long creates run after the first one the new leader acknowledged.
const AFTER: Duration = Duration::from_secs(6);
/// How long past that first create a refused one is still the failover's.
const SETTLE: Duration = Duration::from_secs(1);

/// The created links' codes and URLs, or the refusals, by when they were answered.
type Created = Outcomes<(String, String)>;

/// Creates on `node` until `stop`, recording every outcome in `outcomes`.
fn create_until(
    node: Arc<Node>,
    client: usize,
    outcomes: Arc<Created>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            let url = format!("https://example.com/{client}/{i}");
            let answer =
                tokio::time::timeout(Duration::from_secs(3), node.create(json!({ "url": url })))
                    .await;
            let outcome = match answer {
                Ok((StatusCode::CREATED, body)) => {
                    Ok((body["code"].as_str().unwrap_or_default().to_string(), url))
                }
                Ok((status, body)) => Err(format!("{status}: {body}")),
                Err(_) => Err("no answer within 3 s".to_string()),
            };
            record(&outcomes, outcome).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_switchover_behind_pgbouncer_loses_no_create_and_leaves_no_stale_connection() {
    let cluster = Arc::new(Patroni::start(Replication::Sync).await);
    cluster.create_database("links").await;
    cluster
        .wait_replicas(cluster.len() - 1, Duration::from_secs(60))
        .await;
    let leader = cluster.wait_leader(Duration::from_secs(60)).await;
    let router = Arc::new(
        Proxy::start(member(&cluster, leader))
            .await
            .expect("start the router"),
    );
    let _follow = follow_leader(Arc::clone(&cluster), Arc::clone(&router), leader);
    let routed = format!("postgres://postgres@{}/links", router.addr());
    let bouncer = PgBouncer::start(router.addr().port(), Mode::Transaction, 4).await;
    let stack = Stack::on_database(&routed).await;
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let mut config = stack.config(name);
        config.store.database_url = Some(bouncer.database_url("links"));
        config.store.database_pool_mode = PoolMode::Transaction;
        config.store.database_direct_url = Some(routed.clone());
        nodes.push(Arc::new(Node::start(config).await));
    }

    let outcomes: Arc<Created> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let node = Arc::clone(&nodes[c % nodes.len()]);
            create_until(node, c, Arc::clone(&outcomes), Arc::clone(&stop))
        })
        .collect();

    let judging = Judging {
        after: AFTER,
        settle: SETTLE,
        what: "creates",
    };
    let created = switch_over_under_load(&cluster, (&outcomes, &stop, clients), judging, || {
        bouncer.log()
    })
    .await;
    let codes: HashSet<&str> = created.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(codes.len(), created.len(), "a code was given twice");
    assert_stored(&routed, &created).await;
}

/// Every acknowledged create is in the database at `url` with its URL.
async fn assert_stored(url: &str, created: &[(String, String)]) {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the new leader");
    tokio::spawn(connection);
    let codes: Vec<&str> = created.iter().map(|(c, _)| c.as_str()).collect();
    let rows = db
        .query(
            "SELECT code, long_url FROM links WHERE code = ANY($1)",
            &[&codes],
        )
        .await
        .expect("read the acknowledged links");
    let stored: HashSet<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let lost: Vec<&(String, String)> = created.iter().filter(|c| !stored.contains(*c)).collect();
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
}
