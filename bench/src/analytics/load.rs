//! A year of click rollups for one tenant's links, written directly with SQL into the tables
//! and partitions the node keeps (names as `shortener/src/store/postgres/rollups.rs` makes
//! them): hourly rows for the days not compacted yet, daily rows for the days before, and the
//! link day totals and tenant-level rows those rows sum to (what the node's flush and
//! compaction would have written).

use super::StatsSettings;
use chrono::{DateTime, Datelike, NaiveDate};
use std::time::Instant;

/// The tenant of the bench key.
pub const TENANT: &str = "default";
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

/// Referrer hosts ('' for none, `(other)` for the folded rest), device classes and countries
/// ('' for unknown) the rows are spread over.
const REFERRERS: [&str; 20] = [
    "",
    "news.example",
    "google.com",
    "t.co",
    "facebook.com",
    "linkedin.com",
    "reddit.com",
    "bing.com",
    "duckduckgo.com",
    "mail.example",
    "blog.example",
    "youtube.com",
    "instagram.com",
    "slack.com",
    "github.com",
    "hn.example",
    "substack.com",
    "medium.com",
    "yahoo.com",
    "(other)",
];
const DEVICES: [&str; 5] = ["desktop", "mobile", "tablet", "bot", "other"];
const COUNTRIES: [&str; 12] = [
    "", "US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "NL", "ES", "IT",
];

/// What was loaded.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Rows of `click_hourly`, `click_daily`, `link_day_totals`, `tenant_hourly`,
    /// `tenant_daily`.
    pub rows: [i64; 5],
    /// Hours with hourly rows (the days not compacted yet), days with daily rows.
    pub hours: i64,
    /// See `hours`.
    pub days: i64,
    /// Seconds the load took (rows, derived tables, VACUUM ANALYZE).
    pub seconds: f64,
}

fn date(t: i64) -> NaiveDate {
    DateTime::from_timestamp(t, 0)
        .unwrap_or(DateTime::UNIX_EPOCH)
        .date_naive()
}

fn seconds(d: NaiveDate) -> i64 {
    d.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp())
}

/// The months (start, end) covering `[from, to)`.
fn months(from: i64, to: i64) -> Vec<(i64, i64)> {
    let d = date(from);
    let mut first = NaiveDate::from_ymd_opt(d.year(), d.month(), 1).unwrap_or(d);
    let mut out = Vec::new();
    while seconds(first) < to {
        let next = first
            .checked_add_months(chrono::Months::new(1))
            .unwrap_or(first);
        out.push((seconds(first), seconds(next)));
        first = next;
    }
    out
}

fn array(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
    format!("(ARRAY[{}]::text[])", quoted.join(", "))
}

/// A pseudo-random integer in `[0, m)` from a SQL expression (repeatable from run to run).
fn hash(expr: &str, m: i64) -> String {
    format!("((hashint8(({expr})::bigint)::bigint + 2147483648) % {m})")
}

/// The SELECT of one table's per-link rows: each link has `draws` buckets of `width` seconds
/// drawn from the `count` buckets starting at `first` (duplicates merged), and each bucket one
/// to three rows of (referrer, device, country). Counts grow with the link's popularity (its
/// rank `n` in code order: a few links have many visits, most a few).
fn rows_select(first: i64, width: i64, count: i64, draws: u32) -> String {
    let bucket_draw = hash("c.n * 1000 + k", count);
    let combos = hash("c.n * 7 + h.bucket", 3);
    let referrer = hash(&format!("c.n * 31 + h.bucket / {width} + j"), 20);
    let country = hash(&format!("c.n * 17 + h.bucket / {width} * 3 + j"), 12);
    let scale = hash("c.n + h.bucket + j", 3);
    let bot = hash("c.n * 5 + h.bucket + j", 2);
    let head = hash("c.n * 11 + h.bucket + j", 5);
    format!(
        "SELECT '{TENANT}', c.code, h.bucket, {refs}[1 + {referrer}], {devices}[1 + (c.n + j) % 5], \
         {countries}[1 + {country}], c.weight * (1 + {scale}), {bot}, CASE WHEN {head} = 0 THEN 1 ELSE 0 END \
         FROM bench_codes c \
         CROSS JOIN LATERAL (SELECT DISTINCT {first}::bigint + {width} * {bucket_draw} AS bucket \
                             FROM generate_series(1, {draws}) AS k) AS h \
         CROSS JOIN LATERAL generate_series(0, {combos}::int) AS j",
        refs = array(&REFERRERS),
        devices = array(&DEVICES),
        countries = array(&COUNTRIES),
    )
}

/// Loads the rollups at the time `now` into the database `client` is connected to (the
/// node's schema, its links already in `links`), and gives each link one of `tags` tags.
pub async fn load(
    client: &tokio_postgres::Client,
    settings: &StatsSettings,
    now: i64,
) -> anyhow::Result<Loaded> {
    let started = Instant::now();
    let day = |t: i64| t.div_euclid(DAY) * DAY;
    // The node's boundaries: days before this are compacted (30 days, its default).
    let compact_before = day(now - 30 * DAY);
    let hour_now = now.div_euclid(HOUR) * HOUR;
    let hours = (hour_now - compact_before) / HOUR + 1;
    let daily_from = compact_before - settings.daily_days * DAY;
    client
        .batch_execute(&partitions(now, compact_before, daily_from))
        .await?;
    client
        .batch_execute(&format!(
            "SET synchronous_commit = off; SET work_mem = '256MB'; SET maintenance_work_mem = '512MB';
             CREATE TEMP TABLE bench_codes AS
               SELECT row_number() OVER (ORDER BY code) AS n, code,
                      1 + floor(30 / sqrt(row_number() OVER (ORDER BY code)))::bigint AS weight
               FROM links WHERE tenant = '{TENANT}';
             UPDATE links l SET tags = ARRAY['campaign-' || lpad((c.n % {tags})::text, 3, '0')]
               FROM bench_codes c WHERE l.code = c.code;
             INSERT INTO link_tags (tenant, tag, created_at, code)
               SELECT tenant, tags[1], created_at, code FROM links WHERE tenant = '{TENANT}';",
            tags = settings.tags
        ))
        .await?;
    eprintln!(
        "stats: partitions and {} tags in {:.1} s",
        settings.tags,
        started.elapsed().as_secs_f64()
    );
    let columns = "(tenant, code, bucket, referrer, device, country, human, bot, head)";
    let step = Instant::now();
    client
        .batch_execute(&format!(
            "INSERT INTO click_hourly {columns} {}",
            rows_select(compact_before, HOUR, hours, settings.hours_per_link)
        ))
        .await?;
    eprintln!(
        "stats: hourly rows in {:.1} s",
        step.elapsed().as_secs_f64()
    );
    let step = Instant::now();
    client
        .batch_execute(&format!(
            "INSERT INTO click_daily {columns} {}",
            rows_select(daily_from, DAY, settings.daily_days, settings.days_per_link)
        ))
        .await?;
    eprintln!("stats: daily rows in {:.1} s", step.elapsed().as_secs_f64());
    derived_rows(client).await?;
    let step = Instant::now();
    // As autovacuum would have left tables this old: statistics and visibility maps.
    client
        .batch_execute(
            "VACUUM (ANALYZE) click_hourly, click_daily, link_day_totals, tenant_hourly, \
             tenant_daily, links, link_tags",
        )
        .await?;
    eprintln!(
        "stats: VACUUM ANALYZE in {:.1} s",
        step.elapsed().as_secs_f64()
    );
    let rows = row_counts(client).await?;
    Ok(Loaded {
        rows,
        hours,
        days: settings.daily_days,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The partitions the loaded rows go in: hourly days from `compact_before` to tomorrow, daily
/// months from `daily_from`, and the link day totals' months up to the day after tomorrow.
fn partitions(now: i64, compact_before: i64, daily_from: i64) -> String {
    let day = |t: i64| t.div_euclid(DAY) * DAY;
    let mut ddl = String::new();
    let mut d = compact_before;
    while d <= day(now) + DAY {
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS click_hourly_d{} PARTITION OF click_hourly FOR VALUES FROM ({d}) TO ({});\n",
            date(d).format("%Y%m%d"),
            d + DAY
        ));
        d += DAY;
    }
    for (m, end) in months(daily_from, compact_before) {
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS click_daily_m{} PARTITION OF click_daily FOR VALUES FROM ({m}) TO ({end});\n",
            date(m).format("%Y%m")
        ));
    }
    for (m, end) in months(daily_from, day(now) + 2 * DAY) {
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS link_day_totals_m{} PARTITION OF link_day_totals FOR VALUES FROM ({m}) TO ({end});\n",
            date(m).format("%Y%m")
        ));
    }
    ddl
}

/// The rows the node's flushes and compactions would have left beside the loaded clicks: the
/// link day totals and the tenant-wide rows.
async fn derived_rows(client: &tokio_postgres::Client) -> anyhow::Result<()> {
    let step = Instant::now();
    let dims = |table: &str| {
        format!(
            "SELECT tenant, bucket, dim, name, sum(human), sum(bot), sum(head) FROM (\
               SELECT tenant, bucket, 'all' AS dim, '' AS name, human, bot, head FROM {table} \
               UNION ALL SELECT tenant, bucket, 'referrer', referrer, human, bot, head FROM {table} \
               UNION ALL SELECT tenant, bucket, 'device', device, human, bot, head FROM {table} \
               UNION ALL SELECT tenant, bucket, 'country', country, human, bot, head FROM {table}) AS r \
             GROUP BY tenant, bucket, dim, name"
        )
    };
    client
        .batch_execute(&format!(
            "INSERT INTO link_day_totals (tenant, day, code, visits) \
               SELECT min(tenant), bucket - bucket % {DAY}, code, sum(human + bot + head) \
               FROM click_hourly GROUP BY code, bucket - bucket % {DAY} \
               UNION ALL SELECT min(tenant), bucket, code, sum(human + bot + head) \
               FROM click_daily GROUP BY code, bucket;
             INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head) {};
             INSERT INTO tenant_daily (tenant, bucket, dim, name, human, bot, head) {};",
            dims("click_hourly"),
            dims("click_daily")
        ))
        .await?;
    eprintln!(
        "stats: link day totals and tenant rows in {:.1} s",
        step.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The row counts of the five loaded tables.
async fn row_counts(client: &tokio_postgres::Client) -> anyhow::Result<[i64; 5]> {
    let mut rows = [0i64; 5];
    for (i, table) in [
        "click_hourly",
        "click_daily",
        "link_day_totals",
        "tenant_hourly",
        "tenant_daily",
    ]
    .iter()
    .enumerate()
    {
        rows[i] = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await?
            .get(0);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_cover_the_range_and_start_on_the_first() {
        // 2026-01-15 to 2026-03-02.
        let m = months(1_768_435_200, 1_772_409_600);
        assert_eq!(m.len(), 3);
        assert_eq!(date(m[0].0).to_string(), "2026-01-01");
        assert_eq!(date(m[2].1).to_string(), "2026-04-01");
    }
}
