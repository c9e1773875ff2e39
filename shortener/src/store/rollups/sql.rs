//! The statements of a stats query, written once for both backends (each only binds and reads
//! them; the dialects differ only where noted), and the report made of their rows.

use super::day_start;
use crate::domain::stats::{SeriesPoint, StatsReport};
use crate::domain::{ClickCounts, StatsQuery, StatsScope};

/// A parameter of a stats statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// A text value.
    Text(String),
    /// An integer (Unix seconds for times).
    Int(i64),
}

/// The SQL dialect a statement is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// PostgreSQL: `$n` parameters with their types, `generate_series` and `LATERAL`.
    Postgres,
    /// SQLite: `?n` parameters, window functions instead of `LATERAL`.
    Sqlite,
}

/// One statement and its parameters.
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// Its parameters, `$1` (or `?1`) first.
    pub params: Vec<Param>,
}

/// The statements of one stats query (public so that the benchmark can send the node's own
/// statements directly as its baseline).
pub struct StatsSql {
    /// (bucket, human, bot, head), oldest first.
    pub series: Statement,
    /// (key, visits) top lists: referrers, devices, countries, then links if asked for.
    pub tops: Vec<Statement>,
    /// PostgreSQL, a tag's links: one statement that reads the rows once and answers the
    /// series and every top list as one JSON array (`[series, referrers, devices, countries,
    /// links]`); run instead of `series` and `tops`.
    pub combined: Option<Statement>,
}

impl StatsSql {
    /// The statements a backend runs for the query, in order.
    pub fn statements(&self) -> Vec<&Statement> {
        match &self.combined {
            Some(c) => vec![c],
            None => std::iter::once(&self.series).chain(&self.tops).collect(),
        }
    }
}

/// How many of each day's busiest links of a tenant the top links of a summary read (see
/// docs/analytics.md, "What a request reads"): the list is exact whenever no full day of the
/// range had more links with visits than this.
pub const TOP_LINKS_PER_DAY: usize = 300;

/// Numbers the parameters of one statement.
struct Binder {
    flavor: Flavor,
    params: Vec<Param>,
}

impl Binder {
    fn new(flavor: Flavor) -> Binder {
        Binder {
            flavor,
            params: Vec::new(),
        }
    }

    fn bind(&mut self, value: Param) -> String {
        let typed = match (&value, self.flavor) {
            (Param::Text(_), Flavor::Postgres) => "::text",
            (Param::Int(_), Flavor::Postgres) => "::bigint",
            (_, Flavor::Sqlite) => "",
        };
        self.params.push(value);
        match self.flavor {
            Flavor::Postgres => format!("${}{typed}", self.params.len()),
            Flavor::Sqlite => format!("?{}", self.params.len()),
        }
    }

    fn text(&mut self, t: &str) -> String {
        self.bind(Param::Text(t.to_string()))
    }

    fn int(&mut self, n: i64) -> String {
        self.bind(Param::Int(n))
    }

    fn done(self, sql: String) -> Statement {
        Statement {
            sql,
            params: self.params,
        }
    }
}

/// The condition on the per-link tables that selects the links of `scope`.
fn link_scope(b: &mut Binder, scope: &StatsScope) -> String {
    match scope {
        StatsScope::Link(code) => format!("code = {}", b.text(code)),
        StatsScope::Links { tenant, tag } => {
            let tenant = tenant.as_ref().map(|t| b.text(t));
            let tag = tag.as_ref().map(|t| b.text(t));
            match (tenant, tag) {
                (Some(t), None) => format!("tenant = {t}"),
                (Some(t), Some(g)) => format!(
                    "tenant = {t} AND code IN (SELECT code FROM link_tags WHERE tenant = {t} AND tag = {g})"
                ),
                (None, Some(g)) => format!("code IN (SELECT code FROM link_tags WHERE tag = {g})"),
                (None, None) => "1 = 1".to_string(),
            }
        }
    }
}

/// Where a query reads its series and its referrer, device and country lists.
#[derive(Clone, Copy)]
enum Source {
    /// `click_hourly` and `click_daily`: one link, or a tag's links.
    Links,
    /// `tenant_hourly` and `tenant_daily`: a tenant's (or every tenant's) summary.
    Tenants,
}

/// `SELECT columns` from the hourly and the daily table of `source` over the query's range.
fn both(b: &mut Binder, query: &StatsQuery, source: Source, dim: &str, columns: &str) -> String {
    let (scope, hourly, daily) = match source {
        Source::Links => (link_scope(b, &query.scope), "click_hourly", "click_daily"),
        Source::Tenants => {
            let tenant = match &query.scope {
                StatsScope::Links {
                    tenant: Some(t), ..
                } => format!("tenant = {}", b.text(t)),
                _ => "1 = 1".to_string(),
            };
            (
                format!("{tenant} AND dim = '{dim}'"),
                "tenant_hourly",
                "tenant_daily",
            )
        }
    };
    let (start, end) = (b.int(query.start), b.int(query.end));
    let filter = format!("{scope} AND bucket >= {start} AND bucket < {end}");
    format!(
        "SELECT {columns} FROM {hourly} WHERE {filter} \
         UNION ALL SELECT {columns} FROM {daily} WHERE {filter}"
    )
}

/// The statements of `query` in `flavor`.
///
/// One link and a tag's links are read from the per-link rows. A tenant's summary (and an
/// admin's of every tenant) reads its series and its referrer, device and country lists from
/// the tenant-level rows, and a tenant's top links from each day's busiest links
/// ([`top_links`]); an admin's top links over every tenant are summed from the per-link rows.
pub fn stats_sql(query: &StatsQuery, flavor: Flavor) -> StatsSql {
    let source = match &query.scope {
        StatsScope::Links { tag: None, .. } => Source::Tenants,
        _ => Source::Links,
    };
    let width = query.granularity.seconds();
    let series = {
        let mut b = Binder::new(flavor);
        let rows = both(
            &mut b,
            query,
            source,
            "all",
            &format!("bucket - bucket % {width} AS b, human, bot, head"),
        );
        b.done(format!(
            "SELECT b, CAST(sum(human) AS bigint), CAST(sum(bot) AS bigint), CAST(sum(head) AS bigint) \
             FROM ({rows}) AS r GROUP BY b ORDER BY b"
        ))
    };
    let top = |source: Source, column: &str| {
        let mut b = Binder::new(flavor);
        let (key, dim) = match source {
            Source::Links => (column, ""),
            Source::Tenants => ("name", column),
        };
        let rows = both(
            &mut b,
            query,
            source,
            dim,
            &format!("{key} AS k, human, bot, head"),
        );
        b.done(format!(
            "SELECT k, CAST(sum(human + bot + head) AS bigint) AS v FROM ({rows}) AS r \
             GROUP BY k ORDER BY v DESC, k LIMIT {}",
            query.top
        ))
    };
    let mut tops = vec![
        top(source, "referrer"),
        top(source, "device"),
        top(source, "country"),
    ];
    match &query.scope {
        // One link's visits by the target they went to (its rules, app targets, variants).
        StatsScope::Link(_) => tops.push(top(source, "route")),
        StatsScope::Links {
            tenant: Some(tenant),
            tag: None,
        } => tops.push(top_links(query, tenant, flavor)),
        StatsScope::Links { .. } => tops.push(top(Source::Links, "code")),
    }
    let combined = match (&query.scope, flavor) {
        (
            StatsScope::Links {
                tag: Some(tag),
                tenant,
            },
            Flavor::Postgres,
        ) => Some(tag_combined(query, tenant.as_deref(), tag)),
        _ => None,
    };
    StatsSql {
        series,
        tops,
        combined,
    }
}

/// A tag's summary on PostgreSQL in one statement: the tag's links' per-link rows over the
/// range read once (by each link's key in each partition, not by the tenant's rows), then the
/// series and the four top lists made from them, as JSON.
fn tag_combined(query: &StatsQuery, tenant: Option<&str>, tag: &str) -> Statement {
    let mut b = Binder::new(Flavor::Postgres);
    let codes = match tenant {
        Some(t) => {
            let t = b.text(t);
            let g = b.text(tag);
            format!(
                "tenant = {t} AND code = ANY(ARRAY(SELECT code FROM link_tags WHERE tenant = {t} AND tag = {g}))"
            )
        }
        None => {
            let g = b.text(tag);
            format!("code = ANY(ARRAY(SELECT code FROM link_tags WHERE tag = {g}))")
        }
    };
    let (start, end) = (b.int(query.start), b.int(query.end));
    let filter = format!("{codes} AND bucket >= {start} AND bucket < {end}");
    let columns = "bucket, referrer, device, country, code, human, bot, head";
    let width = query.granularity.seconds();
    let top = |column: &str| {
        format!(
            "(SELECT json_agg(json_build_array(k, v) ORDER BY v DESC, k) FROM \
             (SELECT {column} AS k, CAST(sum(human + bot + head) AS bigint) AS v FROM r \
             GROUP BY k ORDER BY v DESC, k LIMIT {}) AS t)",
            query.top
        )
    };
    let sql = format!(
        "WITH r AS MATERIALIZED (SELECT {columns} FROM click_hourly WHERE {filter} \
         UNION ALL SELECT {columns} FROM click_daily WHERE {filter}) \
         SELECT json_build_array( \
         (SELECT json_agg(json_build_array(b, h, o, d) ORDER BY b) FROM \
         (SELECT bucket - bucket % {width} AS b, CAST(sum(human) AS bigint) AS h, \
         CAST(sum(bot) AS bigint) AS o, CAST(sum(head) AS bigint) AS d FROM r GROUP BY b) AS s), \
         {}, {}, {}, {})::text",
        top("referrer"),
        top("device"),
        top("country"),
        top("code")
    );
    b.done(sql)
}

/// The rows of a series: (bucket, [human, bot, head]).
pub(crate) type SeriesRows = Vec<(i64, [i64; 3])>;
/// The rows of the top lists, in order: (key, visits).
pub(crate) type TopRows = Vec<Vec<(String, i64)>>;

/// The series and top lists of the JSON answer of [`StatsSql::combined`].
pub(crate) fn combined_rows(text: &str) -> Result<(SeriesRows, TopRows), String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let parts = value.as_array().ok_or("not an array")?;
    let list = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
    let int = |v: &serde_json::Value| v.as_i64().unwrap_or(0);
    let series = parts
        .first()
        .map(list)
        .unwrap_or_default()
        .iter()
        .map(|p| (int(&p[0]), [int(&p[1]), int(&p[2]), int(&p[3])]))
        .collect();
    let tops = parts
        .iter()
        .skip(1)
        .map(|t| {
            list(t)
                .iter()
                .map(|e| (e[0].as_str().unwrap_or_default().to_string(), int(&e[1])))
                .collect()
        })
        .collect();
    Ok((series, tops))
}

/// The top links of `tenant` over the query's range.
///
/// Whole UTC days inside the range are read from `link_day_totals`, each day's
/// [`TOP_LINKS_PER_DAY`] busiest links only, so the cost is bounded by the days, not by the
/// links. The parts of days at either end of the range are summed from the per-link rows (at
/// most a day's each), except that the last day counts whole from `link_day_totals` when it
/// has no hourly rows at or after the range's end (the usual case: a range that ends now).
fn top_links(query: &StatsQuery, tenant: &str, flavor: Flavor) -> Statement {
    use crate::domain::stats::DAY;
    let (start, end) = (query.start, query.end);
    let first = day_start(start);
    let (full_from, head) = if start == first {
        (start, (0, 0))
    } else {
        (first + DAY, (start, (first + DAY).min(end)))
    };
    let last = day_start(end);
    let has_tail = end > last && last >= full_from;
    let tail = if has_tail { (last, end) } else { (0, 0) };
    // The probe's range: an empty one when there is no tail (which is then "clean").
    let probe_end = if has_tail { last + DAY } else { end };
    let last_full = last - DAY;
    let last_if_clean = if has_tail { last } else { last_full };

    let mut b = Binder::new(flavor);
    let t = b.text(tenant);
    let (end_p, probe_end) = (b.int(end), b.int(probe_end));
    let (full_from, last_full, last_if_clean) =
        (b.int(full_from), b.int(last_full), b.int(last_if_clean));
    let (head_s, head_e) = (b.int(head.0), b.int(head.1));
    let (tail_s, tail_e) = (b.int(tail.0), b.int(tail.1));
    let probe = format!(
        "WITH tail AS (SELECT NOT EXISTS (SELECT 1 FROM click_hourly WHERE tenant = {t} \
         AND bucket >= {end_p} AND bucket < {probe_end}) AS clean) "
    );
    let days = match flavor {
        // The days between the first and the last with totals (two index probes), so that a
        // range far wider than the rollups kept costs no more than the days kept.
        Flavor::Postgres => format!(
            "SELECT l.code, l.visits AS v FROM tail, \
             LATERAL (SELECT CASE WHEN tail.clean THEN {last_if_clean} ELSE {last_full} END AS upto) AS u, \
             generate_series(\
               greatest({full_from}, coalesce((SELECT min(day) FROM link_day_totals \
                 WHERE tenant = {t} AND day >= {full_from}), u.upto + {DAY})), \
               least(u.upto, coalesce((SELECT max(day) FROM link_day_totals \
                 WHERE tenant = {t} AND day <= u.upto), {full_from} - {DAY})), \
               {DAY}) AS d(day) \
             CROSS JOIN LATERAL (SELECT code, visits FROM link_day_totals WHERE tenant = {t} AND day = d.day \
             ORDER BY visits DESC, code LIMIT {TOP_LINKS_PER_DAY}) AS l"
        ),
        Flavor::Sqlite => format!(
            "SELECT code, visits AS v FROM (SELECT code, visits, \
             row_number() OVER (PARTITION BY day ORDER BY visits DESC, code) AS n \
             FROM link_day_totals WHERE tenant = {t} AND day >= {full_from} \
             AND day <= (SELECT CASE WHEN clean THEN {last_if_clean} ELSE {last_full} END FROM tail)) \
             WHERE n <= {TOP_LINKS_PER_DAY}"
        ),
    };
    let part = |table: &str, from: &str, to: &str, guard: &str| {
        format!(
            "SELECT code, human + bot + head AS v FROM {table} WHERE tenant = {t} \
             AND bucket >= {from} AND bucket < {to}{guard}"
        )
    };
    let dirty = " AND NOT (SELECT clean FROM tail)";
    let parts = [
        days,
        part("click_hourly", &head_s, &head_e, ""),
        part("click_daily", &head_s, &head_e, ""),
        part("click_hourly", &tail_s, &tail_e, dirty),
        part("click_daily", &tail_s, &tail_e, dirty),
    ];
    b.done(format!(
        "{probe}SELECT code, CAST(sum(v) AS bigint) AS v FROM ({}) AS r \
         GROUP BY code ORDER BY v DESC, code LIMIT {}",
        parts.join(" UNION ALL "),
        query.top
    ))
}

/// The report of the rows the statements of [`stats_sql`] returned for `query`.
pub(crate) fn report(query: &StatsQuery, series: SeriesRows, mut tops: TopRows) -> StatsReport {
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
    let last = plain(next());
    let (links, routes) = match query.scope {
        StatsScope::Link(_) => (Vec::new(), last),
        StatsScope::Links { .. } => (last, Vec::new()),
    };
    let routes = routes
        .into_iter()
        .map(|(route, n)| (crate::domain::Route::shown(&route).to_string(), n))
        .collect();
    StatsReport {
        totals,
        series,
        referrers,
        devices,
        countries,
        links,
        routes,
    }
}
