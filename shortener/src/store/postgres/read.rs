//! Reading links.

use super::error::db_error;
use super::{LINK_COLUMNS, link_from_row};
use crate::domain::{ClickCounts, Link};
use crate::store::StoreError;

/// The link with `code`, without click counts.
pub(super) async fn get(
    client: &tokio_postgres::Client,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {LINK_COLUMNS} FROM links WHERE code = $1"),
            &[&code],
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_from_row))
}

/// The link with `code` and its click counts.
pub(super) async fn get_with_clicks(
    client: &tokio_postgres::Client,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    let row = client
        .query_opt(
            "SELECT l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at, l.tenant, c.human, c.head, c.bot \
             FROM links l LEFT JOIN link_clicks c ON c.code = l.code WHERE l.code = $1",
            &[&code],
        )
        .await
        .map_err(db_error)?;
    Ok(row.map(|row| {
        let mut link = link_from_row(&row);
        let count = |i: usize| row.get::<_, Option<i64>>(i).unwrap_or(0).max(0) as u64;
        link.clicks = ClickCounts {
            human: count(6),
            head: count(7),
            bot: count(8),
        };
        link
    }))
}

/// The live link with `dedup_key`.
pub(super) async fn find_dedup(
    client: &tokio_postgres::Client,
    dedup_key: &[u8],
) -> Result<Option<Link>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {LINK_COLUMNS} FROM links WHERE dedup_key = $1"),
            &[&dedup_key],
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_from_row))
}

/// How many links exist.
pub(super) async fn count(client: &tokio_postgres::Client) -> Result<u64, StoreError> {
    let row = client
        .query_one("SELECT count(*) FROM links", &[])
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as u64)
}
