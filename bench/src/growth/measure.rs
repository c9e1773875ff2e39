//! Measuring one point: the create runs over HTTP and gRPC batches (rates, WAL, buffer hits),
//! then the cache-miss runs (cold, prewarmed, at a fixed rate) and the direct-lookup baseline.

use super::cluster::BenchCluster;
use super::sample::Sample;
use super::{GrowthSettings, Layout, Point, Store, lookup};
use crate::creates::{self, Target, Transport};
use crate::load;
use crate::node::{IdService, Node};
use crate::stats::{Repeated, Run};
use anyhow::bail;
use std::sync::Arc;
use std::time::Duration;

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
pub(super) async fn measure(
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
    let creates = create_runs(cluster, store, &ids, settings, layout, rows, &label).await?;
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
        http: creates.http,
        batch: creates.batch,
        http_wal: creates.wal[0] / creates.created[0].max(1) as f64,
        batch_wal: creates.wal[1] / creates.created[1].max(1) as f64,
        create_hit: creates.hit,
        miss,
        miss_hit,
        warm,
        warm_hit,
        paced,
        direct,
    })
}

/// What the create runs of one point gave.
struct CreateRuns {
    /// HTTP creates.
    http: Repeated,
    /// gRPC batch creates.
    batch: Repeated,
    /// WAL bytes over the runs of each transport (HTTP, then batches).
    wal: [f64; 2],
    /// Links created by each transport.
    created: [u64; 2],
    /// The database's buffer hit ratio over the runs.
    hit: f64,
}

/// Runs the creates of one point, alternating the transports, against a fresh node.
async fn create_runs(
    cluster: &BenchCluster,
    store: &Store,
    ids: &IdService,
    settings: &GrowthSettings,
    layout: Layout,
    rows: u64,
    label: &str,
) -> anyhow::Result<CreateRuns> {
    let name = store.name.as_str();
    let (mut http, mut batch) = (Repeated::default(), Repeated::default());
    let (mut wal, mut created) = ([0.0f64; 2], [0u64; 2]);
    let node = Node::start(store.node_spec(ids, label)).await?;
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
    let hit = cluster.blocks(name).await?.ratio_since(before);
    Ok(CreateRuns {
        http,
        batch,
        wal,
        created,
        hit,
    })
}
