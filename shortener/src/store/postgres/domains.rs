//! Branded domains on PostgreSQL: one row per host, the primary key deciding between claims.
//! Read on the primary: a claim is followed by reads of it at once. Every claim, change and
//! removal announces its host on [`DOMAIN_NOTIFY_CHANNEL`] in its own statement, so every node
//! drops what it cached of the host ([`crate::domains::DomainCache`]).

use super::error::db_error;
use super::send::Conn;
use crate::domain::{Domain, DomainSettings, Robots};
use crate::store::{DomainRemoval, LIVE_LINKS_COUNTED, StoreError};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

const COLUMNS: &str = "host, tenant, created_at, created_by, root_url, not_found_url, expired_url, redirect_status, robots, apple_app_site_association, assetlinks";

/// The channel claims, changes and removals of domains are announced on (the payload is the
/// host), committed with them.
pub const DOMAIN_NOTIFY_CHANNEL: &str = "shortener_domain_changes";

fn domain(row: &Row) -> Domain {
    let status: Option<i16> = row.get(7);
    let robots: String = row.get(8);
    Domain {
        host: row.get(0),
        tenant: row.get(1),
        created_at: row.get(2),
        created_by: row.get(3),
        settings: DomainSettings {
            root_url: row.get(4),
            not_found_url: row.get(5),
            expired_url: row.get(6),
            redirect_status: status.and_then(|s| u16::try_from(s).ok()),
            robots: Robots::from_name(&robots).unwrap_or_default(),
            apple_app_site_association: row.get(9),
            assetlinks: row.get(10),
        },
    }
}

fn status(settings: &DomainSettings) -> Option<i16> {
    settings.redirect_status.and_then(|s| i16::try_from(s).ok())
}

pub(super) async fn insert(client: &Conn, d: &Domain) -> Result<Option<Domain>, StoreError> {
    let s = &d.settings;
    let params: [&(dyn ToSql + Sync); 11] = [
        &d.host,
        &d.tenant,
        &d.created_by,
        &s.root_url,
        &s.not_found_url,
        &s.expired_url,
        &status(s),
        &s.robots.name(),
        &s.apple_app_site_association,
        &s.assetlinks,
        &DOMAIN_NOTIFY_CHANNEL,
    ];
    let row = client
        .query_opt(
            &format!(
                "WITH claimed AS (INSERT INTO domains (host, tenant, created_by, root_url, not_found_url, expired_url, redirect_status, robots, apple_app_site_association, assetlinks) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (host) DO NOTHING RETURNING {COLUMNS}) \
                 SELECT {COLUMNS} FROM claimed, LATERAL pg_notify($11, claimed.host)"
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(domain))
}

pub(super) async fn get(
    client: &Conn,
    host: &str,
    tenant: Option<&str>,
) -> Result<Option<Domain>, StoreError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM domains WHERE host = $1 AND ($2::text IS NULL OR tenant = $2)"
            ),
            &[&host, &tenant],
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(domain))
}

pub(super) async fn list(
    client: &Conn,
    tenant: Option<&str>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Domain>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM domains WHERE ($1::text IS NULL OR tenant = $1) \
                 AND ($2::text IS NULL OR host > $2) ORDER BY host LIMIT $3"
            ),
            &[&tenant, &after, &limit],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(domain).collect())
}

pub(super) async fn set_settings(
    client: &Conn,
    host: &str,
    tenant: Option<&str>,
    s: &DomainSettings,
) -> Result<Option<Domain>, StoreError> {
    let params: [&(dyn ToSql + Sync); 10] = [
        &host,
        &tenant,
        &s.root_url,
        &s.not_found_url,
        &s.expired_url,
        &status(s),
        &s.robots.name(),
        &s.apple_app_site_association,
        &s.assetlinks,
        &DOMAIN_NOTIFY_CHANNEL,
    ];
    let row = client
        .query_opt(
            &format!(
                "WITH changed AS (UPDATE domains SET root_url = $3, not_found_url = $4, expired_url = $5, redirect_status = $6, robots = $7, \
                 apple_app_site_association = $8, assetlinks = $9 \
                 WHERE host = $1 AND ($2::text IS NULL OR tenant = $2) RETURNING {COLUMNS}) \
                 SELECT {COLUMNS} FROM changed, LATERAL pg_notify($10, changed.host)"
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(domain))
}

pub(super) async fn delete(
    client: &Conn,
    host: &str,
    tenant: Option<&str>,
) -> Result<DomainRemoval, StoreError> {
    // One statement: the count, the delete and the notification see one snapshot. A create on
    // the domain that commits meanwhile keeps its link, which then answers nowhere (a link
    // answers on a branded domain only while the domain is its tenant's) until the tenant
    // claims the host again.
    let row = client
        .query_one(
            "WITH live AS (SELECT count(*) AS n FROM (SELECT 1 FROM links WHERE domain = $1 AND deleted_at IS NULL LIMIT $4) l), \
             removed AS (DELETE FROM domains WHERE host = $1 AND ($2::text IS NULL OR tenant = $2) \
                 AND (SELECT n FROM live) = 0 RETURNING host) \
             SELECT (SELECT count(*) FROM removed, LATERAL pg_notify($3, removed.host)), (SELECT n FROM live), \
                 EXISTS (SELECT 1 FROM domains WHERE host = $1 AND ($2::text IS NULL OR tenant = $2))",
            &[&host, &tenant, &DOMAIN_NOTIFY_CHANNEL, &LIVE_LINKS_COUNTED],
        )
        .await
        .map_err(db_error)?;
    let (removed, live, exists): (i64, i64, bool) = (row.get(0), row.get(1), row.get(2));
    Ok(DomainRemoval::of(removed == 1, exists, live))
}
