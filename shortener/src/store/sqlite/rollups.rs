//! Click rollups on SQLite: additive upserts (per-link rows, link day totals and tenant-level
//! rows in one transaction), compaction and retention as plain statements in one transaction
//! each, and the stats queries (see [`crate::store::rollups`]).

use super::rows::db_error;
use crate::domain::stats::DAY;
use crate::domain::{StatsQuery, StatsReport};
use crate::store::StoreError;
use crate::store::rollups::{
    Flavor, Param, RollupOutcome, RollupPlan, RollupRow, link_days, report, stats_sql, tenant_rows,
};
use rusqlite::types::Value;
use rusqlite::{Connection, TransactionBehavior, params};

/// Adds `rows` in one transaction.
pub(super) fn add(conn: &mut Connection, rows: &[RollupRow]) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    {
        let mut upsert = tx
            .prepare_cached(
                "INSERT INTO click_hourly (tenant, code, bucket, referrer, device, country, human, bot, head) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT (code, bucket, referrer, device, country) DO UPDATE SET \
                   human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head",
            )
            .map_err(db_error)?;
        for r in rows {
            upsert
                .execute(params![
                    r.tenant,
                    r.code,
                    r.bucket,
                    r.referrer,
                    r.device,
                    r.country,
                    r.counts.human as i64,
                    r.counts.bot as i64,
                    r.counts.head as i64
                ])
                .map_err(db_error)?;
        }
        let mut upsert = tx
            .prepare_cached(
                "INSERT INTO link_day_totals (tenant, day, code, visits) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (tenant, day, code) DO UPDATE SET visits = visits + excluded.visits",
            )
            .map_err(db_error)?;
        for (tenant, day, code, visits) in link_days(rows) {
            upsert
                .execute(params![tenant, day, code, visits])
                .map_err(db_error)?;
        }
        let mut upsert = tx
            .prepare_cached(
                "INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (tenant, bucket, dim, name) DO UPDATE SET \
                   human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head",
            )
            .map_err(db_error)?;
        for r in tenant_rows(rows) {
            let [human, bot, head] = r.counts;
            upsert
                .execute(params![r.tenant, r.bucket, r.dim, r.name, human, bot, head])
                .map_err(db_error)?;
        }
    }
    tx.commit().map_err(db_error)
}

/// Carries out `plan` in one transaction: hours before the compaction boundary folded into
/// daily rows and deleted, daily rows before the retention boundary deleted; the tenant-level
/// rows and the link day totals alike.
pub(super) fn maintain(
    conn: &mut Connection,
    plan: &RollupPlan,
) -> Result<RollupOutcome, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    tx.execute(
        &format!(
            "INSERT INTO click_daily (tenant, code, bucket, referrer, device, country, human, bot, head) \
             SELECT min(tenant), code, bucket - bucket % {DAY} AS day, referrer, device, country, \
                    sum(human), sum(bot), sum(head) \
             FROM click_hourly WHERE bucket < ?1 GROUP BY code, day, referrer, device, country \
             ON CONFLICT (code, bucket, referrer, device, country) DO UPDATE SET \
               human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head"
        ),
        [plan.compact_before],
    )
    .map_err(db_error)?;
    let compacted = tx
        .execute(
            "DELETE FROM click_hourly WHERE bucket < ?1",
            [plan.compact_before],
        )
        .map_err(db_error)? as u64;
    tx.execute(
        &format!(
            "INSERT INTO tenant_daily (tenant, bucket, dim, name, human, bot, head) \
             SELECT tenant, bucket - bucket % {DAY} AS day, dim, name, sum(human), sum(bot), sum(head) \
             FROM tenant_hourly WHERE bucket < ?1 GROUP BY tenant, day, dim, name \
             ON CONFLICT (tenant, bucket, dim, name) DO UPDATE SET \
               human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head"
        ),
        [plan.compact_before],
    )
    .map_err(db_error)?;
    tx.execute(
        "DELETE FROM tenant_hourly WHERE bucket < ?1",
        [plan.compact_before],
    )
    .map_err(db_error)?;
    let expired = match plan.expire_before {
        Some(before) => {
            let expired = tx
                .execute("DELETE FROM click_daily WHERE bucket < ?1", [before])
                .map_err(db_error)? as u64;
            tx.execute("DELETE FROM tenant_daily WHERE bucket < ?1", [before])
                .map_err(db_error)?;
            // Retention is longer than the compaction age, so every day before it is in
            // `click_daily` alone: its total goes with its daily rows.
            tx.execute("DELETE FROM link_day_totals WHERE day < ?1", [before])
                .map_err(db_error)?;
            expired
        }
        None => 0,
    };
    tx.commit().map_err(db_error)?;
    Ok(RollupOutcome { compacted, expired })
}

/// The report of `query`.
pub(super) fn stats(conn: &Connection, query: &StatsQuery) -> Result<StatsReport, StoreError> {
    let sql = stats_sql(query, Flavor::Sqlite);
    let values = |statement: &crate::store::rollups::Statement| -> Vec<Value> {
        statement
            .params
            .iter()
            .map(|p| match p {
                Param::Text(t) => Value::Text(t.clone()),
                Param::Int(n) => Value::Integer(*n),
            })
            .collect()
    };
    let mut select = conn.prepare_cached(&sql.series.sql).map_err(db_error)?;
    let series = select
        .query_map(rusqlite::params_from_iter(values(&sql.series)), |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?]))
        })
        .map_err(db_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_error)?;
    let mut tops = Vec::with_capacity(sql.tops.len());
    for statement in &sql.tops {
        let mut select = conn.prepare_cached(&statement.sql).map_err(db_error)?;
        let rows = select
            .query_map(rusqlite::params_from_iter(values(statement)), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(db_error)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_error)?;
        tops.push(rows);
    }
    Ok(report(series, tops))
}
