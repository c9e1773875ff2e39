//! CHECK constraints as comparisons: migration 25 rewrites, in the schema's text, the CHECK
//! constraints that listed their values with `IN (...)`.
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

/// The migration that rewrites the constraints ([`rewrite`] runs after its SQL).
pub(super) const VERSION: i64 = 25;

/// Each table's constraint as the migrations wrote it, and the same condition as comparisons.
const REWRITES: [(&str, &str, &str); 3] = [
    (
        "links",
        "CHECK (kind IN ('generated', 'private', 'alias'))",
        "CHECK (kind = 'generated' OR kind = 'private' OR kind = 'alias')",
    ),
    (
        "link_events",
        "CHECK (kind IN ('update', 'disable', 'enable', 'delete'))",
        "CHECK (kind = 'update' OR kind = 'disable' OR kind = 'enable' OR kind = 'delete')",
    ),
    (
        "webhook_deliveries",
        "CHECK (state IN ('pending', 'delivered'))",
        "CHECK (state = 'pending' OR state = 'delivered')",
    ),
];

/// Rewrites [`REWRITES`] in the schema of `tx` (inside the migration's transaction). A table
/// whose text does not hold its constraint exactly once is left as it is: it was made some
/// other way, and the constraint it has is still in force.
pub(super) fn rewrite(tx: &Connection) -> Result<(), StoreError> {
    let version: i64 = tx
        .query_row("PRAGMA schema_version", [], |r| r.get(0))
        .map_err(db_error)?;
    tx.execute_batch("PRAGMA writable_schema = ON")
        .map_err(db_error)?;
    let rewritten = rewrite_tables(tx);
    // Raised whatever happened (an error rolls the whole migration back): every connection
    // reads the schema again before its next statement runs.
    let done = tx
        .execute_batch(&format!(
            "PRAGMA schema_version = {}; PRAGMA writable_schema = OFF",
            version + 1
        ))
        .map_err(db_error);
    rewritten?;
    done
}

fn rewrite_tables(tx: &Connection) -> Result<(), StoreError> {
    for (table, listed, compared) in REWRITES {
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
            [table, &sql.replace(listed, compared)],
        )
        .map_err(db_error)?;
    }
    Ok(())
}
