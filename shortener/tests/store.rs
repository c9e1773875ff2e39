//! The store interface itself, on both backends: batched inserts resolve conflicts per row.

mod common;

use common::{Backend, Cluster};
use shortener::store::{InsertOutcome, Kind, NewLink};

fn link(code: &str, url: &str, dedup: Option<&[u8]>) -> NewLink {
    NewLink {
        code: code.to_string(),
        url: url.to_string(),
        kind: if dedup.is_some() {
            Kind::Generated
        } else {
            Kind::Alias
        },
        id: None,
        expires_at: None,
        owner: "owner".into(),
        dedup_key: dedup.map(<[u8]>::to_vec),
        idempotency: None,
    }
}

async fn a_batched_insert_resolves_every_row_on_its_own(backend: Backend) {
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
    let store = node.service.store();
    let planted = store
        .insert_many(&[link("taken-1", "https://example.com/first", None)])
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
    let outcomes = store.insert_many(&batch).await.expect("batch");
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
    let cluster = Cluster::new(backend).await;
    let node = cluster.node("a").await;
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

/// A data directory of schema version 2 keeps every link, click count, deletion and uniqueness
/// rule through migration 3, which rebuilds the click table clustered by code.
#[tokio::test]
async fn an_embedded_file_of_schema_version_2_keeps_its_links_through_the_migration() {
    use shortener::store::{SqliteStore, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("links.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.execute_batch(
            "CREATE TABLE shortener_schema_migrations (version INTEGER PRIMARY KEY, \
             name TEXT NOT NULL, applied_at INTEGER NOT NULL); \
             INSERT INTO shortener_schema_migrations VALUES (1, 'links', 0), (2, 'clicks', 0);",
        )
        .expect("version table");
        conn.execute_batch(include_str!("../migrations/sqlite/0001_links.sql"))
            .expect("schema 1");
        conn.execute_batch(include_str!("../migrations/sqlite/0002_clicks.sql"))
            .expect("schema 2");
        conn.execute_batch(
            "INSERT INTO links (code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key) VALUES \
             ('gen0001', 'https://example.com/g', 'generated', 7, 1000, NULL, NULL, 'o', NULL), \
             ('dedup01', 'https://example.com/d', 'generated', 8, 2000, NULL, NULL, 'o', x'0102'), \
             ('my-alias', 'https://example.com/a', 'alias', NULL, 3000, 4102444800000, NULL, 'o', NULL), \
             ('gone001', 'https://example.com/x', 'generated', 9, 4000, NULL, 5000, 'o', NULL); \
             INSERT INTO link_clicks (code, human, head, bot) VALUES ('gen0001', 5, 2, 1);",
        )
        .expect("old rows");
    }

    let sqlite = SqliteStore::open(&path).expect("reopen");
    assert_eq!(
        sqlite.migrate().await.expect("migrate"),
        1,
        "only migration 3 runs"
    );
    assert_eq!(sqlite.migrate().await.expect("migrate again"), 0);
    let store = Store::Sqlite(sqlite);
    assert_eq!(store.count_links().await.expect("count"), 4);
    let alias = store
        .get("my-alias")
        .await
        .expect("get")
        .expect("alias kept");
    assert_eq!(alias.url, "https://example.com/a");
    assert_eq!(alias.created_at.timestamp_millis(), 3000);
    assert_eq!(
        alias.expires_at.map(|t| t.timestamp_millis()),
        Some(4102444800000)
    );
    let counted = store
        .get_with_clicks("gen0001")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        (
            counted.clicks.human,
            counted.clicks.head,
            counted.clicks.bot
        ),
        (5, 2, 1),
        "click counts kept"
    );
    let gone = store
        .get("gone001")
        .await
        .expect("get")
        .expect("deleted kept");
    assert_eq!(gone.deleted_at.map(|t| t.timestamp_millis()), Some(5000));

    // The rules still hold after the migration: a taken code, a reused generated ID and a live
    // dedup key are refused per row, and rows without a dedup key never collide on it.
    let mut reused_id = link("gen0002", "https://example.com/reused", None);
    reused_id.kind = Kind::Generated;
    reused_id.id = Some(7);
    let outcomes = store
        .insert_many(&[
            link("gen0001", "https://example.com/intruder", None),
            reused_id,
            link("dedup02", "https://example.com/d", Some(&[1, 2])),
            link("free-1", "https://example.com/f1", None),
            link("free-2", "https://example.com/f2", None),
        ])
        .await
        .expect("insert");
    assert_eq!(outcomes[0], InsertOutcome::CodeTaken);
    assert_eq!(
        outcomes[1],
        InsertOutcome::CodeTaken,
        "generated ID 7 is used"
    );
    assert!(matches!(&outcomes[2], InsertOutcome::Deduplicated(twin) if twin.code == "dedup01"));
    assert!(matches!(&outcomes[3], InsertOutcome::Created(_)));
    assert!(matches!(&outcomes[4], InsertOutcome::Created(_)));
    assert_eq!(
        store.get("gen0001").await.expect("get").expect("kept").url,
        "https://example.com/g"
    );
    drop(store);

    let conn = rusqlite::Connection::open(&path).expect("inspect");
    assert!(
        conn.prepare("SELECT rowid FROM link_clicks").is_err(),
        "link_clicks is WITHOUT ROWID"
    );
}

/// Group commit on the embedded store: a write returns only once an fsync of the WAL covers
/// it, concurrent writes share fsyncs, and a read never waits when nothing is pending.
#[tokio::test]
async fn embedded_writes_return_only_when_a_wal_fsync_covers_them() {
    use shortener::store::{SqliteStore, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = SqliteStore::open(&dir.path().join("links.db")).expect("open");
    let store = Store::Sqlite(sqlite.clone());
    sqlite.migrate().await.expect("migrate");

    // One writer at a time: every write is durable the moment it returns.
    for i in 0..20 {
        let outcome = store
            .insert(link(&format!("seq-{i:03}"), "https://example.com/s", None))
            .await
            .expect("insert");
        assert!(matches!(outcome, InsertOutcome::Created(_)));
        let d = sqlite.durability();
        assert_eq!(
            d.durable_writes, d.writes,
            "write {i} returned before an fsync covered it: {d:?}"
        );
    }
    let before = sqlite.durability();

    // Many at once: all durable on return, and they need no more fsyncs than writes.
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (store, sqlite) = (store.clone(), sqlite.clone());
            tokio::spawn(async move {
                store
                    .insert_many(&[link(&format!("par-{i:03}"), "https://example.com/p", None)])
                    .await
                    .expect("insert");
                let d = sqlite.durability();
                d.durable_writes
            })
        })
        .collect();
    for task in tasks {
        assert!(task.await.expect("task") > before.writes);
    }
    let after = sqlite.durability();
    assert_eq!(after.durable_writes, after.writes);
    assert!(after.wal_syncs - before.wal_syncs <= after.writes - before.writes);
    assert_eq!(store.count_links().await.expect("count"), 84);

    // A read with nothing pending starts no fsync.
    let syncs = sqlite.durability().wal_syncs;
    assert!(store.get("seq-000").await.expect("get").is_some());
    assert_eq!(sqlite.durability().wal_syncs, syncs);
}
