//! Creates on PostgreSQL (node + id-service) and embedded, over HTTP, gRPC and gRPC batches,
//! beside pgbench and the SQLite single-insert baseline; then block rollovers under load.

use crate::baselines;
use crate::creates::{self, Transport};
use crate::node::{Backend, IdService, Node, NodeSpec};
use crate::procs::PgDatabase;
use crate::settings::Settings;
use crate::stats::Repeated;
use codespace::CodeKey;
use std::path::Path;

/// Which store a node used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// PostgreSQL with the id-service.
    Postgres,
    /// SQLite.
    Embedded,
}

impl StoreKind {
    /// Its name in tables.
    pub fn label(self) -> &'static str {
        match self {
            StoreKind::Postgres => "PostgreSQL",
            StoreKind::Embedded => "embedded",
        }
    }
}

/// One measured configuration.
#[derive(Debug, Clone)]
pub struct CreateRow {
    /// The store.
    pub store: StoreKind,
    /// The transport.
    pub transport: Transport,
    /// Concurrent clients.
    pub clients: usize,
    /// The runs.
    pub runs: Repeated,
}

/// Creates under block rollovers.
#[derive(Debug, Clone)]
pub struct Rollover {
    /// The store.
    pub store: StoreKind,
    /// Block size (min = max).
    pub block: u64,
    /// Leases taken during the measured runs.
    pub leases: f64,
    /// HTTP creates at 64 clients.
    pub runs: Repeated,
}

/// Everything the create suite measures.
#[derive(Debug, Clone, Default)]
pub struct Creates {
    /// Node rows.
    pub rows: Vec<CreateRow>,
    /// pgbench per client count.
    pub pgbench: Vec<(usize, Repeated)>,
    /// SQLite single inserts (one writer).
    pub sqlite: Repeated,
    /// Rollover runs.
    pub rollover: Vec<Rollover>,
}

impl Creates {
    /// The row for a configuration.
    pub fn row(
        &self,
        store: StoreKind,
        transport: Transport,
        clients: usize,
    ) -> Option<&CreateRow> {
        self.rows
            .iter()
            .find(|r| r.store == store && r.transport == transport && r.clients == clients)
    }

    fn push(
        &mut self,
        store: StoreKind,
        transport: Transport,
        clients: usize,
        run: crate::stats::Run,
    ) {
        match self
            .rows
            .iter_mut()
            .find(|r| r.store == store && r.transport == transport && r.clients == clients)
        {
            Some(row) => row.runs.push(run),
            None => {
                let mut runs = Repeated::default();
                runs.push(run);
                self.rows.push(CreateRow {
                    store,
                    transport,
                    clients,
                    runs,
                });
            }
        }
    }

    /// pgbench's median rate at `clients`.
    pub fn pgbench_rate(&self, clients: usize) -> f64 {
        crate::redirects::rate_at(&self.pgbench, clients)
    }
}

/// The transports measured at `clients` (one shared channel only where there are several
/// clients to share it).
fn transports(settings: &Settings, clients: usize) -> Vec<Transport> {
    let mut all = vec![Transport::Http, Transport::Grpc];
    if clients > 1 {
        all.push(Transport::GrpcShared);
    }
    all.push(Transport::GrpcBatch(settings.batch));
    // The gRPC/HTTP target's point, once more from one C load generator for both transports.
    if clients == 64 {
        all.extend([Transport::H2loadHttp, Transport::H2loadGrpcShared]);
    }
    all
}

/// One point of `transport` against `node`.
async fn point(
    settings: &Settings,
    node: &Node,
    transport: Transport,
    clients: usize,
    dir: &Path,
) -> anyhow::Result<crate::stats::Run> {
    let (w, d) = (settings.warmup, settings.create);
    if transport.by_h2load() {
        crate::h2load::run(node, transport, clients, w, d, dir).await
    } else {
        creates::run(node, transport, clients, w, d).await
    }
}

async fn leases(node: &Node) -> f64 {
    match node.metric("shortener_leases_total").await {
        Some(v) => v,
        None => node.metric("shortener_leases").await.unwrap_or(f64::NAN),
    }
}

async fn rollover(
    settings: &Settings,
    store: StoreKind,
    spec: NodeSpec<'_>,
) -> anyhow::Result<Rollover> {
    let node = Node::start(spec).await?;
    let before = leases(&node).await;
    let mut runs = Repeated::default();
    for rep in 0..settings.reps {
        eprintln!("creates: {} rollover rep {rep}", store.label());
        runs.push(
            creates::run(&node, Transport::Http, 64, settings.warmup, settings.create).await?,
        );
    }
    let after = leases(&node).await;
    Ok(Rollover {
        store,
        block: settings.rollover_block,
        leases: after - before,
        runs,
    })
}

fn postgres<'a>(db: &PgDatabase, ids: &IdService) -> Backend<'a> {
    Backend::Postgres {
        database_url: db.url(),
        id_service: ids.url.clone(),
    }
}

fn spec<'a>(
    backend: Backend<'a>,
    key: &CodeKey,
    name: &str,
    blocks: Option<(u64, u64)>,
    dir: &Path,
) -> NodeSpec<'a> {
    NodeSpec {
        backend,
        key_hex: key.to_hex(),
        cache_bytes: 64 << 20,
        blocks,
        log_dir: dir.to_path_buf(),
        name: name.into(),
        env: Vec::new(),
    }
}

/// Runs the suite with scratch files in `dir`, on both stores or only on `only`.
pub async fn run(
    settings: &Settings,
    dir: &Path,
    only: Option<StoreKind>,
) -> anyhow::Result<Creates> {
    let mut out = Creates::default();
    if only != Some(StoreKind::Embedded) {
        postgres_suite(settings, dir, &mut out).await?;
    }
    if only != Some(StoreKind::Postgres) {
        embedded_suite(settings, dir, &mut out).await?;
    }
    Ok(out)
}

async fn postgres_suite(settings: &Settings, dir: &Path, out: &mut Creates) -> anyhow::Result<()> {
    let d = settings.create;

    // PostgreSQL: the node, the id-service, and pgbench on a database with the same schema.
    let ids = IdService::start(dir).await?;
    let key = CodeKey::generate();
    let links_db = PgDatabase::create("links")?;
    let pgbench_db = baselines::pgbench_database()?;
    {
        let node =
            Node::start(spec(postgres(&links_db, &ids), &key, "postgres", None, dir)).await?;
        for clients in settings.clients() {
            for rep in 0..settings.reps {
                eprintln!("creates: PostgreSQL, {clients} clients, rep {rep}");
                let r = baselines::pgbench(&pgbench_db, clients, d, dir)?;
                match out.pgbench.iter_mut().find(|(c, _)| *c == clients) {
                    Some((_, runs)) => runs.push(r),
                    None => {
                        let mut runs = Repeated::default();
                        runs.push(r);
                        out.pgbench.push((clients, runs));
                    }
                }
                for t in transports(settings, clients) {
                    let r = point(settings, &node, t, clients, dir).await?;
                    out.push(StoreKind::Postgres, t, clients, r);
                }
            }
        }
    }
    let block = settings.rollover_block;
    out.rollover.push(
        rollover(
            settings,
            StoreKind::Postgres,
            spec(
                postgres(&links_db, &ids),
                &key,
                "postgres-rollover",
                Some((block, block)),
                dir,
            ),
        )
        .await?,
    );
    drop(pgbench_db);
    drop(links_db);
    drop(ids);
    Ok(())
}

async fn embedded_suite(settings: &Settings, dir: &Path, out: &mut Creates) -> anyhow::Result<()> {
    let d = settings.create;
    let block = settings.rollover_block;
    let key = CodeKey::generate();
    let data = dir.join("create-node");
    std::fs::create_dir_all(&data)?;
    {
        let node = Node::start(spec(Backend::Embedded(&data), &key, "embedded", None, dir)).await?;
        // The baseline is an fsync figure and this VM's disk speeds up and slows down over
        // minutes, so the baseline runs once per repetition, interleaved with the node's
        // points: right before that repetition's points at every client count.
        for rep in 0..settings.reps {
            eprintln!("creates: SQLite single-insert baseline, rep {rep}");
            let scratch = dir.to_path_buf();
            let r =
                tokio::task::spawn_blocking(move || baselines::sqlite_single_inserts(&scratch, d))
                    .await??;
            out.sqlite.push(r);
            for clients in settings.clients() {
                eprintln!("creates: embedded, {clients} clients, rep {rep}");
                for t in transports(settings, clients) {
                    let r = point(settings, &node, t, clients, dir).await?;
                    out.push(StoreKind::Embedded, t, clients, r);
                }
            }
        }
    }
    let data = dir.join("rollover-node");
    std::fs::create_dir_all(&data)?;
    out.rollover.push(
        rollover(
            settings,
            StoreKind::Embedded,
            spec(
                Backend::Embedded(&data),
                &key,
                "embedded-rollover",
                Some((block, block)),
                dir,
            ),
        )
        .await?,
    );
    Ok(())
}
