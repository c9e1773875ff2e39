//! Click rollups on SQLite: additive upserts (per-link rows, link day totals and tenant-level
//! rows in one transaction), compaction and retention as plain statements in one transaction
//! each, and the stats queries (see [`crate::store::rollups`]).

use super::convert::{db_error, millis};
use crate::domain::stats::DAY;
use crate::domain::{StatsQuery, StatsReport};
use crate::store::rollups::{
    Flavor, Param, RollupOutcome, RollupPlan, RollupRow, link_days, report, stats_sql, tenant_rows,
};
use crate::store::{BatchMark, MARKS_KEPT_DAYS, StoreError};
use chrono::Utc;
use rusqlite::types::Value;
use rusqlite::{Connection, TransactionBehavior};

/// Sizes of the multi-row upserts a batch is cut into, largest first: each size's statement is
/// prepared once and cached, and a batch of up to a thousand rows runs at most a few dozen of
/// them instead of a bind, step and reset per row.
const STATEMENT_ROWS: [usize; 4] = [1000, 100, 10, 1];

/// One additive upsert, written for any number of rows.
struct Upsert {
    /// `INSERT INTO t (columns)`.
    insert: &'static str,
    /// Values per row.
    width: usize,
    /// `ON CONFLICT ... DO UPDATE ...`.
    conflict: &'static str,
}

impl Upsert {
    /// The statement for `rows` rows: one `VALUES` list of them all.
    fn text(&self, rows: usize) -> String {
        let row = format!("({})", vec!["?"; self.width].join(", "));
        let mut sql = String::with_capacity(
            self.insert.len() + self.conflict.len() + rows * (row.len() + 2) + 16,
        );
        sql.push_str(self.insert);
        sql.push_str(" VALUES ");
        for i in 0..rows {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&row);
        }
        sql.push(' ');
        sql.push_str(self.conflict);
        sql
    }

    /// Runs the upsert over `rows`, with `bind` setting one row's values from the given
    /// (1-based) parameter index on.
    fn run<T>(
        &self,
        tx: &rusqlite::Transaction<'_>,
        rows: &[T],
        bind: impl Fn(&mut rusqlite::CachedStatement<'_>, usize, &T) -> rusqlite::Result<()>,
    ) -> Result<(), StoreError> {
        let mut rest = rows;
        for size in STATEMENT_ROWS {
            if rest.len() < size {
                continue;
            }
            let mut statement = tx.prepare_cached(&self.text(size)).map_err(db_error)?;
            while rest.len() >= size {
                let (now, later) = rest.split_at(size);
                for (i, row) in now.iter().enumerate() {
                    bind(&mut statement, i * self.width + 1, row).map_err(db_error)?;
                }
                statement.raw_execute().map_err(db_error)?;
                rest = later;
            }
        }
        Ok(())
    }
}

const CLICK_HOURLY: Upsert = Upsert {
    insert: "INSERT INTO click_hourly (tenant, code, bucket, referrer, device, country, human, bot, head, route)",
    width: 10,
    conflict: "ON CONFLICT (code, bucket, referrer, device, country, route) DO UPDATE SET \
               human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head",
};

const LINK_DAY_TOTALS: Upsert = Upsert {
    insert: "INSERT INTO link_day_totals (tenant, day, code, visits)",
    width: 4,
    conflict: "ON CONFLICT (tenant, day, code) DO UPDATE SET visits = visits + excluded.visits",
};

const TENANT_HOURLY: Upsert = Upsert {
    insert: "INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head)",
    width: 7,
    conflict: "ON CONFLICT (tenant, bucket, dim, name) DO UPDATE SET \
               human = human + excluded.human, bot = bot + excluded.bot, head = head + excluded.head",
};

/// Adds `rows` in one transaction, which first advances `mark`'s writer to it: one that is
/// there already (the batch was sent before, and committed) adds nothing.
pub(super) fn add(
    conn: &mut Connection,
    mark: BatchMark,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    if !super::rows::advance_mark(&tx, mark)? {
        return tx.commit().map_err(db_error);
    }
    CLICK_HOURLY.run(&tx, rows, |s, at, r| {
        s.raw_bind_parameter(at, &r.tenant)?;
        s.raw_bind_parameter(at + 1, &r.code)?;
        s.raw_bind_parameter(at + 2, r.bucket)?;
        s.raw_bind_parameter(at + 3, &r.referrer)?;
        s.raw_bind_parameter(at + 4, r.device)?;
        s.raw_bind_parameter(at + 5, &r.country)?;
        s.raw_bind_parameter(at + 6, r.counts.human as i64)?;
        s.raw_bind_parameter(at + 7, r.counts.bot as i64)?;
        s.raw_bind_parameter(at + 8, r.counts.head as i64)?;
        s.raw_bind_parameter(at + 9, &r.route)
    })?;
    LINK_DAY_TOTALS.run(
        &tx,
        &link_days(rows),
        |s, at, (tenant, day, code, visits)| {
            s.raw_bind_parameter(at, tenant)?;
            s.raw_bind_parameter(at + 1, day)?;
            s.raw_bind_parameter(at + 2, code)?;
            s.raw_bind_parameter(at + 3, visits)
        },
    )?;
    TENANT_HOURLY.run(&tx, &tenant_rows(rows), |s, at, r| {
        let [human, bot, head] = r.counts;
        s.raw_bind_parameter(at, &r.tenant)?;
        s.raw_bind_parameter(at + 1, r.bucket)?;
        s.raw_bind_parameter(at + 2, r.dim)?;
        s.raw_bind_parameter(at + 3, &r.name)?;
        s.raw_bind_parameter(at + 4, human)?;
        s.raw_bind_parameter(at + 5, bot)?;
        s.raw_bind_parameter(at + 6, head)
    })?;
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
            "INSERT INTO click_daily (tenant, code, bucket, referrer, device, country, route, human, bot, head) \
             SELECT min(tenant), code, bucket - bucket % {DAY} AS day, referrer, device, country, route, \
                    sum(human), sum(bot), sum(head) \
             FROM click_hourly WHERE bucket < ?1 GROUP BY code, day, referrer, device, country, route \
             ON CONFLICT (code, bucket, referrer, device, country, route) DO UPDATE SET \
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

/// Removes the flush marks of writers that wrote nothing for [`MARKS_KEPT_DAYS`] days by the
/// system clock, which stamps them ([`super::rows::advance_mark`]): processes gone long ago.
pub(super) fn forget_writers(conn: &mut Connection) -> Result<u64, StoreError> {
    let kept_from = millis(Utc::now() - chrono::Duration::days(MARKS_KEPT_DAYS));
    conn.execute("DELETE FROM flush_marks WHERE at < ?1", [kept_from])
        .map(|removed| removed as u64)
        .map_err(db_error)
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
    Ok(report(query, series, tops))
}
