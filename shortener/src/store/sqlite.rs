//! The embedded SQLite backend: one file holds the links and the lease ledger.
//!
//! rusqlite is synchronous, so nothing here runs on the runtime's threads: every write runs on
//! the store's writer thread (`store/sqlite_writer.rs`), which owns the one writer connection
//! (SQLite has one writer at a time anyway), and reads run on the blocking pool. The file runs
//! in WAL mode. Every write returns only after an fsync of the WAL that began after its commit
//! ([`WalSync`], group commit), which is what lets a create be acknowledged (I3) and a lease be
//! trusted (I1); a read returns only what such an fsync already covers.
//!
//! Reads go through a few read-only connections of their own, so a redirect that misses the
//! cache never waits behind a batch of inserts or a click flush. WAL gives each read a snapshot
//! of what was committed when it began, so a read after an acknowledged write sees that write.
//!
//! Generated links are stored at the rowid of their ID (migration 4): a create appends to the
//! end of the table instead of dirtying a random page of a code index, and a lookup decodes the
//! code to find the row. Codes without an ID (aliases, private codes) keep a unique index of
//! their own. The file records the code space (key fingerprint and base length) its generated
//! rows were made in and refuses to open under another, since only that code space finds them.

use super::migrate::{SQLITE, VERSION_TABLE};
use super::sqlite_writer::Writer;
use super::walsync::{Durability, WalSync};
use super::{DeleteOutcome, InsertOutcome, NewLink, StoreError, WriterStats};
use crate::code_map_key::CodeMapKey;
use crate::domain::{ClickCounts, Link};
use chrono::{DateTime, TimeZone, Utc};
use codespace::{Block, CodeSpace};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Links (and leases) in a local SQLite file. Cheap to clone.
#[derive(Clone)]
pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    sync: Arc<WalSync>,
    space: Arc<CodeSpace>,
}

/// The rowid of the generated row `code` would be, if it can be a generated code.
fn slot(space: &CodeSpace, code: &str) -> Option<i64> {
    space
        .decode(code)
        .ok()
        .and_then(|id| i64::try_from(id).ok())
}

/// The read-only connections, handed out in turn.
struct Readers {
    connections: Vec<Arc<Mutex<Connection>>>,
    next: AtomicUsize,
}

/// At most this many read connections (fewer on machines with fewer cores, at least two).
const MAX_READERS: usize = 4;

fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn link_from_row(row: &Row<'_>) -> rusqlite::Result<Link> {
    Ok(Link {
        code: row.get(0)?,
        url: row.get(1)?,
        created_at: from_millis(row.get(2)?),
        expires_at: row.get::<_, Option<i64>>(3)?.map(from_millis),
        deleted_at: row.get::<_, Option<i64>>(4)?.map(from_millis),
        clicks: ClickCounts::default(),
    })
}

pub(super) fn db_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path`, whose generated codes are made
    /// in `space`, with at most `max_batch` creates in one insert transaction.
    /// [`migrate`](Self::migrate) checks that the file agrees.
    pub fn open(path: &Path, space: Arc<CodeSpace>, max_batch: usize) -> Result<Self, StoreError> {
        let open = || {
            let conn = Connection::open(path)
                .map_err(|e| StoreError::Internal(format!("open {}: {e}", path.display())))?;
            conn.set_prepared_statement_cache_capacity(64);
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .map_err(db_error)?;
            Ok::<_, StoreError>(conn)
        };
        let writer = open()?;
        // WAL is a property of the file: set once here, every later connection uses it.
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        writer
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(db_error)?;
        // 64 MiB of page cache: random codes touch B-tree pages all over the index.
        writer
            .pragma_update(None, "cache_size", -65536)
            .map_err(db_error)?;
        let count = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .clamp(2, MAX_READERS);
        let connections = (0..count)
            .map(|_| {
                let reader = open()?;
                reader
                    .pragma_update(None, "query_only", true)
                    .map_err(db_error)?;
                reader
                    .pragma_update(None, "cache_size", -16384)
                    .map_err(db_error)?;
                Ok(Arc::new(Mutex::new(reader)))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let sync = Arc::new(WalSync::start(path)?);
        let writer = Writer::start(writer, Arc::clone(&sync), Arc::clone(&space), max_batch)?;
        Ok(Self {
            writer,
            readers: Arc::new(Readers {
                connections,
                next: AtomicUsize::new(0),
            }),
            sync,
            space,
        })
    }

    /// What the group commit has done so far.
    pub fn durability(&self) -> Durability {
        self.sync.durability()
    }

    /// What the writer thread has batched so far.
    pub fn writer_stats(&self) -> Arc<WriterStats> {
        Arc::clone(self.writer.stats())
    }

    /// Runs `f` on the writer connection, as a transaction of its own on the writer thread;
    /// returns once an fsync covers it.
    async fn with<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.writer.run(f).await
    }

    /// Inserts one link (without an idempotency key) in the writer thread's next batch of
    /// creates; returns once an fsync covers it.
    pub(super) async fn insert_batched(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        self.writer.insert(link).await
    }

    /// Runs `f` on a read-only connection (the next one in turn).
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = &self.readers.connections;
        let i = self.readers.next.fetch_add(1, Ordering::Relaxed) % readers.len();
        let value = on_blocking_pool(Arc::clone(&readers[i]), f).await?;
        self.sync.reveal().await?;
        Ok(value)
    }

    /// Applies pending migrations and checks the file's code space (recording it on first use);
    /// returns how many migrations ran.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let space = Arc::clone(&self.space);
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;
            tx.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            ))
            .map_err(db_error)?;
            let mut ran = 0;
            for m in SQLITE {
                let done: Option<i64> = tx
                    .query_row(&format!("SELECT version FROM {VERSION_TABLE} WHERE version = ?1"), [m.version], |r| r.get(0))
                    .optional()
                    .map_err(db_error)?;
                if done.is_none() {
                    tx.execute_batch(m.sql).map_err(db_error)?;
                    tx.execute(
                        &format!("INSERT INTO {VERSION_TABLE} (version, name, applied_at) VALUES (?1, ?2, ?3)"),
                        params![m.version, m.name, millis(Utc::now())],
                    )
                    .map_err(db_error)?;
                    ran += 1;
                }
            }
            check_code_space(&tx, &space)?;
            tx.commit().map_err(db_error)?;
            Ok(ran)
        })
        .await
    }

    pub(super) async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        let space = Arc::clone(&self.space);
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;
            let now = millis(Utc::now());
            if let Some(idem) = &link.idempotency {
                let existing: Option<(Vec<u8>, String)> = tx
                    .query_row(
                        "SELECT fingerprint, code FROM idempotency_keys WHERE owner = ?1 AND key = ?2",
                        params![link.owner, idem.key],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(db_error)?;
                if let Some((fingerprint, code)) = existing {
                    if fingerprint != idem.fingerprint {
                        return Ok(InsertOutcome::IdempotencyMismatch);
                    }
                    let first = get_link(&tx, &space, &code)?
                        .ok_or_else(|| StoreError::Internal(format!("idempotent link {code:?} vanished")))?;
                    return Ok(InsertOutcome::Replayed(first));
                }
            }
            let outcome = match insert_row(&tx, &space, &link, now)? {
                InsertOutcome::CodeTaken => return Ok(InsertOutcome::CodeTaken),
                other => other,
            };
            if let Some(idem) = &link.idempotency {
                let code = match &outcome {
                    InsertOutcome::Created(l) | InsertOutcome::Deduplicated(l) => l.code.clone(),
                    _ => unreachable!("only created or deduplicated reach here"),
                };
                tx.execute(
                    "INSERT INTO idempotency_keys (owner, key, fingerprint, code, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![link.owner, idem.key, idem.fingerprint, code, now],
                )
                .map_err(db_error)?;
            }
            tx.commit().map_err(db_error)?;
            Ok(outcome)
        })
        .await
    }

    /// Inserts many links (none with an idempotency key) in one transaction: one commit, one
    /// fsync for the whole batch. Outcomes in input order.
    pub(super) async fn insert_many(
        &self,
        links: Vec<NewLink>,
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        let space = Arc::clone(&self.space);
        self.with(move |conn| insert_all(conn, &space, &links))
            .await
    }

    pub(super) async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        self.read(move |conn| get_link(conn, &space, &code)).await
    }

    pub(super) async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        self.read(move |conn| {
            let Some(mut link) = get_link(conn, &space, &code)? else {
                return Ok(None);
            };
            let counts: Option<(i64, i64, i64)> = conn
                .query_row(
                    "SELECT human, head, bot FROM link_clicks WHERE code = ?1",
                    [&code],
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
        })
        .await
    }

    /// Adds a chunk of click counts in a transaction of its own, answered at its commit: the
    /// flush makes all its chunks durable at once ([`SqliteStore::sync_clicks`]).
    pub(super) async fn add_clicks(
        &self,
        rows: Arc<[(CodeMapKey, ClickCounts)]>,
    ) -> Result<(), StoreError> {
        self.writer
            .run_unsynced(move |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_error)?;
                {
                    // Most codes already have a row: an UPDATE finds it with one search of the
                    // key, where an upsert searches for the conflict and then again to update.
                    let mut update = tx
                        .prepare_cached(
                            "UPDATE link_clicks SET human = human + ?2, head = head + ?3, \
                             bot = bot + ?4 WHERE code = ?1",
                        )
                        .map_err(db_error)?;
                    let mut insert = tx
                        .prepare_cached(
                            "INSERT INTO link_clicks (code, human, head, bot) \
                             VALUES (?1, ?2, ?3, ?4)",
                        )
                        .map_err(db_error)?;
                    for (code, c) in rows.iter() {
                        let values =
                            params![code.as_str(), c.human as i64, c.head as i64, c.bot as i64];
                        // `BEGIN IMMEDIATE` holds SQLite's write lock for the whole chunk, so no
                        // connection can add a code between the UPDATE that missed it and the
                        // INSERT.
                        if update.execute(values).map_err(db_error)? == 0 {
                            insert.execute(values).map_err(db_error)?;
                        }
                    }
                }
                tx.commit().map_err(db_error)
            })
            .await
    }

    /// Returns once an fsync covers every click count added before the call.
    pub(super) async fn sync_clicks(&self) -> Result<(), StoreError> {
        self.with(|_| Ok(())).await
    }

    pub(super) async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        let key = dedup_key.to_vec();
        self.read(move |conn| find_dedup(conn, &key)).await
    }

    pub(super) async fn find_idempotent(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        let (owner, key) = (owner.to_string(), key.to_string());
        let space = Arc::clone(&self.space);
        self.read(move |conn| {
            let found: Option<(Vec<u8>, String)> = conn
                .query_row(
                    "SELECT fingerprint, code FROM idempotency_keys WHERE owner = ?1 AND key = ?2",
                    params![owner, key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db_error)?;
            match found {
                Some((fingerprint, code)) => {
                    Ok(get_link(conn, &space, &code)?.map(|link| (fingerprint, link)))
                }
                None => Ok(None),
            }
        })
        .await
    }

    pub(super) async fn delete(&self, code: &str) -> Result<DeleteOutcome, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        self.with(move |conn| {
            let Some(slot) = find_slot(conn, &space, &code)? else {
                return Ok(DeleteOutcome::NotFound);
            };
            let updated = conn
                .execute(
                    "UPDATE links SET deleted_at = ?2, dedup_key = NULL WHERE slot = ?1 AND deleted_at IS NULL",
                    params![slot, millis(Utc::now())],
                )
                .map_err(db_error)?;
            Ok(if updated == 1 { DeleteOutcome::Deleted } else { DeleteOutcome::AlreadyDeleted })
        })
        .await
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        self.read(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(db_error))
            .await
    }

    pub(super) async fn count_links(&self) -> Result<u64, StoreError> {
        self.read(|conn| {
            conn.query_row("SELECT count(*) FROM links", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(db_error)
        })
        .await
    }

    /// Leases the next `size` IDs of `namespace` from the embedded ledger: one immediate
    /// transaction advances the namespace cursor and records the lease; it returns after the
    /// commit is on disk. Overlap is refused by a trigger, so the file itself proves disjointness.
    pub async fn lease(
        &self,
        namespace: &str,
        size: u64,
        holder: &str,
    ) -> Result<(u64, Block), StoreError> {
        let (namespace, holder) = (namespace.to_string(), holder.to_string());
        self.with(move |conn| {
            let size = i64::try_from(size).map_err(|_| StoreError::Internal("lease size too large".into()))?;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;
            tx.execute("INSERT INTO id_namespaces (namespace, next_id) VALUES (?1, 0) ON CONFLICT DO NOTHING", [&namespace])
                .map_err(db_error)?;
            let start: i64 = tx
                .query_row("SELECT next_id FROM id_namespaces WHERE namespace = ?1", [&namespace], |r| r.get(0))
                .map_err(db_error)?;
            let end = start.checked_add(size).ok_or_else(|| StoreError::Internal(format!("namespace {namespace} exhausted")))?;
            tx.execute("UPDATE id_namespaces SET next_id = ?2 WHERE namespace = ?1", params![namespace, end])
                .map_err(db_error)?;
            tx.execute(
                "INSERT INTO id_leases (namespace, start_id, end_id, holder, leased_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![namespace, start, end, holder, millis(Utc::now())],
            )
            .map_err(db_error)?;
            let lease_id = tx.last_insert_rowid() as u64;
            tx.commit().map_err(db_error)?;
            let block = Block::new(start as u64, end as u64).ok_or_else(|| StoreError::Internal("empty lease".into()))?;
            Ok((lease_id, block))
        })
        .await
    }
}

/// Runs `f` with `conn` locked, on tokio's blocking pool (rusqlite calls block).
async fn on_blocking_pool<T, F>(conn: Arc<Mutex<Connection>>, f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        // A panic mid-transaction rolls the transaction back when it unwinds, so the
        // connection is consistent even if the lock is poisoned.
        let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    })
    .await
    .map_err(|e| StoreError::Internal(format!("store task failed: {e}")))?
}

/// Inserts `links` in one immediate transaction; outcomes in input order.
pub(super) fn insert_all(
    conn: &mut Connection,
    space: &CodeSpace,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let now = millis(Utc::now());
    let outcomes = links
        .iter()
        .map(|link| insert_row(&tx, space, link, now))
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().map_err(db_error)?;
    Ok(outcomes)
}

/// Inserts one row unless its code (or dedup key) is taken: `Created`, `Deduplicated` (the
/// live twin) or `CodeTaken`.
///
/// A row with an ID goes to the rowid of that ID (its code must be the one the file's code
/// space gives the ID, as the service makes it); a row without one goes below zero, with its
/// code in the named-code index. A code is checked against the other placement first, so it is
/// unique across both.
fn insert_row(
    conn: &Connection,
    space: &CodeSpace,
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
    let taken_elsewhere = match id {
        Some(_) => named_slot(conn, &link.code)?.is_some(),
        None => generated_slot(conn, space, &link.code)?.is_some(),
    };
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
                link.kind.as_str(),
                id,
                now,
                link.expires_at.map(millis),
                link.owner,
                link.dedup_key
            ])
            .map_err(db_error)?
    };
    Ok(match inserted {
        // The row is exactly what was written; no need to read it back.
        1 => InsertOutcome::Created(Link {
            code: link.code.clone(),
            url: link.url.clone(),
            created_at: from_millis(now),
            expires_at: link.expires_at.map(|t| from_millis(millis(t))),
            deleted_at: None,
            clicks: ClickCounts::default(),
        }),
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

// Statements are constants so `prepare_cached` finds them without formatting a string, and
// SQLite parses each once per connection.
const INSERT_GENERATED: &str = "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key) \
     VALUES (?4, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING";
/// The next free negative slot: one below the lowest (`min(slot)` reads one end of the table).
const INSERT_NAMED: &str = "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key) \
     VALUES ((SELECT min(0, coalesce(min(slot), 0)) - 1 FROM links), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING";
const SELECT_BY_SLOT: &str = "SELECT code, long_url, created_at, expires_at, deleted_at FROM links WHERE slot = ?1 AND code = ?2";
const SELECT_NAMED: &str = "SELECT code, long_url, created_at, expires_at, deleted_at FROM links WHERE code = ?1 AND id IS NULL";
const SLOT_BY_SLOT: &str = "SELECT slot FROM links WHERE slot = ?1 AND code = ?2";
const SLOT_NAMED: &str = "SELECT slot FROM links WHERE code = ?1 AND id IS NULL";
const SELECT_BY_DEDUP: &str =
    "SELECT code, long_url, created_at, expires_at, deleted_at FROM links WHERE dedup_key = ?1";

/// The link with `code`, wherever it is placed.
fn get_link(conn: &Connection, space: &CodeSpace, code: &str) -> Result<Option<Link>, StoreError> {
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

/// The slot of the row holding `code`, wherever it is placed.
fn find_slot(conn: &Connection, space: &CodeSpace, code: &str) -> Result<Option<i64>, StoreError> {
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
    let Some(slot) = slot(space, code) else {
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

/// Records the file's code space on first use and refuses another one later. Generated rows
/// are found by decoding their code, so only the key and base length that made them find them;
/// under another key a new ID's code could also equal an old row's code.
///
/// On first use (a file from before migration 4, or a new one) every generated row is checked
/// against the configured code space, one encode per row, once. Rows it did not make (a key or
/// length changed in the file's past) are moved to the named placement, where their code is
/// indexed and still found. If it made none of them, the node is most likely configured with
/// the wrong key, and the file is refused instead.
fn check_code_space(conn: &Connection, space: &CodeSpace) -> Result<(), StoreError> {
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

fn find_dedup(conn: &Connection, key: &[u8]) -> Result<Option<Link>, StoreError> {
    let mut select = conn.prepare_cached(SELECT_BY_DEDUP).map_err(db_error)?;
    select
        .query_row([key], link_from_row)
        .optional()
        .map_err(db_error)
}
