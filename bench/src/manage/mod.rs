//! Link management on PostgreSQL and embedded, each beside the store doing the same work
//! directly: a list page at the top and deep in the list beside the same keyset `SELECT`;
//! NDJSON import beside gRPC `BatchCreateLinks` of as many rows; export beside
//! `COPY (SELECT ...) TO STDOUT` (PostgreSQL) or the same `SELECT` stepped through rusqlite;
//! and, on PostgreSQL, how soon a second node serves an edit made on the first.

mod calls;
mod direct;
mod edits;

use crate::create_suite::StoreKind;
use crate::node::{Backend, IdService, Node, NodeSpec};
use crate::preload;
use crate::procs::PgDatabase;
use crate::stats::{Repeated, Run};
use calls::{bulk, list};
use codespace::CodeKey;
use direct::Direct;
use edits::propagation;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Sizes and bounds of a run.
#[derive(Debug, Clone)]
pub struct ManageSettings {
    /// Links preloaded into each store (one tenant) before the list is measured.
    pub links: u64,
    /// How many links deep the deep page starts.
    pub depth: u64,
    /// Links per measured page.
    pub page: usize,
    /// Requests per list point (node and direct SQL each), in `rounds` interleaved rounds.
    pub samples: usize,
    /// Rows of each import and of each batch-create run.
    pub rows: u64,
    /// Items per `BatchCreateLinks` call (the node's default batch limit).
    pub batch: usize,
    /// Repetitions of the import/batch pair and of the export/scan pair.
    pub reps: usize,
    /// Edits whose propagation to the second node is timed.
    pub edits: usize,
    /// The most the propagation runs take, edits or not.
    pub edit_budget: Duration,
    /// The longest one edit may take to reach the second node before it counts as missed.
    pub edit_timeout: Duration,
}

impl ManageSettings {
    /// The full run (about 5.5 minutes on 2 cores) or the smoke run (under half a minute).
    pub fn new(quick: bool) -> ManageSettings {
        if quick {
            ManageSettings {
                links: 12_000,
                depth: 10_000,
                page: 100,
                samples: 60,
                rows: 5_000,
                batch: 1000,
                reps: 1,
                edits: 30,
                edit_budget: Duration::from_secs(20),
                edit_timeout: Duration::from_secs(5),
            }
        } else {
            ManageSettings {
                links: 1_010_000,
                depth: 1_000_000,
                page: 100,
                samples: 300,
                rows: 100_000,
                batch: 1000,
                reps: 2,
                edits: 200,
                edit_budget: Duration::from_secs(60),
                edit_timeout: Duration::from_secs(5),
            }
        }
    }
}

/// Rounds the list samples are split into (node and SQL alternate between them).
pub const LIST_ROUNDS: usize = 3;

/// Latencies of one list position: through the node and as direct SQL.
#[derive(Debug, Clone, Default)]
pub struct ListPoint {
    /// `GET /api/v1/links?limit=N[&cursor=C]`.
    pub node: Run,
    /// The same keyset `SELECT` on the store, from this process.
    pub sql: Run,
}

/// What one store measured.
#[derive(Debug, Clone)]
pub struct StoreManage {
    /// The store.
    pub store: StoreKind,
    /// Links of the tenant when the list was measured.
    pub links: u64,
    /// Position of the deep page.
    pub depth: u64,
    /// The first page.
    pub first: ListPoint,
    /// The page `depth` links in.
    pub deep: ListPoint,
    /// Import rows per second (`POST /api/v1/links/import`, NDJSON).
    pub import: Repeated,
    /// `BatchCreateLinks` links per second for as many rows.
    pub batch: Repeated,
    /// Export rows per second (`GET /api/v1/links/export?format=ndjson`).
    pub export: Repeated,
    /// The store's own scan of the same rows per second.
    pub scan: Repeated,
    /// Rows in each export.
    pub exported: u64,
    /// Bytes of one NDJSON export and of one direct scan (COPY text; SQLite: none).
    pub export_bytes: (u64, u64),
}

/// Edit propagation between two PostgreSQL nodes.
#[derive(Debug, Clone, Default)]
pub struct Propagation {
    /// PATCH answered on A to B answering with the new target (ms percentiles).
    pub waits: Run,
    /// The longest wait (ms).
    pub max_ms: f64,
    /// PATCH round trips on A.
    pub patch: Run,
    /// Edits timed.
    pub edits: usize,
    /// Edits B did not serve within the timeout.
    pub missed: usize,
    /// Edits after whose acknowledgement B still answered with the old target at least once
    /// (the wait then measured the change feed, not a cache miss).
    pub stale_edits: usize,
    /// Visits to B in all, and how many of them its cache answered (`shortener_cache_hits`).
    pub visits: u64,
    /// B's cache hits over the run.
    pub cache_hits: f64,
}

/// Everything `bench manage` measures.
#[derive(Debug, Clone)]
pub struct Manage {
    /// The sizes used.
    pub settings: ManageSettings,
    /// Per store.
    pub stores: Vec<StoreManage>,
    /// PostgreSQL only.
    pub propagation: Option<Propagation>,
}

fn spec<'a>(backend: Backend<'a>, key: &CodeKey, name: &str, dir: &Path) -> NodeSpec<'a> {
    NodeSpec {
        backend,
        key_hex: key.to_hex(),
        cache_bytes: 64 << 20,
        blocks: None,
        log_dir: dir.to_path_buf(),
        name: name.into(),
        env: Vec::new(),
    }
}

fn empty(store: StoreKind, settings: &ManageSettings) -> StoreManage {
    StoreManage {
        store,
        links: settings.links,
        depth: settings.depth,
        first: ListPoint::default(),
        deep: ListPoint::default(),
        import: Repeated::default(),
        batch: Repeated::default(),
        export: Repeated::default(),
        scan: Repeated::default(),
        exported: 0,
        export_bytes: (0, 0),
    }
}

async fn postgres(
    settings: &ManageSettings,
    dir: &Path,
) -> anyhow::Result<(StoreManage, Propagation)> {
    let ids = IdService::start(dir).await?;
    let key = CodeKey::generate();
    let db = PgDatabase::create("manage")?;
    let backend = || Backend::Postgres {
        database_url: db.url(),
        id_service: ids.url.clone(),
    };
    let node = Node::start(spec(backend(), &key, "manage-pg-a", dir)).await?;
    let started = Instant::now();
    let codes = {
        let (url, id_service, key, n) = (db.url(), ids.url.clone(), key.clone(), settings.links);
        tokio::task::spawn_blocking(move || preload::postgres_links(&url, &id_service, &key, n))
            .await??
    };
    eprintln!(
        "manage: preloaded {} links into PostgreSQL in {:.1} s",
        codes.len(),
        started.elapsed().as_secs_f64()
    );
    let direct = Direct::postgres(&db.url()).await?;
    if let Direct::Postgres(client) = &direct {
        // Fresh statistics, as autovacuum would have them on a table this size.
        client.batch_execute("ANALYZE links").await?;
    }
    let mut out = empty(StoreKind::Postgres, settings);
    (out.first, out.deep) = list(settings, &node, &direct).await?;
    bulk(settings, &node, &direct, &mut out).await?;
    let second = Node::start(spec(backend(), &key, "manage-pg-b", dir)).await?;
    eprintln!(
        "manage: PostgreSQL edit propagation, {} edits",
        settings.edits
    );
    let propagation = propagation(settings, &node, &second, &codes).await?;
    drop(second);
    drop(node);
    drop(direct);
    drop(db);
    drop(ids);
    Ok((out, propagation))
}

async fn embedded(settings: &ManageSettings, dir: &Path) -> anyhow::Result<StoreManage> {
    let key = CodeKey::generate();
    let data: PathBuf = dir.join("manage-node");
    std::fs::create_dir_all(&data)?;
    let node = Node::start(spec(Backend::Embedded(&data), &key, "manage-embedded", dir)).await?;
    let started = Instant::now();
    {
        let (data, key, n) = (data.clone(), key.clone(), settings.links);
        tokio::task::spawn_blocking(move || preload::links(&data, &key, n)).await??;
    }
    eprintln!(
        "manage: preloaded {} links into SQLite in {:.1} s",
        settings.links,
        started.elapsed().as_secs_f64()
    );
    let direct = Direct::sqlite(&data.join(preload::DB_FILE))?;
    let mut out = empty(StoreKind::Embedded, settings);
    (out.first, out.deep) = list(settings, &node, &direct).await?;
    bulk(settings, &node, &direct, &mut out).await?;
    Ok(out)
}

/// Runs everything with scratch files in `dir`, on both stores or only on `only`.
pub async fn run(
    settings: &ManageSettings,
    dir: &Path,
    only: Option<StoreKind>,
) -> anyhow::Result<Manage> {
    let mut out = Manage {
        settings: settings.clone(),
        stores: Vec::new(),
        propagation: None,
    };
    if only != Some(StoreKind::Embedded) {
        let (store, propagation) = postgres(settings, dir).await?;
        out.stores.push(store);
        out.propagation = Some(propagation);
    }
    if only != Some(StoreKind::Postgres) {
        out.stores.push(embedded(settings, dir).await?);
    }
    Ok(out)
}
