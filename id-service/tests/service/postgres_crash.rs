//! Invariant I1 across a PostgreSQL crash, on a private cluster that the test crashes.
//!
//! The cluster runs with `synchronous_commit = off` as its default and a 10 s WAL writer delay,
//! so WAL that no commit flushed is still in memory when the server dies: a bare `nextval()`
//! or an asynchronous commit is lost, and the test checks that this really happens (otherwise
//! it would prove nothing) and that leases are not.

use crate::helpers::{Server, assert_disjoint, lease, ledger_leases, ledger_overlaps};
use id_service::Config;
use proto::idalloc::v1::Lease;
use std::time::{Duration, Instant};
use testkit::cluster::Cluster;

const NAMESPACE: &str = "links";

/// Settings that make a crash lose whatever WAL was not flushed by a synchronous commit.
const FORGETFUL: &[&str] = &[
    "synchronous_commit = off",
    "wal_writer_delay = 10s",
    "checkpoint_timeout = 1h",
];

async fn sequence_of(db: &tokio_postgres::Client, namespace: &str) -> String {
    db.query_one(
        "SELECT seq::text FROM id_namespaces WHERE name = $1",
        &[&namespace],
    )
    .await
    .expect("read the namespace's sequence")
    .get(0)
}

/// Advances the sequence in a transaction that rolls back: the advance is pre-logged (up to 32
/// values ahead) in WAL that nothing flushes.
async fn rolled_back_nextval(db: &tokio_postgres::Client, sequence: &str) -> i64 {
    db.batch_execute("BEGIN").await.expect("begin");
    let value: i64 = db
        .query_one("SELECT nextval($1::text::regclass)", &[&sequence])
        .await
        .expect("nextval")
        .get(0);
    db.batch_execute("ROLLBACK").await.expect("rollback");
    value
}

async fn lease_many(server: &Server, tasks: usize, per_task: usize, holder: &str) -> Vec<Lease> {
    let mut handles = Vec::new();
    for t in 0..tasks {
        let mut client = server.client().await;
        let holder = format!("{holder}-{t}");
        handles.push(tokio::spawn(async move {
            let mut leases = Vec::new();
            for i in 0..per_task {
                let size = [1, 7, 100, 1000][(t + i) % 4];
                leases.push(
                    lease(&mut client, NAMESPACE, size, &holder)
                        .await
                        .expect("lease"),
                );
            }
            leases
        }));
    }
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.await.expect("join a leasing task"));
    }
    all
}

/// How the test brings PostgreSQL down.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `pg_ctl stop -m immediate`: no checkpoint, crash recovery on the next start.
    ImmediateShutdown,
    /// `kill -9` of the postmaster.
    KillPostmaster,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lease_granted_before_a_postgres_immediate_shutdown_is_granted_again() {
    leases_survive(Fault::ImmediateShutdown).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lease_granted_before_kill_9_of_the_postmaster_is_granted_again() {
    leases_survive(Fault::KillPostmaster).await;
}

async fn leases_survive(fault: Fault) {
    let cluster = Cluster::start(FORGETFUL).await;
    let db = cluster.connect().await;
    let default: String = db
        .query_one("SHOW synchronous_commit", &[])
        .await
        .expect("show")
        .get(0);
    assert_eq!(
        default, "off",
        "the server default must be off for this test to mean anything"
    );
    db.batch_execute("CREATE SEQUENCE crash_probe CACHE 1")
        .await
        .expect("create the probe sequence");

    let server = Server::start(Config::for_tests(&cluster.url())).await;
    let mut client = server.client().await;
    let mut before = vec![
        lease(&mut client, NAMESPACE, 100, "first")
            .await
            .expect("first lease"),
    ];
    let sequence = sequence_of(&db, NAMESPACE).await;

    // A rolled-back transaction pre-logs the next values; size-1 leases then take them without
    // logging the sequence again. Only the lease commits' WAL flush makes them durable.
    rolled_back_nextval(&db, &sequence).await;
    for _ in 0..5 {
        before.push(
            lease(&mut client, NAMESPACE, 1, "single")
                .await
                .expect("size-1 lease"),
        );
    }
    before.extend(lease_many(&server, 4, 8, "before").await);

    // Unflushed WAL right before the crash: a bare nextval on the probe and another
    // rolled-back advance of the namespace's sequence.
    let probe_before: i64 = db
        .query_one("SELECT nextval('crash_probe')", &[])
        .await
        .expect("probe nextval")
        .get(0);
    rolled_back_nextval(&db, &sequence).await;
    drop(db);
    match fault {
        Fault::ImmediateShutdown => cluster.crash().await,
        Fault::KillPostmaster => cluster.kill().await,
    }
    cluster.restart().await;

    let db = cluster.connect().await;
    let probe_after: i64 = db
        .query_one("SELECT nextval('crash_probe')", &[])
        .await
        .expect("probe nextval after the crash")
        .get(0);
    assert!(
        probe_after <= probe_before,
        "the crash kept unflushed WAL (probe {probe_before} then {probe_after}), so this test \
         cannot tell a durable lease from a lucky one"
    );

    // The service reconnects by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    let first_after = loop {
        match lease(&mut client, NAMESPACE, 10, "after").await {
            Ok(lease) => break lease,
            Err(status) if Instant::now() < deadline => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("the service did not recover within 20 s: {status:?}"),
        }
    };
    let mut after = vec![first_after];
    after.extend(lease_many(&server, 4, 8, "after").await);

    // Every lease replied to before the crash is in the ledger, unchanged.
    let ledger = ledger_leases(&db).await;
    for granted in &before {
        assert!(
            ledger.iter().any(|(ns, s, e, id)| ns == NAMESPACE
                && *id == granted.lease_id
                && *s == granted.start
                && *e == granted.end),
            "lease {granted:?} was replied to but lost in the crash"
        );
    }
    // No new lease reaches back into the IDs granted before.
    let high_water = before.iter().map(|l| l.end).max().expect("leases before");
    for lease in &after {
        assert!(
            lease.start >= high_water,
            "lease {lease:?} starts below {high_water}, the end of leases granted before the crash"
        );
    }
    let mut all = before;
    all.extend(after);
    assert_disjoint(&all);
    assert_eq!(ledger_overlaps(&db).await, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_fail_fast_with_unavailable_while_postgres_is_down_and_work_again_after() {
    let cluster = Cluster::start(&[]).await;
    let server = Server::start(Config::for_tests(&cluster.url())).await;
    let mut client = server.client().await;
    lease(&mut client, NAMESPACE, 10, "h")
        .await
        .expect("lease while up");

    cluster.crash().await;
    for _ in 0..3 {
        let started = Instant::now();
        let status = lease(&mut client, NAMESPACE, 10, "h")
            .await
            .expect_err("no lease without a database");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "failing took {:?}",
            started.elapsed()
        );
    }
    let readyz = reqwest::get(format!("http://{}/readyz", server.admin_addr))
        .await
        .expect("readyz");
    assert_eq!(readyz.status(), 503);

    cluster.restart().await;
    let recovered = testkit::wait_until(Duration::from_secs(20), || {
        let mut client = client.clone();
        async move { lease(&mut client, NAMESPACE, 10, "h").await.is_ok() }
    })
    .await;
    assert!(
        recovered,
        "the service did not recover after PostgreSQL came back"
    );
    let readyz = reqwest::get(format!("http://{}/readyz", server.admin_addr))
        .await
        .expect("readyz");
    assert_eq!(readyz.status(), 200);
    server.stop().await;
}
