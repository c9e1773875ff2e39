//! Branded domains on SQLite: one row per host, the primary key deciding between claims (all
//! writes go through the one writer thread, in order).

use super::convert::{db_error, from_millis, millis};
use crate::domain::{Domain, DomainSettings, Robots};
use crate::store::{DomainRemoval, LIVE_LINKS_COUNTED, StoreError};
use chrono::Utc;
use rusqlite::{Connection, OptionalExtension, Row, params};

const COLUMNS: &str = "host, tenant, created_at, created_by, root_url, not_found_url, expired_url, redirect_status, robots, apple_app_site_association, assetlinks";

fn domain(row: &Row<'_>) -> rusqlite::Result<Domain> {
    let status: Option<i64> = row.get(7)?;
    let robots: String = row.get(8)?;
    Ok(Domain {
        host: row.get(0)?,
        tenant: row.get(1)?,
        created_at: from_millis(row.get(2)?),
        created_by: row.get(3)?,
        settings: DomainSettings {
            root_url: row.get(4)?,
            not_found_url: row.get(5)?,
            expired_url: row.get(6)?,
            redirect_status: status.and_then(|s| u16::try_from(s).ok()),
            robots: Robots::from_name(&robots).unwrap_or_default(),
            apple_app_site_association: row.get(9)?,
            assetlinks: row.get(10)?,
        },
    })
}

pub(super) fn insert(conn: &Connection, d: &Domain) -> Result<Option<Domain>, StoreError> {
    let s = &d.settings;
    conn.query_row(
        &format!(
            "INSERT INTO domains (host, tenant, created_at, created_by, root_url, not_found_url, expired_url, redirect_status, robots, apple_app_site_association, assetlinks) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (host) DO NOTHING RETURNING {COLUMNS}"
        ),
        params![
            d.host,
            d.tenant,
            millis(Utc::now()),
            d.created_by,
            s.root_url,
            s.not_found_url,
            s.expired_url,
            s.redirect_status,
            s.robots.name(),
            s.apple_app_site_association,
            s.assetlinks
        ],
        domain,
    )
    .optional()
    .map_err(db_error)
}

pub(super) fn get(
    conn: &Connection,
    host: &str,
    tenant: Option<&str>,
) -> Result<Option<Domain>, StoreError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM domains WHERE host = ?1 AND (?2 IS NULL OR tenant = ?2)"),
        params![host, tenant],
        domain,
    )
    .optional()
    .map_err(db_error)
}

pub(super) fn list(
    conn: &Connection,
    tenant: Option<&str>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Domain>, StoreError> {
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM domains WHERE (?1 IS NULL OR tenant = ?1) \
             AND (?2 IS NULL OR host > ?2) ORDER BY host LIMIT ?3"
        ))
        .map_err(db_error)?;
    let rows = select
        .query_map(params![tenant, after, limit], domain)
        .map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

pub(super) fn set_settings(
    conn: &Connection,
    host: &str,
    tenant: Option<&str>,
    s: &DomainSettings,
) -> Result<Option<Domain>, StoreError> {
    conn.query_row(
        &format!(
            "UPDATE domains SET root_url = ?3, not_found_url = ?4, expired_url = ?5, redirect_status = ?6, robots = ?7, \
             apple_app_site_association = ?8, assetlinks = ?9 WHERE host = ?1 AND (?2 IS NULL OR tenant = ?2) RETURNING {COLUMNS}"
        ),
        params![
            host,
            tenant,
            s.root_url,
            s.not_found_url,
            s.expired_url,
            s.redirect_status,
            s.robots.name(),
            s.apple_app_site_association,
            s.assetlinks
        ],
        domain,
    )
    .optional()
    .map_err(db_error)
}

pub(super) fn delete(
    conn: &mut Connection,
    host: &str,
    tenant: Option<&str>,
) -> Result<DomainRemoval, StoreError> {
    // One write transaction: no create on the domain commits between the count and the delete.
    let tx = conn.transaction().map_err(db_error)?;
    let exists: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM domains WHERE host = ?1 AND (?2 IS NULL OR tenant = ?2))",
            params![host, tenant],
            |r| r.get(0),
        )
        .map_err(db_error)?;
    let live: i64 = tx
        .query_row(
            "SELECT count(*) FROM (SELECT 1 FROM links WHERE domain = ?1 AND deleted_at IS NULL LIMIT ?2)",
            params![host, LIVE_LINKS_COUNTED],
            |r| r.get(0),
        )
        .map_err(db_error)?;
    let removed = exists
        && live == 0
        && tx
            .execute(
                "DELETE FROM domains WHERE host = ?1 AND (?2 IS NULL OR tenant = ?2)",
                params![host, tenant],
            )
            .map_err(db_error)?
            == 1;
    tx.commit().map_err(db_error)?;
    Ok(DomainRemoval::of(removed, exists, live))
}
