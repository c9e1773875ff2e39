//! Resident memory of an embedded node holding 0, then N cached links (each warmed by one
//! redirect), read from `/proc/<pid>/status`.

use crate::load;
use crate::machine::rss_kib;
use crate::node::{Backend, Node, NodeSpec};
use crate::preload;
use crate::settings::Settings;
use crate::stats::Run;
use codespace::CodeKey;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One memory figure.
#[derive(Debug, Clone)]
pub struct MemoryPoint {
    /// Links cached.
    pub links: u64,
    /// Entries the node reports in its cache.
    pub cache_entries: f64,
    /// Bytes the node reports its redirect cache's links hold
    /// (`shortener_memory_bytes{structure="redirect_cache"}`; NaN for a node without it).
    pub cache_bytes: f64,
    /// Resident set size (KiB).
    pub rss_kib: u64,
}

/// Memory figures and the warming rate.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// Points, starting at 0 links.
    pub points: Vec<MemoryPoint>,
    /// Redirects per second while warming (every one a cache miss).
    pub warming: Option<Run>,
}

async fn point(node: &Node, links: u64) -> MemoryPoint {
    // Read once the node reports every warmed link cached (or after a bounded wait, in which
    // case the entry count in the table shows the shortfall).
    let deadline = Instant::now() + Duration::from_secs(10);
    let cache_entries = loop {
        let entries = node
            .metric("shortener_cache_entries")
            .await
            .unwrap_or(f64::NAN);
        if entries >= links as f64 || Instant::now() > deadline {
            break entries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let cache_bytes = node
        .metric("shortener_memory_bytes{structure=\"redirect_cache\"}")
        .await
        .unwrap_or(f64::NAN);
    MemoryPoint {
        links,
        cache_entries,
        cache_bytes,
        rss_kib: rss_kib(node.server.pid()).unwrap_or(0),
    }
}

/// Runs the suite with scratch files in `dir`.
pub async fn run(settings: &Settings, dir: &Path) -> anyhow::Result<Memory> {
    let key = CodeKey::generate();
    let data = dir.join("memory-node");
    std::fs::create_dir_all(&data)?;
    // Written before the node starts: an embedded node keeps the highest stored ID in memory
    // and answers a code above it 404 without a lookup, so links written behind a running
    // node's back would never be found (nor cached).
    let total = settings.memory_points.iter().copied().max().unwrap_or(0);
    let codes = {
        let (data, key) = (data.clone(), key.clone());
        tokio::task::spawn_blocking(move || preload::links(&data, &key, total)).await??
    };
    let node = Node::start(NodeSpec {
        backend: Backend::Embedded(&data),
        key_hex: key.to_hex(),
        // Large enough for every link: the figure is what the links cost, not the bound.
        cache_bytes: 4 << 30,
        blocks: None,
        log_dir: dir.to_path_buf(),
        name: "memory".into(),
        env: Vec::new(),
    })
    .await?;
    let mut out = Memory::default();
    out.points.push(point(&node, 0).await);
    let mut warmed = 0usize;
    for &target in &settings.memory_points {
        eprintln!("memory: warming {target} links");
        let slice = Arc::new(codes[warmed..target as usize].to_vec());
        let run = load::each_once(node.http, slice, 64).await?;
        if out.warming.is_none() {
            out.warming = Some(run);
        }
        warmed = target as usize;
        out.points.push(point(&node, target).await);
    }
    Ok(out)
}
