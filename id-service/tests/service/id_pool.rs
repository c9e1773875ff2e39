//! Invariant I7 end to end: the id-client's `IdPool` over gRPC against the real server.

use crate::helpers::Server;
use crate::helpers::tokens::{self, Caller};
use id_client::{GrpcLeaseSource, GrpcSourceConfig, IdError, IdPool, LeaseSource, PoolConfig};
use id_service::Config;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::TestDb;

/// IDs per block: at one ID a millisecond a block lasts about a second, so the spare lease (a
/// few milliseconds) has ample time to land even on a machine busy with other tests (at 400 a
/// lease under a full test run once took longer than its block).
const BLOCK: u64 = 1_000;

/// A gRPC lease source on `server` for namespace `links` as `holder`, with `token`.
fn source(server: &Server, holder: &str, token: Option<String>) -> GrpcLeaseSource {
    GrpcLeaseSource::new(&GrpcSourceConfig {
        endpoints: vec![server.endpoint()],
        namespace: "links".into(),
        holder: holder.into(),
        token,
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
    })
    .expect("grpc source")
}

/// A pool's settings with blocks of `min` to `max` IDs, starting at `max`, and quick retries.
fn blocks(min: u64, max: u64) -> PoolConfig {
    PoolConfig {
        min_block: min,
        max_block: max,
        initial_block: max,
        target_block_duration: Duration::from_secs(60),
        lease_timeout: Duration::from_secs(2),
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
    }
}

/// A server on `db` whose tokens file holds `caller` alone.
async fn server_for(db: &TestDb, dir: &std::path::Path, caller: tokens::Caller) -> Server {
    Server::start(Config {
        tokens_file: Some(tokens::write(dir, &[caller])),
        insecure_no_auth: false,
        ..Config::for_tests(db.url())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_pool_rides_out_an_id_service_outage_then_fails_fast_then_recovers() {
    let db = TestDb::create().await;
    let server = Server::start(Config::for_tests(db.url())).await;
    let grpc_addr = server.grpc_addr;
    let pool = IdPool::start(
        Arc::new(source(&server, "pool-test", None)),
        blocks(BLOCK, BLOCK),
    );
    assert!(
        pool.wait_ready(Duration::from_secs(5)).await,
        "no first block"
    );

    // Steady state: a block lasts ~1 s here, far longer than a lease takes, so the spare
    // is always there when the current block runs out and taking an ID never fails.
    let mut seen = HashSet::new();
    let mut highest = 0;
    for _ in 0..4_000 {
        let id = pool
            .next_id()
            .expect("an ID is in hand while leases roll over");
        assert!(seen.insert(id), "ID {id} handed out twice");
        highest = highest.max(id);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stats = pool.stats();
    assert!(stats.leases >= 4, "{stats:?}");
    assert_eq!(stats.rewinds, 0);

    // Outage: what is in hand is still handed out, then the pool fails fast.
    server.stop().await;
    let in_hand = pool.stats().ids_in_hand;
    assert!(in_hand > 0 && in_hand <= 2 * BLOCK, "in hand: {in_hand}");
    for _ in 0..in_hand {
        let id = pool.next_id().expect("IDs in hand outlast the outage");
        assert!(seen.insert(id), "ID {id} handed out twice");
        highest = highest.max(id);
    }
    for _ in 0..5 {
        let started = Instant::now();
        let error = pool.next_id().expect_err("nothing left in hand");
        assert!(matches!(error, IdError::Exhausted { .. }), "{error:?}");
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "failing waited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(pool.stats().lease_errors > 0, "{:?}", pool.stats());

    // The id-service comes back on the same address: the pool recovers by itself.
    let server = Server::start(Config {
        grpc_addr,
        ..Config::for_tests(db.url())
    })
    .await;
    assert!(
        pool.wait_ready(Duration::from_secs(10)).await,
        "the pool did not recover: {:?}",
        pool.stats()
    );
    for _ in 0..(3 * BLOCK) {
        let id = pool.next_id().expect("IDs again");
        assert!(seen.insert(id), "ID {id} handed out twice");
        assert!(
            id > highest,
            "ID {id} is below one handed out before the outage"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(pool.stats().rewinds, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_a_lease_token_authenticates_as_its_caller_like_a_shortener_node() {
    const NODE: Caller = Caller::new("shortener", &["links"], &["lease"]);
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server_for(&db, dir.path(), NODE).await;
    let source = |token: Option<String>| source(&server, "shortener-7d9f-x2", token);
    let pool = IdPool::start(Arc::new(source(Some(NODE.token()))), PoolConfig::default());
    assert!(
        pool.wait_ready(Duration::from_secs(5)).await,
        "{:?}",
        pool.stats()
    );
    pool.next_ids(10).expect("IDs");
    let holders: Vec<String> = db
        .connect()
        .await
        .query("SELECT DISTINCT holder FROM id_leases", &[])
        .await
        .expect("holders")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(holders, ["shortener/shortener-7d9f-x2"]);

    // Without the token the pool gets nothing, and says why.
    let refused = IdPool::start(Arc::new(source(None)), PoolConfig::default());
    assert!(!refused.wait_ready(Duration::from_millis(500)).await);
    let error = refused.last_lease_error().expect("a lease error");
    assert!(
        matches!(error, id_client::LeaseError::Unauthorized(_)),
        "{error:?}"
    );
    server.stop().await;
}

/// A pool whose first block is larger than its caller's `ids_burst` (a block that can never
/// pass the caller's bucket) is refused as bad input, not told to retry, and asks for half the
/// size until a block fits: it gets IDs at once rather than retrying the same block forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_whose_block_is_above_its_callers_burst_asks_for_smaller_blocks() {
    const METERED: Caller = Caller {
        quota: "ids_per_second = 1000\nids_burst = 3000\n",
        ..Caller::new("metered", &["links"], &["lease"])
    };
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server_for(&db, dir.path(), METERED).await;
    let pool = IdPool::start(
        Arc::new(source(&server, "pool-test", Some(METERED.token()))),
        blocks(1_000, 8_000),
    );
    assert!(
        pool.wait_ready(Duration::from_secs(5)).await,
        "no block: {:?}",
        pool.last_lease_error()
    );
    let sizes: Vec<i64> = db
        .connect()
        .await
        .query(
            "SELECT upper(ids) - lower(ids) FROM id_leases ORDER BY lease_id",
            &[],
        )
        .await
        .expect("leases")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        sizes.first().is_some_and(|s| *s <= 3_000),
        "the first block granted is within the burst: {sizes:?}"
    );
    server.stop().await;
}

/// A caller over its `leases_per_second` is told it is throttled, not that the id-service is
/// unreachable: the refusal says to wait, and a lease a moment later goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_over_its_lease_quota_is_throttled_not_unreachable() {
    const PACED: Caller = Caller {
        quota: "leases_per_second = 1\n",
        ..Caller::new("paced", &["links"], &["lease"])
    };
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server_for(&db, dir.path(), PACED).await;
    let source = source(&server, "paced-node", Some(PACED.token()));
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        outcomes.push(source.lease(BLOCK).await);
    }
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    let throttled = outcomes
        .iter()
        .find_map(|o| o.as_ref().err())
        .expect("the quota refused a lease");
    assert!(
        matches!(throttled, id_client::LeaseError::Throttled { retry_after, .. } if !retry_after.is_zero()),
        "{throttled:?}"
    );
    assert_eq!(throttled.cause(), "throttled");
    let later = testkit::wait_until(Duration::from_secs(10), || async {
        source.lease(BLOCK).await.is_ok()
    })
    .await;
    assert!(later, "the quota never let a lease through again");
    server.stop().await;
}
