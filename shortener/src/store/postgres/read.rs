//! Reading links and the blocked domains.

use super::error::db_error;
use super::layout::{Find, Layout, slot_of};
use super::send::Conn;
use super::{L_LINK_COLUMNS, LINK_COLUMNS, link_from_row, link_with_clicks};
use crate::domain::Link;
use crate::store::{BlockedDomain, Mark, StoreError};
use std::sync::LazyLock;
use tokio_postgres::types::ToSql;

/// The link with `code`, without click counts: the read of a redirect's cache miss, so its
/// statement is prepared once per connection.
pub(super) async fn get(
    client: &Conn,
    layout: &Layout,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    static SQL: LazyLock<[String; 3]> = LazyLock::new(|| {
        [Find::Code, Find::Slot(0), Find::Named]
            .map(|f| format!("SELECT {LINK_COLUMNS} FROM links WHERE {}", f.clause("", 2)))
    });
    let find = layout.find(code);
    let row = client
        .prepared_query_opt(&SQL[find.variant()], &params(&code, &find))
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_from_row))
}

/// The link with `code` and its click counts.
pub(super) async fn get_with_clicks(
    client: &Conn,
    layout: &Layout,
    code: &str,
) -> Result<Option<Link>, StoreError> {
    static SQL: LazyLock<[String; 3]> = LazyLock::new(|| {
        [Find::Code, Find::Slot(0), Find::Named].map(|f| {
            format!(
                "SELECT {L_LINK_COLUMNS}, c.human, c.head, c.bot \
                 FROM links l LEFT JOIN link_clicks c ON c.code = l.code WHERE {}",
                f.clause("l", 2)
            )
        })
    });
    let find = layout.find(code);
    let row = client
        .prepared_query_opt(&SQL[find.variant()], &params(&code, &find))
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_with_clicks))
}

/// The parameters of a statement that finds one code's row: the code, and its slot if the
/// clause needs one.
pub(super) fn params<'a>(code: &'a &str, find: &'a Find) -> Vec<&'a (dyn ToSql + Sync)> {
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![code];
    params.extend(find.param());
    params
}

/// The link with `dedup_key`, live or not (asked by every dedup create, so prepared once).
pub(super) async fn find_dedup(
    client: &Conn,
    dedup_key: &[u8],
) -> Result<Option<Link>, StoreError> {
    let row = client
        .prepared_query_opt(
            &format!("SELECT {LINK_COLUMNS} FROM links WHERE dedup_key = $1"),
            &[&dedup_key],
        )
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(link_from_row))
}

/// The highest slot a row holds, or `-1` for none: the last entry of the slot index (only
/// asked in the slot layout, where that index exists), a few pages whatever the table's size;
/// and whether a named row holds a code of generated shape for base length `length` (which
/// then decodes to no ID: one that decodes sits at its slot), from the first entries of the
/// index of named base62 codes by length (PostgreSQL migration 29). `None` when the connection
/// reaches a server that accepts no writes (a standby, or a primary demoted since): its rows
/// may be behind the primary's, so its mark bounds nothing, and the pool's connections made
/// before are marked for eviction ([`pgtls::evict`]).
pub(super) async fn high_water(client: &Conn, length: usize) -> Result<Option<Mark>, StoreError> {
    let length = length as i32;
    let longest = codespace::MAX_GENERATED_LENGTH as i32;
    let row = client
        .prepared_query_one(
            "SELECT (SELECT coalesce(max(slot), -1) FROM links), EXISTS (SELECT 1 FROM links \
             WHERE slot < 0 AND code ~ '^[0-9A-Za-z]+$' AND length(code) BETWEEN $1 AND $2), \
             current_setting('transaction_read_only') = 'on'",
            &[&length, &longest],
        )
        .await
        .map_err(db_error)?;
    if row.get::<_, bool>(2) {
        pgtls::evict::mark();
        return Ok(None);
    }
    Ok(Some(Mark {
        slot: row.get(0),
        undecodable: row.get(1),
    }))
}

/// How many links exist.
pub(super) async fn count(client: &Conn) -> Result<u64, StoreError> {
    let row = client
        .query_one("SELECT count(*) FROM links", &[])
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// The links holding `codes` (those that exist), with their click counts.
pub(super) async fn get_many(
    client: &Conn,
    layout: &Layout,
    codes: &[String],
) -> Result<Vec<Link>, StoreError> {
    let select = format!(
        "SELECT {L_LINK_COLUMNS}, c.human, c.head, c.bot FROM links l LEFT JOIN link_clicks c ON c.code = l.code"
    );
    let rows = if layout.by_slot() {
        // A slot holds one code only (decoding is a bijection); the code is compared anyway.
        let (mut slots, mut named) = (Vec::new(), Vec::new());
        for code in codes {
            match slot_of(layout.space(), code) {
                Some(slot) => slots.push(slot),
                None => named.push(code.as_str()),
            }
        }
        client
            .query(
                // Two index probes per code, not an OR (which would read every named row).
                &format!(
                    "{select} WHERE l.slot = ANY($2) AND l.code = ANY($1) \
                     UNION ALL {select} WHERE l.slot < 0 AND l.code = ANY($3)"
                ),
                &[&codes, &slots, &named],
            )
            .await
    } else {
        client
            .query(&format!("{select} WHERE l.code = ANY($1)"), &[&codes])
            .await
    };
    Ok(rows
        .map_err(db_error)?
        .iter()
        .map(link_with_clicks)
        .collect())
}

/// The domains blocked through the admin API, in entry order.
pub(super) async fn blocked_domains(client: &Conn) -> Result<Vec<BlockedDomain>, StoreError> {
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
