//! Stats latency on PostgreSQL over a year of rollups: one link's 90-day daily series, a
//! tenant's 30-day summary and one tag's 30-day summary, through a node's HTTP API, each
//! beside the node's own statements sent directly (the same SQL, the same parameters).

mod load;

use crate::http::Conn;
use crate::node::{API_KEY, Backend, IdService, Node, NodeSpec};
use crate::preload;
use crate::procs::PgDatabase;
use crate::stats::Run;
use anyhow::{Context, ensure};
use chrono::{DateTime, SecondsFormat};
use codespace::CodeKey;
use hyper::Method;
use hyper::body::Bytes;
pub use load::{Loaded, load};
use rand::{Rng, SeedableRng};
use shortener::domain::{Granularity, StatsQuery, StatsScope};
use shortener::store::rollups::{Flavor, Param, stats_sql};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;

/// Sizes of a run.
#[derive(Debug, Clone)]
pub struct StatsSettings {
    /// Links of the one tenant.
    pub links: u64,
    /// Days of daily rows before the 30 days of hourly rows.
    pub daily_days: i64,
    /// Hours each link is drawn to have clicks in, of the ~720 hourly buckets.
    pub hours_per_link: u32,
    /// Days each link is drawn to have clicks in, of the `daily_days`.
    pub days_per_link: u32,
    /// Distinct tags, one per link, round robin.
    pub tags: u64,
    /// Requests per query (node and direct SQL each), in [`ROUNDS`] interleaved rounds.
    pub samples: usize,
}

impl StatsSettings {
    /// The full run or the smoke run.
    pub fn new(quick: bool) -> StatsSettings {
        StatsSettings {
            links: if quick { 10_000 } else { 100_000 },
            daily_days: 335,
            hours_per_link: 7,
            days_per_link: 33,
            tags: 100,
            samples: if quick { 60 } else { 300 },
        }
    }
}

/// Rounds the samples are split into (node and SQL alternate between them).
pub const ROUNDS: usize = 3;

/// One query: through the node and as the node's statements sent directly.
#[derive(Debug, Clone, Default)]
pub struct QueryPoint {
    /// Through the node's HTTP API.
    pub node: Run,
    /// The same statements, from this process.
    pub sql: Run,
}

/// Everything `bench stats` measures.
#[derive(Debug, Clone)]
pub struct StatsBench {
    /// The sizes used.
    pub settings: StatsSettings,
    /// What was loaded.
    pub loaded: Loaded,
    /// One link's 90-day daily series.
    pub link: QueryPoint,
    /// The tenant's 30-day summary.
    pub tenant: QueryPoint,
    /// One tag's 30-day summary.
    pub tag: QueryPoint,
    /// The top 10 links of the tenant's summary against the exact ranking from the per-link
    /// rows: links in both lists, and whether the lists (codes and visits) are the same.
    pub top_agreement: (usize, bool),
    /// The exact ranking from the per-link rows (what the summary's top links read before the
    /// link day totals), ms per run.
    pub per_link_top: Vec<f64>,
    /// Links with visits on the busiest full day of the tenant's summary.
    pub busiest_day_links: i64,
}

fn rfc3339(t: i64) -> String {
    DateTime::from_timestamp(t, 0)
        .unwrap_or(DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `GET path` through the node; the JSON answer.
async fn node_get(conn: &mut Conn, path: &str) -> anyhow::Result<serde_json::Value> {
    let (status, body) = conn
        .call(Method::GET, path, API_KEY, "application/json", Bytes::new())
        .await?;
    ensure!(
        status.as_u16() == 200,
        "{path} answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(serde_json::from_slice(&body)?)
}

/// Runs the statements the node runs for `query`, at once on connections of their own as the
/// node does; the rows of the first.
async fn direct(clients: &[tokio_postgres::Client], query: &StatsQuery) -> anyhow::Result<usize> {
    let sql = stats_sql(query, Flavor::Postgres);
    let answers = futures::future::try_join_all(sql.statements().into_iter().zip(clients).map(
        |(statement, client)| async move {
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
            client.query(&statement.sql, &refs).await
        },
    ))
    .await?;
    Ok(answers.first().map_or(0, Vec::len))
}

/// Connections for [`direct`]: one per statement of the longest query (series and four lists).
async fn connect_all(url: &str) -> anyhow::Result<Vec<tokio_postgres::Client>> {
    let mut clients = Vec::new();
    for _ in 0..5 {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .context("connect to the links database")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        clients.push(client);
    }
    Ok(clients)
}

fn run_of(micros: Vec<u32>) -> Run {
    let total: f64 = micros.iter().map(|&us| f64::from(us) / 1e6).sum();
    let n = micros.len() as u64;
    Run::from_latencies(micros, n, Duration::from_secs_f64(total), 0)
}

/// The three queries of one measurement: an HTTP path and the query it stands for.
struct Queries {
    codes: Vec<String>,
    tags: u64,
    now: i64,
}

impl Queries {
    fn link(&self, rng: &mut impl Rng) -> (String, StatsQuery) {
        let code = &self.codes[rng.random_range(0..self.codes.len())];
        let from = self.now - 90 * 86_400;
        let path = format!(
            "/api/v1/links/{code}/stats?from={}&to={}&granularity=day",
            rfc3339(from),
            rfc3339(self.now)
        );
        (
            path,
            self.query(StatsScope::Link(code.clone()), from, Granularity::Day),
        )
    }

    fn tenant(&self) -> (String, StatsQuery) {
        let from = self.now - 30 * 86_400;
        let path = format!(
            "/api/v1/stats?from={}&to={}",
            rfc3339(from),
            rfc3339(self.now)
        );
        let scope = StatsScope::Links {
            tenant: Some(load::TENANT.into()),
            tag: None,
        };
        (path, self.query(scope, from, Granularity::Day))
    }

    fn tag(&self, rng: &mut impl Rng) -> (String, StatsQuery) {
        let tag = format!("campaign-{:03}", rng.random_range(0..self.tags));
        let from = self.now - 30 * 86_400;
        let path = format!(
            "/api/v1/stats?tag={tag}&from={}&to={}",
            rfc3339(from),
            rfc3339(self.now)
        );
        let scope = StatsScope::Links {
            tenant: Some(load::TENANT.into()),
            tag: Some(tag),
        };
        (path, self.query(scope, from, Granularity::Day))
    }

    /// What the node makes of `from` and `to` (the day start at or before `from`).
    fn query(&self, scope: StatsScope, from: i64, granularity: Granularity) -> StatsQuery {
        let width = granularity.seconds();
        StatsQuery {
            scope,
            start: from.div_euclid(width) * width,
            end: self.now,
            granularity,
            top: 10,
        }
    }
}

/// Measures one query kind: `samples` requests through the node and as many direct runs, in
/// interleaved rounds, after a few of each to warm up.
async fn measure<F>(
    settings: &StatsSettings,
    conn: &mut Conn,
    clients: &[tokio_postgres::Client],
    mut next: F,
) -> anyhow::Result<QueryPoint>
where
    F: FnMut() -> (String, StatsQuery),
{
    for _ in 0..5 {
        let (path, query) = next();
        node_get(conn, &path).await?;
        direct(clients, &query).await?;
    }
    let per_round = settings.samples.div_ceil(ROUNDS);
    let (mut node, mut sql) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for _ in 0..per_round {
            let (path, _) = next();
            let t = Instant::now();
            node_get(conn, &path).await?;
            node.push(t.elapsed().as_micros() as u32);
        }
        for _ in 0..per_round {
            let (_, query) = next();
            let t = Instant::now();
            direct(clients, &query).await?;
            sql.push(t.elapsed().as_micros() as u32);
        }
    }
    Ok(QueryPoint {
        node: run_of(node),
        sql: run_of(sql),
    })
}

/// The exact top links of `query` from the per-link rows, and the time it took.
async fn exact_top(
    client: &tokio_postgres::Client,
    query: &StatsQuery,
) -> anyhow::Result<(Vec<(String, i64)>, f64)> {
    let t = Instant::now();
    let rows = client
        .query(
            "SELECT code, CAST(sum(human + bot + head) AS bigint) AS v FROM ( \
               SELECT code, human, bot, head FROM click_hourly WHERE tenant = $1 AND bucket >= $2 AND bucket < $3 \
               UNION ALL SELECT code, human, bot, head FROM click_daily WHERE tenant = $1 AND bucket >= $2 AND bucket < $3) AS r \
             GROUP BY code ORDER BY v DESC, code LIMIT 10",
            &[&load::TENANT, &query.start, &query.end],
        )
        .await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok((rows.iter().map(|r| (r.get(0), r.get(1))).collect(), ms))
}

/// Runs the group with scratch files in `dir`.
pub async fn run(settings: &StatsSettings, dir: &Path) -> anyhow::Result<StatsBench> {
    let ids = IdService::start(dir).await?;
    let key = CodeKey::generate();
    let db = PgDatabase::create("stats")?;
    let node = Node::start(NodeSpec {
        backend: Backend::Postgres {
            database_url: db.url(),
            id_service: ids.url.clone(),
        },
        key_hex: key.to_hex(),
        cache_bytes: 64 << 20,
        blocks: None,
        log_dir: dir.to_path_buf(),
        name: "stats".into(),
        env: Vec::new(),
    })
    .await?;
    let started = Instant::now();
    let codes = {
        let (url, id_service, key, n) = (db.url(), ids.url.clone(), key.clone(), settings.links);
        tokio::task::spawn_blocking(move || preload::postgres_links(&url, &id_service, &key, n))
            .await??
    };
    eprintln!(
        "stats: preloaded {} links in {:.1} s",
        codes.len(),
        started.elapsed().as_secs_f64()
    );
    let clients = connect_all(&db.url()).await?;
    let client = &clients[0];
    let now = chrono::Utc::now().timestamp();
    let loaded = load::load(client, settings, now).await?;
    eprintln!(
        "stats: loaded {:?} rows (hourly, daily, link days, tenant hourly, tenant daily) in {:.1} s",
        loaded.rows, loaded.seconds
    );
    let queries = Queries {
        codes,
        tags: settings.tags,
        now,
    };
    let mut conn = Conn::connect(node.http).await?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    eprintln!("stats: one link's 90-day daily series");
    let link = measure(settings, &mut conn, &clients, || queries.link(&mut rng)).await?;
    eprintln!("stats: the tenant's 30-day summary");
    let tenant = measure(settings, &mut conn, &clients, || queries.tenant()).await?;
    eprintln!("stats: one tag's 30-day summary");
    let mut rng = rand::rngs::StdRng::seed_from_u64(43);
    let tag = measure(settings, &mut conn, &clients, || queries.tag(&mut rng)).await?;

    // How the approximated top links compare with the exact ranking.
    let (path, query) = queries.tenant();
    let answer = node_get(&mut conn, &path).await?;
    let listed: Vec<(String, i64)> = answer["links"]
        .as_array()
        .context("no links in the summary")?
        .iter()
        .map(|l| {
            (
                l["code"].as_str().unwrap_or_default().to_string(),
                l["visits"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let mut per_link_top = Vec::new();
    let mut exact = Vec::new();
    for _ in 0..3 {
        let (rows, ms) = exact_top(client, &query).await?;
        exact = rows;
        per_link_top.push(ms);
    }
    let common = listed
        .iter()
        .filter(|(c, _)| exact.iter().any(|(e, _)| e == c))
        .count();
    let busiest_day_links: i64 = client
        .query_one(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM link_day_totals \
             WHERE tenant = $1 AND day >= $2 AND day < $3 GROUP BY day) AS d",
            &[&load::TENANT, &query.start, &query.end],
        )
        .await?
        .get(0);
    drop(conn);
    drop(clients);
    drop(node);
    drop(db);
    drop(ids);
    Ok(StatsBench {
        settings: settings.clone(),
        loaded,
        link,
        tenant,
        tag,
        top_agreement: (common, listed == exact),
        per_link_top,
        busiest_day_links,
    })
}
