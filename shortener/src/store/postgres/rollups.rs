//! Click rollups on PostgreSQL: additive upserts into day partitions of `click_hourly`,
//! compaction of whole days into month partitions of `click_daily`, retention by dropping
//! months, and the stats queries (see [`crate::store::rollups`]).
//!
//! Partitions are made under an advisory lock (several nodes may find the same day missing at
//! once) and remembered per store handle, so a flush issues no DDL for a day it has seen.

use super::error::db_error;
use crate::domain::stats::DAY;
use crate::domain::{StatsQuery, StatsReport};
use crate::store::StoreError;
use crate::store::rollups::{
    Param, RollupOutcome, RollupPlan, RollupRow, day_start, report, stats_sql,
};
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

/// Makes the hourly partitions of `days` that this handle has not seen.
async fn ensure_days(
    client: &mut deadpool_postgres::Object,
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
    }
    tx.commit().await.map_err(db_error)?;
    known.lock().extend(missing);
    Ok(())
}

/// Adds `rows` (sorted by key, so concurrent flushes of several nodes lock rows in one order)
/// with one upsert, making their days' partitions first where needed.
pub(super) async fn add(
    client: &mut deadpool_postgres::Object,
    known: &Partitions,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    ensure_days(client, known, rows.iter().map(|r| day_start(r.bucket))).await?;
    let text = |f: fn(&RollupRow) -> &str| -> Vec<&str> { rows.iter().map(f).collect() };
    let int = |f: fn(&RollupRow) -> i64| -> Vec<i64> { rows.iter().map(f).collect() };
    let (tenant, code, referrer, device, country) = (
        text(|r| &r.tenant),
        text(|r| &r.code),
        text(|r| &r.referrer),
        text(|r| r.device),
        text(|r| &r.country),
    );
    let (bucket, human, bot, head) = (
        int(|r| r.bucket),
        int(|r| r.counts.human as i64),
        int(|r| r.counts.bot as i64),
        int(|r| r.counts.head as i64),
    );
    let result = client
        .execute(
            "INSERT INTO click_hourly (tenant, code, bucket, referrer, device, country, human, bot, head) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], \
                                  $7::int8[], $8::int8[], $9::int8[]) \
             ON CONFLICT (code, bucket, referrer, device, country) DO UPDATE SET \
               human = click_hourly.human + excluded.human, bot = click_hourly.bot + excluded.bot, \
               head = click_hourly.head + excluded.head",
            &[
                &tenant, &code, &bucket, &referrer, &device, &country, &human, &bot, &head,
            ],
        )
        .await;
    if let Err(error) = result {
        // A day compacted (its partition dropped) by another node since this handle saw it:
        // forget what is known, the next flush makes what is missing.
        known.lock().clear();
        return Err(db_error(error));
    }
    Ok(())
}

/// The partitions of `table` and the start each one's name stands for.
async fn partitions_of(
    client: &deadpool_postgres::Object,
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
    client: &mut deadpool_postgres::Object,
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
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PARTITION_LOCK])
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
                    "INSERT INTO click_daily (tenant, code, bucket, referrer, device, country, human, bot, head) \
                     SELECT min(tenant), code, {day}, referrer, device, country, sum(human), sum(bot), sum(head) \
                     FROM {name} GROUP BY code, referrer, device, country \
                     ON CONFLICT (code, bucket, referrer, device, country) DO UPDATE SET \
                       human = click_daily.human + excluded.human, bot = click_daily.bot + excluded.bot, \
                       head = click_daily.head + excluded.head"
                ),
                &[],
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
            if month_of(month).1 <= expire_before {
                client
                    .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
                    .await
                    .map_err(db_error)?;
                outcome.expired += 1;
            }
        }
    }
    Ok(outcome)
}

/// The report of `query`.
pub(super) async fn stats(
    client: &deadpool_postgres::Object,
    query: &StatsQuery,
) -> Result<StatsReport, StoreError> {
    let sql = stats_sql(query, |n| format!("${n}"));
    let params: Vec<Box<dyn ToSql + Sync + Send>> = sql
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
    let series = client
        .query(&sql.series, &refs)
        .await
        .map_err(db_error)?
        .iter()
        .map(|r| (r.get(0), [r.get(1), r.get(2), r.get(3)]))
        .collect();
    let mut tops = Vec::with_capacity(sql.tops.len());
    for statement in &sql.tops {
        let rows = client.query(statement, &refs).await.map_err(db_error)?;
        tops.push(rows.iter().map(|r| (r.get(0), r.get(1))).collect());
    }
    Ok(report(series, tops))
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
