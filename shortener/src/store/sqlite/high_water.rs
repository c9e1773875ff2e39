//! The high-water mark of an embedded file's slots, read at start (docs/design.md, I9).
//!
//! A code that decodes is found at the rowid of the ID it decodes to, or, for a row without an
//! ID (an imported legacy code, a row another code key made), in the named-code index. The mark
//! covers both: the highest rowid (one step down the table's B-tree), and the highest ID a
//! named row's code decodes to, which `named_high_water` keeps for the named rows down to the
//! lowest slot it has seen. Named slots only go down, so a start decodes only the named rows
//! added since the last one (all of them the first time). While the node runs, the writer
//! raises the mark in memory for every row it writes, before the row commits.

use super::convert::db_error;
use crate::store::StoreError;
use codespace::CodeSpace;
use rusqlite::{Connection, OptionalExtension, params};

/// The highest ID any row's code decodes to in `space` (`-1` for none), bringing
/// `named_high_water` up to date with the named rows added since it was last written. Run on
/// the writer connection, inside the migration's transaction, so no row is written meanwhile.
pub(super) fn load(conn: &Connection, space: &CodeSpace) -> Result<i64, StoreError> {
    let (lowest, mut high): (i64, i64) = conn
        .query_row(
            "SELECT lowest, high FROM named_high_water WHERE only = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db_error)?
        .unwrap_or((0, -1));
    let mut new_lowest = lowest;
    {
        let mut rows = conn
            .prepare("SELECT slot, code FROM links WHERE slot < ?1")
            .map_err(db_error)?;
        let mut rows = rows.query([lowest]).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            let slot: i64 = row.get(0).map_err(db_error)?;
            let code: String = row.get(1).map_err(db_error)?;
            new_lowest = new_lowest.min(slot);
            if let Some(decoded) = space
                .decode(&code)
                .ok()
                .and_then(|id| i64::try_from(id).ok())
            {
                high = high.max(decoded);
            }
        }
    }
    conn.execute(
        "INSERT INTO named_high_water (only, lowest, high) VALUES (1, ?1, ?2) \
         ON CONFLICT (only) DO UPDATE SET lowest = excluded.lowest, high = excluded.high",
        params![new_lowest, high],
    )
    .map_err(db_error)?;
    let generated: i64 = conn
        .query_row("SELECT coalesce(max(slot), -1) FROM links", [], |r| {
            r.get(0)
        })
        .map_err(db_error)?;
    Ok(generated.max(high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use codespace::{CodeKey, DEFAULT_LENGTH};

    fn file() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(dir.path().join("h.db")).expect("open");
        conn.execute_batch(
            "CREATE TABLE links (slot INTEGER PRIMARY KEY, code TEXT NOT NULL);
             CREATE TABLE named_high_water (only INTEGER PRIMARY KEY, lowest INTEGER NOT NULL, high INTEGER NOT NULL);",
        )
        .expect("schema");
        (dir, conn)
    }

    fn named(conn: &Connection, code: &str) {
        conn.execute(
            "INSERT INTO links (slot, code) VALUES ((SELECT min(0, coalesce(min(slot), 0)) - 1 FROM links), ?1)",
            [code],
        )
        .expect("named row");
    }

    /// The mark covers generated rows and every named code that decodes, also one added after
    /// the summary was written (as a release without it would add), and never an alias.
    #[test]
    fn the_mark_covers_generated_rows_and_named_codes_added_since_the_last_start() {
        let space = CodeSpace::new(&CodeKey::generate(), DEFAULT_LENGTH).expect("space");
        let (_dir, conn) = file();
        assert_eq!(load(&conn, &space).expect("empty"), -1);
        conn.execute(
            "INSERT INTO links (slot, code) VALUES (5, ?1)",
            [space.encode(5)],
        )
        .expect("generated");
        named(&conn, "an-alias");
        assert_eq!(load(&conn, &space).expect("generated only"), 5);
        named(&conn, &space.encode(9_000));
        assert_eq!(load(&conn, &space).expect("a legacy code"), 9_000);
        named(&conn, &space.encode(7_000));
        named(&conn, "another_alias");
        assert_eq!(load(&conn, &space).expect("a lower one"), 9_000);
        let lowest: i64 = conn
            .query_row("SELECT lowest FROM named_high_water", [], |r| r.get(0))
            .expect("summary");
        assert_eq!(lowest, -4, "every named row is summarised");
        named(&conn, &space.encode(123_456));
        assert_eq!(load(&conn, &space).expect("a higher one"), 123_456);
    }
}
