//! `bench growth`: how the PostgreSQL store's cost grows with the links table.
//!
//! For each layout of the links table (code, slot) the group loads one database to each size
//! in turn with `shortener preload` (the node's own leased IDs and batched store insert), and at
//! each size, for each `shared_buffers`, restarts its own PostgreSQL cluster and measures
//! against a fresh `shortener serve`: creates/s over HTTP and gRPC `BatchCreateLinks` at 64
//! clients, the WAL each create wrote, the buffer-cache hit ratio of the database meanwhile,
//! and redirects of codes no node has cached. pg_stat_statements' top statements follow the
//! largest size.
//!
//! One file for the run's sequence (load, then measure each point) and the types it fills;
//! the cluster, sampling, direct lookups and settings are modules of their own.

pub mod cluster;
pub mod layout;
mod lookup;
mod sample;
mod settings;

use crate::creates::{self, Target, Transport};
use crate::load;
use crate::node::{Backend, IdService, Node, NodeSpec};
use crate::preload;
use crate::stats::{Repeated, Run};
use anyhow::{Context, bail};
use cluster::{BenchCluster, Statement};
use codespace::CodeKey;
pub use layout::Layout;
use layout::{LayoutReady, set_layout};
use sample::Sample;
pub use settings::{GrowthSettings, count_label, parse_count};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measured point: a layout, a `shared_buffers` and a table size.
#[derive(Debug, Clone)]
pub struct Point {
    /// The layout.
    pub layout: Layout,
    /// `shared_buffers`.
    pub shared_buffers: String,
    /// The size the table was loaded to.
    pub size: u64,
    /// Rows in the table when the point began (the load, the probe links, earlier points'
    /// creates).
    pub rows: u64,
    /// Bytes of the table and its indexes then.
    pub bytes: u64,
    /// Bytes of the table and its primary key then: what cache misses read.
    pub lookup_bytes: u64,
    /// HTTP creates.
    pub http: Repeated,
    /// gRPC batch creates (rates count links).
    pub batch: Repeated,
    /// WAL bytes per link created over HTTP (warm-up included).
    pub http_wal: f64,
    /// WAL bytes per link created in batches.
    pub batch_wal: f64,
    /// The database's buffer hit ratio over the create runs.
    pub create_hit: f64,
    /// Redirects of uncached codes, each once, with the caches as the load and the
    /// create runs left it.
    pub miss: Run,
    /// The database's buffer hit ratio over those redirects.
    pub miss_hit: f64,
    /// The same over other uncached codes after the table and its primary key were read into
    /// the page cache (`None` without pg_prewarm).
    pub warm: Option<Run>,
    /// The database's buffer hit ratio over those.
    pub warm_hit: f64,
    /// Other uncached codes right after those, offered at a fixed rate well below what the
    /// machine answers (an open loop: latency from each request's intended send time), so
    /// the figure is a miss's latency rather than a queue's.
    pub paced: Run,
    /// The baseline: other uncached codes looked up straight in PostgreSQL (no node), at the
    /// same concurrency, right after the prewarmed run.
    pub direct: Run,
}

/// One load step.
#[derive(Debug, Clone)]
pub struct Load {
    /// The layout.
    pub layout: Layout,
    /// Rows before.
    pub from: u64,
    /// Rows after.
    pub to: u64,
    /// Seconds `shortener preload` took.
    pub seconds: f64,
    /// Seconds of the `VACUUM (ANALYZE)` after it.
    pub vacuum_seconds: f64,
}

impl Load {
    /// Rows loaded per second.
    pub fn rate(&self) -> f64 {
        (self.to - self.from) as f64 / self.seconds.max(1e-9)
    }
}

/// What one layout gave.
#[derive(Debug, Clone)]
pub struct LayoutRun {
    /// The layout.
    pub layout: Layout,
    /// Why it was not measured, if it was not.
    pub skipped: Option<String>,
    /// Its load steps.
    pub loads: Vec<Load>,
    /// pg_stat_statements' top 10 by total time over the points at the largest size measured.
    pub top: Vec<Statement>,
    /// That size.
    pub top_size: u64,
}

/// Everything the group measured.
#[derive(Debug, Clone)]
pub struct Growth {
    /// The run's settings.
    pub settings: GrowthSettings,
    /// The points, in the order measured.
    pub points: Vec<Point>,
    /// Per layout: loads, statements, or why it was skipped.
    pub layouts: Vec<LayoutRun>,
    /// The PostgreSQL server's version.
    pub server_version: String,
}

impl Growth {
    /// The point of a layout, `shared_buffers` and size.
    pub fn point(&self, layout: Layout, shared_buffers: &str, size: u64) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.layout == layout && p.shared_buffers == shared_buffers && p.size == size)
    }
}

/// The database and key of one layout's run.
struct Store {
    name: String,
    url: String,
    ids_url: String,
    key: CodeKey,
    dir: PathBuf,
}

impl Store {
    fn node_spec(&self, id_service: &IdService, name: &str) -> NodeSpec<'static> {
        NodeSpec {
            backend: Backend::Postgres {
                database_url: self.url.clone(),
                id_service: id_service.url.clone(),
            },
            key_hex: self.key.to_hex(),
            cache_bytes: 64 << 20,
            blocks: None,
            log_dir: self.dir.clone(),
            name: name.into(),
            env: Vec::new(),
        }
    }
}

/// Runs the group with logs in `dir`.
pub async fn run(settings: &GrowthSettings, dir: &Path) -> anyhow::Result<Growth> {
    let mut cluster = BenchCluster::start(&settings.shared_buffers[0]).await?;
    let ids_url = cluster.create_database("growth_ids").await?;
    let mut out = Growth {
        settings: settings.clone(),
        points: Vec::new(),
        layouts: Vec::new(),
        server_version: String::new(),
    };
    out.server_version = cluster.server_version().await?;
    for &layout in &settings.layouts {
        let result = run_layout(settings, &mut cluster, &ids_url, layout, dir, &mut out).await;
        if let Err(e) = result {
            let log = cluster.log();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(e.context(format!(
                "growth, {} layout (PostgreSQL log tail:\n{})",
                layout.label(),
                tail.join("\n")
            )));
        }
    }
    Ok(out)
}

async fn run_layout(
    settings: &GrowthSettings,
    cluster: &mut BenchCluster,
    ids_url: &str,
    layout: Layout,
    dir: &Path,
    out: &mut Growth,
) -> anyhow::Result<()> {
    let name = format!("growth_{}", layout.label());
    let url = cluster.create_database(&name).await?;
    preload::migrate_postgres(&url)?;
    let ready = tokio::task::spawn_blocking({
        let url = url.clone();
        move || set_layout(&url, layout)
    })
    .await??;
    if let LayoutReady::Skip(why) = ready {
        eprintln!("growth: skipping the {} layout: {why}", layout.label());
        cluster.drop_database(&name).await?;
        out.layouts.push(LayoutRun {
            layout,
            skipped: Some(why),
            loads: Vec::new(),
            top: Vec::new(),
            top_size: 0,
        });
        return Ok(());
    }
    let mut run = LayoutRun {
        layout,
        skipped: None,
        loads: Vec::new(),
        top: Vec::new(),
        top_size: 0,
    };
    // Four cache-miss runs per point (cold, prewarmed, at a fixed rate, straight to
    // PostgreSQL), and as many codes again to spare.
    let capacity = settings.misses * settings.sizes.len() * settings.shared_buffers.len() * 8;
    let mut sample = Sample::new(capacity, 0x9e37_79b9 ^ layout as u64);
    let deadline = Instant::now() + settings.load_budget;
    let store = Store {
        name,
        url,
        ids_url: ids_url.to_string(),
        key: CodeKey::generate(),
        dir: dir.to_path_buf(),
    };
    for &size in &settings.sizes {
        let target = size.max(settings.probe());
        let load = load_to(
            cluster,
            &store,
            settings,
            layout,
            target,
            &mut sample,
            deadline,
        );
        if let Some(l) = load.await? {
            run.loads.push(l);
        }
        cluster.reset_statements().await?;
        for sb in &settings.shared_buffers {
            // A restart for every point: each starts right after a checkpoint, with empty
            // shared buffers, so full-page images and cache warm-up weigh alike at every point.
            cluster.restart_with(sb).await?;
            let point = measure(cluster, &store, settings, layout, size, &mut sample).await?;
            eprintln!(
                "growth: {} layout, {} rows, shared_buffers {sb}: HTTP {:.0}/s, batch {:.0}/s, \
                 WAL {:.0} / {:.0} B per create, hit ratio {:.4}, miss p50 {:.2} ms p99 {:.2} ms, \
                 after prewarm p50 {:.2} ms p99 {:.2} ms, at {:.0}/s p50 {:.2} ms p99 {:.2} ms, \
                 straight to PostgreSQL p50 {:.2} ms p99 {:.2} ms",
                layout.label(),
                point.rows,
                point.http.rate(),
                point.batch.rate(),
                point.http_wal,
                point.batch_wal,
                point.create_hit,
                point.miss.p50_ms,
                point.miss.p99_ms,
                point.warm.as_ref().map_or(f64::NAN, |r| r.p50_ms),
                point.warm.as_ref().map_or(f64::NAN, |r| r.p99_ms),
                settings.miss_rate,
                point.paced.p50_ms,
                point.paced.p99_ms,
                point.direct.p50_ms,
                point.direct.p99_ms
            );
            out.points.push(point);
        }
        run.top = cluster.top_statements(&store.name, 10).await?;
        run.top_size = size;
    }
    cluster.drop_database(&store.name).await?;
    out.layouts.push(run);
    Ok(())
}

/// Loads the table at `store` to `target` rows (if it has fewer) in bounded chunks, keeping a
/// sample of the codes; then `VACUUM (ANALYZE)`, as autovacuum would have left an older table.
async fn load_to(
    cluster: &BenchCluster,
    store: &Store,
    settings: &GrowthSettings,
    layout: Layout,
    target: u64,
    sample: &mut Sample,
    deadline: Instant,
) -> anyhow::Result<Option<Load>> {
    let from = cluster.links_size(&store.name).await?.rows;
    if from >= target {
        return Ok(None);
    }
    let ids = IdService::start_on(&store.dir, &store.ids_url).await?;
    let started = Instant::now();
    let mut rows = from;
    // Bounded in count (one chunk per million rows) and in time (the layout's budget).
    for _ in 0..(target - from).div_ceil(settings.chunk) {
        let n = (target - rows).min(settings.chunk);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "the {} layout's load budget ran out at {rows} of {target} rows ({:.0} rows/s): \
                 raise --load-minutes or lower --sizes",
                layout.label(),
                (rows - from) as f64 / started.elapsed().as_secs_f64()
            );
        }
        let (url, ids_url, key) = (store.url.clone(), ids.url.clone(), store.key.clone());
        let mut taken = std::mem::take(sample);
        let chunk_started = Instant::now();
        let (result, back) = tokio::task::spawn_blocking(move || {
            let r = preload::postgres_links_each(&url, &ids_url, &key, n, left, |code| {
                taken.offer(code)
            });
            (r, taken)
        })
        .await?;
        *sample = back;
        result.with_context(|| format!("load the {} layout to {target} rows", layout.label()))?;
        rows += n;
        eprintln!(
            "growth: {} layout: {rows} of {target} rows, {:.0} rows/s this chunk, {:.0} rows/s so far",
            layout.label(),
            n as f64 / chunk_started.elapsed().as_secs_f64(),
            (rows - from) as f64 / started.elapsed().as_secs_f64()
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(ids);
    let vacuum = Instant::now();
    cluster
        .execute_in(&store.name, "VACUUM (ANALYZE) links")
        .await?;
    Ok(Some(Load {
        layout,
        from,
        to: rows,
        seconds,
        vacuum_seconds: vacuum.elapsed().as_secs_f64(),
    }))
}

/// Opens the node's database connections before a cache-miss run, so that run does not time
/// their set-up: a few lookups per connection of random generated-shape codes (a loaded code
/// among them is as unlikely as one in 3.5e12 / rows, and would only be warmed early).
async fn warm_pool(addr: std::net::SocketAddr, connections: usize) -> anyhow::Result<()> {
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut tasks = Vec::new();
    for _ in 0..connections {
        tasks.push(tokio::spawn(async move {
            let mut conn = crate::http::Conn::connect(addr).await?;
            for _ in 0..10 {
                let code: String = (0..7)
                    .map(|_| char::from(BASE62[rand::random_range(0..BASE62.len())]))
                    .collect();
                conn.get(&format!("/{code}")).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Measures one point against a fresh id-service and node on the store.
async fn measure(
    cluster: &BenchCluster,
    store: &Store,
    settings: &GrowthSettings,
    layout: Layout,
    size: u64,
    sample: &mut Sample,
) -> anyhow::Result<Point> {
    let name = store.name.as_str();
    let size_now = cluster.links_size(name).await?;
    let rows = size_now.rows;
    let ids = IdService::start_on(&store.dir, &store.ids_url).await?;
    let label = format!("growth-{}", layout.label());
    let (mut http, mut batch) = (Repeated::default(), Repeated::default());
    let (mut wal, mut created) = ([0.0f64; 2], [0u64; 2]);
    let create_hit = {
        let node = Node::start(store.node_spec(&ids, &label)).await?;
        let target = Target {
            http: node.http,
            grpc: node.grpc,
            pid: Some(node.server.pid()),
        };
        cluster.settle(name).await?;
        let before = cluster.blocks(name).await?;
        for rep in 0..settings.reps {
            for (i, transport) in [Transport::Http, Transport::GrpcBatch(settings.batch)]
                .into_iter()
                .enumerate()
            {
                eprintln!(
                    "growth: {} layout, {} rows, shared_buffers {}: {} creates, rep {rep}",
                    layout.label(),
                    rows,
                    cluster.shared_buffers,
                    transport.label()
                );
                let w0 = cluster.wal_bytes().await?;
                let (run, links) = creates::run_counted(
                    target,
                    transport,
                    settings.clients,
                    settings.warmup,
                    settings.create,
                )
                .await?;
                wal[i] += cluster.wal_bytes().await? - w0;
                created[i] += links;
                let runs = if i == 0 { &mut http } else { &mut batch };
                runs.push(run);
            }
        }
        drop(node);
        cluster.settle(name).await?;
        cluster.blocks(name).await?.ratio_since(before)
    };
    let mut fresh = || {
        let codes = sample.fresh(settings.misses);
        if codes.len() < settings.misses {
            bail!(
                "only {} sampled codes left for the cache-miss run (of {})",
                codes.len(),
                settings.misses
            );
        }
        Ok(Arc::new(codes))
    };
    let (cold_codes, warm_codes) = (fresh()?, fresh()?);
    let (paced_codes, direct_codes) = (fresh()?, fresh()?);
    // A fresh node for each run, stopped before the counts are read: a backend reports its
    // buffer counts when it exits.
    // Closed (each connection sends its next code when answered) or, with a rate, open.
    let misses = async |codes, run: &str, rate: Option<f64>| -> anyhow::Result<(Run, f64)> {
        let node = Node::start(store.node_spec(&ids, &format!("{label}-{run}"))).await?;
        warm_pool(node.http, settings.miss_connections).await?;
        cluster.quiesce(name, Duration::from_secs(120)).await?;
        cluster.settle(name).await?;
        let before = cluster.blocks(name).await?;
        let run = match rate {
            None => load::each_once(node.http, codes, settings.miss_connections).await?,
            Some(rate) => {
                let pick = load::Pick::EachOnce;
                load::open_loop(node.http, codes, rate, pick, settings.miss_connections).await?
            }
        };
        drop(node);
        cluster.settle(name).await?;
        Ok((run, cluster.blocks(name).await?.ratio_since(before)))
    };
    let (miss, miss_hit) = misses(cold_codes, "misses", None).await?;
    // Then as a primary that has served misses for a while would answer them: the table and
    // its primary key in its caches (memory permitting), other codes again.
    let (warm, warm_hit) = match cluster.prewarm_lookups(name).await? {
        Some(read) => {
            eprintln!(
                "growth: {} layout, {rows} rows: read {:.1} GB of table and primary key into the caches",
                layout.label(),
                read as f64 / 1e9
            );
            let (run, hit) = misses(warm_codes, "prewarmed-misses", None).await?;
            (Some(run), hit)
        }
        None => (None, f64::NAN),
    };
    let (paced, _) = misses(paced_codes, "paced-misses", Some(settings.miss_rate)).await?;
    let direct = lookup::each_once(
        &store.url,
        layout,
        &store.key,
        direct_codes,
        settings.miss_connections,
    )
    .await?;
    drop(ids);
    Ok(Point {
        layout,
        shared_buffers: cluster.shared_buffers.clone(),
        size,
        rows,
        bytes: size_now.total,
        lookup_bytes: size_now.lookup,
        http,
        batch,
        http_wal: wal[0] / created[0].max(1) as f64,
        batch_wal: wal[1] / created[1].max(1) as f64,
        create_hit,
        miss,
        miss_hit,
        warm,
        warm_hit,
        paced,
        direct,
    })
}
