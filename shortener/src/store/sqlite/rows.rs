//! Rows of the links table on one SQLite connection: where a code's row is placed, inserts,
//! lookups, and click counts. Plain functions over a connection, run on the writer thread or a
//! read connection by the store.
//!
//! A row with an ID (a generated code) sits at the rowid of that ID (`slot = id`); a row
//! without one (an alias or private code) sits below zero, with its code in the named-code
//! index. A code is checked against the other placement before it is inserted, so it is unique
//! across both.
//!
//! One file because every insert and lookup here depends on that placement rule: splitting
//! them would spread one invariant over several files.

use super::convert::{db_error, from_millis, millis};
use crate::domain::{ClickCounts, CompactCode, Link, PasswordHash};
use crate::store::{
    BatchMark, HighWater, InsertOutcome, NewLink, StoreError, host_rev, kind_name, undecodable,
};
use chrono::Utc;
use codespace::CodeSpace;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

/// The columns every read of a link selects, in the order [`link_from_row`] reads them.
pub(super) const COLUMNS: &str = "code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing";
/// How many columns [`COLUMNS`] holds (click counts follow them where a read joins them).
pub(super) const COLUMN_COUNT: usize = 14;

/// A link from a row holding [`COLUMNS`] first.
pub(super) fn link_from_row(row: &Row<'_>) -> rusqlite::Result<Link> {
    // Read in place: most links have no tags, and then there is nothing to copy or parse.
    let tags = row.get_ref(9)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(9, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(Link {
        code: row.get(0)?,
        url: row.get(1)?,
        created_at: from_millis(row.get(2)?),
        expires_at: row.get::<_, Option<i64>>(3)?.map(from_millis),
        deleted_at: row.get::<_, Option<i64>>(4)?.map(from_millis),
        tenant: row.get(5)?,
        owner: row.get(6)?,
        disabled_at: row.get::<_, Option<i64>>(7)?.map(from_millis),
        max_visits: row.get::<_, Option<i64>>(8)?.map(|n| n.max(0) as u64),
        tags: if tags == "[]" {
            Vec::new()
        } else {
            serde_json::from_str(tags).unwrap_or_default()
        },
        import_batch: row.get(10)?,
        password: row
            .get::<_, Option<String>>(11)?
            .map(PasswordHash::from_stored),
        domain: row.get(12)?,
        routes: crate::domain::Routes::from_stored(row.get::<_, Option<String>>(13)?.as_deref()),
        clicks: ClickCounts::default(),
    })
}

/// A link and the click counts that follow its columns in `row`.
pub(super) fn link_with_clicks(row: &Row<'_>) -> rusqlite::Result<Link> {
    let mut link = link_from_row(row)?;
    let count = |i: usize| -> rusqlite::Result<u64> {
        Ok(row
            .get::<_, Option<i64>>(COLUMN_COUNT + i)?
            .unwrap_or(0)
            .max(0) as u64)
    };
    link.clicks = ClickCounts {
        human: count(0)?,
        head: count(1)?,
        bot: count(2)?,
    };
    Ok(link)
}

/// The rowid of the generated row `code` would be, if it can be a generated code.
pub(super) fn slot(space: &CodeSpace, code: &str) -> Option<i64> {
    space
        .decode(code)
        .ok()
        .and_then(|id| i64::try_from(id).ok())
}

// Statements are constants so `prepare_cached` finds them without formatting a string, and
// SQLite parses each once per connection.
const INSERT_GENERATED: &str = "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key, tenant, tags, max_visits, host_rev, import_batch, password_hash, domain, routing) \
     VALUES (?4, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT DO NOTHING";
/// The next free negative slot: one below the lowest (`min(slot)` reads one end of the table).
const INSERT_NAMED: &str = "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key, tenant, tags, max_visits, host_rev, import_batch, password_hash, domain, routing) \
     VALUES ((SELECT min(0, coalesce(min(slot), 0)) - 1 FROM links), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT DO NOTHING";
const INSERT_TAG: &str = "INSERT INTO link_tags (tenant, tag, created_at, code) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING";
const SELECT_BY_SLOT: &str = "SELECT code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing FROM links WHERE slot = ?1 AND code = ?2";
const SELECT_NAMED: &str = "SELECT code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing FROM links WHERE code = ?1 AND id IS NULL";
const SLOT_BY_SLOT: &str = "SELECT slot FROM links WHERE slot = ?1 AND code = ?2";
const SLOT_NAMED: &str = "SELECT slot FROM links WHERE code = ?1 AND id IS NULL";
const SELECT_BY_DEDUP: &str = "SELECT code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing FROM links WHERE dedup_key = ?1";

/// Inserts `links` in one immediate transaction; outcomes in input order.
pub(super) fn insert_all(
    conn: &mut Connection,
    space: &CodeSpace,
    high_water: &HighWater,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let now = millis(Utc::now());
    let outcomes = links
        .iter()
        .map(|link| insert_row(&tx, space, high_water, link, now))
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().map_err(db_error)?;
    Ok(outcomes)
}

/// WAL pages past which the commit of a bulk write ([`insert_bulk`]) checkpoints them into the
/// file, instead of SQLite's 1000.
const BULK_AUTOCHECKPOINT: i64 = 10_000;

/// Inserts `links` as [`insert_all`] does, for a bulk write (a chunk of an import), whose
/// commit checkpoints the WAL only past [`BULK_AUTOCHECKPOINT`] pages.
///
/// An import's codeless rows carry random dedup keys, so every chunk rewrites pages all over the
/// dedup index. A checkpoint copies each page once however many commits rewrote it since the
/// last one; every 1000 pages it copied (and fsynced) those pages again nearly every chunk.
/// Creates keep SQLite's interval: a larger checkpoint inside a create's commit is what sets
/// their tail latency (docs/benchmarks.md, "Tried and not kept"). So the first other commit
/// after bulk writes checkpoints what they left, once.
pub(super) fn insert_bulk(
    conn: &mut Connection,
    space: &CodeSpace,
    high_water: &HighWater,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let usual: i64 = conn
        .pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
        .map_err(db_error)?;
    conn.pragma_update(None, "wal_autocheckpoint", BULK_AUTOCHECKPOINT)
        .map_err(db_error)?;
    let bulk = UsualCheckpoints { conn, usual };
    insert_all(&mut *bulk.conn, space, high_water, links)
}

/// Puts the connection's checkpoint interval back when dropped, a panic's unwinding included.
struct UsualCheckpoints<'c> {
    conn: &'c mut Connection,
    usual: i64,
}

impl Drop for UsualCheckpoints<'_> {
    fn drop(&mut self) {
        if let Err(error) = self
            .conn
            .pragma_update(None, "wal_autocheckpoint", self.usual)
        {
            tracing::error!(%error, "could not restore the writer's checkpoint interval");
        }
    }
}

/// Inserts one row unless its code (or dedup key) is taken: `Created`, `Deduplicated` (the
/// live twin) or `CodeTaken`. A row with an ID must carry the code the file's code space gives
/// that ID, as the service makes it.
///
/// A row whose code decodes raises `high_water` to the ID it decodes to before the transaction
/// commits, so no redirect that arrives after the write is acknowledged finds the mark below
/// it (docs/design.md, I9).
pub(super) fn insert_row(
    conn: &Connection,
    space: &CodeSpace,
    high_water: &HighWater,
    link: &NewLink,
    now: i64,
) -> Result<InsertOutcome, StoreError> {
    let id = link
        .id
        .map(|id| {
            i64::try_from(id).map_err(|_| StoreError::Internal(format!("ID {id} out of range")))
        })
        .transpose()?;
    debug_assert!(
        id.is_none() || slot(space, &link.code) == id,
        "code {:?} is not the code of ID {:?}",
        link.code,
        link.id
    );
    // The ID the code decodes to: a generated row's own, or what a named code spells.
    let decoded = id.or_else(|| slot(space, &link.code));
    let taken_elsewhere = match id {
        Some(_) => named_slot(conn, &link.code)?.is_some(),
        None => slot_holding(conn, decoded, &link.code)?.is_some(),
    };
    let created_at = link.created_at.map_or(now, millis);
    let tags = serde_json::to_string(&link.tags).unwrap_or_else(|_| "[]".into());
    let inserted = if taken_elsewhere {
        0
    } else {
        let mut insert = conn
            .prepare_cached(if id.is_some() {
                INSERT_GENERATED
            } else {
                INSERT_NAMED
            })
            .map_err(db_error)?;
        insert
            .execute(params![
                link.code,
                link.url,
                kind_name(link.kind),
                id,
                created_at,
                link.expires_at.map(millis),
                link.owner,
                link.dedup_key,
                link.tenant,
                tags,
                link.max_visits.map(|n| n as i64),
                host_rev(&link.url),
                link.import_batch,
                link.password.as_ref().map(PasswordHash::as_stored),
                link.domain,
                link.routes.to_stored()
            ])
            .map_err(db_error)?
    };
    if let (1, Some(decoded)) = (inserted, decoded) {
        high_water.raise(decoded);
    } else if inserted == 1 && undecodable(space, &link.code) {
        high_water.note_undecodable();
    }
    if inserted == 1 && !link.tags.is_empty() {
        let mut insert = conn.prepare_cached(INSERT_TAG).map_err(db_error)?;
        for tag in &link.tags {
            insert
                .execute(params![link.tenant, tag, created_at, link.code])
                .map_err(db_error)?;
        }
    }
    if let (1, Some(entry)) = (inserted, &link.audit) {
        // The create's own entry: its code was decoded above.
        let slot = super::audit::entry_slot(space, entry, Some((&link.code, decoded)));
        super::audit::append_one(conn, entry, now, slot)?;
    }
    Ok(match inserted {
        // The row is exactly what was written; no need to read it back.
        1 => InsertOutcome::Created(created(
            conn,
            link.trace.as_deref(),
            Link {
                code: link.code.clone(),
                domain: link.domain.clone(),
                routes: link.routes.clone(),
                tenant: link.tenant.clone(),
                owner: link.owner.clone(),
                url: link.url.clone(),
                created_at: from_millis(created_at),
                expires_at: link.expires_at.map(|t| from_millis(millis(t))),
                deleted_at: None,
                disabled_at: None,
                max_visits: link.max_visits,
                tags: link.tags.clone(),
                import_batch: link.import_batch,
                password: link.password.clone(),
                clicks: ClickCounts::default(),
            },
        )?),
        _ => match link
            .dedup_key
            .as_ref()
            .map(|k| find_dedup(conn, k))
            .transpose()?
            .flatten()
        {
            Some(twin) => InsertOutcome::Deduplicated(twin),
            None => InsertOutcome::CodeTaken,
        },
    })
}

/// `link`, once its `link.created` event is recorded (in the insert's transaction).
fn created(conn: &Connection, trace: Option<&str>, link: Link) -> Result<Link, StoreError> {
    super::webhooks::record(
        conn,
        &link.tenant,
        crate::store::webhooks::LINK_CREATED,
        || crate::store::webhooks::link_data(&link),
        trace,
    )?;
    Ok(link)
}

/// The link with `code`, wherever it is placed.
pub(super) fn get_link(
    conn: &Connection,
    space: &CodeSpace,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    if let Some(slot) = slot(space, code) {
        let mut select = conn.prepare_cached(SELECT_BY_SLOT).map_err(db_error)?;
        let found = select
            .query_row(params![slot, code], link_from_row)
            .optional()
            .map_err(db_error)?;
        if found.is_some() {
            return Ok(found);
        }
    }
    let mut select = conn.prepare_cached(SELECT_NAMED).map_err(db_error)?;
    select
        .query_row([code], link_from_row)
        .optional()
        .map_err(db_error)
}

/// The link with `code` and its click counts.
pub(super) fn get_with_clicks(
    conn: &Connection,
    space: &CodeSpace,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    let Some(mut link) = get_link(conn, space, code)? else {
        return Ok(None);
    };
    let counts: Option<(i64, i64, i64)> = conn
        .query_row(
            "SELECT human, head, bot FROM link_clicks WHERE code = ?1",
            [code],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(db_error)?;
    if let Some((human, head, bot)) = counts {
        link.clicks = ClickCounts {
            human: human.max(0) as u64,
            head: head.max(0) as u64,
            bot: bot.max(0) as u64,
        };
    }
    Ok(Some(link))
}

/// The slot of the row holding `code`, wherever it is placed.
pub(super) fn find_slot(
    conn: &Connection,
    space: &CodeSpace,
    code: &str,
) -> Result<Option<i64>, StoreError> {
    match generated_slot(conn, space, code)? {
        Some(slot) => Ok(Some(slot)),
        None => named_slot(conn, code),
    }
}

/// The slot of the generated row holding `code` (at the rowid its code decodes to).
fn generated_slot(
    conn: &Connection,
    space: &CodeSpace,
    code: &str,
) -> Result<Option<i64>, StoreError> {
    slot_holding(conn, slot(space, code), code)
}

/// The slot of the generated row at `slot` if it holds `code`.
fn slot_holding(
    conn: &Connection,
    slot: Option<i64>,
    code: &str,
) -> Result<Option<i64>, StoreError> {
    let Some(slot) = slot else {
        return Ok(None);
    };
    let mut select = conn.prepare_cached(SLOT_BY_SLOT).map_err(db_error)?;
    select
        .query_row(params![slot, code], |r| r.get(0))
        .optional()
        .map_err(db_error)
}

/// The slot of the ID-less row holding `code`.
fn named_slot(conn: &Connection, code: &str) -> Result<Option<i64>, StoreError> {
    let mut select = conn.prepare_cached(SLOT_NAMED).map_err(db_error)?;
    select
        .query_row([code], |r| r.get(0))
        .optional()
        .map_err(db_error)
}

/// The link with `key` as its dedup key, live or not.
pub(super) fn find_dedup(conn: &Connection, key: &[u8]) -> Result<Option<Link>, StoreError> {
    let mut select = conn.prepare_cached(SELECT_BY_DEDUP).map_err(db_error)?;
    select
        .query_row([key], link_from_row)
        .optional()
        .map_err(db_error)
}

/// Adds a chunk of click counts in a transaction of its own, which first advances `mark`'s
/// writer to it: one that is there already (the chunk was sent before, and committed) adds
/// nothing.
pub(super) fn add_clicks(
    conn: &mut Connection,
    mark: BatchMark,
    rows: &[(CompactCode, ClickCounts)],
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    if !advance_mark(&tx, mark)? {
        return tx.commit().map_err(db_error);
    }
    {
        // Most codes already have a row: an UPDATE finds it with one search of the key, where
        // an upsert searches for the conflict and then again to update.
        let mut update = tx
            .prepare_cached(
                "UPDATE link_clicks SET human = human + ?2, head = head + ?3, \
                 bot = bot + ?4 WHERE code = ?1",
            )
            .map_err(db_error)?;
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO link_clicks (code, human, head, bot) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(db_error)?;
        for (code, c) in rows {
            let values = params![code.as_str(), c.human as i64, c.head as i64, c.bot as i64];
            // `BEGIN IMMEDIATE` holds SQLite's write lock for the whole chunk, so no connection
            // can add a code between the UPDATE that missed it and the INSERT.
            if update.execute(values).map_err(db_error)? == 0 {
                insert.execute(values).map_err(db_error)?;
            }
        }
    }
    tx.commit().map_err(db_error)
}

/// Advances `mark`'s writer to it in `tx`: false when the writer is there or past it already
/// (the batch was added before), and the batch must add nothing.
pub(super) fn advance_mark(
    tx: &rusqlite::Transaction<'_>,
    mark: BatchMark,
) -> Result<bool, StoreError> {
    let advanced = tx
        .prepare_cached(
            "INSERT INTO flush_marks (writer, stream, seq, at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (writer, stream) DO UPDATE SET seq = excluded.seq, at = excluded.at \
             WHERE flush_marks.seq < excluded.seq",
        )
        .and_then(|mut s| {
            s.execute(params![
                mark.writer,
                mark.stream.stored(),
                mark.seq,
                millis(Utc::now())
            ])
        })
        .map_err(db_error)?;
    Ok(advanced == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use codespace::shape::CodeKind;

    fn interval(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
            .expect("read the interval")
    }

    /// A bulk write gives the connection back with the checkpoint interval it had, whether its
    /// insert succeeded or failed.
    #[test]
    fn a_bulk_write_puts_the_checkpoint_interval_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut conn = Connection::open(dir.path().join("b.db")).expect("open");
        conn.pragma_update(None, "wal_autocheckpoint", 777)
            .expect("set");
        let space = CodeSpace::new(&codespace::CodeKey::generate(), codespace::DEFAULT_LENGTH)
            .expect("space");
        assert!(
            insert_bulk(&mut conn, &space, &HighWater::unknown(), &[])
                .expect("nothing to insert")
                .is_empty()
        );
        assert_eq!(interval(&conn), 777);
        let link = NewLink {
            import_batch: Some(1),
            ..NewLink::plain(
                "legacy-1".into(),
                "https://example.com/".into(),
                CodeKind::Alias,
                None,
                "default",
                "ci",
            )
        };
        // No links table in this file: the insert fails.
        assert!(insert_bulk(&mut conn, &space, &HighWater::unknown(), &[link]).is_err());
        assert_eq!(interval(&conn), 777);
        assert!(conn.is_autocommit(), "the failed insert was rolled back");
    }
}
