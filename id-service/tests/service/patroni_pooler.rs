//! A planned Patroni switchover under load, with the id-service behind a real PgBouncer in
//! transaction mode that reaches the leader through a router following Patroni's `GET /primary`
//! check and cutting the sessions of a member that stops being the leader (HAProxy's
//! `on-marked-down shutdown-sessions`; docs/operations.md, "PgBouncer and HAProxy"). Grants
//! pause for the switchover and go on: none fails once the new leader serves (no stale server
//! connection is handed out), every lease acknowledged is in the ledger afterwards, and no two
//! overlap.

use crate::helpers::{Server, assert_ledger_covers, assert_ranges_disjoint, lease};
use id_service::Config;
use pgtls::pooler::PoolMode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::patroni::router::{follow_leader, member};
use testkit::patroni::{Patroni, Replication};
use testkit::pgbouncer::{Mode, PgBouncer};
use testkit::proxy::Proxy;

/// How long grants run after the new leader's first grant.
const AFTER: Duration = Duration::from_secs(8);
/// How long past the first grant after the switchover a refused one is still the failover's.
const SETTLE: Duration = Duration::from_secs(1);

/// One grant's outcome: when it was answered, and the range or the refusal.
type Outcome = (Instant, Result<(u64, u64), String>);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_switchover_behind_pgbouncer_loses_no_grant_and_leaves_no_stale_connection() {
    let cluster = Arc::new(Patroni::start(Replication::Sync).await);
    let direct = cluster.create_database("ids").await;
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
    let bouncer = PgBouncer::start(router.addr().port(), Mode::Transaction, 4).await;
    let mut config = Config::for_tests(&bouncer.database_url("ids"));
    config.database_pool_mode = PoolMode::Transaction;
    config.database_direct_url = Some(direct.clone());
    let server = Server::start(config).await;

    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..4 {
        let mut client = server.client().await;
        let (outcomes, stop) = (Arc::clone(&outcomes), Arc::clone(&stop));
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let answer = tokio::time::timeout(
                    Duration::from_secs(3),
                    lease(&mut client, "links", 100, &format!("client-{c}")),
                )
                .await;
                let outcome = match answer {
                    Ok(Ok(l)) => Ok((l.start, l.end)),
                    Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
                    Err(_) => Err("no answer within 3 s".to_string()),
                };
                let failed = outcome.is_err();
                outcomes
                    .lock()
                    .expect("outcomes")
                    .push((Instant::now(), outcome));
                if failed {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }

    tokio::time::sleep(Duration::from_secs(3)).await;
    let switched = Instant::now();
    cluster
        .switchover(None)
        .await
        .expect("Patroni switches over");
    // Patroni answers once the new leader runs: the first grant after that ends the pause.
    let done = Instant::now();
    let resumed = loop {
        let first = outcomes
            .lock()
            .expect("outcomes")
            .iter()
            .find(|(at, o)| *at > done && o.is_ok())
            .map(|(at, _)| *at);
        if let Some(at) = first {
            break at;
        }
        assert!(
            done.elapsed() < Duration::from_secs(60),
            "no grant within 60 s of the switchover\n{}",
            bouncer.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(AFTER).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("client task");
    }

    let outcomes = outcomes.lock().expect("outcomes").clone();
    let granted: Vec<(u64, u64)> = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok().copied())
        .collect();
    let late: Vec<&Outcome> = outcomes
        .iter()
        .filter(|(at, o)| o.is_err() && *at > resumed + SETTLE)
        .collect();
    let before = outcomes.iter().filter(|(at, _)| *at < switched).count();
    let after = outcomes
        .iter()
        .filter(|(at, o)| *at > resumed && o.is_ok())
        .count();
    eprintln!(
        "switchover behind PgBouncer: {} grants, {} refused; grants paused {:.2}s; {before} \
         before, {after} after",
        granted.len(),
        outcomes.len() - granted.len(),
        (resumed - switched).as_secs_f64()
    );
    assert!(
        late.is_empty(),
        "grants refused after the new leader served (a stale connection?): {:?}",
        late.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        before > 0 && after > 0,
        "{before} grants before, {after} after"
    );
    assert_ranges_disjoint(&granted);
    let (db, connection) = tokio_postgres::connect(&direct, tokio_postgres::NoTls)
        .await
        .expect("connect to the new leader");
    tokio::spawn(connection);
    assert_ledger_covers(&db, "links", &granted).await;
    server.stop().await;
}
