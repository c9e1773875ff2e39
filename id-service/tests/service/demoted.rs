//! A primary demoted under a full pool: a real primary and its streaming standby, listed in one
//! multi-host `DATABASE_URL` with `target_session_attrs=read-write`. The primary turns read-only
//! (as a demoted one does) and the standby is promoted: the first grant after it succeeds, its
//! refused attempt having emptied the pool of connections to the old primary. With no primary
//! left, grants are refused as unavailable and `/readyz` says not ready, until one is back.

use crate::helpers::{Server, lease};
use id_service::Config;
use std::time::Duration;
use testkit::cluster::Cluster;

async fn ready(server: &Server) -> (u16, String) {
    let response = reqwest::get(format!("http://{}/readyz", server.admin_addr))
        .await
        .expect("readyz");
    let status = response.status().as_u16();
    (status, response.text().await.expect("readyz body"))
}

fn evicted(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("idservice_db_connections_evicted_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no eviction counter in:\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pool_of_connections_to_a_demoted_primary_recovers_on_the_first_refused_grant() {
    let old = Cluster::start(&[]).await;
    old.create_database("ids").await;
    let new = old.start_standby(&[]).await;
    let url = Cluster::multi_host_url(&[&old, &new], "ids");
    let mut config = Config::for_tests(&url);
    config.db_pool_size = 8;
    let server = Server::start(config).await;

    // Fill the pool: concurrent grants each hold a connection to the old primary.
    let grants = (0..16).map(|i| {
        let server = &server;
        async move {
            let mut client = server.client().await;
            lease(&mut client, "links", 10, &format!("filler-{i}"))
                .await
                .expect("a grant before the demotion")
        }
    });
    let before = futures::future::join_all(grants).await;
    assert_eq!(ready(&server).await.0, 200);

    // The old primary refuses writes from now on; the standby takes over with everything.
    old.set_read_only(true).await;
    new.promote().await;
    let evicted_before = evicted(&server.metrics().await);

    let mut client = server.client().await;
    let granted = lease(&mut client, "links", 10, "after")
        .await
        .expect("the first grant after the demotion succeeds");
    let highest = before.iter().map(|l| l.end).max().expect("leases");
    assert!(
        granted.start >= highest,
        "{granted:?} overlaps the leases granted before ({highest})"
    );
    assert!(
        evicted(&server.metrics().await) > evicted_before,
        "the refused grant evicted nothing"
    );
    // Every later grant lands on the new primary too: no stale connection is handed out.
    for i in 0..20 {
        lease(&mut client, "links", 10, &format!("later-{i}"))
            .await
            .expect("a grant on the new primary");
    }
    assert_eq!(ready(&server).await.0, 200);

    // No primary at all: grants are refused as unavailable, and the replica is not ready.
    new.set_read_only(true).await;
    let refused = lease(&mut client, "links", 10, "none")
        .await
        .expect_err("a grant with no primary");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    let (status, body) = ready(&server).await;
    assert_eq!((status, body.as_str()), (503, "no primary reachable\n"));

    // A primary again: ready, and grants succeed.
    new.set_read_only(false).await;
    let back = testkit::wait_until(Duration::from_secs(10), || async {
        ready(&server).await.0 == 200
    })
    .await;
    assert!(back, "not ready again: {:?}", ready(&server).await);
    lease(&mut client, "links", 10, "back")
        .await
        .expect("a grant once a primary is back");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_no_primary_at_start_the_service_waits_for_one_instead_of_exiting() {
    let old = Cluster::start(&[]).await;
    old.create_database("ids").await;
    let standby = old.start_standby(&[]).await;
    old.set_read_only(true).await;
    let url = Cluster::multi_host_url(&[&old, &standby], "ids");
    let starting = tokio::spawn(async move { Server::start(Config::for_tests(&url)).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !starting.is_finished(),
        "start-up ended (it should wait for a primary)"
    );
    old.set_read_only(false).await;
    let server = tokio::time::timeout(Duration::from_secs(20), starting)
        .await
        .expect("the service starts once a primary is back")
        .expect("start-up task");
    let mut client = server.client().await;
    lease(&mut client, "links", 10, "started")
        .await
        .expect("a grant after the wait");
    assert_eq!(ready(&server).await.0, 200);
    server.stop().await;
}
