//! The store interface itself, on both backends (batched inserts resolve conflicts per row);
//! the embedded file's layout and migrations (`embedded`), and its group commit (`durability`).

mod api_keys;
mod audit;
mod batch_bounds;
mod bounds;
mod checks;
mod durability;
mod embedded;
mod in_doubt;
pub(crate) mod layout;
mod marks;
mod one_writer;
mod outage;
mod sessions;
mod upgrade;
mod webhook_leases;

use crate::helpers::{Backend, Stack};
use codespace::shape::CodeKind;
use codespace::{CodeKey, CodeSpace};
use shortener::store::{Capabilities, InsertOutcome, LinkStore, NewLink};

pub(super) fn link(code: &str, url: &str, dedup: Option<&[u8]>) -> NewLink {
    let kind = if dedup.is_some() {
        CodeKind::Generated
    } else {
        CodeKind::Alias
    };
    NewLink {
        dedup_key: dedup.map(<[u8]>::to_vec),
        ..NewLink::plain(
            code.to_string(),
            url.to_string(),
            kind,
            None,
            "default",
            "owner",
        )
    }
}

async fn a_batched_insert_resolves_every_row_on_its_own(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let store = node.app.store.clone();
    let planted = store
        .insert_many(vec![link("taken-1", "https://example.com/first", None)])
        .await
        .expect("plant");
    assert!(matches!(&planted[0], InsertOutcome::Created(l) if l.code == "taken-1"));

    let batch = vec![
        link("new-1", "https://example.com/1", None),
        link("taken-1", "https://example.com/intruder", None),
        link("dup-a", "https://example.com/d", Some(b"dedup-key-1")),
        link("dup-b", "https://example.com/d", Some(b"dedup-key-1")),
        link("same-1", "https://example.com/s1", None),
        link("same-1", "https://example.com/s2", None),
        link("new-2", "https://example.com/2", None),
    ];
    let outcomes = store.insert_many(batch.clone()).await.expect("batch");
    assert_eq!(outcomes.len(), batch.len());
    assert!(
        matches!(&outcomes[0], InsertOutcome::Created(l) if l.code == "new-1" && l.url == "https://example.com/1")
    );
    assert_eq!(
        outcomes[1],
        InsertOutcome::CodeTaken,
        "a taken code is reported, never overwritten"
    );
    let InsertOutcome::Created(first) = &outcomes[2] else {
        panic!("dedup first: {:?}", outcomes[2])
    };
    assert!(matches!(&outcomes[3], InsertOutcome::Deduplicated(twin) if twin.code == first.code));
    assert!(matches!(&outcomes[4], InsertOutcome::Created(l) if l.url == "https://example.com/s1"));
    assert_eq!(outcomes[5], InsertOutcome::CodeTaken);
    assert!(matches!(&outcomes[6], InsertOutcome::Created(l) if l.code == "new-2"));

    // The stored URLs are the first ones: nothing was silently replaced (I2).
    assert_eq!(
        store
            .get("taken-1")
            .await
            .expect("get")
            .expect("exists")
            .url,
        "https://example.com/first"
    );
    assert_eq!(
        store.get("same-1").await.expect("get").expect("exists").url,
        "https://example.com/s1"
    );
    assert_eq!(store.count_links().await.expect("count"), 5);
}
on_both_stores!(a_batched_insert_resolves_every_row_on_its_own);

async fn many_concurrent_creates_are_all_committed_with_distinct_codes(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let codes = futures::future::join_all(
        (0..300).map(|i| node.create_url_owned(format!("https://example.com/many/{i}"))),
    )
    .await;
    let distinct: std::collections::HashSet<&String> = codes.iter().collect();
    assert_eq!(distinct.len(), 300);
    assert_eq!(node.stored_links().await, 300);
    for (i, code) in codes.iter().enumerate().step_by(37) {
        assert_eq!(
            node.visit(code).await.headers()["location"],
            format!("https://example.com/many/{i}").as_str()
        );
    }
}
on_both_stores!(many_concurrent_creates_are_all_committed_with_distinct_codes);

/// A dedup key is released only from the link it was found on, and only while that link may
/// be dead (deleted included: a delete keeps the key): a live link that took the key since
/// (another create's) keeps it, as does a live twin.
async fn a_dedup_key_is_released_only_from_the_dead_twin_it_was_found_on(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("a").await;
    let store = node.app.store.clone();
    let key: &[u8] = b"dedup-key-release";
    let holder = async |store: &shortener::store::Store| {
        store.find_dedup(key).await.expect("find").map(|l| l.code)
    };
    let live = link("live-twin", "https://example.com/r", Some(key));
    store.insert_many(vec![live]).await.expect("insert");
    // Live (no limit, expiry or disabling): kept, whoever asks.
    store
        .release_dedup(key, "live-twin")
        .await
        .expect("release");
    assert_eq!(holder(&store).await.as_deref(), Some("live-twin"));
    store
        .delete("live-twin", None, "owner")
        .await
        .expect("delete");
    // Deleted, it keeps the key (an import's rerun finds it) until a release takes it off.
    assert_eq!(holder(&store).await.as_deref(), Some("live-twin"));
    store
        .release_dedup(key, "live-twin")
        .await
        .expect("release");
    assert_eq!(holder(&store).await, None);
    let dead = NewLink {
        max_visits: Some(1),
        ..link("capped-twin", "https://example.com/r", Some(key))
    };
    store.insert_many(vec![dead]).await.expect("insert");
    // Asked for another code: kept.
    store
        .release_dedup(key, "someone-else")
        .await
        .expect("release");
    assert_eq!(holder(&store).await.as_deref(), Some("capped-twin"));
    store
        .release_dedup(key, "capped-twin")
        .await
        .expect("release");
    assert_eq!(holder(&store).await, None);
    // A new link took the key; a late release of the twin's leaves it there.
    let new = link("new-holder", "https://example.com/r", Some(key));
    store.insert_many(vec![new]).await.expect("insert");
    store
        .release_dedup(key, "capped-twin")
        .await
        .expect("release");
    assert_eq!(holder(&store).await.as_deref(), Some("new-holder"));
}
on_both_stores!(a_dedup_key_is_released_only_from_the_dead_twin_it_was_found_on);

/// Opens the embedded store at `path` for the codes of `key` at base length `length` and runs
/// its migrations: the store and how many ran, or the refusal.
pub(super) async fn open_migrated(
    path: &std::path::Path,
    key: &CodeKey,
    length: usize,
) -> Result<(shortener::store::SqliteStore, usize), shortener::store::StoreError> {
    let space = std::sync::Arc::new(CodeSpace::new(key, length).expect("space"));
    let store = shortener::store::SqliteStore::open(path, space, 64).expect("open");
    let ran = store.migrate().await?;
    Ok((store, ran))
}

/// A migrated embedded store on a new file with a new key (the directory holds the file).
pub(super) async fn fresh_embedded() -> (tempfile::TempDir, shortener::store::SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sqlite, _) = open_migrated(
        &dir.path().join("links.db"),
        &CodeKey::generate(),
        codespace::DEFAULT_LENGTH,
    )
    .await
    .expect("migrate");
    (dir, sqlite)
}

/// An endpoint of tenant `default` made in `store` directly (events of its links are then
/// recorded with a delivery to it).
pub(super) async fn endpoint_of_default<S: shortener::store::OutboxStore>(
    store: &S,
) -> shortener::store::Endpoint {
    store
        .create_endpoint(shortener::store::webhooks::NewEndpoint {
            tenant: "default".into(),
            url: "https://hooks.example.com/in".into(),
            secret: "s".repeat(24),
            created_by: "default/ci".into(),
            most: shortener::webhooks::MAX_ENDPOINTS_PER_TENANT,
        })
        .await
        .expect("endpoint")
        .expect("room for it")
}

/// A webhook event keeps the `traceparent` of the traced create that recorded it, in the
/// outbox row, so whichever node claims the delivery continues that trace (the PostgreSQL
/// path is driven end to end by the Python tracing tests, through a real OTLP receiver).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_event_keeps_the_trace_of_the_create_in_the_outbox() {
    use shortener::store::OutboxStore;
    let (_dir, store) = fresh_embedded().await;
    endpoint_of_default(&store).await;
    let traced = |code: &str, trace: &str| NewLink {
        trace: Some(trace.to_string()),
        ..link(code, &format!("https://example.com/{code}"), None)
    };
    let (one, two) = (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    assert!(matches!(
        store.insert(traced("traced-1", one)).await.expect("insert"),
        InsertOutcome::Created(_)
    ));
    let batch = vec![
        traced("traced-2", two),
        link("plain-1", "https://example.com/plain", None),
    ];
    store.insert_many(batch).await.expect("batch");
    let claimed = store
        .claim_deliveries(std::time::Duration::from_secs(30), 10, 10)
        .await
        .expect("claim");
    let trace_of = |code: &str| {
        claimed
            .iter()
            .find(|d| d.data.contains(&format!("\"code\":\"{code}\"")))
            .unwrap_or_else(|| panic!("no delivery of {code}: {claimed:?}"))
            .trace
            .clone()
    };
    assert_eq!(trace_of("traced-1").as_deref(), Some(one));
    assert_eq!(trace_of("traced-2").as_deref(), Some(two));
    assert_eq!(trace_of("plain-1"), None, "an untraced create keeps none");
}
