//! No reissue after an asynchronous failover: a real primary and streaming standby on this
//! machine. Leases are granted, replication stops, more are granted, the primary crashes, the
//! standby is promoted (a new timeline) and the id-service, reconnecting through the same
//! address, grants again. The old primary is then brought back on its own to read everything it
//! had granted: nothing of that may be granted again.

use crate::helpers::proxy::Proxy;
use crate::helpers::{Server, allocate, assert_ranges_disjoint, lease, lease_as};
use id_client::{
    GrpcLeaseSource, GrpcSourceConfig, IdPool, Lease, LeaseFuture, LeaseSource, PoolConfig,
};
use id_service::Config;
use proto::idalloc::v1::DescribeNamespaceRequest;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::cluster::Cluster;

const NAMESPACE: &str = "links";

/// A lease source that remembers every block it got: the pool's leases, to compare with the
/// ledgers.
struct Recording {
    inner: GrpcLeaseSource,
    blocks: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl LeaseSource for Recording {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        self.lease_reporting(size, 0)
    }

    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            let lease: Lease = self.inner.lease_reporting(size, high_water).await?;
            self.blocks
                .lock()
                .expect("blocks")
                .push((lease.block.start, lease.block.end));
            Ok(lease)
        })
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Waits until the standby has replayed everything the primary has written so far.
async fn wait_replayed(primary: &Cluster, standby: &Cluster) {
    let written: String = primary
        .connect()
        .await
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .expect("primary LSN")
        .get(0);
    let standby = standby.connect().await;
    let caught_up = testkit::wait_until(Duration::from_secs(30), || async {
        standby
            .query_one(
                "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                &[&written],
            )
            .await
            .is_ok_and(|row| row.get::<_, bool>(0))
    })
    .await;
    assert!(caught_up, "the standby did not catch up");
}

/// Every lease of the namespace in a ledger, as (start, end, lease_id).
async fn ledger(cluster: &Cluster) -> Vec<(u64, u64, u64)> {
    cluster
        .connect()
        .await
        .query(
            "SELECT lower(ids), upper(ids), lease_id FROM id_leases WHERE namespace = $1 ORDER BY lower(ids)",
            &[&NAMESPACE],
        )
        .await
        .expect("read a ledger")
        .iter()
        .map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64, r.get::<_, i64>(2) as u64))
        .collect()
}

/// Takes IDs from `pool` until it has received `leases` leases in all; returns the IDs.
async fn take_until(pool: &IdPool, leases: u64) -> Vec<(u64, u64)> {
    let mut taken = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while pool.stats().leases < leases {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool stalled: {:?}",
            pool.stats()
        );
        match pool.next_ranges(100) {
            Ok(ranges) => taken.extend(ranges.into_iter().map(|r| (r.start, r.end))),
            Err(_) => {
                pool.wait_ready(Duration::from_secs(5)).await;
            }
        }
    }
    taken
}

/// Grants raw leases (callers that report nothing) and AllocateIds ranges.
async fn grant_some(server: &Server, holder: &str, rounds: u64) -> Vec<(u64, u64)> {
    let mut client = server.client().await;
    let mut ranges = Vec::new();
    for i in 0..rounds {
        let l = lease(
            &mut client,
            NAMESPACE,
            [10, 100, 1000][(i % 3) as usize],
            holder,
        )
        .await
        .expect("lease");
        ranges.push((l.start, l.end));
        ranges.extend(
            allocate(&mut client, None, NAMESPACE, 100)
                .await
                .expect("allocate"),
        );
    }
    ranges
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_asynchronous_failover_no_range_granted_before_the_crash_is_granted_again() {
    let primary = Cluster::start(&[]).await;
    let standby = primary.start_standby(&[]).await;
    // The database's address moves to the new primary, as a Kubernetes Service would.
    let database = Proxy::start(loopback(primary.port())).await;
    let server = Server::start(Config {
        namespaces: vec![NAMESPACE.into()],
        auto_create_namespaces: false,
        segment_min: 1000,
        segment_max: 1000,
        allocate_max_count: 100,
        ..Config::for_tests(&format!("postgres://postgres@{}/postgres", database.addr()))
    })
    .await;
    let blocks = Arc::new(Mutex::new(Vec::new()));
    let pool = IdPool::start(
        Arc::new(Recording {
            inner: GrpcLeaseSource::new(&GrpcSourceConfig {
                endpoints: vec![server.endpoint()],
                namespace: NAMESPACE.into(),
                holder: "pool".into(),
                token: None,
                connect_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(3),
            })
            .expect("source"),
            blocks: Arc::clone(&blocks),
        }),
        PoolConfig {
            min_block: 500,
            max_block: 500,
            initial_block: 500,
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(200),
            ..PoolConfig::default()
        },
    );

    // Replicated: granted while the standby streams.
    // The jump's counter is there at zero before it: an alert on its increase() sees the
    // first jump, which a series born at 1 would hide.
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("idservice_timeline_jumps_total{namespace=\"links\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("idservice_lease_errors_total{reason=\"unavailable\"} 0"),
        "{metrics}"
    );
    let mut handed_out = grant_some(&server, "early", 6).await;
    handed_out.extend(take_until(&pool, 3).await);
    wait_replayed(&primary, &standby).await;
    let replicated = ledger(&standby).await;

    // Lost: granted after replication stopped.
    standby.stop().await;
    handed_out.extend(grant_some(&server, "late", 12).await);
    handed_out.extend(take_until(&pool, 6).await);
    primary.crash().await;

    standby.restart().await;
    standby.promote().await;
    let survived = ledger(&standby).await;
    // What was replayed survives (a background segment refill may have made it across too).
    assert!(
        replicated.iter().all(|l| survived.contains(l)),
        "the standby lost replayed leases"
    );
    database.set_target(loopback(standby.port()));

    // The service reconnects by itself and grants from the new primary.
    let client = server.client().await;
    let back = testkit::wait_until(Duration::from_secs(30), || {
        let mut client = client.clone();
        async move { lease(&mut client, NAMESPACE, 10, "after").await.is_ok() }
    })
    .await;
    assert!(back, "no grant from the promoted standby");
    let mut after = grant_some(&server, "after", 6).await;
    after.extend(take_until(&pool, 9).await);
    handed_out.extend(after);

    // Every ID handed out, before and after, is distinct: nothing was issued twice.
    assert_ranges_disjoint(&handed_out);

    // The old primary's own ledger is everything granted before the crash; the new primary's
    // grants since the promotion must not touch any of it.
    primary.restart().await;
    let before = ledger(&primary).await;
    assert!(
        before.len() > survived.len(),
        "the failover lost no lease, so this test proves nothing ({} vs {})",
        before.len(),
        survived.len()
    );
    let last_replicated = survived.iter().map(|l| l.2).max().unwrap_or(0);
    let granted_after: Vec<(u64, u64, u64)> = ledger(&standby)
        .await
        .into_iter()
        .filter(|l| l.2 > last_replicated)
        .collect();
    assert!(!granted_after.is_empty());
    for new in &granted_after {
        for old in &before {
            assert!(
                new.1 <= old.0 || old.1 <= new.0,
                "lease [{}, {}) granted after the failover overlaps [{}, {}) granted before",
                new.0,
                new.1,
                old.0,
                old.1
            );
        }
    }
    // The pool's blocks all came from one ledger or the other, and never went backwards.
    assert_eq!(pool.stats().rewinds, 0, "{:?}", pool.stats());
    let recorded = blocks.lock().expect("blocks").clone();
    assert!(recorded.len() >= 9);

    // The jump is visible: counted, and recorded with the namespace.
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("idservice_timeline_jumps_total{namespace=\"links\"} 1"),
        "{metrics}"
    );
    let info = server
        .admin_client()
        .await
        .describe_namespace(DescribeNamespaceRequest {
            name: NAMESPACE.into(),
        })
        .await
        .expect("describe")
        .into_inner();
    assert_eq!((info.timeline, info.timeline_jumps), (2, 1), "{info:?}");
    assert!(info.last_jump_at.is_some());
    drop(pool);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_high_water_is_passed_and_without_a_margin_an_unreported_lost_lease_is_granted_again()
 {
    let primary = Cluster::start(&[]).await;
    let standby = primary.start_standby(&[]).await;
    let database = Proxy::start(loopback(primary.port())).await;
    // No margin at all: only the ledger and what callers report count.
    let server = Server::start(Config {
        namespaces: vec![NAMESPACE.into()],
        failover_margin_ids: 0,
        failover_margin_leases: 0,
        ..Config::for_tests(&format!("postgres://postgres@{}/postgres", database.addr()))
    })
    .await;
    let mut client = server.client().await;
    lease(&mut client, NAMESPACE, 100, "early")
        .await
        .expect("lease");
    wait_replayed(&primary, &standby).await;
    standby.stop().await;
    // Lost in the failover: one lease of a caller that will report, then one of a caller that
    // will not (it died, or does not send high_water).
    let reporter = lease(&mut client, NAMESPACE, 1000, "reporter")
        .await
        .expect("lease");
    let silent = lease(&mut client, NAMESPACE, 1000, "silent")
        .await
        .expect("lease");
    assert_eq!(silent.start, reporter.end);
    primary.crash().await;
    standby.restart().await;
    standby.promote().await;
    database.set_target(loopback(standby.port()));

    let next = testkit::wait_until(Duration::from_secs(30), || {
        let mut client = client.clone();
        async move {
            lease_as(
                &mut client,
                None,
                NAMESPACE,
                1000,
                "reporter",
                Some(reporter.end),
            )
            .await
            .is_ok()
        }
    })
    .await;
    assert!(next, "no grant from the promoted standby");
    let leases = ledger(&standby).await;
    let (start, end, _) = *leases.last().expect("the reporter's new lease");
    // The reporter's lost IDs are not granted again...
    assert!(
        start >= reporter.end,
        "[{start}, {end}) reaches into {reporter:?}"
    );
    // ...but the silent caller's are: this is what the margin is for (docs/leases.md).
    assert!(
        start < silent.end && silent.start < end,
        "expected [{start}, {end}) to overlap the unreported {silent:?}"
    );
    // A report far beyond the cursor is refused and changes nothing.
    let status = lease_as(
        &mut client,
        None,
        NAMESPACE,
        10,
        "liar",
        Some(u64::from(u32::MAX) << 20),
    )
    .await
    .expect_err("implausible high water");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert_eq!(ledger(&standby).await.len(), leases.len());
    server.stop().await;
}
