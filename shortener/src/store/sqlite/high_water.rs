//! The high-water mark of an embedded file's slots, read at start (docs/design.md, I9).
//!
//! A code that decodes is found at the rowid of the ID it decodes to, or, for a row without an
//! ID (an imported legacy code, a row another code key made), in the named-code index. The mark
//! covers both: the highest rowid (one step down the table's B-tree), and the highest ID a
//! named row's code decodes to, which `named_high_water` keeps for the named rows down to the
//! lowest slot it has seen. Named slots only go down, so a start decodes only the named rows
//! added since the last one (all of them the first time). The same pass notes whether a named
//! row holds a code of generated shape that decodes to no ID ([`undecodable`]). While the node
//! runs, the writer raises the mark in memory for every row it writes, before the row commits.

use super::convert::db_error;
use crate::store::{Mark, StoreError, undecodable};
use codespace::CodeSpace;
use rusqlite::{Connection, OptionalExtension, params};

/// The highest ID any row's code decodes to in `space` (`-1` for none), and whether a named row
/// holds a code of generated shape that decodes to no ID ([`undecodable`]), bringing
/// `named_high_water` up to date with the named rows added since it was last written. Run on
/// the writer connection, inside the migration's transaction, so no row is written meanwhile.
pub(super) fn load(conn: &Connection, space: &CodeSpace) -> Result<Mark, StoreError> {
    let (lowest, mut high, mut undecodable_seen, undecodable_lowest): (i64, i64, bool, i64) = conn
        .query_row(
            "SELECT lowest, high, undecodable, undecodable_lowest FROM named_high_water \
             WHERE only = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(db_error)?
        .unwrap_or((0, -1, false, 0));
    // The rows neither summary has looked at: below the higher of the two marks (a release
    // without the flag moves `lowest` alone). Folding a row into `high` twice is harmless.
    let lowest = lowest.max(undecodable_lowest);
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
            } else if undecodable(space, &code) {
                undecodable_seen = true;
            }
        }
    }
    conn.execute(
        "INSERT INTO named_high_water (only, lowest, high, undecodable, undecodable_lowest) \
         VALUES (1, ?1, ?2, ?3, ?1) ON CONFLICT (only) DO UPDATE SET lowest = excluded.lowest, \
         high = excluded.high, undecodable = excluded.undecodable, \
         undecodable_lowest = excluded.undecodable_lowest",
        params![new_lowest, high, undecodable_seen],
    )
    .map_err(db_error)?;
    let generated: i64 = conn
        .query_row("SELECT coalesce(max(slot), -1) FROM links", [], |r| {
            r.get(0)
        })
        .map_err(db_error)?;
    Ok(Mark {
        slot: generated.max(high),
        undecodable: undecodable_seen,
    })
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
             CREATE TABLE named_high_water (only INTEGER PRIMARY KEY, lowest INTEGER NOT NULL, high INTEGER NOT NULL, undecodable INTEGER NOT NULL DEFAULT 0, undecodable_lowest INTEGER NOT NULL DEFAULT 0);",
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

    /// An eleven-character code of generated shape that decodes to no ID in `space`.
    fn an_undecodable_code(space: &CodeSpace) -> String {
        (0..)
            .map(|n: u64| format!("zz{n:09}"))
            .find(|code| undecodable(space, code))
            .expect("an eleven-character code that decodes to no ID")
    }

    fn slot(conn: &Connection, space: &CodeSpace) -> i64 {
        load(conn, space).expect("load").slot
    }

    /// The mark covers generated rows and every named code that decodes, also one added after
    /// the summary was written (as a release without it would add), and never an alias.
    #[test]
    fn the_mark_covers_generated_rows_and_named_codes_added_since_the_last_start() {
        let space = CodeSpace::new(&CodeKey::generate(), DEFAULT_LENGTH).expect("space");
        let (_dir, conn) = file();
        assert_eq!(slot(&conn, &space), -1);
        conn.execute(
            "INSERT INTO links (slot, code) VALUES (5, ?1)",
            [space.encode(5)],
        )
        .expect("generated");
        named(&conn, "an-alias");
        assert_eq!(slot(&conn, &space), 5, "generated only");
        named(&conn, &space.encode(9_000));
        assert_eq!(slot(&conn, &space), 9_000, "a legacy code");
        named(&conn, &space.encode(7_000));
        named(&conn, "another_alias");
        assert_eq!(slot(&conn, &space), 9_000, "a lower one");
        let lowest: i64 = conn
            .query_row("SELECT lowest FROM named_high_water", [], |r| r.get(0))
            .expect("summary");
        assert_eq!(lowest, -4, "every named row is summarised");
        named(&conn, &space.encode(123_456));
        assert_eq!(slot(&conn, &space), 123_456, "a higher one");
    }

    /// Aliases, private codes and legacy codes that decode leave the mark saying no named row
    /// holds an undecodable code; the first that does says so from then on, at every start.
    #[test]
    fn a_named_code_of_generated_shape_that_decodes_to_no_id_is_noted_and_kept() {
        let space = CodeSpace::new(&CodeKey::generate(), DEFAULT_LENGTH).expect("space");
        let (_dir, conn) = file();
        named(&conn, "promo");
        named(&conn, "an-alias");
        named(&conn, &codespace::shape::generate_private_code());
        named(&conn, &space.encode(62u64.pow(7) + 5));
        assert!(!load(&conn, &space).expect("load").undecodable);
        let eleven = an_undecodable_code(&space);
        named(&conn, &eleven);
        assert!(load(&conn, &space).expect("load").undecodable);
        assert!(
            load(&conn, &space).expect("load").undecodable,
            "kept once the rows are summarised"
        );
    }

    /// A release without the flag moves `lowest` past the rows it adds without looking at them
    /// for it; the next start of this one looks at them all the same.
    #[test]
    fn rows_an_older_release_summarised_are_looked_at_for_the_flag() {
        let space = CodeSpace::new(&CodeKey::generate(), DEFAULT_LENGTH).expect("space");
        let (_dir, conn) = file();
        named(&conn, "promo");
        assert!(!load(&conn, &space).expect("load").undecodable);
        let eleven = an_undecodable_code(&space);
        named(&conn, &eleven);
        // What an older release's start writes: `lowest` down to the new row, nothing else.
        conn.execute(
            "UPDATE named_high_water SET lowest = (SELECT min(slot) FROM links)",
            [],
        )
        .expect("an older start");
        assert!(load(&conn, &space).expect("load").undecodable);
    }
}
