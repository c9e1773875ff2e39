//! Where a link's row is found: by its code (the `code` layout, the primary key of databases
//! from before migration 11) or by its slot (the `slot` layout).
//!
//! A generated code is a keyed permutation of its ID, so an index ordered by code takes each
//! create at a random leaf. In the slot layout the primary key is `slot`: the ID the code
//! decodes to under the database's code space (IDs within a node's blocks only grow, so each
//! node appends to its own part of the index), or a negative number from a sequence for a code
//! that decodes to none, which alone is indexed by code (`links_named_code`, partial). Decoding
//! is a bijection, so two rows with one code have one slot, and the two unique indexes between
//! them refuse every duplicate code (docs/design.md has the argument).
//!
//! Every node reads the layout at start and again every [`POLL`], so `shortener layout
//! migrate` can move the primary key while nodes serve: it switches the layout, waits for
//! nodes to notice, and only then drops the index they were using.

use super::error::db_error;
use super::send::{Conn, Pooled};
use crate::store::StoreError;
use codespace::CodeSpace;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio_postgres::types::ToSql;

/// How often a node reads the layout again.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The database's layout as this node last read it, and the code space slots are computed in.
#[derive(Debug)]
pub(super) struct Layout {
    space: Arc<CodeSpace>,
    slot: AtomicBool,
    /// The database placed its rows under another code space (a key rollout not finished
    /// before `shortener layout migrate` started): this node then finds rows by code, which
    /// is right whatever placed them, and refuses to write rows it would misplace.
    foreign: AtomicBool,
    /// The code space is recorded (or need not be); until then the first write records it.
    recorded: AtomicBool,
}

/// How one code's row is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Find {
    /// By the code index (the code layout).
    Code,
    /// At this slot, the code compared.
    Slot(i64),
    /// In the named-code index.
    Named,
}

/// The slot a code that can be a generated code sits at: the ID it decodes to.
pub(crate) fn slot_of(space: &CodeSpace, code: &str) -> Option<i64> {
    space
        .decode(code)
        .ok()
        .and_then(|id| i64::try_from(id).ok())
}

/// The slot of a row about to be written: a generated link's own ID (its code is that ID's,
/// made in this code space, so decoding it again would give the same), otherwise what its
/// code decodes to, if anything.
pub(super) fn slot_of_new(space: &CodeSpace, link: &crate::store::NewLink) -> Option<i64> {
    match link.id {
        Some(id) => {
            debug_assert_eq!(
                space.encode(id),
                link.code,
                "a generated row has its ID's code"
            );
            i64::try_from(id).ok()
        }
        None => slot_of(space, &link.code),
    }
}

impl Find {
    /// An index for per-variant statement tables ([`Find::Code`], [`Find::Slot`], [`Find::Named`]).
    pub(super) fn variant(self) -> usize {
        match self {
            Find::Code => 0,
            Find::Slot(_) => 1,
            Find::Named => 2,
        }
    }

    /// The condition that finds the row of the code in `$1`, on the table aliased `table`
    /// (`""` for none); a slot is the statement's parameter `$n`.
    pub(super) fn clause(self, table: &str, n: usize) -> String {
        let p = if table.is_empty() {
            String::new()
        } else {
            format!("{table}.")
        };
        match self {
            Find::Code => format!("{p}code = $1"),
            Find::Slot(_) => format!("{p}slot = ${n} AND {p}code = $1"),
            Find::Named => format!("{p}slot < 0 AND {p}code = $1"),
        }
    }

    /// The slot parameter [`clause`](Self::clause) refers to, if any.
    pub(super) fn param(&self) -> Option<&(dyn ToSql + Sync)> {
        match self {
            Find::Slot(slot) => Some(slot),
            _ => None,
        }
    }
}

impl Layout {
    /// The code layout until [`load`](Self::load) says otherwise.
    pub(super) fn new(space: Arc<CodeSpace>) -> Self {
        Self {
            space,
            slot: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
            recorded: AtomicBool::new(false),
        }
    }

    /// The code space slots are computed in.
    pub(super) fn space(&self) -> &CodeSpace {
        &self.space
    }

    /// How to find `code` in the layout as last read.
    pub(super) fn find(&self, code: &str) -> Find {
        if !self.slot.load(Ordering::Relaxed) {
            return Find::Code;
        }
        match slot_of(&self.space, code) {
            Some(slot) => Find::Slot(slot),
            None => Find::Named,
        }
    }

    /// Whether rows are found by slot.
    pub(super) fn by_slot(&self) -> bool {
        self.slot.load(Ordering::Relaxed)
    }

    /// Notes whether the database's code space is recorded.
    pub(super) fn set_recorded(&self, recorded: bool) {
        self.recorded.store(recorded, Ordering::Relaxed);
    }

    /// Records the code space before this node's first write to a database without links.
    pub(super) async fn record_before_writing(&self, pool: &Pooled) -> Result<(), StoreError> {
        if self.recorded.load(Ordering::Relaxed) {
            return Ok(());
        }
        let client = pool.get().await.map_err(super::error::pool_error)?;
        if let Err(error) = record_code_space(&client, &self.space).await {
            self.foreign.store(true, Ordering::Relaxed);
            return Err(error);
        }
        self.recorded.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Refuses a write while the database's code space is another one (see `foreign`).
    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        if self.foreign.load(Ordering::Relaxed) {
            return Err(StoreError::Unavailable(format!(
                "this node's code key (fingerprint {}) is not the one the database places links \
                 with; restart it with that key",
                self.space.fingerprint()
            )));
        }
        Ok(())
    }

    /// Reads the layout (and the code space it was placed in) from the database.
    pub(super) async fn load(&self, client: &Conn) -> Result<(), StoreError> {
        let row = client
            .query_one(
                "SELECT l.layout, l.step IS NOT NULL, c.fingerprint, c.length \
                 FROM link_layout l LEFT JOIN code_space c ON true",
                &[],
            )
            .await
            .map_err(db_error)?;
        let (layout, moving): (&str, bool) = (row.get(0), row.get(1));
        let recorded: Option<(&str, i32)> = row.get::<_, Option<&str>>(2).zip(row.get(3));
        let foreign = (layout == "slot" || moving)
            && recorded.is_some_and(|(fingerprint, length)| {
                fingerprint != self.space.fingerprint() || length != self.space.length() as i32
            });
        if self.foreign.swap(foreign, Ordering::Relaxed) != foreign && foreign {
            tracing::error!(
                fingerprint = %self.space.fingerprint(),
                recorded = recorded.map_or("", |r| r.0),
                "the database places links under another code key: finding them by code and \
                 refusing creates until this node is restarted with that key"
            );
        }
        let slot = layout == "slot" && !foreign;
        if self.slot.swap(slot, Ordering::Relaxed) != slot {
            tracing::info!(
                layout = if slot { "slot" } else { "code" },
                "the links table's layout is now in force: rows are looked up by {}",
                if slot {
                    "the ID their code stands for"
                } else {
                    "their code"
                }
            );
        }
        Ok(())
    }

    /// Reads the layout every [`POLL`] until the store is dropped.
    pub(super) fn watch(self: &Arc<Self>, pool: Pooled) {
        let layout: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                let Some(layout) = layout.upgrade() else {
                    return;
                };
                // A database that is down is reported by the reads themselves.
                if let Ok(client) = pool.get().await
                    && let Err(error) = layout.load(&client).await
                {
                    tracing::debug!(%error, "could not read the links layout");
                }
            }
        });
    }
}

/// Records the code space on first use and refuses another one later: rows are found by
/// decoding their code, so only the key and length that placed them find them.
///
/// In the code layout (no migration under way) lookups do not decode, so any code space is
/// accepted: that is where a key rotation happens, and the next `shortener layout migrate`
/// places every row again under the new one and records it.
///
/// On first use, the newest generated links (up to 100) are checked against the configured
/// code space; if there are some and it made none of them, the node is most likely configured
/// with the wrong key, and the database is refused instead of recorded. A database without
/// links records nothing yet: returns false, and the first write records
/// ([`record_code_space`]).
pub(super) async fn check_code_space(client: &Conn, space: &CodeSpace) -> Result<bool, StoreError> {
    let length = space.length() as i32;
    let state = client
        .query_one("SELECT layout, step FROM link_layout", &[])
        .await
        .map_err(db_error)?;
    if state.get::<_, &str>(0) == "code" && state.get::<_, Option<&str>>(1).is_none() {
        // Writes in the code layout place nothing that lookups depend on.
        return Ok(true);
    }
    let recorded = client
        .query_opt("SELECT fingerprint, length FROM code_space", &[])
        .await
        .map_err(db_error)?;
    if let Some(row) = recorded {
        let (fingerprint, recorded_length): (String, i32) = (row.get(0), row.get(1));
        if fingerprint == space.fingerprint() && recorded_length == length {
            return Ok(true);
        }
        return Err(StoreError::Internal(format!(
            "this database's links were placed with the code key of fingerprint {fingerprint} \
             and code length {recorded_length}, but the node is configured with fingerprint {} \
             and length {length}; start it with the key (SHORTENER_KEY or SHORTENER_KEY_FILE) and \
             SHORTENER_CODE_LENGTH every node of this database uses (to change them, see \
             \"Rotating keys and code length\" in docs/operations.md)",
            space.fingerprint()
        )));
    }
    let newest = client
        .query(
            "SELECT id, code FROM links WHERE id IS NOT NULL ORDER BY id DESC LIMIT 100",
            &[],
        )
        .await
        .map_err(db_error)?;
    let ours = newest
        .iter()
        .any(|row| space.encode(row.get::<_, i64>(0) as u64) == row.get::<_, &str>(1));
    if !newest.is_empty() && !ours {
        return Err(StoreError::Internal(format!(
            "none of this database's {} newest generated links has the code that the configured \
             key (fingerprint {}) gives its ID; start the node with the key that made them",
            newest.len(),
            space.fingerprint()
        )));
    }
    let empty = client
        .query_opt("SELECT 1 FROM links LIMIT 1", &[])
        .await
        .map_err(db_error)?
        .is_none();
    if empty {
        // Nothing is placed yet: the first write records (so `shortener migrate` run with any
        // key on a new database decides nothing).
        return Ok(false);
    }
    record_code_space(client, space).await?;
    Ok(true)
}

/// Records `space` as the database's, unless one is recorded; refuses if the recorded one
/// (perhaps another node's, a moment earlier) is another.
pub(super) async fn record_code_space(client: &Conn, space: &CodeSpace) -> Result<(), StoreError> {
    let length = space.length() as i32;
    client
        .execute(
            "INSERT INTO code_space (fingerprint, length) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&space.fingerprint(), &length],
        )
        .await
        .map_err(db_error)?;
    // Two nodes recording at once: the first one's stands, and the other is checked against it.
    let row = client
        .query_one("SELECT fingerprint, length FROM code_space", &[])
        .await
        .map_err(db_error)?;
    if row.get::<_, &str>(0) != space.fingerprint() || row.get::<_, i32>(1) != length {
        return Err(StoreError::Internal(
            "another node recorded a different code key for this database at the same time; \
             every node of a database must use one key and code length"
                .into(),
        ));
    }
    Ok(())
}
