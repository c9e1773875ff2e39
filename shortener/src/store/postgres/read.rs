//! Reading links and the blocked domains.

use super::error::db_error;
use super::{L_LINK_COLUMNS, LINK_COLUMNS, link_from_row, link_with_clicks};
use crate::domain::Link;
use crate::store::{BlockedDomain, StoreError};

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
            &format!(
                "SELECT {L_LINK_COLUMNS}, c.human, c.head, c.bot \
                 FROM links l LEFT JOIN link_clicks c ON c.code = l.code WHERE l.code = $1"
            ),
            &[&code],
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_with_clicks))
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

/// The links holding `codes` (those that exist), with their click counts.
pub(super) async fn get_many(
    client: &tokio_postgres::Client,
    codes: &[String],
) -> Result<Vec<Link>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {L_LINK_COLUMNS}, c.human, c.head, c.bot \
                 FROM links l LEFT JOIN link_clicks c ON c.code = l.code WHERE l.code = ANY($1)"
            ),
            &[&codes],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(link_with_clicks).collect())
}

/// The domains blocked through the admin API, in entry order.
pub(super) async fn blocked_domains(
    client: &tokio_postgres::Client,
) -> Result<Vec<BlockedDomain>, StoreError> {
    let rows = client
        .query(
            "SELECT entry, added_at, added_by FROM blocked_domains ORDER BY entry",
            &[],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| BlockedDomain {
            entry: r.get(0),
            added_at: r.get(1),
            added_by: r.get(2),
        })
        .collect())
}
