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
//! This file holds the run's sequence (load, then measure each point) and the types it fills;
//! loading a layout's table, measuring a point, the cluster, sampling, direct lookups and
//! settings are modules of their own.

pub mod cluster;
pub mod layout;
mod loading;
mod lookup;
mod measure;
mod sample;
mod settings;

use crate::node::{Backend, IdService, NodeSpec};
use crate::preload;
use crate::stats::{Repeated, Run};
use cluster::{BenchCluster, Statement};
use codespace::CodeKey;
pub use layout::Layout;
use layout::{LayoutReady, set_layout};
use loading::load_to;
use measure::measure;
use sample::Sample;
pub use settings::{GrowthSettings, count_label, parse_count};
use std::path::{Path, PathBuf};
use std::time::Instant;

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
