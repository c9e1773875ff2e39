//! `shortener layout migrate` and `revert`: moving the links table between the code layout and
//! the slot layout ([`super::layout`]) while nodes keep serving.
//!
//! Each step commits its progress in `link_layout` with its own work, so a run killed at any
//! point starts again where the last commit left it:
//!
//! 1. `start`: a `NOT VALID` check makes every new row carry a slot (writers of this version
//!    fill it already), and the row count and a checksum of `code -> url` are recorded.
//! 2. `backfill`: rows without a slot get one (and rows placed under another code space, after
//!    a key rotation, get theirs again), a batch per transaction in code order, the last code
//!    done committed with the batch.
//! 3. `validate`: the check is validated (a scan that blocks no writer), so `slot` becomes
//!    `NOT NULL` without another scan.
//! 4. `index`: the slot, named-code and partial dedup indexes are built concurrently (one left
//!    invalid by a kill is dropped and built again).
//! 5. `switch`: the layout becomes `slot`; nodes read it within a second, and the run waits the
//!    grace period before the next step takes away the index they used.
//! 6. `swap`: in one short transaction, the primary key moves to `slot` and the full code and
//!    dedup indexes go.
//! 7. `verify`: every row is checked to sit at the slot its code decodes to, and the count and
//!    checksum recorded again, in one snapshot.
//!
//! `revert` builds the code indexes concurrently, switches back and swaps the keys back.
//!
//! Long because both directions of one procedure, their steps and the helpers they share
//! (index builds, lock-bounded swaps, verification) read best in one place.

use super::PgStore;
use super::error::{db_error, pool_error};
use super::layout::slot_of;
use crate::store::StoreError;
use codespace::CodeSpace;
use futures::{TryStreamExt, pin_mut};
use std::time::Duration;
use tokio_postgres::types::ToSql;

/// Held by a run for its whole length, so two runs never interleave.
const LAYOUT_LOCK: i64 = 0x6c61796f7574;
/// How long a run waits for the layout lock before saying another run holds it.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How a migration runs.
#[derive(Debug, Clone)]
pub struct LayoutOptions {
    /// Rows given a slot per transaction.
    pub batch: usize,
    /// How long to wait after switching the layout before dropping the index nodes used (they
    /// read the layout every second).
    pub grace: Duration,
    /// A pause after each backfill batch, to leave the database room for its traffic.
    pub pause: Duration,
}

/// Where the links table stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutStatus {
    /// `code` or `slot`: what nodes find rows by.
    pub layout: String,
    /// The step a migration or revert is at (`None`: none is under way).
    pub step: Option<String>,
    /// Rows the backfill has given a slot so far.
    pub filled: i64,
    /// Rows and checksum of `code -> url` when the migration started.
    pub before: Option<(i64, String)>,
    /// Rows and checksum when it was verified.
    pub after: Option<(i64, String)>,
}

impl std::fmt::Display for LayoutStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "layout: {}", self.layout)?;
        if let Some(step) = &self.step {
            write!(
                f,
                "\nmigration at step: {step} ({} rows filled)",
                self.filled
            )?;
        }
        if let Some((rows, sum)) = &self.before {
            write!(f, "\nbefore: {rows} rows, checksum {sum}")?;
        }
        if let Some((rows, sum)) = &self.after {
            write!(f, "\nafter: {rows} rows, checksum {sum}")?;
        }
        Ok(())
    }
}

/// The indexes of the slot layout besides its primary key: (name, definition).
const SLOT_INDEXES: [(&str, &str); 3] = [
    ("links_slot", "ON links (slot)"),
    ("links_named_code", "ON links (code) WHERE slot < 0"),
    (
        "links_dedup",
        "ON links (dedup_key) WHERE dedup_key IS NOT NULL",
    ),
];
/// The indexes of the code layout, built by a revert before they become constraints.
const CODE_INDEXES: [(&str, &str); 2] = [
    ("links_code", "ON links (code)"),
    ("links_dedup_key_key", "ON links (dedup_key)"),
];

impl PgStore {
    /// Where the links table stands.
    pub async fn layout_status(&self) -> Result<LayoutStatus, StoreError> {
        status(&self.direct.get().await.map_err(pool_error)?.into_raw()).await
    }

    /// Moves the links table to the slot layout (or finishes a migration a kill interrupted),
    /// telling `progress` what it does. Nodes keep serving throughout.
    pub async fn layout_migrate(
        &self,
        options: &LayoutOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<LayoutStatus, StoreError> {
        let mut client = self.session().await?;
        // Whether this run has waited the grace period since the layout switched; a run that
        // resumes after the switch (the one before it killed during the wait) waits it again.
        let mut waited = false;
        loop {
            let now = status(&client).await?;
            let step = match (&now.step, now.layout.as_str()) {
                (None, "slot") => {
                    progress("the links table is in the slot layout");
                    return Ok(now);
                }
                (None, _) => "start".to_string(),
                (Some(step), _) if step.starts_with("revert") => {
                    return Err(StoreError::Internal(format!(
                        "a revert is under way (at step {step}); run `shortener layout revert` to finish it first"
                    )));
                }
                (Some(step), _) => step.clone(),
            };
            progress(&format!("step {step}"));
            match step.as_str() {
                "start" => start(&client, self.layout.space()).await?,
                "backfill" => backfill(&mut client, self.layout.space(), options, progress).await?,
                "validate" => validate(&client).await?,
                "index" => {
                    build_indexes(&client, &SLOT_INDEXES, progress).await?;
                    set_step(&client, "switch").await?;
                }
                "switch" => {
                    client
                        .execute("UPDATE link_layout SET layout = 'slot', step = 'swap'", &[])
                        .await
                        .map_err(db_error)?;
                    tokio::time::sleep(options.grace).await;
                    waited = true;
                }
                "swap" => {
                    if !waited {
                        progress("waiting the grace period after the switch first");
                        tokio::time::sleep(options.grace).await;
                        waited = true;
                    }
                    swap(
                        &client,
                        "ALTER TABLE links DROP CONSTRAINT links_pkey; \
                         ALTER TABLE links ADD CONSTRAINT links_pkey PRIMARY KEY USING INDEX links_slot; \
                         ALTER TABLE links DROP CONSTRAINT IF EXISTS links_dedup_key_key; \
                         UPDATE link_layout SET step = 'verify'",
                    )
                    .await?
                }
                "verify" => {
                    let (rows, sum) = verify_or_replace(&mut client, self.layout.space()).await?;
                    client
                        .execute(
                            "UPDATE link_layout SET step = NULL, after_rows = $1, after_sum = $2::text::numeric, \
                             finished_at = now()",
                            &[&rows, &sum],
                        )
                        .await
                        .map_err(db_error)?;
                }
                other => {
                    return Err(StoreError::Internal(format!(
                        "unknown layout migration step {other:?}"
                    )));
                }
            }
        }
    }

    /// Moves the links table back to the code layout (the primary key on `code`), online.
    pub async fn layout_revert(
        &self,
        options: &LayoutOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<LayoutStatus, StoreError> {
        let client = self.session().await?;
        let mut waited = false;
        loop {
            let now = status(&client).await?;
            let step = match (&now.step, now.layout.as_str()) {
                (None, "code") => {
                    progress("the links table is in the code layout");
                    return Ok(now);
                }
                (None, _) => "revert-index".to_string(),
                (Some(step), _) if step.starts_with("revert") => step.clone(),
                (Some(step), _) => {
                    return Err(StoreError::Internal(format!(
                        "a migration is under way (at step {step}); run `shortener layout migrate` to finish it first"
                    )));
                }
            };
            progress(&format!("step {step}"));
            match step.as_str() {
                "revert-index" => {
                    set_step(&client, "revert-index").await?;
                    build_indexes(&client, &CODE_INDEXES, progress).await?;
                    set_step(&client, "revert-switch").await?;
                }
                "revert-switch" => {
                    client
                        .execute(
                            "UPDATE link_layout SET layout = 'code', step = 'revert-swap'",
                            &[],
                        )
                        .await
                        .map_err(db_error)?;
                    tokio::time::sleep(options.grace).await;
                    waited = true;
                }
                "revert-swap" => {
                    if !waited {
                        progress("waiting the grace period after the switch first");
                        tokio::time::sleep(options.grace).await;
                        waited = true;
                    }
                    swap(
                        &client,
                        "ALTER TABLE links DROP CONSTRAINT links_pkey; \
                         ALTER TABLE links ADD CONSTRAINT links_pkey PRIMARY KEY USING INDEX links_code; \
                         ALTER TABLE links ADD CONSTRAINT links_dedup_key_key UNIQUE USING INDEX links_dedup_key_key; \
                         DROP INDEX IF EXISTS links_named_code; DROP INDEX IF EXISTS links_dedup; \
                         UPDATE link_layout SET step = NULL, finished_at = now()",
                    )
                    .await?
                }
                other => {
                    return Err(StoreError::Internal(format!(
                        "unknown layout revert step {other:?}"
                    )));
                }
            }
        }
    }

    /// Checks that every row sits where its code puts it; returns the row count and the
    /// checksum of `code -> url`, from one snapshot.
    /// Rows found misplaced (written by a node under another key) are placed again by the
    /// next `layout migrate`.
    pub async fn layout_verify(&self) -> Result<(i64, String), StoreError> {
        let mut client = self.session().await?;
        verify_or_replace(&mut client, self.layout.space()).await
    }

    /// A connection for a layout run: a session of its own (from the direct URL behind a
    /// pooler in transaction mode), no statement bound (a step may scan the table), and the
    /// run's session lock (waited for up to [`LOCK_WAIT`]), or an error naming the run that
    /// holds it.
    async fn session(&self) -> Result<deadpool_postgres::Object, StoreError> {
        let client = self.direct.get().await.map_err(pool_error)?.into_raw();
        client
            .batch_execute("SET statement_timeout = 0")
            .await
            .map_err(db_error)?;
        // A run killed a moment ago holds the lock until PostgreSQL has seen its connection
        // drop: wait a little before calling the lock someone else's.
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            let locked: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&LAYOUT_LOCK])
                .await
                .map_err(db_error)?
                .get(0);
            if locked {
                return Ok(client);
            }
            if std::time::Instant::now() >= deadline {
                return Err(StoreError::Internal(
                    "another `shortener layout` run is working on this database".into(),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}

async fn status(client: &tokio_postgres::Client) -> Result<LayoutStatus, StoreError> {
    let row = client
        .query_one(
            "SELECT layout, step, filled, before_rows, before_sum::text, after_rows, after_sum::text \
             FROM link_layout",
            &[],
        )
        .await
        .map_err(db_error)?;
    let pair = |rows: Option<i64>, sum: Option<String>| rows.zip(sum);
    Ok(LayoutStatus {
        layout: row.get(0),
        step: row.get(1),
        filled: row.get(2),
        before: pair(row.get(3), row.get(4)),
        after: pair(row.get(5), row.get(6)),
    })
}

async fn set_step(client: &tokio_postgres::Client, step: &str) -> Result<(), StoreError> {
    client
        .execute("UPDATE link_layout SET step = $1", &[&step])
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The row count and the checksum of `code -> url` (a sum of 64-bit hashes, as text).
const CHECKSUM: &str = "SELECT count(*), coalesce(sum(hashtextextended(code || E'\\n' || long_url, 0)::numeric), 0)::text FROM links";

async fn start(client: &tokio_postgres::Client, space: &CodeSpace) -> Result<(), StoreError> {
    // The rows are placed under this run's code space; nodes under another are refused from
    // now on (a key rotated in the code layout takes effect here).
    client
        .execute(
            "INSERT INTO code_space (fingerprint, length) VALUES ($1, $2) \
             ON CONFLICT (single) DO UPDATE SET fingerprint = excluded.fingerprint, length = excluded.length",
            &[&space.fingerprint(), &(space.length() as i32)],
        )
        .await
        .map_err(db_error)?;
    let checked = client
        .query_opt(
            "SELECT 1 FROM pg_constraint WHERE conname = 'links_slot_filled' AND conrelid = 'links'::regclass",
            &[],
        )
        .await
        .map_err(db_error)?;
    if checked.is_none() {
        // New rows are refused without a slot from here on, so the backfill's set is closed.
        with_lock_retries(client, || {
            "ALTER TABLE links ADD CONSTRAINT links_slot_filled CHECK (slot IS NOT NULL) NOT VALID"
                .to_string()
        })
        .await?;
    }
    let row = client.query_one(CHECKSUM, &[]).await.map_err(db_error)?;
    let (rows, sum): (i64, String) = (row.get(0), row.get(1));
    client
        .execute(
            "UPDATE link_layout SET step = 'backfill', resume_after = NULL, filled = 0, \
             before_rows = $1, before_sum = $2::text::numeric, after_rows = NULL, after_sum = NULL, \
             started_at = now(), finished_at = NULL",
            &[&rows, &sum],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

async fn backfill(
    client: &mut deadpool_postgres::Object,
    space: &CodeSpace,
    options: &LayoutOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(), StoreError> {
    // Rows are visited in primary-key order: by code in the code layout, and by slot when a
    // failed verification sent a slot-layout table back here to place its rows again.
    let by_slot = status(client).await?.layout == "slot";
    let (select, update, next) = if by_slot {
        (
            "SELECT code, slot FROM links WHERE ($1::text IS NULL OR slot > $1::int8) ORDER BY slot LIMIT $2",
            "links.slot = u.old",
            "verify",
        )
    } else {
        (
            "SELECT code, slot FROM links WHERE ($1::text IS NULL OR code > $1) ORDER BY code LIMIT $2",
            "links.code = u.code",
            "validate",
        )
    };
    let select = client.prepare(select).await.map_err(db_error)?;
    let limit = options.batch.max(1) as i64;
    loop {
        let tx = client.transaction().await.map_err(db_error)?;
        let after: Option<String> = tx
            .query_one("SELECT resume_after FROM link_layout FOR UPDATE", &[])
            .await
            .map_err(db_error)?
            .get(0);
        let rows = tx
            .query(&select, &[&after, &limit])
            .await
            .map_err(db_error)?;
        let codes: Vec<&str> = rows.iter().map(|r| r.get(0)).collect();
        let old: Vec<Option<i64>> = rows.iter().map(|r| r.get(1)).collect();
        let slots: Vec<Option<i64>> = codes.iter().map(|c| slot_of(space, c)).collect();
        // A row without a slot gets one; so does one placed under another code space (a key
        // rotated in the code layout). A named row keeps its negative slot.
        let filled = tx
            .execute(
                &format!(
                    "UPDATE links SET slot = CASE WHEN u.slot IS NOT NULL THEN u.slot \
                       WHEN links.slot < 0 THEN links.slot ELSE -nextval('links_named_slot') END \
                     FROM unnest($1::text[], $2::int8[], $3::int8[]) AS u(code, slot, old) \
                     WHERE {update} AND links.code = u.code AND (links.slot IS NULL \
                       OR (u.slot IS NOT NULL AND links.slot <> u.slot) OR (u.slot IS NULL AND links.slot >= 0))"
                ),
                &[&codes, &slots, &old],
            )
            .await
            .map_err(db_error)? as i64;
        let last: Option<String> = if by_slot {
            old.last().copied().flatten().map(|s| s.to_string())
        } else {
            codes.last().map(|c| c.to_string())
        };
        let done = (codes.len() as i64) < limit;
        let params: [&(dyn ToSql + Sync); 4] = [&last, &filled, &done, &next];
        tx.execute(
            "UPDATE link_layout SET resume_after = coalesce($1, resume_after), filled = filled + $2, \
             step = CASE WHEN $3 THEN $4 ELSE step END",
            &params,
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if let Some(last) = &last {
            progress(&format!("filled {filled} rows up to {last}"));
        }
        if done {
            return Ok(());
        }
        if !options.pause.is_zero() {
            tokio::time::sleep(options.pause).await;
        }
    }
}

async fn validate(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    // Scans the table, blocking no writer; then SET NOT NULL trusts the valid check.
    client
        .batch_execute("ALTER TABLE links VALIDATE CONSTRAINT links_slot_filled")
        .await
        .map_err(db_error)?;
    swap(
        client,
        "ALTER TABLE links ALTER COLUMN slot SET NOT NULL; \
         ALTER TABLE links DROP CONSTRAINT links_slot_filled; \
         UPDATE link_layout SET step = 'index'",
    )
    .await
}

/// Builds each of `indexes` concurrently, unless it is there and valid.
async fn build_indexes(
    client: &tokio_postgres::Client,
    indexes: &[(&str, &str)],
    progress: &mut dyn FnMut(&str),
) -> Result<(), StoreError> {
    for (name, definition) in indexes {
        let valid: Option<bool> = client
            .query_opt(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                 WHERE c.relname = $1",
                &[name],
            )
            .await
            .map_err(db_error)?
            .map(|r| r.get(0));
        match valid {
            Some(true) => continue,
            // A build a kill interrupted leaves an invalid index behind.
            Some(false) => client
                .batch_execute(&format!("DROP INDEX CONCURRENTLY {name}"))
                .await
                .map_err(db_error)?,
            None => {}
        }
        progress(&format!("building index {name}"));
        client
            .batch_execute(&format!(
                "CREATE UNIQUE INDEX CONCURRENTLY {name} {definition}"
            ))
            .await
            .map_err(db_error)?;
    }
    Ok(())
}

/// Runs `sql` in one transaction that waits at most 5 s for its lock (so it never queues the
/// nodes' statements behind it for long), trying again up to 20 times.
async fn swap(client: &tokio_postgres::Client, sql: &str) -> Result<(), StoreError> {
    with_lock_retries(client, || {
        format!("BEGIN; SET LOCAL lock_timeout = '5s'; {sql}; COMMIT")
    })
    .await
}

async fn with_lock_retries(
    client: &tokio_postgres::Client,
    sql: impl Fn() -> String,
) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        match client.batch_execute(&sql()).await {
            Ok(()) => return Ok(()),
            Err(error)
                if tries < 20
                    && error.code()
                        == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) =>
            {
                tries += 1;
                let _ = client.batch_execute("ROLLBACK").await;
                tracing::warn!(
                    tries,
                    "the links table is busy; trying its layout change again"
                );
            }
            Err(error) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(db_error(error));
            }
        }
    }
}

/// [`verify_on`]; rows found misplaced send the migration back to the backfill, so that the
/// next run places every row again (nodes under another key refuse creates meanwhile).
async fn verify_or_replace(
    client: &mut deadpool_postgres::Object,
    space: &CodeSpace,
) -> Result<(i64, String), StoreError> {
    match verify_on(client, space).await? {
        Ok(figures) => Ok(figures),
        Err(misplaced) => {
            client
                .execute(
                    "UPDATE link_layout SET step = 'backfill', resume_after = NULL",
                    &[],
                )
                .await
                .map_err(db_error)?;
            Err(StoreError::Internal(format!(
                "{misplaced}; once every node runs with the key of fingerprint {}, run \
                 `shortener layout migrate` to place them",
                space.fingerprint()
            )))
        }
    }
}

/// Checks every row's slot against its code, in one snapshot with the checksum: the row count
/// and checksum, or what is misplaced.
async fn verify_on(
    client: &mut deadpool_postgres::Object,
    space: &CodeSpace,
) -> Result<Result<(i64, String), String>, StoreError> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(db_error)?;
    let row = tx.query_one(CHECKSUM, &[]).await.map_err(db_error)?;
    let (rows, sum): (i64, String) = (row.get(0), row.get(1));
    let stream = tx
        .query_raw("SELECT slot, code FROM links", std::iter::empty::<i64>())
        .await
        .map_err(db_error)?;
    pin_mut!(stream);
    let (mut misplaced, mut first) = (0u64, None);
    while let Some(row) = stream.try_next().await.map_err(db_error)? {
        let (slot, code): (Option<i64>, &str) = (row.get(0), row.get(1));
        let right = match (slot, slot_of(space, code)) {
            (Some(slot), Some(expected)) => slot == expected,
            (Some(slot), None) => slot < 0,
            (None, _) => false,
        };
        if !right {
            misplaced += 1;
            first.get_or_insert_with(|| format!("{code} (slot {slot:?})"));
        }
    }
    tx.commit().await.map_err(db_error)?;
    Ok(match first {
        None => Ok((rows, sum)),
        Some(first) => Err(format!(
            "{misplaced} of {rows} rows are not where their code puts them, the first {first}"
        )),
    })
}
