//! Click rollups, the same for both backends: the rows a flush adds, the plan a maintenance run
//! carries out, and the statements a stats query runs (written once here; each backend only
//! binds and reads them).
//!
//! Two tables hold the same columns: `click_hourly` (a bucket per hour) and `click_daily` (a
//! bucket per UTC day, made by compaction of hours older than the compaction age). A row is
//! keyed by (code, bucket, referrer, device, country, route) and carries the tenant; counts only ever
//! grow by additive upserts. A stats query reads both tables over its range: an hour is in
//! exactly one of them, since compaction moves it in one transaction.
//!
//! Beside them, kept in the same transactions, are the tenant-level rows (`tenant_hourly` and
//! `tenant_daily`: per tenant and bucket its totals and one row per referrer, device and
//! country) and each link's visits per UTC day (`link_day_totals`), so a tenant's summary
//! reads rows in proportion to its buckets and its busiest links, not to all its links. They
//! always equal the sums of the per-link rows.

mod sql;

use crate::domain::ClickCounts;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use sql::{Flavor, Param, Statement, StatsSql, TOP_LINKS_PER_DAY, stats_sql};
pub(crate) use sql::{combined_rows, report};

/// The counts of one (tenant, code, hour, referrer, device, country, route) to add.
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
    /// Which of the link's targets the visits went to ([`crate::domain::Route::stored`]);
    /// empty for the link's URL.
    pub route: String,
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

/// One tenant-level row to add: the counts of one (tenant, bucket, dimension, value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TenantRow {
    pub(crate) tenant: String,
    pub(crate) bucket: i64,
    pub(crate) dim: &'static str,
    pub(crate) name: String,
    pub(crate) counts: [i64; 3],
}

/// The tenant-level rows that `rows` add to, sorted by key (so concurrent flushes lock them in
/// one order): per bucket its totals (`all`), and its referrers, devices and countries.
pub(crate) fn tenant_rows(rows: &[RollupRow]) -> Vec<TenantRow> {
    let mut sums: BTreeMap<(&str, i64, &'static str, &str), [i64; 3]> = BTreeMap::new();
    for r in rows {
        let counts = [
            r.counts.human as i64,
            r.counts.bot as i64,
            r.counts.head as i64,
        ];
        for (dim, name) in [
            ("all", ""),
            ("referrer", r.referrer.as_str()),
            ("device", r.device),
            ("country", r.country.as_str()),
        ] {
            let sum = sums.entry((&r.tenant, r.bucket, dim, name)).or_default();
            for (s, c) in sum.iter_mut().zip(counts) {
                *s += c;
            }
        }
    }
    sums.into_iter()
        .map(|((tenant, bucket, dim, name), counts)| TenantRow {
            tenant: tenant.to_string(),
            bucket,
            dim,
            name: name.to_string(),
            counts,
        })
        .collect()
}

/// The visits `rows` add to each (tenant, UTC day, code), sorted by key.
pub(crate) fn link_days(rows: &[RollupRow]) -> Vec<(String, i64, String, i64)> {
    let mut sums: BTreeMap<(&str, i64, &str), i64> = BTreeMap::new();
    for r in rows {
        *sums
            .entry((&r.tenant, day_start(r.bucket), &r.code))
            .or_default() += (r.counts.human + r.counts.bot + r.counts.head) as i64;
    }
    sums.into_iter()
        .map(|((tenant, day, code), visits)| (tenant.to_string(), day, code.to_string(), visits))
        .collect()
}

/// The day boundary at or before `t`.
pub fn day_start(t: i64) -> i64 {
    t.div_euclid(crate::domain::stats::DAY) * crate::domain::stats::DAY
}
