//! Bulk import: rows from another shortener (or a file of URLs), a chunk at a time.
//!
//! A transport turns its input into a stream of rows and feeds it to the one pipeline
//! ([`pipeline`], [`LinkService::import_rows`]), which checks them and writes them in chunks of
//! at most [`CHUNK_ROWS`] (this file), and hands back their results in row order and the
//! summary. Per row:
//! - with a legacy `code`: the rows of a chunk go in with one multi-row insert. A code that is
//!   taken is told apart afterwards by reading its row: the caller's own link to the same target
//!   brought by an earlier import (or made here) is `exists`; the same code twice in this
//!   import is `duplicate_code`; the caller's own link that was deleted is `code_deleted`;
//!   anything else, another tenant's link included, is `code_taken`, which says nothing of
//!   whose it is. Every answer that a code is taken, and
//!   every code a dry run looks at, is charged as one read to the key's read budget; past it
//!   the row answers `rate_limited` (not written, nothing said of the code), so a dry run
//!   learns of other tenants' codes no faster than reads would tell, and a real import only by
//!   writing a link under each free code it tries (docs/shortener.md, "Bulk import");
//! - without one: a generated code, with a dedup key over the row's tenant, target, expiry and
//!   creation time, so importing the same rows again finds the links of the first run
//!   (`exists`) instead of making new ones.
//!
//! Each import carries a random batch number, stored with the links of legacy codes it brings;
//! it is what tells a code repeated within one import from one an earlier import brought,
//! without the node remembering the codes it has seen, and what marks a legacy code that a
//! generated create may step over.
//!
//! A row that names its domain (an export's `domain` column) goes there once the tenant has
//! claimed it, or on the default domain for the node's own hosts and the import's
//! `default_hosts` ([`LinkService::row_domain`]).
//!
//! One file of about 620 lines: the two ways a row goes in (with its own code, or a generated
//! one), the domain it goes on, how a taken code or a named host is told apart and charged, and
//! the audit and results of a chunk are one write path whose rules depend on each other; the
//! streaming around it is in [`pipeline`].

mod pipeline;

pub use pipeline::{
    CHUNK_BYTES, ImportEvent, ImportSettings, ImportStop, ImportSummary, InputRow, ROW_IDLE,
    import_idle,
};

use super::{LinkService, create};
use crate::domain::{Caller, Error, ImportRow, Link, RowDomain, shown_code};
use crate::store::{InsertOutcome, LinkStore, NewLink};
use codespace::shape::CodeKind;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

/// The most rows checked and written together. A chunk's codeless rows go in with one commit:
/// their dedup keys are random, so they land on pages all over the dedup index, and a commit
/// writes each page it changed out whole. The more rows a commit carries, the more of them
/// share a page (and its write); a chunk of a couple of thousand rows is still small beside a
/// node's memory.
pub const CHUNK_ROWS: usize = 2000;
/// How many generated rows of a chunk are created at once.
const CONCURRENCY: usize = 64;
/// The most bytes of codes a chunk's audit entry lists: with its count and domain it stays
/// well within the audit log's bound on a change (4 KiB), which would otherwise replace the
/// whole summary with the names of its fields.
const AUDIT_CODE_BYTES: usize = 3 * 1024;

/// What became of one row.
#[derive(Debug, Clone)]
pub enum RowStatus {
    /// The link was created.
    Created,
    /// An earlier import (or create) already holds this row's link.
    Exists,
    /// A dry run: the row would be created.
    Valid,
    /// The row was refused.
    Error(Error),
}

impl RowStatus {
    /// The status's name on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            RowStatus::Created => "created",
            RowStatus::Exists => "exists",
            RowStatus::Valid => "valid",
            RowStatus::Error(_) => "error",
        }
    }
}

/// The result of one row, by its number in the input (from 1).
#[derive(Debug, Clone)]
pub struct RowResult {
    /// The row's number.
    pub row: u64,
    /// Its code, when known.
    pub code: Option<String>,
    /// What became of it.
    pub status: RowStatus,
    /// The branded domain its link is on (or would be, in a dry run); `None` for the default
    /// domain and for a row without a link.
    pub domain: Option<String>,
}

impl RowResult {
    /// The short URL of the row's link on `public`'s deployment, when the row has one: made,
    /// found, or (a dry run's row with a code) to be made.
    pub fn short_url(&self, public: &crate::domain::PublicBase) -> Option<String> {
        let code = self.code.as_deref()?;
        if matches!(self.status, RowStatus::Error(_)) {
            return None;
        }
        let mut url = String::new();
        public
            .write_link_url(&mut url, self.domain.as_deref(), code)
            .ok()?;
        Some(url)
    }
}

/// The totals of an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportTotals {
    /// Rows read.
    pub rows: u64,
    /// Links created (none in a dry run).
    pub created: u64,
    /// Rows a dry run found would be created (none in a real run).
    pub valid: u64,
    /// Rows an earlier import already brought.
    pub exists: u64,
    /// Rows refused.
    pub errors: u64,
}

impl ImportTotals {
    /// Counts `result`.
    pub fn add(&mut self, result: &RowResult) {
        self.rows += 1;
        match result.status {
            RowStatus::Created => self.created += 1,
            RowStatus::Valid => self.valid += 1,
            RowStatus::Exists => self.exists += 1,
            RowStatus::Error(_) => self.errors += 1,
        }
    }
}

/// One import in progress: its caller, batch number and mode.
struct Import {
    caller: Caller,
    batch: i64,
    dry_run: bool,
    /// The branded domain the links go on (checked to be the caller's tenant's); `None`: the
    /// default domain.
    domain: Option<String>,
    /// Whether a row naming a domain of its own goes there instead.
    row_domains: bool,
    /// Hosts that mean the default domain in the rows (the public hosts of the deployment the
    /// rows come from), as [`crate::domain::plain_host`] writes them.
    default_hosts: Vec<String>,
    /// The hosts rows have named so far and whether each is the tenant's (at most
    /// [`DOMAINS_KEPT`]; past that each is looked up again).
    domains: std::sync::Mutex<HashMap<String, bool>>,
}

/// The most hosts rows name that one import remembers the answer for.
const DOMAINS_KEPT: usize = 1024;

/// The error of `made` if there are rows and every one failed as unavailable.
fn unavailable_all(made: &[(usize, RowResult)]) -> Option<Error> {
    let mut first = None;
    for (_, result) in made {
        match &result.status {
            RowStatus::Error(error @ Error::Unavailable { .. }) => {
                first.get_or_insert_with(|| error.clone());
            }
            _ => return None,
        }
    }
    first
}

/// A row of a chunk: its number and the checked row, or its refusal.
type ChunkRow = (u64, Result<ImportRow, Refusal>);

/// A row refused before it reached the store: the legacy code it gave (in a chunk, only one
/// this node can serve, so the answer names the row by it as well), and why.
pub type Refusal = (Option<String>, Error);

impl LinkService {
    /// Starts an import for `caller` (links go to its tenant); a dry run checks every row and
    /// stores nothing.
    fn start_import(&self, caller: &Caller, settings: &ImportSettings) -> Import {
        Import {
            caller: caller.clone(),
            // Positive and random: a batch number is never reused by chance.
            batch: (rand::random::<u64>() >> 1) as i64,
            dry_run: settings.dry_run,
            domain: settings.domain.clone(),
            row_domains: settings.row_domains,
            default_hosts: settings.default_hosts.clone(),
            domains: Default::default(),
        }
    }

    /// The domain `row` goes on: the import's, or (for an import that names none) the one the
    /// row names: the default domain for one of the node's own hosts or one of the import's
    /// `default_hosts`, else the importer's tenant's domain of that host, which it must have
    /// claimed (`unknown_domain`: imported elsewhere, the link would not answer where it did),
    /// and text no domain can be is `invalid_domain`.
    async fn row_domain(&self, import: &Import, row: &ImportRow) -> Result<Option<String>, Error> {
        if !import.row_domains {
            return Ok(import.domain.clone());
        }
        let Some(named) = row.domain.named() else {
            return Ok(None);
        };
        if import.default_hosts.iter().any(|h| h == named) {
            return Ok(None);
        }
        let or_default = "or, if it was the default domain where the rows come from, name it in the import's default_hosts";
        let host = match &row.domain {
            RowDomain::Host(host) | RowDomain::IfClaimed(host) => host,
            _ => {
                return Err(Error::invalid(
                    "invalid_domain",
                    format!(
                        "domain {} is no domain a link can be on; {or_default}",
                        crate::domain::echo(named)
                    ),
                ));
            }
        };
        let known = import
            .domains
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
            .copied();
        let claimed = match known {
            Some(claimed) => claimed,
            None => {
                // A host not looked up yet is a read of the store, charged as a code's is.
                self.charge_probe(&import.caller)?;
                let claimed = match self.check_domain(&import.caller, host).await {
                    Ok(()) => true,
                    Err(error) if error.code() == "unknown_domain" => false,
                    // The store's failure is the row's, and is not remembered.
                    Err(error) => return Err(error),
                };
                let mut domains = import.domains.lock().unwrap_or_else(|p| p.into_inner());
                if domains.len() < DOMAINS_KEPT {
                    domains.insert(host.clone(), claimed);
                }
                claimed
            }
        };
        if claimed {
            Ok(Some(host.clone()))
        } else if matches!(row.domain, RowDomain::IfClaimed(_)) {
            // Only a short URL's host: a peer's own (`bit.ly`), whose links come to this
            // deployment's default domain.
            Ok(None)
        } else {
            Err(Error::invalid(
                "unknown_domain",
                format!(
                    "{} is not a domain of tenant {}; claim it first (POST /api/v1/domains), {or_default}",
                    crate::domain::echo(host),
                    import.caller.tenant
                ),
            ))
        }
    }

    /// Imports one chunk of rows (at most [`CHUNK_ROWS`]); results in row order, and the
    /// error the import stops with after them, if the store failed part-way (the rows written
    /// before are answered and recorded).
    async fn import_chunk(
        &self,
        import: &Import,
        rows: Vec<ChunkRow>,
    ) -> Result<(Vec<RowResult>, Option<Error>), Error> {
        let mut results: Vec<Option<RowResult>> = vec![None; rows.len()];
        let mut coded: Vec<(usize, u64, NewLink)> = Vec::new();
        let mut generated: Vec<(usize, u64, bool, create::Row)> = Vec::new();
        for (i, (row, parsed)) in rows.into_iter().enumerate() {
            match parsed {
                Err((code, error)) => results[i] = Some(refused(row, code, error)),
                Ok(parsed) => match self.row_domain(import, &parsed).await {
                    // The store failed looking the host up: it fails every row after this one
                    // alike, so the import stops here, as it does when a write fails, with
                    // nothing of this chunk written.
                    Err(error @ (Error::Unavailable { .. } | Error::Internal(_))) => {
                        return Err(error);
                    }
                    Err(error) => results[i] = Some(refused(row, parsed.code, error)),
                    Ok(domain) => match parsed.code.clone() {
                        Some(code) => {
                            coded.push((i, row, self.imported_link(import, parsed, code, domain)))
                        }
                        None => generated.push((
                            i,
                            row,
                            parsed.private,
                            self.imported_row(import, &parsed, domain),
                        )),
                    },
                },
            }
        }
        for (i, result) in self.import_coded(import, coded).await? {
            results[i] = Some(result);
        }
        // Generated codes go in with one write per chunk; private codes (random, each its own
        // retry on a clash) and dry runs row by row.
        let (batched, single): (Vec<_>, Vec<_>) = generated
            .into_iter()
            .partition(|(_, _, private, _)| !private && !import.dry_run);
        let made = self.import_generated_many(batched).await;
        // Every row of the chunk's one write refused as unavailable: the store (or the ID
        // supply) failed, as it does for every row after it; the import stops after this
        // chunk's answers, as it does when the write of legacy codes fails, rather than
        // answering each row of the rest with the same error and spending an ID on each.
        let failed = unavailable_all(&made);
        for (i, result) in made {
            results[i] = Some(result);
        }
        let single = if failed.is_some() { Vec::new() } else { single };
        let made: Vec<(usize, RowResult)> = futures::stream::iter(single)
            .map(|(i, row, private, new)| async move {
                (i, self.import_generated(import, row, private, new).await)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for (i, result) in made {
            results[i] = Some(result);
        }
        let results: Vec<RowResult> = results.into_iter().flatten().collect();
        self.audit_chunk(import, &results).await;
        Ok((results, failed))
    }

    /// Records the links one chunk of an import created: one entry per chunk (the import's
    /// batch number, how many rows it created and the first of their codes, at most 100 and
    /// [`AUDIT_CODE_BYTES`], each of a link on a branded domain other than the import's as
    /// `host/code`, since rows may go on domains of their own), so an import of any size
    /// writes a bounded number of entries, each within the audit log's bound and never cut.
    async fn audit_chunk(&self, import: &Import, results: &[RowResult]) {
        let created: Vec<(&str, Option<&str>)> = results
            .iter()
            .filter(|r| matches!(r.status, RowStatus::Created))
            .filter_map(|r| Some((r.code.as_deref()?, r.domain.as_deref())))
            .collect();
        if import.dry_run || created.is_empty() {
            return;
        }
        let mut codes: Vec<String> = Vec::new();
        let mut bytes = 0;
        for (code, domain) in created.iter().take(100) {
            let shown = match domain {
                Some(host) if *domain != import.domain.as_deref() => format!("{host}/{code}"),
                _ => code.to_string(),
            };
            // A code and a host are ASCII that JSON writes as it is: quotes and a comma more.
            bytes += shown.len() + 3;
            if bytes > AUDIT_CODE_BYTES {
                break;
            }
            codes.push(shown);
        }
        let batch = import.batch.to_string();
        let subject = crate::audit::Subject {
            tenant: &import.caller.tenant,
            action: crate::audit::Action::LinkImport,
            kind: crate::audit::ObjectKind::Import,
            id: &batch,
        };
        let change = serde_json::json!({
            "created": created.len(),
            "codes": codes,
            "domain": &import.domain,
        });
        self.audit.record(&import.caller, subject, change).await;
    }

    /// Rows with generated codes, in one write.
    async fn import_generated_many(
        &self,
        rows: Vec<(usize, u64, bool, create::Row)>,
    ) -> Vec<(usize, RowResult)> {
        if rows.is_empty() {
            return Vec::new();
        }
        let (places, news): (Vec<(usize, u64)>, Vec<create::Row>) = rows
            .into_iter()
            .map(|(i, row, _, new)| ((i, row), new))
            .unzip();
        let made =
            create::generated_many(&self.store, &self.ids, &self.space, &self.counters, news).await;
        places
            .into_iter()
            .zip(made)
            .map(|((i, row), made)| (i, self.row_result(row, made)))
            .collect()
    }

    fn row_result(&self, row: u64, made: Result<(Link, bool), Error>) -> RowResult {
        match made {
            Ok((link, true)) => {
                self.changes.changed(&link.code);
                of_link(row, link, RowStatus::Created)
            }
            Ok((link, false)) => found(row, link),
            Err(error) => result(row, None, RowStatus::Error(error)),
        }
    }

    fn imported_link(
        &self,
        import: &Import,
        row: ImportRow,
        code: String,
        domain: Option<String>,
    ) -> NewLink {
        // An alias-shaped legacy code is unique per domain, any other one across all of them
        // (`link_key`).
        let kind =
            codespace::shape::classify(&code, self.space.length()).unwrap_or(CodeKind::Alias);
        let created_at = created_at(&row);
        NewLink {
            code: crate::domain::link_key(domain.as_deref(), &code, kind).into_owned(),
            domain,
            routes: row.routes.clone(),
            url: row.url.as_str().to_string(),
            // A legacy code has no ID here: it is filed as a named code, whatever its shape.
            kind: CodeKind::Alias,
            id: None,
            expires_at: row.expires_at,
            tenant: import.caller.tenant.to_string(),
            owner: import.caller.key.to_string(),
            dedup_key: None,
            idempotency: None,
            tags: row.tags,
            max_visits: row.max_visits,
            import_batch: Some(import.batch),
            created_at,
            password: None,
            trace: otel::current_traceparent(),
            audit: None,
        }
    }

    fn imported_row(
        &self,
        import: &Import,
        row: &ImportRow,
        domain: Option<String>,
    ) -> create::Row {
        let dedup_key = import_dedup_key(&import.caller.tenant, domain.as_deref(), row);
        create::Row {
            url: row.url.as_str().to_string(),
            expires_at: row.expires_at,
            tenant: import.caller.tenant.to_string(),
            owner: import.caller.key.to_string(),
            dedup_key: Some(dedup_key),
            idempotency: None,
            tags: row.tags.clone(),
            max_visits: row.max_visits,
            // Generated codes are this node's own: only legacy codes carry the batch (which is
            // what lets a generated create step over a legacy code without an alarm).
            import_batch: None,
            created_at: created_at(row),
            password: None,
            domain,
            routes: row.routes.clone(),
            // The import records its chunks in the audit log, not each row.
            audit: None,
        }
    }

    /// The rows with legacy codes: one insert, then a read of the codes that were taken.
    async fn import_coded(
        &self,
        import: &Import,
        rows: Vec<(usize, u64, NewLink)>,
    ) -> Result<Vec<(usize, RowResult)>, Error> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        // A dry run's answer about a code is a read of it: each is charged to the key's read
        // budget before the code is looked at, and a row past the budget is answered
        // `rate_limited` without looking (so a dry run probes codes no faster than reads do).
        let probes: Vec<Result<(), Error>> = rows
            .iter()
            .map(|_| {
                if import.dry_run {
                    self.charge_probe(&import.caller)
                } else {
                    Ok(())
                }
            })
            .collect();
        let outcomes = if import.dry_run {
            vec![InsertOutcome::CodeTaken; rows.len()]
        } else {
            self.store
                .insert_many(rows.iter().map(|(_, _, link)| link.clone()).collect())
                .await?
        };
        let taken: Vec<String> = rows
            .iter()
            .zip(&outcomes)
            .zip(&probes)
            .filter(|((_, o), probe)| !matches!(o, InsertOutcome::Created(_)) && probe.is_ok())
            .map(|(((_, _, link), _), _)| link.code.clone())
            .collect();
        // The rows written are committed by now: a failure to read the holders of the others
        // answers those rows with it, never the whole chunk (whose created links must still
        // be reported, and audited).
        let (holders, unread): (HashMap<String, Link>, Option<Error>) = if taken.is_empty() {
            (HashMap::new(), None)
        } else {
            match self.store.get_many(&taken).await {
                Ok(links) => (
                    links
                        .into_iter()
                        .map(|link| (link.code.clone(), link))
                        .collect(),
                    None,
                ),
                Err(error) if !import.dry_run => (HashMap::new(), Some(error.into())),
                Err(error) => return Err(error.into()),
            }
        };
        let mut seen_in_chunk: HashSet<&str> = HashSet::new();
        let mut results = Vec::with_capacity(rows.len());
        for (((i, row, link), outcome), probe) in rows.iter().zip(outcomes).zip(probes) {
            // A code this chunk held before: a duplicate whatever the first one found (on a
            // rerun that is the link the last run made, which alone would read as `exists`).
            let repeated = !seen_in_chunk.insert(&link.code);
            let status = match (outcome, holders.get(&link.code), probe) {
                (_, _, Err(limited)) => RowStatus::Error(limited),
                (InsertOutcome::Created(made), _, _) => {
                    self.changes.changed(&made.code);
                    RowStatus::Created
                }
                _ if repeated => RowStatus::Error(duplicate(&link.code)),
                // A dry run reads what a real run would find.
                (_, None, _) if import.dry_run => RowStatus::Valid,
                (_, Some(holder), _) => match self.classify_taken(import, link, holder) {
                    // A real import learns a code is taken only by failing to write it, as a
                    // create would; that answer is charged as a read too, so that a run of
                    // guesses costs what reading them would.
                    RowStatus::Error(error) if !import.dry_run && error.code() == "code_taken" => {
                        match self.charge_probe(&import.caller) {
                            Ok(()) => RowStatus::Error(error),
                            Err(limited) => RowStatus::Error(limited),
                        }
                    }
                    status => status,
                },
                // Taken a moment ago and gone since cannot happen (rows are never removed);
                // report it as taken rather than guess, unless its holder could not be read.
                (_, None, _) => {
                    RowStatus::Error(unread.clone().unwrap_or_else(|| code_taken(&link.code)))
                }
            };
            results.push((
                *i,
                RowResult {
                    row: *row,
                    code: Some(shown_code(&link.code).to_string()),
                    status,
                    domain: link.domain.clone(),
                },
            ));
        }
        Ok(results)
    }

    /// Charges one answer about a code to `caller`'s read budget: `RateLimited` once it is
    /// spent.
    fn charge_probe(&self, caller: &Caller) -> Result<(), Error> {
        self.rates
            .read(&caller.key_id())
            .map_err(|retry_after| Error::RateLimited { retry_after })
    }

    /// Why a legacy code of this import is taken by `holder`.
    fn classify_taken(&self, import: &Import, link: &NewLink, holder: &Link) -> RowStatus {
        let ours = *holder.tenant == *import.caller.tenant;
        if ours && holder.import_batch == Some(import.batch) {
            RowStatus::Error(duplicate(&link.code))
        } else if ours && holder.deleted_at.is_some() {
            // The caller's own link, deleted: `exists` would point at a code that answers 410,
            // and a deleted code is never given out again (docs/design.md).
            RowStatus::Error(code_deleted(&link.code))
        } else if ours && holder.url == link.url && holder.domain == link.domain {
            RowStatus::Exists
        } else {
            RowStatus::Error(code_taken(&link.code))
        }
    }

    /// A row without a code: a generated (or private) one, or, dry, the check that its link is
    /// not there yet.
    async fn import_generated(
        &self,
        import: &Import,
        row: u64,
        private: bool,
        new: create::Row,
    ) -> RowResult {
        let dedup_key = new.dedup_key.clone().unwrap_or_default();
        if import.dry_run {
            return match self.store.find_dedup(&dedup_key).await {
                Ok(Some(link)) => found(row, link),
                Ok(None) => result(row, None, RowStatus::Valid),
                Err(error) => result(row, None, RowStatus::Error(error.into())),
            };
        }
        let made = if private {
            create::private(&self.store, new).await
        } else {
            create::generated(&self.store, &self.ids, &self.space, &self.counters, new).await
        };
        self.row_result(row, made)
    }
}

/// The result of a row without a code whose link an earlier import made: `exists`, or, when
/// that link was deleted since (it keeps its dedup key for this), refused: importing the row
/// again must not bring a deleted link back under a new code.
fn found(row: u64, link: Link) -> RowResult {
    if link.deleted_at.is_some() {
        let error = Error::invalid(
            "code_deleted",
            format!(
                "this row's link, {}, made by an earlier import, was deleted; an import does not \
                 make it again (create a new link with POST /api/v1/links)",
                crate::domain::echo(shown_code(&link.code))
            ),
        );
        return of_link(row, link, RowStatus::Error(error));
    }
    of_link(row, link, RowStatus::Exists)
}

/// When a row's link was made: its own `created_at`, or for a row without one that is
/// imported already expired, its expiry (its link cannot have been made after it expired,
/// and its export must import again); otherwise none, which the store makes the time of the
/// write. Not part of the row's dedup key, which is over the row as given.
fn created_at(row: &ImportRow) -> Option<chrono::DateTime<chrono::Utc>> {
    row.created_at
        .or(row.expires_at.filter(|at| *at <= chrono::Utc::now()))
}

/// A row's result; `code` is a link's key, answered as the code people type.
fn result(row: u64, code: Option<String>, status: RowStatus) -> RowResult {
    let code = code.map(|key| shown_code(&key).to_string());
    RowResult {
        row,
        code,
        status,
        domain: None,
    }
}

/// Row `row`'s result with `status`, for its `link`.
fn of_link(row: u64, link: Link, status: RowStatus) -> RowResult {
    RowResult {
        domain: link.domain,
        ..result(row, Some(link.code), status)
    }
}

/// Row `row` (its legacy code, if it has one) refused for `error`.
fn refused(row: u64, code: Option<String>, error: Error) -> RowResult {
    result(row, code, RowStatus::Error(error))
}

fn duplicate(code: &str) -> Error {
    Error::invalid(
        "duplicate_code",
        format!(
            "the code {} appears more than once in this import",
            crate::domain::echo(shown_code(code))
        ),
    )
}

fn code_deleted(code: &str) -> Error {
    Error::invalid(
        "code_deleted",
        format!(
            "the code {} belonged to a link of yours that was deleted; a deleted code is never reused",
            crate::domain::echo(shown_code(code))
        ),
    )
}

fn code_taken(code: &str) -> Error {
    Error::invalid(
        "code_taken",
        format!(
            "the code {} is taken",
            crate::domain::echo(shown_code(code))
        ),
    )
}

/// The dedup key of an imported row without a code: one link per (tenant, target, expiry,
/// creation time, private or not), so the same rows imported twice make their links once.
fn import_dedup_key(tenant: &str, domain: Option<&str>, row: &ImportRow) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"import v1");
    if let Some(host) = domain {
        // On a branded domain, per domain too (the default domain's keys are those of before).
        h.update(b"\0domain\0");
        h.update(host.as_bytes());
    }
    for field in [
        tenant.as_bytes(),
        row.url.as_str().as_bytes(),
        &row.expires_at
            .map_or(i64::MIN, |t| t.timestamp_micros())
            .to_be_bytes(),
        &row.created_at
            .map_or(i64::MIN, |t| t.timestamp_micros())
            .to_be_bytes(),
        &[u8::from(row.private)],
    ] {
        h.update([0]);
        h.update(field);
    }
    h.finalize().to_vec()
}
