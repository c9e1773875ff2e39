//! CHECK constraints as comparisons: migration 25 rewrites, in the schema's text, the CHECK
//! constraints that listed their values with `IN (...)`; migration 28 widens one of them (a
//! delivery may end `failed`) the same way.
//!
//! SQLite codes a CHECK's `IN` list of three or more values as a temporary B-tree built for
//! every row an INSERT or UPDATE writes (an `OpenEphemeral`: a B-tree, its page cache and the
//! list's values, ~11,000 instructions per created link, about a tenth of the writer thread's
//! work for it); a chain of `=` joined by `OR` allows the same values and builds nothing. SQLite
//! cannot alter a constraint, but a change that leaves every stored row valid and every page as it
//! is may be made in `sqlite_schema` itself, in one transaction with the schema version raised,
//! as SQLite's documentation describes for changing CHECK constraints ("ALTER TABLE", making
//! other kinds of table schema changes).

use super::db_error;
use crate::store::StoreError;
use rusqlite::{Connection, OptionalExtension};

/// The migrations that rewrite constraints ([`rewrite`] runs after their SQL).
pub(super) const VERSIONS: [i64; 2] = [25, 28];

/// The migration each rewrite belongs to, its table, its constraint as the schema holds it
/// before, and after.
const REWRITES: [(i64, &str, &str, &str); 5] = [
    (
        25,
        "links",
        "CHECK (kind IN ('generated', 'private', 'alias'))",
        "CHECK (kind = 'generated' OR kind = 'private' OR kind = 'alias')",
    ),
    (
        25,
        "link_events",
        "CHECK (kind IN ('update', 'disable', 'enable', 'delete'))",
        "CHECK (kind = 'update' OR kind = 'disable' OR kind = 'enable' OR kind = 'delete')",
    ),
    (
        25,
        "webhook_deliveries",
        "CHECK (state IN ('pending', 'delivered'))",
        "CHECK (state = 'pending' OR state = 'delivered')",
    ),
    // Widening a CHECK leaves every stored row valid. From the text migration 25 wrote, or
    // from the one it found (a table whose text it did not rewrite).
    (
        28,
        "webhook_deliveries",
        "CHECK (state = 'pending' OR state = 'delivered')",
        "CHECK (state = 'pending' OR state = 'delivered' OR state = 'failed')",
    ),
    (
        28,
        "webhook_deliveries",
        "CHECK (state IN ('pending', 'delivered'))",
        "CHECK (state = 'pending' OR state = 'delivered' OR state = 'failed')",
    ),
];

/// Rewrites the [`REWRITES`] of migration `version` in the schema of `tx` (inside the
/// migration's transaction). A table
/// whose text does not hold its constraint exactly once is left as it is: it was made some
/// other way, and the constraint it has is still in force.
pub(super) fn rewrite(tx: &Connection, version: i64) -> Result<(), StoreError> {
    let schema: i64 = tx
        .query_row("PRAGMA schema_version", [], |r| r.get(0))
        .map_err(db_error)?;
    tx.execute_batch("PRAGMA writable_schema = ON")
        .map_err(db_error)?;
    let rewritten = rewrite_tables(tx, version);
    // Raised whatever happened (an error rolls the whole migration back): every connection
    // reads the schema again before its next statement runs.
    let done = tx
        .execute_batch(&format!(
            "PRAGMA schema_version = {}; PRAGMA writable_schema = OFF",
            schema + 1
        ))
        .map_err(db_error);
    rewritten?;
    done
}

fn rewrite_tables(tx: &Connection, version: i64) -> Result<(), StoreError> {
    for (_, table, listed, compared) in REWRITES.iter().filter(|r| r.0 == version) {
        let sql: Option<String> = tx
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_error)?;
        let Some(sql) = sql.filter(|sql| sql.matches(listed).count() == 1) else {
            continue;
        };
        tx.execute(
            "UPDATE sqlite_schema SET sql = ?2 WHERE type = 'table' AND name = ?1",
            [*table, &sql.replace(listed, compared)],
        )
        .map_err(db_error)?;
    }
    Ok(())
}
