//! Click rollups, the same for both backends: the rows a flush adds, the plan a maintenance run
//! carries out, and the statements a stats query runs (written once here; each backend only
//! binds and reads them).
//!
//! Two tables hold the same columns: `click_hourly` (a bucket per hour) and `click_daily` (a
//! bucket per UTC day, made by compaction of hours older than the compaction age). A row is
//! keyed by (code, bucket, referrer, device, country) and carries the tenant, so a tenant's
//! summary needs no join; counts only ever grow by additive upserts. A stats query reads both
//! tables over its range: an hour is in exactly one of them, since compaction moves it in one
//! transaction.

use crate::domain::stats::{SeriesPoint, StatsReport};
use crate::domain::{ClickCounts, StatsQuery, StatsScope};
use std::sync::Arc;

/// The counts of one (tenant, code, hour, referrer, device, country) to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupRow {
    /// The link's tenant.
    pub tenant: String,
    /// The link's code.
    pub code: String,
    /// Start of the hour, Unix seconds.
    pub bucket: i64,
    /// Referrer host; empty for none,
    /// [`OTHER_REFERRER`](crate::domain::stats::OTHER_REFERRER) for the folded rest.
    pub referrer: String,
    /// Device class name.
    pub device: &'static str,
    /// ISO country code; empty when unknown.
    pub country: String,
    /// The clicks.
    pub counts: ClickCounts,
}

/// Rollup rows written in one batch (shared, so a failed batch can be put back).
pub type RollupRows = Arc<[RollupRow]>;

/// What one maintenance run does, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollupPlan {
    /// The run's time: PostgreSQL creates the hourly partitions of the days around it ahead.
    pub now: i64,
    /// Hours before this day boundary are folded into daily rows.
    pub compact_before: i64,
    /// Daily rows before this are deleted (on PostgreSQL, whole months of them are dropped
    /// once the month ends before it); `None` keeps them forever.
    pub expire_before: Option<i64>,
}

/// What a maintenance run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollupOutcome {
    /// Hourly rows folded into daily rows.
    pub compacted: u64,
    /// Partitions (PostgreSQL) or rows (SQLite) removed by retention.
    pub expired: u64,
}

/// A parameter of a stats statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// The statements of one stats query and their parameters (the same for each statement).
pub(crate) struct StatsSql {
    pub(crate) params: Vec<Param>,
    /// (bucket, human, bot, head), oldest first.
    pub(crate) series: String,
    /// (key, visits) top lists: referrers, devices, countries, then links if asked for.
    pub(crate) tops: Vec<String>,
}

/// The statements of `query`, with `placeholder(n)` naming parameter `n` (1-based).
pub(crate) fn stats_sql(query: &StatsQuery, placeholder: fn(usize) -> String) -> StatsSql {
    let mut params = Vec::new();
    let mut param = |value: Param| {
        params.push(value);
        placeholder(params.len())
    };
    let scope = match &query.scope {
        StatsScope::Link(code) => format!("code = {}", param(Param::Text(code.clone()))),
        StatsScope::Links { tenant, tag } => {
            let tenant = tenant.as_ref().map(|t| param(Param::Text(t.clone())));
            let tag = tag.as_ref().map(|t| param(Param::Text(t.clone())));
            match (tenant, tag) {
                (Some(t), None) => format!("tenant = {t}"),
                (Some(t), Some(g)) => format!(
                    "tenant = {t} AND code IN (SELECT code FROM link_tags WHERE tenant = {t} AND tag = {g})"
                ),
                (None, Some(g)) => format!("code IN (SELECT code FROM link_tags WHERE tag = {g})"),
                (None, None) => "1 = 1".to_string(),
            }
        }
    };
    let (start, end) = (param(Param::Int(query.start)), param(Param::Int(query.end)));
    let filter = format!("{scope} AND bucket >= {start} AND bucket < {end}");
    let width = query.granularity.seconds();
    let both = |columns: &str| {
        format!(
            "SELECT {columns} FROM click_hourly WHERE {filter} \
             UNION ALL SELECT {columns} FROM click_daily WHERE {filter}"
        )
    };
    let series = format!(
        "SELECT b, CAST(sum(human) AS bigint), CAST(sum(bot) AS bigint), CAST(sum(head) AS bigint) \
         FROM ({}) AS r GROUP BY b ORDER BY b",
        both(&format!("bucket - bucket % {width} AS b, human, bot, head"))
    );
    let top = |column: &str| {
        format!(
            "SELECT {column}, CAST(sum(human + bot + head) AS bigint) AS v FROM ({}) AS r \
             GROUP BY {column} ORDER BY v DESC, {column} LIMIT {}",
            both(&format!("{column}, human, bot, head")),
            query.top
        )
    };
    let mut tops = vec![top("referrer"), top("device"), top("country")];
    if matches!(query.scope, StatsScope::Links { .. }) {
        tops.push(top("code"));
    }
    StatsSql {
        params,
        series,
        tops,
    }
}

/// The report of the rows the statements of [`stats_sql`] returned.
pub(crate) fn report(
    series: Vec<(i64, [i64; 3])>,
    mut tops: Vec<Vec<(String, i64)>>,
) -> StatsReport {
    let count = |n: i64| n.max(0) as u64;
    let series: Vec<SeriesPoint> = series
        .into_iter()
        .map(|(at, [human, bot, head])| SeriesPoint {
            at,
            counts: ClickCounts {
                human: count(human),
                head: count(head),
                bot: count(bot),
            },
        })
        .collect();
    let totals = series
        .iter()
        .fold(ClickCounts::default(), |t, p| ClickCounts {
            human: t.human + p.counts.human,
            head: t.head + p.counts.head,
            bot: t.bot + p.counts.bot,
        });
    let mut next = || {
        if tops.is_empty() {
            Vec::new()
        } else {
            tops.remove(0)
        }
    };
    let optional = |rows: Vec<(String, i64)>| -> Vec<(Option<String>, u64)> {
        rows.into_iter()
            .map(|(key, n)| ((!key.is_empty()).then_some(key), count(n)))
            .collect()
    };
    let plain = |rows: Vec<(String, i64)>| -> Vec<(String, u64)> {
        rows.into_iter().map(|(key, n)| (key, count(n))).collect()
    };
    let referrers = optional(next());
    let devices = plain(next());
    let countries = optional(next());
    let links = plain(next());
    StatsReport {
        totals,
        series,
        referrers,
        devices,
        countries,
        links,
    }
}

/// The day boundary at or before `t`.
pub fn day_start(t: i64) -> i64 {
    t.div_euclid(crate::domain::stats::DAY) * crate::domain::stats::DAY
}
