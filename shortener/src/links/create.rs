//! The three ways a new row is written: an alias as given, a random private code, or the code
//! of the next leased ID.

use super::CreateCounters;
use crate::domain::{Error, Link, PasswordHash};
use crate::store::{Idempotency, InsertOutcome, LinkStore, NewAuditEntry, NewLink, Store};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use codespace::shape::{self, CodeKind};
use id_client::{IdError, IdPool};
use std::sync::atomic::Ordering;

/// How many generated codes one create may find taken by something other than an imported
/// legacy code (the alarm) before it gives up. Codes held by imported links do not count: see
/// [`generated`] for what bounds those.
const MAX_GENERATED_CONFLICTS: usize = 16;
/// How many random private codes one create may try.
const MAX_PRIVATE_ATTEMPTS: usize = 8;

/// Everything of a new row but its code.
pub(super) struct Row {
    pub(super) url: String,
    pub(super) expires_at: Option<DateTime<Utc>>,
    pub(super) tenant: String,
    pub(super) owner: String,
    pub(super) dedup_key: Option<Vec<u8>>,
    pub(super) idempotency: Option<Idempotency>,
    pub(super) tags: Vec<String>,
    pub(super) max_visits: Option<u64>,
    pub(super) import_batch: Option<i64>,
    pub(super) created_at: Option<DateTime<Utc>>,
    pub(super) password: Option<PasswordHash>,
    /// The branded domain it answers on; `None` for the default domain.
    pub(super) domain: Option<String>,
    /// Where it routes besides its URL.
    pub(super) routes: crate::domain::Routes,
    /// The create's audit entry, its object filled in with the code the row goes in under.
    pub(super) audit: Option<NewAuditEntry>,
}

impl Row {
    pub(super) fn with_code(&self, code: String, kind: CodeKind, id: Option<u64>) -> NewLink {
        NewLink {
            domain: self.domain.clone(),
            routes: self.routes.clone(),
            url: self.url.clone(),
            kind,
            id,
            expires_at: self.expires_at,
            tenant: self.tenant.clone(),
            owner: self.owner.clone(),
            dedup_key: self.dedup_key.clone(),
            idempotency: self.idempotency.clone(),
            tags: self.tags.clone(),
            max_visits: self.max_visits,
            import_batch: self.import_batch,
            created_at: self.created_at,
            password: self.password.clone(),
            trace: otel::current_traceparent(),
            audit: self.audit.as_ref().map(|entry| NewAuditEntry {
                object_id: code.clone(),
                ..entry.clone()
            }),
            code,
        }
    }
}

/// A link under the caller's alias (on its domain: the same alias on two domains is two links);
/// a taken alias is [`Error::AliasTaken`].
pub(super) async fn alias(store: &Store, row: Row, alias: String) -> Result<(Link, bool), Error> {
    let key = crate::domain::link_key(row.domain.as_deref(), &alias, CodeKind::Alias).into_owned();
    let link = row.with_code(key, CodeKind::Alias, None);
    match store.insert(link).await? {
        InsertOutcome::CodeTaken => Err(Error::AliasTaken(alias)),
        other => settle(other),
    }
}

/// A link under a fresh random private code (a taken one, vanishingly rare, is redrawn).
pub(super) async fn private(store: &Store, row: Row) -> Result<(Link, bool), Error> {
    for _ in 0..MAX_PRIVATE_ATTEMPTS {
        let link = row.with_code(shape::generate_private_code(), CodeKind::Private, None);
        match store.insert(link).await? {
            InsertOutcome::CodeTaken => continue,
            other => return settle(other),
        }
    }
    Err(Error::Internal(
        "no free private code after several attempts".into(),
    ))
}

/// A link under the code of the next ID in hand. A code taken by an imported link (a legacy
/// code that happens to spell this ID's code) is stepped over: counted, and the next ID tried,
/// however many such codes follow one another, so an import can never make a create fail.
/// Any other taken code cannot happen by construction (an ID is leased once, the permutation
/// is a bijection); if it does, it is counted and logged as an alarm and the next ID is tried,
/// and the create fails once [`MAX_GENERATED_CONFLICTS`] such codes were found.
///
/// The steps over imported codes end: each consumes an ID that is never handed out again, so
/// each imported code is stepped over at most once in the life of the code space, and the
/// steps of all creates together are at most the imported links whose code has the generated
/// shape. A pool that runs dry on the way ends the create as unavailable, as any create.
pub(super) async fn generated(
    store: &Store,
    ids: &IdPool,
    space: &CodeSpace,
    counters: &CreateCounters,
    row: Row,
) -> Result<(Link, bool), Error> {
    let mut conflicts = 0;
    loop {
        let (id, code) = next_code(ids, space).map_err(|IdError::Exhausted { retry_after }| {
            Error::Unavailable {
                message: ids.shortage(),
                retry_after,
            }
        })?;
        match store
            .insert(row.with_code(code.clone(), CodeKind::Generated, Some(id)))
            .await?
        {
            InsertOutcome::CodeTaken => {
                if taken(store, counters, id, &code).await? == Holder::Other {
                    conflicts += 1;
                    if conflicts >= MAX_GENERATED_CONFLICTS {
                        return Err(Error::Internal(
                            "too many conflicts on generated codes".into(),
                        ));
                    }
                }
            }
            other => return settle(other),
        }
    }
}

/// Who holds a generated code found taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// An imported link under a legacy code: expected, stepped over without an alarm.
    Imported,
    /// Anything else: the alarm.
    Other,
}

/// Counts a generated code found taken: stepped over an imported legacy code that holds it, or
/// the alarm for anything else; says which.
async fn taken(
    store: &Store,
    counters: &CreateCounters,
    id: u64,
    code: &str,
) -> Result<Holder, Error> {
    let holder = store.get(code).await?;
    // Only links with a legacy code carry an import batch.
    if holder.is_some_and(|link| link.import_batch.is_some()) {
        counters.imported_skips.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            id,
            "generated code held by an imported legacy code; skipping to the next ID"
        );
        Ok(Holder::Imported)
    } else {
        counters.generated_conflicts.fetch_add(1, Ordering::Relaxed);
        tracing::error!(id, code = %code, "generated code already taken; skipping to the next ID (check the lease ledger and key)");
        Ok(Holder::Other)
    }
}

/// Many links under the codes of the next IDs in hand, in one write (one commit): each row's
/// outcome in input order, as [`generated`] gives it for one row. A row whose code is taken
/// (an imported legacy code, or the alarm) is retried on its own with the next ID.
/// The next ID from `ids` and its code, passing over every ID whose code spells a reserved
/// word ([`shape::is_reserved`]: `console`, `healthz` and `metrics` have the default length):
/// the router answers such a path itself, so a link under it could never be reached. The ID
/// passed over is never handed out again, as any unused ID.
fn next_code(ids: &IdPool, space: &CodeSpace) -> Result<(u64, String), IdError> {
    loop {
        let id = ids.next_id()?;
        let code = space.encode(id);
        if !shape::is_reserved(&code) {
            return Ok((id, code));
        }
    }
}

pub(super) async fn generated_many(
    store: &Store,
    ids: &IdPool,
    space: &CodeSpace,
    counters: &CreateCounters,
    rows: Vec<Row>,
) -> Vec<Result<(Link, bool), Error>> {
    let mut results: Vec<Option<Result<(Link, bool), Error>>> = Vec::with_capacity(rows.len());
    let mut batch = Vec::with_capacity(rows.len());
    for row in &rows {
        match next_code(ids, space) {
            Ok((id, code)) => {
                batch.push((
                    results.len(),
                    row.with_code(code, CodeKind::Generated, Some(id)),
                ));
                results.push(None);
            }
            Err(IdError::Exhausted { retry_after }) => {
                results.push(Some(Err(Error::Unavailable {
                    message: ids.shortage(),
                    retry_after,
                })))
            }
        }
    }
    let (slots, links): (Vec<usize>, Vec<NewLink>) = batch.into_iter().unzip();
    let tried: Vec<(u64, String)> = links
        .iter()
        .map(|l| (l.id.unwrap_or_default(), l.code.clone()))
        .collect();
    let mut rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    match store.insert_many(links).await {
        Ok(outcomes) => {
            for ((slot, outcome), (id, code)) in slots.into_iter().zip(outcomes).zip(tried) {
                results[slot] = Some(match (outcome, rows[slot].take()) {
                    (InsertOutcome::CodeTaken, Some(row)) => {
                        // The row goes on alone, under the bound of `generated`.
                        match taken(store, counters, id, &code).await {
                            Ok(_) => generated(store, ids, space, counters, row).await,
                            Err(error) => Err(error),
                        }
                    }
                    (other, _) => settle(other),
                });
            }
        }
        Err(error) => {
            let error = Error::from(error);
            for slot in slots {
                results[slot] = Some(Err(error.clone()));
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Internal("a row without an outcome".into()))))
        .collect()
}

fn settle(outcome: InsertOutcome) -> Result<(Link, bool), Error> {
    match outcome {
        InsertOutcome::Created(link) => Ok((link, true)),
        InsertOutcome::Deduplicated(link) | InsertOutcome::Replayed(link) => Ok((link, false)),
        InsertOutcome::IdempotencyMismatch => Err(Error::IdempotencyMismatch),
        InsertOutcome::CodeTaken => Err(Error::Internal("code taken".into())),
    }
}
