//! The code space an embedded file's generated rows were made in, recorded on first use and
//! checked at every start.

use super::convert::db_error;
use crate::store::StoreError;
use codespace::CodeSpace;
use rusqlite::{Connection, OptionalExtension, params};

/// Records the file's code space on first use and refuses another one later. Generated rows
/// are found by decoding their code, so only the key and base length that made them find them;
/// under another key a new ID's code could also equal an old row's code.
///
/// On first use (a file from before migration 4, or a new one) every generated row is checked
/// against the configured code space, one encode per row, once. Rows it did not make (a key or
/// length changed in the file's past) are moved to the named placement, where their code is
/// indexed and still found. If it made none of them, the node is most likely configured with
/// the wrong key, and the file is refused instead.
pub(super) fn check_code_space(conn: &Connection, space: &CodeSpace) -> Result<(), StoreError> {
    let length = space.length() as i64;
    let recorded: Option<(String, i64)> = conn
        .query_row(
            "SELECT fingerprint, length FROM code_space WHERE only = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db_error)?;
    if let Some((fingerprint, recorded_length)) = recorded {
        if fingerprint == space.fingerprint() && recorded_length == length {
            return Ok(());
        }
        return Err(StoreError::Internal(format!(
            "this database's generated links were made with the code key of fingerprint {fingerprint} \
             and code length {recorded_length}, but the node is configured with fingerprint {} and \
             length {length}; start it with the original key (the data directory's code.key unless \
             SHORTENER_KEY or SHORTENER_KEY_FILE was set) and length",
            space.fingerprint()
        )));
    }
    let started = std::time::Instant::now();
    let (mut placed, mut misplaced) = (0u64, Vec::new());
    {
        let mut rows = conn
            .prepare("SELECT slot, code FROM links WHERE slot >= 0")
            .map_err(db_error)?;
        let mut rows = rows.query([]).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            let slot: i64 = row.get(0).map_err(db_error)?;
            let code: String = row.get(1).map_err(db_error)?;
            if space.encode(slot as u64) == code {
                placed += 1;
            } else {
                misplaced.push((slot, code));
            }
        }
    }
    if placed == 0 && !misplaced.is_empty() {
        return Err(StoreError::Internal(format!(
            "none of the {} generated links in this database (e.g. {:?}) was made with the \
             configured code key (fingerprint {}) and length {length}; start the node with the key \
             and length that made them",
            misplaced.len(),
            misplaced[0].1,
            space.fingerprint()
        )));
    }
    for (slot, _) in &misplaced {
        conn.execute(
            "UPDATE links SET slot = (SELECT min(0, coalesce(min(slot), 0)) - 1 FROM links), id = NULL \
             WHERE slot = ?1",
            [slot],
        )
        .map_err(db_error)?;
    }
    tracing::info!(
        generated = placed,
        moved = misplaced.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        fingerprint = %space.fingerprint(),
        length,
        "recorded the code space of the embedded database"
    );
    conn.execute(
        "INSERT INTO code_space (only, fingerprint, length) VALUES (1, ?1, ?2)",
        params![space.fingerprint(), length],
    )
    .map_err(db_error)?;
    Ok(())
}
