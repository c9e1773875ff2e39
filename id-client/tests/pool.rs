//! The pool's behaviour over an in-memory ledger whose availability the test controls.
//! (The real ledgers, PostgreSQL through the id-service and SQLite, have their own tests.)

use codespace::Block;
use id_client::{IdError, IdPool, Lease, LeaseError, LeaseFuture, LeaseSource, PoolConfig};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Grants consecutive blocks; can be switched off, and can be made to rewind; refuses blocks
/// larger than `most` when it is set, as a namespace with a block limit does.
#[derive(Default)]
struct Ledger {
    next: AtomicU64,
    lease_id: AtomicU64,
    down: AtomicBool,
    sizes: Mutex<Vec<u64>>,
    most: AtomicU64,
    /// Refuses every request for a reason other than its size while set.
    refuse: AtomicBool,
}

impl LeaseSource for Ledger {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if self.down.load(Ordering::SeqCst) {
                return Err(LeaseError::Unavailable("ledger down".into()));
            }
            if self.refuse.load(Ordering::SeqCst) {
                return Err(LeaseError::Refused("high water too far ahead".into()));
            }
            let most = self.most.load(Ordering::SeqCst);
            if most > 0 && size > most {
                return Err(LeaseError::Invalid(format!(
                    "size {size} is above the namespace's block limit {most}"
                )));
            }
            self.sizes.lock().unwrap().push(size);
            let start = self.next.fetch_add(size, Ordering::SeqCst);
            Ok(Lease {
                lease_id: self.lease_id.fetch_add(1, Ordering::SeqCst) + 1,
                block: Block::new(start, start + size).unwrap(),
            })
        })
    }
}

fn config(block: u64) -> PoolConfig {
    PoolConfig {
        min_block: block,
        max_block: block,
        initial_block: block,
        ..PoolConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn ids_keep_coming_without_waiting_while_blocks_roll_over() {
    let ledger = Arc::new(Ledger::default());
    let pool = IdPool::start(ledger.clone(), config(10));
    assert!(pool.wait_ready(Duration::from_secs(1)).await);
    let mut seen = HashSet::new();
    for _ in 0..1000 {
        // Consume slower than a lease takes, as in steady state: the spare is always there.
        let id = pool
            .next_id()
            .expect("an ID is always in hand in steady state");
        assert!(seen.insert(id), "id {id} handed out twice");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(pool.stats().leases >= 100, "{:?}", pool.stats());
}

#[tokio::test(start_paused = true)]
async fn an_outage_is_ridden_out_on_ids_in_hand_then_fails_fast_then_recovers() {
    let ledger = Arc::new(Ledger::default());
    let pool = IdPool::start(ledger.clone(), config(50));
    assert!(pool.wait_ready(Duration::from_secs(1)).await);
    tokio::time::sleep(Duration::from_millis(100)).await; // let the spare arrive
    assert_eq!(pool.stats().ids_in_hand, 100);

    ledger.down.store(true, Ordering::SeqCst);
    let mut ids = HashSet::new();
    for _ in 0..100 {
        assert!(ids.insert(pool.next_id().expect("current block and spare")));
    }
    let started = tokio::time::Instant::now();
    assert!(matches!(pool.next_id(), Err(IdError::Exhausted { .. })));
    assert_eq!(started.elapsed(), Duration::ZERO, "failing must not wait");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(pool.next_id().is_err());
    assert!(pool.stats().lease_errors > 0);

    ledger.down.store(false, Ordering::SeqCst);
    assert!(
        pool.wait_ready(Duration::from_secs(30)).await,
        "pool recovers by itself"
    );
    let id = pool.next_id().expect("recovered");
    assert!(!ids.contains(&id));
    assert_eq!(pool.stats().last_error, None);
}

#[tokio::test(start_paused = true)]
async fn a_lease_below_one_already_seen_is_refused_and_counted() {
    let ledger = Arc::new(Ledger::default());
    let pool = IdPool::start(ledger.clone(), config(10));
    assert!(pool.wait_ready(Duration::from_secs(1)).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first: Vec<u64> = (0..20).map(|_| pool.next_id().unwrap()).collect();
    ledger.next.store(0, Ordering::SeqCst); // the ledger goes back in time
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = pool.stats();
    assert!(stats.rewinds >= 1, "{stats:?}");
    // Nothing from the rewound ledger was handed out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    while let Ok(id) = pool.next_id() {
        assert!(!first.contains(&id), "id {id} repeated after a rewind");
        if id > 200 {
            break;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn block_size_adapts_to_the_consumption_rate() {
    let ledger = Arc::new(Ledger::default());
    let pool = IdPool::start(
        ledger.clone(),
        PoolConfig {
            min_block: 10,
            max_block: 100_000,
            initial_block: 10,
            target_block_duration: Duration::from_secs(10),
            ..PoolConfig::default()
        },
    );
    assert!(pool.wait_ready(Duration::from_secs(1)).await);
    // ~1000 IDs per second for a minute.
    for _ in 0..60_000 {
        let _ = pool.next_id();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let last = *ledger.sizes.lock().unwrap().last().unwrap();
    assert!(
        (5_000..=20_000).contains(&last),
        "last block size {last}, want about 10 s x 1000/s"
    );
    let stats = pool.stats();
    assert!(
        stats.runway_seconds.is_finite() && stats.runway_seconds > 1.0,
        "{stats:?}"
    );
}

/// Blocks of 10 to 100,000 IDs, `initial` before any rate is measured, sized for 10 s.
fn wide(initial: u64) -> PoolConfig {
    PoolConfig {
        min_block: 10,
        max_block: 100_000,
        initial_block: initial,
        target_block_duration: Duration::from_secs(10),
        ..PoolConfig::default()
    }
}

/// A ledger whose block limit is below the pool's `max_block` refuses the large requests; the
/// pool asks for smaller blocks at once and keeps to them, so a fast consumer never runs dry.
#[tokio::test(start_paused = true)]
async fn a_ledger_that_refuses_large_blocks_gets_smaller_requests() {
    let ledger = Arc::new(Ledger {
        most: AtomicU64::new(1_000),
        ..Ledger::default()
    });
    let pool = IdPool::start(ledger.clone(), wide(50_000));
    assert!(
        pool.wait_ready(Duration::from_secs(1)).await,
        "{:?}",
        pool.stats()
    );
    // ~1000 IDs per second for half a minute: the rate asks for blocks of ~10,000.
    let mut dry = 0;
    for _ in 0..30_000 {
        if pool.next_id().is_err() {
            dry += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(dry, 0, "{:?}", pool.stats());
    let sizes = ledger.sizes.lock().unwrap().clone();
    assert!(sizes.len() >= 30, "{sizes:?}");
    assert!(sizes.iter().all(|&s| s <= 1_000), "{sizes:?}");
    assert!(
        sizes.iter().any(|&s| s > 500),
        "halved no further than needed: {sizes:?}"
    );
    assert_eq!(
        pool.stats().lease_errors,
        0,
        "a size refusal is not an outage"
    );
}

/// A refusal for another reason than the size leaves the size alone: once the ledger takes
/// requests again, the pool asks for the blocks it asked for before.
#[tokio::test(start_paused = true)]
async fn a_refusal_for_another_reason_leaves_the_block_size_alone() {
    let ledger = Arc::new(Ledger {
        refuse: AtomicBool::new(true),
        ..Ledger::default()
    });
    let pool = IdPool::start(ledger.clone(), wide(5_000));
    assert!(!pool.wait_ready(Duration::from_secs(2)).await, "refused");
    assert!(pool.stats().lease_errors >= 1, "{:?}", pool.stats());
    ledger.refuse.store(false, Ordering::SeqCst);
    assert!(pool.wait_ready(Duration::from_secs(30)).await);
    let first = ledger.sizes.lock().unwrap()[0];
    assert_eq!(first, 5_000, "the size was not halved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_tasks_never_get_the_same_id() {
    let ledger = Arc::new(Ledger::default());
    let pool = Arc::new(IdPool::start(ledger.clone(), config(1000)));
    assert!(pool.wait_ready(Duration::from_secs(5)).await);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while got.len() < 20_000 {
                    match pool.next_ids(7) {
                        Ok(ids) => got.extend(ids),
                        Err(_) => tokio::task::yield_now().await,
                    }
                }
                got
            })
        })
        .collect();
    let mut all = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(all.insert(id), "id {id} handed out twice");
        }
    }
    assert!(all.len() >= 160_000);
}

/// Grants consecutive blocks and remembers the high water reported with each request.
#[derive(Default)]
struct Reporting {
    next: AtomicU64,
    reported: Mutex<Vec<u64>>,
}

impl LeaseSource for Reporting {
    fn lease(&self, _size: u64) -> LeaseFuture<'_> {
        Box::pin(async { Err(LeaseError::Refused("the pool must report".into())) })
    }

    fn lease_reporting(&self, size: u64, high_water: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            self.reported.lock().unwrap().push(high_water);
            let start = 1 + self.next.fetch_add(size, Ordering::SeqCst);
            Ok(Lease {
                lease_id: start,
                block: Block::new(start, start + size).unwrap(),
            })
        })
    }
}

#[tokio::test(start_paused = true)]
async fn every_lease_request_reports_one_past_the_highest_id_received_so_far() {
    let source = Arc::new(Reporting::default());
    let pool = IdPool::start(source.clone(), config(10));
    assert!(pool.wait_ready(Duration::from_secs(1)).await);
    let mut ranges = Vec::new();
    for _ in 0..6 {
        ranges.extend(pool.next_ranges(7).expect("IDs"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Touching runs come back merged; the 42 IDs are the first 42 of the ledger.
    assert_eq!(ranges.iter().map(|r| r.end - r.start).sum::<u64>(), 42);
    assert_eq!(ranges.first().map(|r| r.start), Some(1));
    let reported = source.reported.lock().unwrap().clone();
    assert!(reported.len() >= 5, "{reported:?}");
    // 0 before the first block, then the end of the last block received, every time.
    let expected: Vec<u64> = (0..reported.len() as u64)
        .map(|i| if i == 0 { 0 } else { 1 + 10 * i })
        .collect();
    assert_eq!(reported, expected);
    assert_eq!(pool.stats().high_water, *reported.last().unwrap() + 10);
}

/// A waiter that answers a failure at once is woken by the failed lease, not by its deadline;
/// one that waits for IDs keeps waiting through failures and gets them once the ledger is back.
#[tokio::test(start_paused = true)]
async fn a_failed_lease_wakes_a_waiter_that_answers_failures() {
    let ledger = Arc::new(Ledger::default());
    ledger.down.store(true, Ordering::SeqCst);
    let pool = Arc::new(IdPool::start(ledger.clone(), config(10)));
    let started = tokio::time::Instant::now();
    assert!(!pool.wait_ready_or_failure(Duration::from_secs(60)).await);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "woken after {:?}, not by the failed lease",
        started.elapsed()
    );
    assert!(pool.last_lease_error().is_some());

    let patient = {
        let pool = Arc::clone(&pool);
        tokio::spawn(async move { pool.wait_ready(Duration::from_secs(60)).await })
    };
    // Several failed leases later (the clock is paused: each wait below is virtual time).
    let before = pool.stats().lease_errors;
    let failed_thrice = tokio::time::timeout(Duration::from_secs(30), async {
        while pool.stats().lease_errors < before + 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        failed_thrice.is_ok(),
        "three more failed leases within 30 s"
    );
    assert!(!patient.is_finished(), "a failure ended a wait for IDs");
    ledger.down.store(false, Ordering::SeqCst);
    assert!(patient.await.expect("join"), "IDs once the ledger is back");
}

/// Refuses its first lease as over the caller's quota, asking for `retry_after`; grants the
/// rest. Counts the attempts.
struct Quota {
    attempts: AtomicU64,
    retry_after: Duration,
    ledger: Ledger,
}

impl LeaseSource for Quota {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            if self.attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(LeaseError::Throttled {
                    detail: "caller over its leases a second".into(),
                    retry_after: self.retry_after,
                });
            }
            self.ledger.lease(size).await
        })
    }
}

/// A throttled lease is asked again after the wait the ledger asked for, not sooner on the
/// pool's own backoff (which would spend the quota on refusals and count an error each).
#[tokio::test(start_paused = true)]
async fn a_throttled_lease_waits_as_long_as_the_ledger_asks() {
    let source = Arc::new(Quota {
        attempts: AtomicU64::new(0),
        retry_after: Duration::from_secs(3),
        ledger: Ledger::default(),
    });
    let pool = IdPool::start(source.clone(), config(10));
    assert!(!pool.wait_ready(Duration::from_secs(2)).await);
    assert_eq!(
        source.attempts.load(Ordering::SeqCst),
        1,
        "asked again too soon"
    );
    assert!(
        matches!(pool.last_lease_error(), Some(LeaseError::Throttled { .. })),
        "{:?}",
        pool.last_lease_error()
    );
    assert!(pool.wait_ready(Duration::from_secs(5)).await);
    assert!(pool.next_id().is_ok());
}
