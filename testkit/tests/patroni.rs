//! The Patroni harness does what the failover suite relies on: a multi-host connection string
//! reaches the leader, and after a planned switchover, a `kill -9` of the leader and a leader cut
//! off from etcd, a new leader takes writes with every committed row present (synchronous mode),
//! and a killed member rejoins as a replica.

use std::time::Duration;
use testkit::patroni::{Patroni, Replication};
use testkit::proxy::Mode;

/// Connects through the multi-host string, retrying while no member is the primary.
async fn connect(url: &str) -> tokio_postgres::Client {
    for _ in 0..300 {
        if let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no primary reachable through {url}");
}

/// Inserts `n` through a fresh connection to whichever member is the primary.
async fn write(url: &str, n: i32) {
    connect(url)
        .await
        .execute("INSERT INTO t VALUES ($1)", &[&n])
        .await
        .unwrap_or_else(|e| panic!("insert {n}: {e}"));
}

async fn rows(url: &str) -> Vec<i32> {
    let rows = connect(url)
        .await
        .query("SELECT n FROM t ORDER BY n", &[])
        .await
        .expect("read rows");
    rows.iter().map(|r| r.get(0)).collect()
}

async fn wait_new_leader(cluster: &Patroni, old: usize) -> usize {
    for _ in 0..600 {
        if let Some(leader) = cluster.leader().await
            && leader != old
        {
            return leader;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "no new leader after {}\n{}",
        cluster.name(old),
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_cluster_fails_over_three_ways_and_keeps_every_commit() {
    let mut cluster = Patroni::start(Replication::Sync).await;
    let url = cluster.create_database("harness").await;
    connect(&url)
        .await
        .batch_execute("CREATE TABLE t (n int PRIMARY KEY)")
        .await
        .expect("create the table");
    write(&url, 1).await;

    let first = cluster.switchover(None).await.expect("switch over");
    let second = wait_new_leader(&cluster, first).await;
    write(&url, 2).await;
    // A new leader names its synchronous standby a moment after its promotion; until then no
    // other member may be promoted, so the next fault waits for it.
    cluster.wait_replicas(2, Duration::from_secs(60)).await;

    cluster.kill(second).await;
    let third = wait_new_leader(&cluster, second).await;
    write(&url, 3).await;
    cluster.wait_replicas(1, Duration::from_secs(60)).await;
    cluster.start_member(second);
    cluster.wait_replicas(2, Duration::from_secs(90)).await;

    cluster.set_etcd_link(third, Mode::Blackhole);
    let fourth = wait_new_leader(&cluster, third).await;
    cluster.set_etcd_link(third, Mode::Open);
    write(&url, 4).await;
    assert_eq!(rows(&url).await, vec![1, 2, 3, 4], "every committed row");
    let standby = (0..cluster.len())
        .find(|&i| i != fourth)
        .expect("a standby");
    let read_only = connect(&cluster.member_url(standby, "harness"))
        .await
        .execute("INSERT INTO t VALUES (5)", &[])
        .await;
    assert!(read_only.is_err(), "a standby refuses writes");
}
