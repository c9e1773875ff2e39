//! The throwaway cluster survives what the fault tests do to it: an immediate shutdown and a
//! `kill -9` of the postmaster, each followed by a restart on the same port with committed
//! data intact.

use testkit::cluster::Cluster;

async fn count(cluster: &Cluster) -> i64 {
    cluster
        .connect()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count rows")
        .get(0)
}

#[tokio::test]
async fn committed_rows_survive_a_crash_and_a_kill_9_of_the_postmaster() {
    let cluster = Cluster::start(&[]).await;
    let port = cluster.port();
    let db = cluster.connect().await;
    db.batch_execute("CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
        .await
        .expect("write a row");

    cluster.crash().await;
    assert!(!cluster.accepts_connections().await, "down after the crash");
    cluster.restart().await;
    assert_eq!(count(&cluster).await, 1);

    cluster
        .connect()
        .await
        .batch_execute("INSERT INTO t VALUES (2)")
        .await
        .expect("write another row");
    cluster.kill().await;
    assert!(!cluster.accepts_connections().await, "down after kill -9");
    cluster.restart().await;
    assert_eq!(cluster.port(), port, "same port after restarts");
    assert_eq!(count(&cluster).await, 2);
}
