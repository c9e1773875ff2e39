//! The embedded file's CHECK constraints are comparisons, not `IN` lists: an insert builds no
//! temporary B-tree for them, and they refuse what they refused before.

use super::{fresh_embedded, link};
use shortener::store::{Capabilities, InsertOutcome, LinkStore, Store};

/// The opcodes of `sql` (one parameter) as the connection compiles it.
fn opcodes(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).expect("explain");
    explain
        .query_map(["x"], |r| r.get::<_, String>(1))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("opcodes")
}

#[tokio::test]
async fn embedded_checks_build_no_temporary_table_and_still_refuse_bad_values() {
    let (dir, sqlite) = fresh_embedded().await;
    assert_eq!(sqlite.migrate().await.expect("migrate again"), 0);
    let store = Store::Sqlite(sqlite);
    let outcomes = store
        .insert_many(vec![link("kept-alias", "https://example.com/kept", None)])
        .await
        .expect("insert");
    assert!(matches!(&outcomes[0], InsertOutcome::Created(_)));
    drop(store);

    let conn = rusqlite::Connection::open(dir.path().join("links.db")).expect("inspect");
    for (table, insert) in [
        (
            "links",
            "INSERT INTO links (slot, code, long_url, kind, id, created_at, owner, tenant, host_rev) \
             VALUES (-100, 'x', 'https://example.com/', ?1, NULL, 0, 'o', 'default', '')",
        ),
        (
            "link_events",
            "INSERT INTO link_events (code, at, key, kind, change) VALUES ('x', 0, 'k', ?1, '{}')",
        ),
    ] {
        let ops = opcodes(&conn, insert);
        assert!(
            !ops.iter().any(|op| op == "OpenEphemeral"),
            "an insert into {table} builds a temporary table: {ops:?}"
        );
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .expect("schema");
        assert!(!sql.contains(" IN ("), "{table}: {sql}");
        // Still refused: a value the constraint does not name, in any case.
        for bad in ["other", "ALIAS", "Update", ""] {
            let refused = conn.execute(insert, [bad]).expect_err(bad).to_string();
            assert!(
                refused.contains("CHECK constraint failed"),
                "{table} {bad}: {refused}"
            );
        }
    }
    let fine = conn.execute(
        "INSERT INTO link_events (code, at, key, kind, change) VALUES ('x', 0, 'k', 'delete', '{}')",
        [],
    );
    assert_eq!(fine.expect("a named value"), 1);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity check");
    assert_eq!(check, "ok");
    let kept: String = conn
        .query_row(
            "SELECT long_url FROM links WHERE code = 'kept-alias'",
            [],
            |r| r.get(0),
        )
        .expect("the alias");
    assert_eq!(kept, "https://example.com/kept");
}
