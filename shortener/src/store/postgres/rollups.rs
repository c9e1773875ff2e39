//! Click rollups on PostgreSQL: additive upserts into day partitions of `click_hourly` (with
//! the link day totals and the tenant-level rows in the same transaction), compaction of whole
//! days into month partitions of `click_daily`, retention by dropping months, and the stats
//! queries (see [`crate::store::rollups`]).
//!
//! Partitions are made under an advisory lock (several nodes may find the same day missing at
//! once) and remembered per store handle, so a flush issues no DDL for a day it has seen.

use super::error::db_error;
use super::send::{Conn, Pooled};
use crate::domain::stats::DAY;
use crate::domain::{StatsQuery, StatsReport};
use crate::store::rollups::{
    Flavor, Param, RollupOutcome, RollupPlan, RollupRow, day_start, link_days, report, stats_sql,
    tenant_rows,
};
use crate::store::{BatchMark, MARKS_KEPT_DAYS, StoreError};
use chrono::{DateTime, Datelike, NaiveDate};
use std::collections::HashSet;
use std::sync::Mutex;
use tokio_postgres::types::ToSql;

/// Serialises partition DDL across nodes (the migration lock's key plus one).
const PARTITION_LOCK: i64 = super::ADVISORY_LOCK + 1;
/// How many days of hourly partitions a maintenance run makes ahead of its time.
const DAYS_AHEAD: i64 = 2;

/// The days whose hourly partitions this store handle knows exist.
#[derive(Debug, Default)]
pub(super) struct Partitions(Mutex<HashSet<i64>>);

impl Partitions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn date_of(t: i64) -> NaiveDate {
    DateTime::from_timestamp(t, 0)
        .unwrap_or(DateTime::UNIX_EPOCH)
        .date_naive()
}

fn hourly_name(day: i64) -> String {
    format!("click_hourly_d{}", date_of(day).format("%Y%m%d"))
}

/// The start and end (Unix seconds) of the month holding `t`.
fn month_of(t: i64) -> (i64, i64) {
    let date = date_of(t);
    let first = NaiveDate::from_ymd_opt(date.year(), date.month(), 1).unwrap_or(date);
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .unwrap_or(first);
    let seconds = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0)
            .map_or(0, |t| t.and_utc().timestamp())
    };
    (seconds(first), seconds(next))
}

fn daily_name(month_start: i64) -> String {
    format!("click_daily_m{}", date_of(month_start).format("%Y%m"))
}

fn link_days_name(month_start: i64) -> String {
    format!("link_day_totals_m{}", date_of(month_start).format("%Y%m"))
}

/// The day (or month) start a partition's name stands for.
fn partition_start(name: &str, prefix: &str, format: &str) -> Option<i64> {
    let digits = name.strip_prefix(prefix)?;
    let text = if format == "%Y%m" {
        format!("{digits}01")
    } else {
        digits.to_string()
    };
    NaiveDate::parse_from_str(&text, "%Y%m%d")
        .ok()?
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp())
}

/// Makes the hourly partitions of `days` that this handle has not seen, and the
/// `link_day_totals` partitions of their months.
async fn ensure_days(
    client: &mut Conn,
    known: &Partitions,
    days: impl IntoIterator<Item = i64>,
) -> Result<(), StoreError> {
    let mut missing: Vec<i64> = {
        let known = known.lock();
        days.into_iter().filter(|d| !known.contains(d)).collect()
    };
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort_unstable();
    missing.dedup();
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PARTITION_LOCK])
        .await
        .map_err(db_error)?;
    for &day in &missing {
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} PARTITION OF click_hourly FOR VALUES FROM ({day}) TO ({})",
            hourly_name(day),
            day + DAY
        ))
        .await
        .map_err(db_error)?;
        let (month, month_end) = month_of(day);
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} PARTITION OF link_day_totals FOR VALUES FROM ({month}) TO ({month_end})",
            link_days_name(month)
        ))
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)?;
    known.lock().extend(missing);
    Ok(())
}

/// Adds `rows` (sorted by key, so concurrent flushes of several nodes lock rows in one order)
/// in one transaction: the per-link rows, each link's day totals and the tenant-level rows,
/// each with one additive upsert, making their days' partitions first where needed.
pub(super) async fn add(
    client: &mut Conn,
    known: &Partitions,
    mark: BatchMark,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    ensure_days(client, known, rows.iter().map(|r| day_start(r.bucket))).await?;
    let result = add_in_transaction(client, mark, rows).await;
    if result.is_err() {
        // A day compacted (its partition dropped) by another node since this handle saw it:
        // forget what is known, the next flush makes what is missing.
        known.lock().clear();
    }
    result
}

/// Adds `rows` in one transaction that first advances `mark`'s writer to it: one that is there
/// already (the batch was sent before, and committed) adds nothing.
async fn add_in_transaction(
    client: &mut Conn,
    mark: BatchMark,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    let text = |f: fn(&RollupRow) -> &str| -> Vec<&str> { rows.iter().map(f).collect() };
    let int = |f: fn(&RollupRow) -> i64| -> Vec<i64> { rows.iter().map(f).collect() };
    let (tenant, code, referrer, device, country, route) = (
        text(|r| &r.tenant),
        text(|r| &r.code),
        text(|r| &r.referrer),
        text(|r| r.device),
        text(|r| &r.country),
        text(|r| &r.route),
    );
    let (bucket, human, bot, head) = (
        int(|r| r.bucket),
        int(|r| r.counts.human as i64),
        int(|r| r.counts.bot as i64),
        int(|r| r.counts.head as i64),
    );
    let tx = client.transaction().await.map_err(db_error)?;
    if !super::write::advance_mark(&tx, mark).await? {
        return tx.commit().await.map_err(db_error);
    }
    tx.execute(
        "INSERT INTO click_hourly (tenant, code, bucket, referrer, device, country, human, bot, head, route) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], \
                              $7::int8[], $8::int8[], $9::int8[], $10::text[]) \
         ON CONFLICT (code, bucket, referrer, device, country, route) DO UPDATE SET \
           human = click_hourly.human + excluded.human, bot = click_hourly.bot + excluded.bot, \
           head = click_hourly.head + excluded.head",
        &[
            &tenant, &code, &bucket, &referrer, &device, &country, &human, &bot, &head, &route,
        ],
    )
    .await
    .map_err(db_error)?;
    let days = link_days(rows);
    let (tenant, day, code, visits): (Vec<&str>, Vec<i64>, Vec<&str>, Vec<i64>) = (
        days.iter().map(|d| d.0.as_str()).collect(),
        days.iter().map(|d| d.1).collect(),
        days.iter().map(|d| d.2.as_str()).collect(),
        days.iter().map(|d| d.3).collect(),
    );
    tx.execute(
        "INSERT INTO link_day_totals (tenant, day, code, visits) \
         SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[]) \
         ON CONFLICT (tenant, day, code) DO UPDATE SET visits = link_day_totals.visits + excluded.visits",
        &[&tenant, &day, &code, &visits],
    )
    .await
    .map_err(db_error)?;
    let sums = tenant_rows(rows);
    let column = |i: usize| -> Vec<i64> { sums.iter().map(|r| r.counts[i]).collect() };
    let (tenant, bucket, dim, name): (Vec<&str>, Vec<i64>, Vec<&str>, Vec<&str>) = (
        sums.iter().map(|r| r.tenant.as_str()).collect(),
        sums.iter().map(|r| r.bucket).collect(),
        sums.iter().map(|r| r.dim).collect(),
        sums.iter().map(|r| r.name.as_str()).collect(),
    );
    let (human, bot, head) = (column(0), column(1), column(2));
    tx.execute(
        "INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head) \
         SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[]) \
         ON CONFLICT (tenant, bucket, dim, name) DO UPDATE SET \
           human = tenant_hourly.human + excluded.human, bot = tenant_hourly.bot + excluded.bot, \
           head = tenant_hourly.head + excluded.head",
        &[&tenant, &bucket, &dim, &name, &human, &bot, &head],
    )
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)
}

/// The partitions of `table` and the start each one's name stands for.
async fn partitions_of(
    client: &Conn,
    table: &str,
    prefix: &str,
    format: &str,
) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = client
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = $1::text::regclass",
            &[&table],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let name: String = r.get(0);
            partition_start(&name, prefix, format).map(|start| (name, start))
        })
        .collect())
}

/// Carries out `plan`: hourly partitions made ahead, whole days before the compaction boundary
/// folded into daily rows (each day in one transaction, its partition dropped), months wholly
/// before the retention boundary dropped.
pub(super) async fn maintain(
    client: &mut Conn,
    known: &Partitions,
    plan: &RollupPlan,
) -> Result<RollupOutcome, StoreError> {
    let today = day_start(plan.now);
    ensure_days(client, known, (-1..=DAYS_AHEAD).map(|d| today + d * DAY)).await?;
    let mut outcome = RollupOutcome::default();
    let mut days = partitions_of(client, "click_hourly", "click_hourly_d", "%Y%m%d").await?;
    days.sort_by_key(|(_, day)| *day);
    for (name, day) in days {
        if day + DAY > plan.compact_before {
            continue;
        }
        let (month, month_end) = month_of(day);
        let tx = client.transaction().await.map_err(db_error)?;
        // Folding a busy day reads its whole partition.
        tx.batch_execute("SET LOCAL statement_timeout = 0")
            .await
            .map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PARTITION_LOCK])
            .await
            .map_err(db_error)?;
        // A flush writing into the day finishes first (and its tenant-level rows are then
        // folded too) or, once the partition is gone, fails and is written again later.
        tx.batch_execute(&format!("LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE"))
            .await
            .map_err(db_error)?;
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} PARTITION OF click_daily FOR VALUES FROM ({month}) TO ({month_end})",
            daily_name(month)
        ))
        .await
        .map_err(db_error)?;
        let folded = tx
            .execute(
                &format!(
                    "INSERT INTO click_daily (tenant, code, bucket, referrer, device, country, route, human, bot, head) \
                     SELECT min(tenant), code, {day}, referrer, device, country, route, sum(human), sum(bot), sum(head) \
                     FROM {name} GROUP BY code, referrer, device, country, route \
                     ON CONFLICT (code, bucket, referrer, device, country, route) DO UPDATE SET \
                       human = click_daily.human + excluded.human, bot = click_daily.bot + excluded.bot, \
                       head = click_daily.head + excluded.head"
                ),
                &[],
            )
            .await
            .map_err(db_error)?;
        tx.execute(
            "INSERT INTO tenant_daily (tenant, bucket, dim, name, human, bot, head) \
             SELECT tenant, $1::bigint, dim, name, sum(human), sum(bot), sum(head) FROM tenant_hourly \
             WHERE bucket >= $1 AND bucket < $2 GROUP BY tenant, dim, name \
             ON CONFLICT (tenant, bucket, dim, name) DO UPDATE SET \
               human = tenant_daily.human + excluded.human, bot = tenant_daily.bot + excluded.bot, \
               head = tenant_daily.head + excluded.head",
            &[&day, &(day + DAY)],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "DELETE FROM tenant_hourly WHERE bucket >= $1 AND bucket < $2",
            &[&day, &(day + DAY)],
        )
        .await
        .map_err(db_error)?;
        tx.batch_execute(&format!("DROP TABLE {name}"))
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        known.lock().remove(&day);
        outcome.compacted += folded;
    }
    if let Some(expire_before) = plan.expire_before {
        for (name, month) in partitions_of(client, "click_daily", "click_daily_m", "%Y%m").await? {
            let month_end = month_of(month).1;
            if month_end <= expire_before {
                // The month's per-link rows, tenant-level rows and link day totals together.
                let tx = client.transaction().await.map_err(db_error)?;
                tx.batch_execute(&format!(
                    "DROP TABLE IF EXISTS {name}; DROP TABLE IF EXISTS {}",
                    link_days_name(month)
                ))
                .await
                .map_err(db_error)?;
                tx.execute(
                    "DELETE FROM tenant_daily WHERE bucket >= $1 AND bucket < $2",
                    &[&month, &month_end],
                )
                .await
                .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                outcome.expired += 1;
            }
        }
    }
    Ok(outcome)
}

/// Removes the flush marks of writers that wrote nothing for [`MARKS_KEPT_DAYS`] days by the
/// database's clock, which stamps them: processes gone long ago (a live one advances its mark
/// with every batch; one whose batch is still in doubt after a week would count it twice).
pub(super) async fn forget_writers(client: &Conn) -> Result<u64, StoreError> {
    client
        .execute(
            "DELETE FROM flush_marks WHERE at < now() - make_interval(days => $1)",
            &[&(MARKS_KEPT_DAYS as i32)],
        )
        .await
        .map_err(db_error)
}

/// The rows of one stats statement.
async fn run(
    client: &Conn,
    statement: &crate::store::rollups::Statement,
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let params: Vec<Box<dyn ToSql + Sync + Send>> = statement
        .params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync + Send> {
            match p {
                Param::Text(t) => Box::new(t.clone()),
                Param::Int(n) => Box::new(*n),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    client.query(&statement.sql, &refs).await.map_err(db_error)
}

/// The part of the pool stats statements may hold at once: a quarter of it (at least one), so
/// that however many stats reads run, three quarters of the connections stay for redirects,
/// creates and every other read.
pub(super) struct StatsShare {
    places: tokio::sync::Semaphore,
    /// The longest a statement waits for its place: as long as it may run.
    wait: std::time::Duration,
}

impl StatsShare {
    /// The share of a pool of `max_connections`, waited for at most `wait`.
    pub(super) fn of_pool(max_connections: usize, wait: std::time::Duration) -> Self {
        Self {
            places: tokio::sync::Semaphore::new((max_connections / 4).max(1)),
            wait,
        }
    }
}

/// The report of `query`. Its statements run at once, each on a connection of its own from
/// the pool (each is released as soon as its statement has answered), so a summary takes
/// about as long as its slowest statement rather than the sum of them; together with every
/// other stats read's, within `share`.
pub(super) async fn stats(
    pool: &Pooled,
    share: &StatsShare,
    query: &StatsQuery,
) -> Result<StatsReport, StoreError> {
    let sql = stats_sql(query, Flavor::Postgres);
    let answers =
        futures::future::try_join_all(sql.statements().into_iter().map(|statement| async move {
            let _place = tokio::time::timeout(share.wait, share.places.acquire())
                .await
                .map_err(|_| {
                    StoreError::Unavailable(
                        "stats reads hold their share of the database connections".into(),
                    )
                })?
                .map_err(|_| StoreError::Internal("the stats share is closed".into()))?;
            let client = pool.get().await.map_err(super::error::pool_error)?;
            run(&client, statement).await
        }))
        .await?;
    if sql.combined.is_some() {
        let text: String = answers
            .first()
            .and_then(|rows| rows.first())
            .map(|r| r.get(0))
            .ok_or_else(|| StoreError::Internal("a stats statement answered no row".into()))?;
        let (series, tops) = crate::store::rollups::combined_rows(&text)
            .map_err(|e| StoreError::Internal(format!("a stats answer: {e}")))?;
        return Ok(report(query, series, tops));
    }
    let mut answers = answers.into_iter();
    let series = answers
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| (r.get(0), [r.get(1), r.get(2), r.get(3)]))
        .collect();
    let tops = answers
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .collect();
    Ok(report(query, series, tops))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_stand_for_their_day_and_month() {
        let t = 1_780_000_000; // 2026-05-28T20:26:40Z
        let day = day_start(t);
        assert_eq!(hourly_name(day), "click_hourly_d20260528");
        assert_eq!(
            partition_start(&hourly_name(day), "click_hourly_d", "%Y%m%d"),
            Some(day)
        );
        let (start, end) = month_of(t);
        assert_eq!(daily_name(start), "click_daily_m202605");
        assert_eq!(
            partition_start("click_daily_m202605", "click_daily_m", "%Y%m"),
            Some(start)
        );
        assert_eq!(end - start, 31 * DAY);
        assert_eq!(
            partition_start("click_hourly_default", "click_hourly_d", "%Y%m%d"),
            None
        );
    }
}
