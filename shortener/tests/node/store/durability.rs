//! The embedded store's group commit: a write returns only once an fsync of the WAL covers it.

use super::{fresh_embedded, link};
use shortener::store::{Capabilities, InsertOutcome, LinkStore, Store};

/// Group commit on the embedded store: a write returns only once an fsync of the WAL covers
/// it, concurrent writes share fsyncs, and a read never waits when nothing is pending.
#[tokio::test]
async fn embedded_writes_return_only_when_a_wal_fsync_covers_them() {
    let (_dir, sqlite) = fresh_embedded().await;
    let store = Store::Sqlite(sqlite.clone());

    // One writer at a time: every write is durable the moment it returns.
    for i in 0..20 {
        let outcome = store
            .insert(link(&format!("seq-{i:03}"), "https://example.com/s", None))
            .await
            .expect("insert");
        assert!(matches!(outcome, InsertOutcome::Created(_)));
        let d = sqlite.durability().expect("embedded");
        assert_eq!(
            d.durable_writes, d.writes,
            "write {i} returned before an fsync covered it: {d:?}"
        );
    }
    let before = sqlite.durability().expect("embedded");

    // Many at once: all durable on return, and they need no more fsyncs than writes.
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (store, sqlite) = (store.clone(), sqlite.clone());
            tokio::spawn(async move {
                store
                    .insert_many(vec![link(
                        &format!("par-{i:03}"),
                        "https://example.com/p",
                        None,
                    )])
                    .await
                    .expect("insert");
                let d = sqlite.durability().expect("embedded");
                d.durable_writes
            })
        })
        .collect();
    for task in tasks {
        assert!(task.await.expect("task") > before.writes);
    }
    let after = sqlite.durability().expect("embedded");
    assert_eq!(after.durable_writes, after.writes);
    assert!(after.wal_syncs - before.wal_syncs <= after.writes - before.writes);
    assert_eq!(store.count_links().await.expect("count"), 84);

    // A read with nothing pending starts no fsync.
    let syncs = sqlite.durability().expect("embedded").wal_syncs;
    assert!(store.get("seq-000").await.expect("get").is_some());
    assert_eq!(sqlite.durability().expect("embedded").wal_syncs, syncs);
}

/// The embedded store's writer runs on a thread of its own: each create returns only after
/// the fsync that follows its batch's commit, rows that wait together share one batch, a taken
/// code in a batch fails only its own row, and leases taken meanwhile share those rounds'
/// fsyncs instead of adding their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_writer_answers_each_batch_after_its_own_fsync() {
    let (_dir, sqlite) = fresh_embedded().await;
    let before = sqlite.durability().expect("embedded");
    let writer = sqlite.clone();
    let leases: Vec<_> = (0..20)
        .map(|_| {
            let sqlite = sqlite.clone();
            tokio::spawn(async move {
                let committed_before = sqlite.durability().expect("embedded").writes;
                let (_, block) = sqlite.lease("links", 10, "test").await.expect("lease");
                assert!(sqlite.durability().expect("embedded").durable_writes > committed_before);
                block.start
            })
        })
        .collect();

    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (writer, sqlite) = (writer.clone(), sqlite.clone());
            // Codes repeat every 150, so 50 rows find theirs taken.
            let code = format!("thread-{:03}", i % 150);
            tokio::spawn(async move {
                let committed_before = sqlite.durability().expect("embedded").writes;
                let outcome = writer
                    .insert(link(&code, "https://example.com/t", None))
                    .await
                    .expect("insert");
                // Its batch committed as a later write than any finished before it was sent,
                // and no barrier waiter runs here, so only the writer's own fsync covers it.
                let durable = sqlite.durability().expect("embedded").durable_writes;
                assert!(
                    durable > committed_before,
                    "answered before an fsync covered its batch: {durable} <= {committed_before}"
                );
                outcome
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        match task.await.expect("task") {
            InsertOutcome::Created(_) => created += 1,
            InsertOutcome::CodeTaken => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(created, 150);
    let mut starts = Vec::new();
    for lease in leases {
        starts.push(lease.await.expect("lease task"));
    }
    starts.sort_unstable();
    assert_eq!(starts, (0..20).map(|i| i * 10).collect::<Vec<u64>>());
    let stats = writer.writer_stats();
    let (batches, rows) = (
        stats.batches.load(std::sync::atomic::Ordering::Relaxed),
        stats.rows.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert_eq!(rows, 200);
    assert!(
        batches < rows,
        "no two rows shared a batch ({batches} batches)"
    );
    let d = sqlite.durability().expect("embedded");
    assert_eq!(d.durable_writes, d.writes);
    let rounds = d.writes - before.writes;
    assert!(batches <= rounds);
    assert!(
        rounds < 220,
        "{rounds} rounds for 200 creates and 20 leases: nothing shared a round"
    );
    // Nothing read, so every fsync was a round's own: one each, none for a lease alone.
    assert_eq!(d.wal_syncs - before.wal_syncs, rounds);
    assert_eq!(
        Store::Sqlite(sqlite).count_links().await.expect("count"),
        150
    );
}
