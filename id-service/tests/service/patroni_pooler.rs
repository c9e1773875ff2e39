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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use testkit::patroni::router::{follow_leader, member};
use testkit::patroni::switchover::{Judging, Outcomes, record, switch_over_under_load};
use testkit::patroni::{Patroni, Replication};
use testkit::pgbouncer::{Mode, PgBouncer};
use testkit::proxy::Proxy;

/// How long grants run after the new leader's first grant.
const AFTER: Duration = Duration::from_secs(8);
/// How long past the first grant after the switchover a refused one is still the failover's.
const SETTLE: Duration = Duration::from_secs(1);

/// The granted ranges, or the refusals, by when they were answered.
type Granted = Outcomes<(u64, u64)>;

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

    let outcomes: Arc<Granted> = Arc::default();
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
                record(&outcomes, outcome).await;
            }
        }));
    }

    let judging = Judging {
        after: AFTER,
        settle: SETTLE,
        what: "grants",
    };
    let granted = switch_over_under_load(&cluster, (&outcomes, &stop, clients), judging, || {
        bouncer.log()
    })
    .await;
    assert_ranges_disjoint(&granted);
    let (db, connection) = tokio_postgres::connect(&direct, tokio_postgres::NoTls)
        .await
        .expect("connect to the new leader");
    tokio::spawn(connection);
    assert_ledger_covers(&db, "links", &granted).await;
    server.stop().await;
}
