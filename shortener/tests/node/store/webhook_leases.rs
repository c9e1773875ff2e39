//! A webhook claim's lease fences what its worker writes afterwards: a worker whose lease ran
//! out and was claimed again by another (a store slower than the lease, a paused process)
//! neither lets go of what the new claim holds nor records a failure over its delivery or
//! against its endpoint. Claims give tenants turns that count the endpoints they already hold.

use super::{endpoint_of_default, fresh_embedded, link};
use codespace::{CodeKey, CodeSpace};
use shortener::store::{
    Attempt, Capabilities, Delivery, LinkStore, OutboxStore, PgSettings, PgStore,
};
use std::time::Duration;

/// Claims until a claim of `lease` takes something (the lease before it running out first).
async fn claimed_again<S: OutboxStore>(store: &S, lease: Duration) -> Vec<Delivery> {
    let got = std::sync::Mutex::new(Vec::new());
    let took = testkit::wait_until(Duration::from_secs(10), || {
        let (found, got) = (store.claim_deliveries(lease, 10, 10), &got);
        async move {
            let found = found.await.expect("claim");
            let any = !found.is_empty();
            *got.lock().expect("lock") = found;
            any
        }
    })
    .await;
    assert!(took, "the first lease never ran out");
    got.into_inner().expect("lock")
}

/// A failed attempt of `delivery`, its last, recorded under `lease`.
fn failure(delivery: &Delivery, lease: i64) -> Attempt {
    Attempt {
        endpoint_id: delivery.endpoint_id,
        event_id: delivery.event_id,
        delivered: false,
        status: Some(500),
        error: Some("answered 500".into()),
        retry_at: chrono::Utc::now(),
        max_failures: 100,
        last: true,
        lease,
    }
}

async fn a_late_worker_changes_nothing_a_new_claim_holds<S: OutboxStore + LinkStore>(store: S) {
    let endpoint = endpoint_of_default(&store).await;
    store
        .insert(link("leased-1", "https://example.com/leased", None))
        .await
        .expect("insert");
    let long = Duration::from_secs(60);
    // The late worker: a lease that runs out at once.
    let first = store
        .claim_deliveries(Duration::from_millis(1), 10, 10)
        .await
        .expect("claim");
    assert_eq!(first.len(), 1, "{first:?}");
    let late = first[0].clone();
    // Another worker claims the endpoint once that lease has run out.
    let second = claimed_again(&store, long).await;
    assert_eq!(second[0].event_id, late.event_id);
    assert_ne!(
        second[0].lease, late.lease,
        "each claim has a lease of its own"
    );

    // The late worker records its failure and lets go: the new claim keeps both.
    let finished = store
        .finish_delivery(failure(&late, late.lease))
        .await
        .expect("finish");
    assert!(!finished.given_up, "the new claim's delivery is not ended");
    assert_eq!(
        (finished.failures, finished.stopped),
        (0, false),
        "the endpoint's run of failures is the new claim's to count"
    );
    store
        .release_endpoint(endpoint.id, late.lease, vec![late.event_id], None)
        .await
        .expect("release");
    let third = store.claim_deliveries(long, 10, 10).await.expect("claim");
    assert!(third.is_empty(), "the new claim still holds it: {third:?}");
    let log = store
        .delivery_log(endpoint.id, None, 10)
        .await
        .expect("log")
        .expect("endpoint");
    assert_eq!(
        (log[0].state.as_str(), log[0].attempts),
        ("pending", 0),
        "the late failure left the delivery to its new claim: {log:?}"
    );

    // The live claim's own release and record take effect.
    store
        .release_endpoint(endpoint.id, second[0].lease, vec![late.event_id], None)
        .await
        .expect("release");
    let fourth = store.claim_deliveries(long, 10, 10).await.expect("claim");
    assert_eq!(fourth.len(), 1, "let go by its holder: {fourth:?}");
    let finished = store
        .finish_delivery(failure(&fourth[0], fourth[0].lease))
        .await
        .expect("finish");
    assert!(finished.given_up, "the holder's last failure ends it");
    assert_eq!(finished.failures, 1, "and counts against the endpoint");
    let log = store
        .delivery_log(endpoint.id, None, 10)
        .await
        .expect("log")
        .expect("endpoint");
    assert_eq!((log[0].state.as_str(), log[0].attempts), ("failed", 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_worker_changes_nothing_a_new_claim_holds_embedded() {
    let (_dir, store) = fresh_embedded().await;
    a_late_worker_changes_nothing_a_new_claim_holds(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_worker_changes_nothing_a_new_claim_holds_postgres() {
    let db = testkit::TestDb::create().await;
    a_late_worker_changes_nothing_a_new_claim_holds(pg_store(&db).await).await;
}

/// A migrated PostgreSQL store on `db`.
async fn pg_store(db: &testkit::TestDb) -> PgStore {
    let space = CodeSpace::new(&CodeKey::generate(), codespace::DEFAULT_LENGTH).expect("space");
    let store = PgStore::connect(&PgSettings {
        url: db.url().to_string(),
        read_url: None,
        ca_file: None,
        max_connections: 4,
        timeout: Duration::from_secs(3),
        write_batch: 64,
        write_concurrency: 2,
        write_fill: 16,
        statement_timeout: Duration::from_secs(10),
        space: std::sync::Arc::new(space),
        pool_mode: Default::default(),
        direct_url: None,
    })
    .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

/// A limit of failures in a row past what the store's counter can hold (`u32::MAX`, meant as
/// "never disable") does not disable the endpoint at its first failure.
async fn a_limit_of_failures_past_the_counters_range_never_disables<S: OutboxStore + LinkStore>(
    store: S,
) {
    let endpoint = endpoint_of_default(&store).await;
    store
        .insert(link("never-1", "https://example.com/never", None))
        .await
        .expect("insert");
    let claimed = store
        .claim_deliveries(Duration::from_secs(60), 10, 10)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let finished = store
        .finish_delivery(Attempt {
            max_failures: u32::MAX,
            last: false,
            ..failure(&claimed[0], claimed[0].lease)
        })
        .await
        .expect("finish");
    assert_eq!(
        (finished.failures, finished.disabled_now, finished.stopped),
        (1, false, false),
        "endpoint {}",
        endpoint.id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_failures_past_the_counters_range_never_disables_embedded() {
    let (_dir, store) = fresh_embedded().await;
    a_limit_of_failures_past_the_counters_range_never_disables(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_failures_past_the_counters_range_never_disables_postgres() {
    let db = testkit::TestDb::create().await;
    a_limit_of_failures_past_the_counters_range_never_disables(pg_store(&db).await).await;
}

/// An endpoint of `tenant` made in `store` directly.
async fn endpoint_of<S: OutboxStore>(store: &S, tenant: &str) -> i64 {
    store
        .create_endpoint(shortener::store::webhooks::NewEndpoint {
            tenant: tenant.into(),
            url: format!("https://hooks.example.com/{tenant}"),
            secret: "s".repeat(24),
            created_by: format!("{tenant}/ci"),
            most: shortener::webhooks::MAX_ENDPOINTS_PER_TENANT,
        })
        .await
        .expect("endpoint")
        .expect("room for it")
        .id
}

/// A link of `tenant`, whose event is recorded for each of its endpoints.
fn link_of(tenant: &str, code: &str) -> shortener::store::NewLink {
    shortener::store::NewLink::plain(
        code.into(),
        format!("https://example.com/{code}"),
        codespace::shape::CodeKind::Alias,
        None,
        tenant,
        "owner",
    )
}

/// A tenant whose backlog spans many endpoints, most of them being delivered to, does not
/// keep the next free place from another tenant whose event is newer: the endpoints it already
/// holds count as turns it has had. (Counting only its idle endpoints, its next one had turn 1
/// like the other tenant's, and won on its older event, place after place.)
async fn endpoints_in_flight_count_against_their_tenants_turn<S: OutboxStore + LinkStore>(
    store: S,
) {
    let mut acme = Vec::new();
    for _ in 0..6 {
        acme.push(endpoint_of(&store, "acme").await);
    }
    let globex = endpoint_of(&store, "globex").await;
    store
        .insert(link_of("acme", "acme-1"))
        .await
        .expect("insert");
    let long = Duration::from_secs(60);
    let first = store.claim_deliveries(long, 4, 10).await.expect("claim");
    assert_eq!(first.len(), 4, "{first:?}");
    assert!(first.iter().all(|d| acme.contains(&d.endpoint_id)));
    store
        .insert(link_of("globex", "globex-1"))
        .await
        .expect("insert");
    let next = store.claim_deliveries(long, 1, 10).await.expect("claim");
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(
        next[0].endpoint_id, globex,
        "acme, holding four places, took the fifth before globex had one"
    );
    let rest = store.claim_deliveries(long, 10, 10).await.expect("claim");
    assert_eq!(rest.len(), 2, "acme's two other endpoints: {rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_in_flight_count_against_their_tenants_turn_embedded() {
    let (_dir, store) = fresh_embedded().await;
    endpoints_in_flight_count_against_their_tenants_turn(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_in_flight_count_against_their_tenants_turn_postgres() {
    let db = testkit::TestDb::create().await;
    endpoints_in_flight_count_against_their_tenants_turn(pg_store(&db).await).await;
}
