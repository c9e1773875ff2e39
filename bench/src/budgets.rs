//! `bench budgets`: a node's resident memory after the traffic issue 38 names, against the sum
//! of its configured budgets, and the cold working set beside the hyper ceiling. For an
//! embedded node and a PostgreSQL node in turn: idle RSS; seed the links; redirects over them
//! uniformly, each request once; random well-formed unknown codes (bounded in count and in
//! time); RSS and every structure's memory gauge. Then, on the same node with its cache at the
//! default bound, wrk with uniform codes beside the ceiling.

use crate::load;
use crate::machine::rss_kib;
use crate::node::{Backend, IdService, Node, NodeSpec};
use crate::procs::{PgDatabase, Server};
use crate::stats::Run;
use crate::{preload, wrk};
use codespace::CodeKey;
use rand::Rng;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The node's default redirect cache bound (`SHORTENER_CACHE_BYTES`, shortener/src/config/redirects.rs),
/// which this group leaves as it is.
pub const DEFAULT_CACHE_BYTES: u64 = 240 << 20;

/// The structures whose budget is the listeners' connection caps (sized from the open-files
/// limit, not from traffic): their bytes in use count towards the sum instead.
const CAP_SIZED: [&str; 2] = ["connection_buffers", "connection_gates"];

/// Sizes and bounds of a run.
#[derive(Debug, Clone)]
pub struct BudgetSettings {
    /// Links seeded.
    pub links: u64,
    /// Uniform redirects over them, each request once.
    pub redirects: usize,
    /// Unknown codes requested at most.
    pub misses: usize,
    /// The longest the unknown codes may take.
    pub miss_time: Duration,
    /// Length of each wrk run of the cold working set.
    pub wrk: Duration,
    /// wrk runs of each server, alternating.
    pub reps: usize,
}

impl BudgetSettings {
    /// The full run (a few minutes on 2 cores) or the smoke run.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                links: 20_000,
                redirects: 60_000,
                misses: 200_000,
                miss_time: Duration::from_secs(30),
                wrk: Duration::from_secs(2),
                reps: 1,
            }
        } else {
            Self {
                links: 100_000,
                redirects: 300_000,
                misses: 1_000_000,
                miss_time: Duration::from_secs(120),
                wrk: Duration::from_secs(5),
                reps: 2,
            }
        }
    }
}

/// One structure's gauges at the end.
#[derive(Debug, Clone)]
pub struct Structure {
    /// Its `structure` label.
    pub name: String,
    /// Bytes in use.
    pub bytes: f64,
    /// Its budget (NaN when the node reports none).
    pub budget: f64,
}

/// What one node measured.
#[derive(Debug, Clone)]
pub struct NodeFigures {
    /// `embedded` or `PostgreSQL`.
    pub store: &'static str,
    /// RSS before any link (KiB).
    pub idle_kib: u64,
    /// RSS after the traffic (KiB).
    pub end_kib: u64,
    /// The redirects' run.
    pub redirects: Run,
    /// Unknown codes requested, and their run.
    pub misses: (usize, Run),
    /// Every structure's gauges at the end (the redirect cache's budget from the setting when
    /// the node reports none).
    pub structures: Vec<Structure>,
    /// The same right after the redirects, before the unknown codes.
    pub after_redirects: Vec<Structure>,
    /// The wrk runs of the ceiling and of the node, uniform codes, 64 connections.
    pub ceiling: Vec<Run>,
    /// The node's.
    pub cold: Vec<Run>,
}

impl NodeFigures {
    /// The sum of the budgets, in bytes: each structure's budget, except the cap-sized ones,
    /// which count their bytes in use.
    pub fn budget_sum(&self) -> f64 {
        self.structures
            .iter()
            .map(|s| {
                if CAP_SIZED.contains(&s.name.as_str()) || !s.budget.is_finite() {
                    s.bytes
                } else {
                    s.budget
                }
            })
            .sum()
    }

    /// The sum of the bytes in use the node reports (structures reporting none left out).
    pub fn in_use_sum(&self) -> f64 {
        self.structures
            .iter()
            .map(|s| s.bytes)
            .filter(|b| b.is_finite())
            .sum()
    }

    /// RSS at the end over the budgets plus the idle RSS (target at most 1.25).
    pub fn rss_ratio(&self) -> f64 {
        self.end_kib as f64 * 1024.0 / (self.budget_sum() + self.idle_kib as f64 * 1024.0)
    }
}

/// Everything the group measured.
#[derive(Debug, Clone)]
pub struct Budgets {
    /// The sizes it ran with.
    pub settings: BudgetSettings,
    /// Embedded, then PostgreSQL.
    pub nodes: Vec<NodeFigures>,
}

/// Runs the group with scratch files in `dir`.
pub async fn run(settings: &BudgetSettings, dir: &Path) -> anyhow::Result<Budgets> {
    let script = wrk::install_script(dir)?;
    let ceiling = crate::ceiling::spawn(dir).await?;
    let key = CodeKey::generate();
    let data = dir.join("budgets-node");
    std::fs::create_dir_all(&data)?;
    // An embedded node learns of rows another process wrote only when it opens the file (its
    // high-water mark is read at start), so its idle RSS is read on a first process and the
    // links are seeded before a second one starts over them.
    let first = start(Backend::Embedded(&data), &key, dir, "budgets-embedded-idle").await?;
    let idle_kib = idle_rss(&first).await;
    drop(first);
    eprintln!("budgets (embedded): seeding {} links", settings.links);
    let codes = {
        let (data, key, n) = (data.clone(), key.clone(), settings.links);
        tokio::task::spawn_blocking(move || preload::links(&data, &key, n)).await??
    };
    let embedded = start(Backend::Embedded(&data), &key, dir, "budgets-embedded").await?;
    let run = Measured {
        node: embedded,
        store: "embedded",
        idle_kib,
        codes,
    };
    let mut nodes = vec![measure(settings, dir, &script, &ceiling, run).await?];
    let ids = IdService::start(dir).await?;
    let db = PgDatabase::create("budgets")?;
    let postgres = start(
        Backend::Postgres {
            database_url: db.url(),
            id_service: ids.url.clone(),
        },
        &key,
        dir,
        "budgets-postgres",
    )
    .await?;
    let idle_kib = idle_rss(&postgres).await;
    eprintln!("budgets (PostgreSQL): seeding {} links", settings.links);
    let codes = {
        let (url, id_service, n) = (db.url(), ids.url.clone(), settings.links);
        tokio::task::spawn_blocking(move || preload::postgres_links(&url, &id_service, &key, n))
            .await??
    };
    let run = Measured {
        node: postgres,
        store: "PostgreSQL",
        idle_kib,
        codes,
    };
    nodes.push(measure(settings, dir, &script, &ceiling, run).await?);
    Ok(Budgets {
        settings: settings.clone(),
        nodes,
    })
}

async fn start(
    backend: Backend<'_>,
    key: &CodeKey,
    dir: &Path,
    name: &str,
) -> anyhow::Result<Node> {
    Node::start(NodeSpec {
        backend,
        key_hex: key.to_hex(),
        cache_bytes: DEFAULT_CACHE_BYTES,
        blocks: None,
        log_dir: dir.to_path_buf(),
        name: name.into(),
        env: Vec::new(),
    })
    .await
}

/// RSS of `node` once it has settled after its start (KiB).
async fn idle_rss(node: &Node) -> u64 {
    tokio::time::sleep(Duration::from_secs(1)).await;
    rss_kib(node.server.pid()).unwrap_or(0)
}

/// A seeded node to measure.
struct Measured {
    node: Node,
    store: &'static str,
    /// Its idle RSS, read before the links were seeded.
    idle_kib: u64,
    /// The seeded links' codes.
    codes: Vec<String>,
}

/// The memory sequence, then the cold working set, on a seeded node.
async fn measure(
    settings: &BudgetSettings,
    dir: &Path,
    script: &Path,
    ceiling: &(std::net::SocketAddr, Server),
    run: Measured,
) -> anyhow::Result<NodeFigures> {
    let Measured {
        mut node,
        store,
        idle_kib,
        codes,
    } = run;
    eprintln!(
        "budgets ({store}): {} uniform redirects",
        settings.redirects
    );
    let picks = {
        let mut rng = rand::rng();
        (0..settings.redirects)
            .map(|_| codes[rng.random_range(0..codes.len())].clone())
            .collect()
    };
    let redirects = load::each_once(node.http, Arc::new(picks), 64).await?;
    let after_redirects = structures(&node).await?;
    let misses = unknown_codes(settings, &node, codes[0].len(), store).await?;
    // The click counts flush on their interval; the figures are read after it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let end_kib = rss_kib(node.server.pid()).unwrap_or(0);
    let structures = structures(&node).await?;
    let codes_file = dir.join(format!("codes-{store}.txt"));
    std::fs::write(&codes_file, codes.join("\n") + "\n")?;
    let uniform = wrk::Mix {
        zipf: 0.0,
        unknown: 0.0,
    };
    let (mut ceiling_runs, mut cold) = (Vec::new(), Vec::new());
    for rep in 0..settings.reps {
        eprintln!("budgets ({store}): rep {rep}: ceiling, then the node, uniform codes");
        let (addr, server) = ceiling;
        let r = wrk::run(
            script,
            &codes_file,
            *addr,
            64,
            settings.wrk,
            uniform,
            server.pid(),
        )?;
        ceiling_runs.push(r);
        let r = wrk::run(
            script,
            &codes_file,
            node.http,
            64,
            settings.wrk,
            uniform,
            node.server.pid(),
        )?;
        cold.push(r);
    }
    node.server.check_alive()?;
    Ok(NodeFigures {
        store,
        idle_kib,
        end_kib,
        redirects,
        misses,
        structures,
        after_redirects,
        ceiling: ceiling_runs,
        cold,
    })
}

/// Requests random well-formed codes of `length` characters (none of them a link, bar a
/// chance in billions) in chunks, until `settings.misses` or `settings.miss_time`.
async fn unknown_codes(
    settings: &BudgetSettings,
    node: &Node,
    length: usize,
    store: &str,
) -> anyhow::Result<(usize, Run)> {
    const CHUNK: usize = 100_000;
    let started = Instant::now();
    let (mut sent, mut latencies_p99) = (0usize, Vec::new());
    while sent < settings.misses && started.elapsed() < settings.miss_time {
        let n = CHUNK.min(settings.misses - sent);
        let codes: Vec<String> = {
            let mut rng = rand::rng();
            (0..n)
                .map(|_| {
                    (0..length)
                        .map(|_| char::from(codespace::ALPHABET[rng.random_range(0..62)]))
                        .collect()
                })
                .collect()
        };
        let run = load::each_once(node.http, Arc::new(codes), 64).await?;
        latencies_p99.push(run.p99_ms);
        sent += n;
    }
    eprintln!(
        "budgets ({store}): {sent} unknown codes in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let elapsed = started.elapsed();
    let mut run = Run {
        per_second: sent as f64 / elapsed.as_secs_f64().max(1e-9),
        ..Run::default()
    };
    run.p99_ms = latencies_p99.iter().copied().fold(f64::NAN, f64::max);
    Ok((sent, run))
}

/// Every structure's gauges from the node's `/metrics`; the redirect cache's budget is its
/// setting when the node does not report one.
async fn structures(node: &Node) -> anyhow::Result<Vec<Structure>> {
    let text = crate::http::get_text(node.admin, "/metrics").await?;
    let mut out: Vec<Structure> = Vec::new();
    for (metric, budget) in [
        ("shortener_memory_bytes{structure=\"", false),
        ("shortener_memory_budget_bytes{structure=\"", true),
    ] {
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(metric) else {
                continue;
            };
            let Some((name, value)) = rest.split_once("\"} ") else {
                continue;
            };
            let value: f64 = value.trim().parse().unwrap_or(f64::NAN);
            let entry = match out.iter().position(|s| s.name == name) {
                Some(i) => &mut out[i],
                None => {
                    out.push(Structure {
                        name: name.to_string(),
                        bytes: f64::NAN,
                        budget: f64::NAN,
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            if budget {
                entry.budget = value;
            } else {
                entry.bytes = value;
            }
        }
    }
    if !out.iter().any(|s| s.name == "redirect_cache") {
        let entries = node
            .metric("shortener_cache_entries")
            .await
            .unwrap_or(f64::NAN);
        out.insert(
            0,
            Structure {
                name: "redirect_cache (setting; not reported)".into(),
                bytes: f64::NAN,
                budget: DEFAULT_CACHE_BYTES as f64,
            },
        );
        eprintln!("budgets: the node reports no redirect_cache gauge ({entries} entries)");
    }
    Ok(out)
}
