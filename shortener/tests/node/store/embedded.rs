//! The embedded file's layout: generated links at the rowid of their ID, named codes in an
//! index, one code space per file, and migrations that keep every link.

use super::{link, open_migrated};
use chrono::Utc;
use codespace::shape::CodeKind;
use codespace::{CodeKey, CodeSpace};
use shortener::domain::{ListInput, ListQuery};
use shortener::store::{Capabilities, InsertOutcome, LinkStore, sqlite_migrations_after};

/// A schema-version-2 file made with `key`: three generated links (IDs 7, 8 and 9, one
/// deduplicated, one deleted), an alias, a row at a negative rowid, a generated row without an
/// ID, and a click count. Returns the generated codes.
fn schema_2_file(path: &std::path::Path, key: &CodeKey) -> [String; 3] {
    let space = CodeSpace::new(key, codespace::DEFAULT_LENGTH).expect("space");
    let codes = [7, 8, 9].map(|id| space.encode(id));
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.execute_batch(
        "CREATE TABLE shortener_schema_migrations (version INTEGER PRIMARY KEY, \
         name TEXT NOT NULL, applied_at INTEGER NOT NULL); \
         INSERT INTO shortener_schema_migrations VALUES (1, 'links', 0), (2, 'clicks', 0);",
    )
    .expect("version table");
    conn.execute_batch(include_str!("../../../migrations/sqlite/0001_links.sql"))
        .expect("schema 1");
    conn.execute_batch(include_str!("../../../migrations/sqlite/0002_clicks.sql"))
        .expect("schema 2");
    conn.execute(
        "INSERT INTO links (code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key) VALUES \
         (?1, 'https://example.com/g', 'generated', 7, 1000, NULL, NULL, 'o', NULL), \
         (?2, 'https://example.com/d', 'generated', 8, 2000, NULL, NULL, 'o', x'0102'), \
         ('my-alias', 'https://example.com/a', 'alias', NULL, 3000, 4102444800000, NULL, 'o', NULL), \
         (?3, 'https://example.com/x', 'generated', 9, 4000, NULL, 5000, 'o', NULL)",
        rusqlite::params![codes[0], codes[1], codes[2]],
    )
    .expect("old rows");
    conn.execute_batch(
        "INSERT INTO links (rowid, code, long_url, kind, id, created_at, owner) VALUES \
         (-5, 'odd-rowid', 'https://example.com/n', 'alias', NULL, 5000, 'o'); \
         INSERT INTO links (code, long_url, kind, id, created_at, owner) VALUES \
         ('legacy_1', 'https://example.com/l', 'generated', NULL, 6000, 'o');",
    )
    .expect("unusual rows");
    conn.execute(
        "INSERT INTO link_clicks (code, human, head, bot) VALUES (?1, 5, 2, 1)",
        [&codes[0]],
    )
    .expect("old clicks");
    codes
}

/// A data directory of schema version 2 keeps every link, click count, deletion and uniqueness
/// rule through migration 3 (the click table clustered by code) and migration 4 (generated
/// links at the rowid of their ID, a code index for the rest only).
#[tokio::test]
async fn an_embedded_file_of_schema_version_2_keeps_its_links_through_the_migrations() {
    use shortener::store::Store;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("links.db");
    let key = CodeKey::generate();
    let [generated, deduplicated, gone] = schema_2_file(&path, &key);

    let (sqlite, ran) = open_migrated(&path, &key, codespace::DEFAULT_LENGTH)
        .await
        .expect("migrate");
    assert_eq!(
        ran,
        sqlite_migrations_after(2),
        "every migration after version 2 runs"
    );
    assert_eq!(sqlite.migrate().await.expect("migrate again"), 0);
    let store = Store::Sqlite(sqlite);
    assert_eq!(store.count_links().await.expect("count"), 6);
    for (code, url) in [
        ("odd-rowid", "https://example.com/n"),
        ("legacy_1", "https://example.com/l"),
    ] {
        assert_eq!(store.get(code).await.expect("get").expect("kept").url, url);
    }
    let alias = store
        .get("my-alias")
        .await
        .expect("get")
        .expect("alias kept");
    assert_eq!(alias.url, "https://example.com/a");
    assert_eq!(
        alias.tenant, "default",
        "links from before tenants belong to the default one"
    );
    assert_eq!(alias.created_at.timestamp_millis(), 3000);
    assert_eq!(
        alias.expires_at.map(|t| t.timestamp_millis()),
        Some(4102444800000)
    );
    let counted = store
        .get_with_clicks(&generated)
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(counted.url, "https://example.com/g");
    assert_eq!(
        (
            counted.clicks.human,
            counted.clicks.head,
            counted.clicks.bot
        ),
        (5, 2, 1),
        "click counts kept"
    );
    let deleted = store.get(&gone).await.expect("get").expect("deleted kept");
    assert_eq!(deleted.deleted_at.map(|t| t.timestamp_millis()), Some(5000));
    // Migration 6 filled in the target host of the rows from before it, which lists filter by.
    let by_host = |host: &str| ListInput {
        host: Some(host.into()),
        limit: Some(100),
        ..Default::default()
    };
    for (host, found) in [("example.com", 6), (".com", 6), ("example.org", 0)] {
        let query = ListQuery::parse(&by_host(host), None, Utc::now()).expect("a query");
        assert_eq!(
            store.list(&query).await.expect("list").links.len(),
            found,
            "{host}"
        );
    }

    // The rules still hold after the migrations: a taken code, a reused generated ID and a live
    // dedup key are refused per row, and rows without a dedup key never collide on it.
    let space = CodeSpace::new(&key, codespace::DEFAULT_LENGTH).expect("space");
    let mut reused_id = link(&space.encode(7), "https://example.com/reused", None);
    reused_id.kind = CodeKind::Generated;
    reused_id.id = Some(7);
    let outcomes = store
        .insert_many(vec![
            link("my-alias", "https://example.com/intruder", None),
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
    assert!(matches!(&outcomes[2], InsertOutcome::Deduplicated(twin) if twin.code == deduplicated));
    assert!(matches!(&outcomes[3], InsertOutcome::Created(_)));
    assert!(matches!(&outcomes[4], InsertOutcome::Created(_)));
    assert_eq!(
        store.get(&generated).await.expect("get").expect("kept").url,
        "https://example.com/g"
    );
    drop(store);

    let conn = rusqlite::Connection::open(&path).expect("inspect");
    assert!(
        conn.prepare("SELECT rowid FROM link_clicks").is_err(),
        "link_clicks is WITHOUT ROWID"
    );
    let placed: Vec<(i64, String)> = conn
        .prepare("SELECT slot, code FROM links ORDER BY slot")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(
        placed,
        vec![
            (-5, "free-2".to_string()),
            (-4, "free-1".to_string()),
            (-3, "legacy_1".to_string()),
            (-2, "my-alias".to_string()),
            (-1, "odd-rowid".to_string()),
            (7, generated),
            (8, deduplicated),
            (9, gone),
        ],
        "generated rows sit at their ID, the rest below zero"
    );
}

/// The file records the code space its generated links were made in. Opening it with another
/// key or another base length is refused before anything is served or written, and a file
/// whose generated rows another key made (all of them) is refused on first use.
#[tokio::test]
async fn an_embedded_file_refuses_a_code_space_other_than_the_one_that_made_its_links() {
    use shortener::store::Store;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("links.db");
    let key = CodeKey::generate();
    let [generated, ..] = schema_2_file(&path, &key);

    let other = CodeKey::generate();
    let refused = open_migrated(&path, &other, codespace::DEFAULT_LENGTH)
        .await
        .err()
        .expect("rows made by another key are refused");
    assert!(
        refused
            .to_string()
            .contains("was made with the configured code key"),
        "{refused}"
    );
    let (sqlite, ran) = open_migrated(&path, &key, codespace::DEFAULT_LENGTH)
        .await
        .expect("migrate");
    assert_eq!(
        ran,
        sqlite_migrations_after(2),
        "the refused start changed nothing"
    );
    drop(sqlite);

    for (key, length, why) in [
        (&other, codespace::DEFAULT_LENGTH, "another key"),
        (&key, codespace::DEFAULT_LENGTH + 1, "another length"),
    ] {
        let refused = open_migrated(&path, key, length).await.err().expect(why);
        let message = refused.to_string();
        assert!(
            message.contains(&key.fingerprint())
                && message.contains("start it with the original key"),
            "{why}: {message}"
        );
    }
    let (sqlite, ran) = open_migrated(&path, &key, codespace::DEFAULT_LENGTH)
        .await
        .expect("migrate");
    assert_eq!(ran, 0);
    let store = Store::Sqlite(sqlite);
    assert_eq!(
        store.get(&generated).await.expect("get").expect("kept").url,
        "https://example.com/g"
    );
}

/// A code is unique across both placements: a row without an ID cannot take a code a generated
/// row holds, nor the reverse; both are found, deleted and counted by their code.
#[tokio::test]
async fn an_embedded_code_is_unique_across_generated_and_named_rows() {
    use shortener::store::{DeleteOutcome, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let key = CodeKey::generate();
    let space = CodeSpace::new(&key, codespace::DEFAULT_LENGTH).expect("space");
    let (sqlite, _) = open_migrated(
        &dir.path().join("links.db"),
        &key,
        codespace::DEFAULT_LENGTH,
    )
    .await
    .expect("migrate");
    let store = Store::Sqlite(sqlite);
    let generated = |id: u64, url: &str| {
        let mut l = link(&space.encode(id), url, None);
        l.kind = CodeKind::Generated;
        l.id = Some(id);
        l
    };

    let first = store
        .insert_many(vec![
            generated(1, "https://example.com/g1"),
            link(&space.encode(2), "https://example.com/named", None),
        ])
        .await
        .expect("plant");
    assert!(matches!(&first[0], InsertOutcome::Created(_)));
    assert!(matches!(&first[1], InsertOutcome::Created(_)));

    let second = store
        .insert_many(vec![
            link(&space.encode(1), "https://example.com/intruder", None),
            generated(2, "https://example.com/intruder"),
            generated(3, "https://example.com/g3"),
        ])
        .await
        .expect("insert");
    assert_eq!(
        second[0],
        InsertOutcome::CodeTaken,
        "a named row cannot take a generated row's code"
    );
    assert_eq!(
        second[1],
        InsertOutcome::CodeTaken,
        "a generated row cannot take a named row's code"
    );
    assert!(matches!(&second[2], InsertOutcome::Created(_)));

    for (code, url) in [
        (space.encode(1), "https://example.com/g1"),
        (space.encode(2), "https://example.com/named"),
        (space.encode(3), "https://example.com/g3"),
    ] {
        assert_eq!(
            store.get(&code).await.expect("get").expect("found").url,
            url
        );
    }
    assert_eq!(store.count_links().await.expect("count"), 3);
    // A code of generated shape that nothing holds, and one of each placement, deleted twice.
    assert!(store.get(&space.encode(4)).await.expect("get").is_none());
    assert_eq!(
        store
            .delete(&space.encode(4), None, "test/ops")
            .await
            .expect("delete"),
        DeleteOutcome::NotFound
    );
    for id in [1, 2] {
        let code = space.encode(id);
        assert_eq!(
            store.delete(&code, None, "test/ops").await.expect("delete"),
            DeleteOutcome::Deleted
        );
        assert_eq!(
            store.delete(&code, None, "test/ops").await.expect("delete"),
            DeleteOutcome::AlreadyDeleted
        );
        let gone = store.get(&code).await.expect("get").expect("kept");
        assert!(gone.deleted_at.is_some(), "{code} is marked deleted");
    }
}

/// A file whose past holds generated links of another code key (or length) keeps them: on
/// first use they move to the named placement and are still found, deleted and unique, while
/// the rows the configured key made stay at their ID.
#[tokio::test]
async fn generated_links_of_an_earlier_code_space_stay_reachable_after_the_migration() {
    use shortener::store::{DeleteOutcome, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("links.db");
    let key = CodeKey::generate();
    let [generated, ..] = schema_2_file(&path, &key);
    let earlier = CodeSpace::new(&CodeKey::generate(), codespace::DEFAULT_LENGTH).expect("space");
    let old_code = earlier.encode(10);
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute(
            "INSERT INTO links (code, long_url, kind, id, created_at, owner) \
             VALUES (?1, 'https://example.com/earlier', 'generated', 10, 7000, 'o')",
            [&old_code],
        )
        .expect("earlier row");

    let (sqlite, ran) = open_migrated(&path, &key, codespace::DEFAULT_LENGTH)
        .await
        .expect("migrate");
    assert_eq!(ran, sqlite_migrations_after(2));
    let store = Store::Sqlite(sqlite);
    assert_eq!(
        store.get(&old_code).await.expect("get").expect("kept").url,
        "https://example.com/earlier"
    );
    assert_eq!(
        store.get(&generated).await.expect("get").expect("kept").url,
        "https://example.com/g"
    );
    let intruder = link(&old_code, "https://example.com/intruder", None);
    assert_eq!(
        store.insert_many(vec![intruder]).await.expect("insert")[0],
        InsertOutcome::CodeTaken
    );
    assert_eq!(
        store
            .delete(&old_code, None, "test/ops")
            .await
            .expect("delete"),
        DeleteOutcome::Deleted
    );
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("inspect");
    let (slot, id): (i64, Option<i64>) = conn
        .query_row(
            "SELECT slot, id FROM links WHERE code = ?1",
            [&old_code],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("moved row");
    assert!(
        slot < 0 && id.is_none(),
        "moved to the named placement: {slot} {id:?}"
    );
    let placed: i64 = conn
        .query_row(
            "SELECT slot FROM links WHERE code = ?1",
            [&generated],
            |r| r.get(0),
        )
        .expect("placed row");
    assert_eq!(placed, 7);
}

/// A row is found by its code only: a row at the slot a code decodes to, holding another code,
/// is neither returned nor deleted for it.
#[tokio::test]
async fn an_embedded_lookup_compares_the_stored_code() {
    use shortener::store::{DeleteOutcome, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("links.db");
    let key = CodeKey::generate();
    let space = CodeSpace::new(&key, codespace::DEFAULT_LENGTH).expect("space");
    let (sqlite, _) = open_migrated(&path, &key, codespace::DEFAULT_LENGTH)
        .await
        .expect("migrate");
    let asked = space.encode(42);
    let other = space.encode(43);
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute(
            "INSERT INTO links (slot, code, long_url, kind, id, created_at, owner) \
             VALUES (42, ?1, 'https://example.com/other', 'generated', 42, 0, 'o')",
            [&other],
        )
        .expect("plant");
    let store = Store::Sqlite(sqlite);
    assert!(store.get(&asked).await.expect("get").is_none());
    assert!(store.get_with_clicks(&asked).await.expect("get").is_none());
    assert_eq!(
        store
            .delete(&asked, None, "test/ops")
            .await
            .expect("delete"),
        DeleteOutcome::NotFound
    );
    assert_eq!(store.count_links().await.expect("count"), 1);
}
