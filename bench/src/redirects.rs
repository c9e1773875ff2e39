//! Redirects through an embedded node's edge, beside the hyper ceiling on the same core with the
//! same load generator: cache hits (Zipf over the links), cache misses (cache disabled), a 5%
//! unknown-code mix, each code once (a cold cache), and open-loop latency at fixed rates.

use crate::load::{self, Pick};
use crate::node::{Backend, Node, NodeSpec};
use crate::procs::Server;
use crate::settings::Settings;
use crate::stats::{Repeated, Run};
use crate::{preload, wrk};
use anyhow::Context;
use codespace::CodeKey;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Connection counts of the closed-loop runs.
pub const CONNECTIONS: [usize; 2] = [1, 64];

/// One open-loop point: the same rate offered to both servers.
#[derive(Debug, Clone)]
pub struct OpenPoint {
    /// The fraction of the node's closed-loop peak (64 connections, cache hits) offered.
    pub fraction: f64,
    /// Requests per second offered to each server.
    pub rate: f64,
    /// The ceiling's latencies.
    pub ceiling: Run,
    /// The node's latencies.
    pub node: Run,
}

/// Everything the redirect suite measures.
#[derive(Debug, Clone, Default)]
pub struct Redirects {
    /// Links behind the runs.
    pub links: u64,
    /// The hyper ceiling, per connection count.
    pub ceiling: Vec<(usize, Repeated)>,
    /// Cache hits, Zipf(1) over the links.
    pub hit: Vec<(usize, Repeated)>,
    /// The same on a node with click analytics off (its own copy of the links), run right
    /// after each `hit` run.
    pub hit_analytics_off: Vec<(usize, Repeated)>,
    /// Zipf hits plus 5% unknown codes.
    pub mix404: Vec<(usize, Repeated)>,
    /// Cache disabled: every request reads SQLite.
    pub miss: Vec<(usize, Repeated)>,
    /// Cache hits at 64 connections in windows as long as a rollups flush interval, alternated
    /// in rounds: the ceiling, the node, the node with analytics off ([`Rig::steady`]).
    pub steady: Steady,
    /// Every code requested once on a cold cache (64 connections, this crate's client).
    pub each_once: Run,
    /// Open-loop points.
    pub open: Vec<OpenPoint>,
}

/// Cache hits: Zipf(1) over the links, no unknown codes.
const HITS: wrk::Mix = wrk::Mix {
    zipf: 1.0,
    unknown: 0.0,
};

/// The steady cache-hit rounds (64 connections, Zipf(1)).
#[derive(Debug, Clone, Default)]
pub struct Steady {
    /// The window of each run.
    pub window: std::time::Duration,
    /// The hyper ceiling.
    pub ceiling: Repeated,
    /// The node.
    pub hit: Repeated,
    /// The node with click analytics off.
    pub hit_analytics_off: Repeated,
}

/// `run` (of known codes) unless some of its requests failed (wrk counts a status over 399 and
/// socket errors): a node that does not know its links answers 404 (refusing them before any
/// lookup), and a run of those measures refusals, not cache hits.
fn redirected(run: &Run, what: &str) -> anyhow::Result<Run> {
    anyhow::ensure!(
        run.errors == 0,
        "{what}: {} answers were errors (a status over 399, or a socket error) where every one should be a redirect; the node does not serve the links it was given, or failed",
        run.errors
    );
    Ok(*run)
}

fn entry(list: &mut Vec<(usize, Repeated)>, conns: usize) -> &mut Repeated {
    if let Some(i) = list.iter().position(|(c, _)| *c == conns) {
        return &mut list[i].1;
    }
    list.push((conns, Repeated::default()));
    &mut list.last_mut().expect("just pushed").1
}

/// The median rate at `conns` in `list`.
pub fn rate_at(list: &[(usize, Repeated)], conns: usize) -> f64 {
    list.iter()
        .find(|(c, _)| *c == conns)
        .map_or(f64::NAN, |(_, r)| r.rate())
}

/// Runs the suite with scratch files in `dir`.
pub async fn run(settings: &Settings, dir: &Path) -> anyhow::Result<Redirects> {
    let mut out = Redirects {
        links: settings.links,
        ..Redirects::default()
    };
    let key = CodeKey::generate();
    let data = dir.join("redirect-node");
    std::fs::create_dir_all(&data)?;
    let script = wrk::install_script(dir)?;
    let codes_file = dir.join("codes.txt");
    let (rig, codes_off) = Rig::start(settings, dir, &data, &key, &codes_file).await?;

    eprintln!(
        "redirects: each of {} codes once (cold cache)",
        rig.codes.len()
    );
    out.each_once = load::each_once(rig.node.http, Arc::clone(&rig.codes), 64)
        .await
        .context("warm the cache")?;
    let off = load::each_once(rig.node_off.http, Arc::new(codes_off), 64)
        .await
        .context("warm the analytics-off node's cache")?;
    redirected(&out.each_once, "warming the node")?;
    redirected(&off, "warming the analytics-off node")?;

    rig.closed_loop(settings, &script, &codes_file, &mut out)?;
    rig.steady(settings, &script, &codes_file, &mut out)?;
    rig.open_loop(settings, &mut out).await?;
    rig.stop()?;
    out.miss = cache_disabled(settings, dir, &data, &key, &script, &codes_file).await?;
    Ok(out)
}

/// The servers of the cache-hit runs and the codes they serve. The servers stop on drop, in
/// field order: the ceiling, the analytics-off node, the node.
struct Rig {
    /// The hyper ceiling.
    ceiling: Server,
    /// The ceiling's address.
    ceiling_addr: SocketAddr,
    /// The node that counts no analytics, on its own copy of the links.
    node_off: Node,
    /// The node (256 MiB cache).
    node: Node,
    /// The node's codes.
    codes: Arc<Vec<String>>,
    /// The analytics-off node's codes, one per line, for wrk.
    codes_off_file: PathBuf,
}

impl Rig {
    /// Starts the node and the analytics-off node on links preloaded for each, and the ceiling;
    /// writes the node's codes to `codes_file`. Returns the analytics-off node's codes beside.
    async fn start(
        settings: &Settings,
        dir: &Path,
        data: &Path,
        key: &CodeKey,
        codes_file: &Path,
    ) -> anyhow::Result<(Rig, Vec<String>)> {
        // The links are written before the node starts: an embedded node reads its high-water
        // mark when it opens the file, and refuses a code that decodes above it without a
        // lookup (docs/design.md, I9), so links written behind a running node are never found.
        let codes = preload_links(data, key, settings.links).await?;
        let node = Node::start(NodeSpec {
            backend: Backend::Embedded(data),
            key_hex: key.to_hex(),
            cache_bytes: 256 << 20,
            blocks: None,
            log_dir: dir.to_path_buf(),
            name: "redirects".into(),
            env: Vec::new(),
        })
        .await?;
        // As many links in a second file, behind a node that counts no analytics: what the
        // analytics cost a cache hit, measured side by side.
        let data_off = dir.join("redirect-node-analytics-off");
        std::fs::create_dir_all(&data_off)?;
        let codes_off = preload_links(&data_off, key, settings.links).await?;
        let codes_off_file = dir.join("codes-analytics-off.txt");
        std::fs::write(&codes_off_file, codes_off.join("\n") + "\n")?;
        let node_off = Node::start(NodeSpec {
            backend: Backend::Embedded(&data_off),
            key_hex: key.to_hex(),
            cache_bytes: 256 << 20,
            blocks: None,
            log_dir: dir.to_path_buf(),
            name: "redirects-analytics-off".into(),
            env: vec![("SHORTENER_ANALYTICS".into(), "off".into())],
        })
        .await?;
        std::fs::write(codes_file, codes.join("\n") + "\n")?;
        let codes = Arc::new(codes);

        let (ceiling_addr, ceiling) = crate::ceiling::spawn(dir).await?;
        let rig = Rig {
            ceiling,
            ceiling_addr,
            node_off,
            node,
            codes,
            codes_off_file,
        };
        Ok((rig, codes_off))
    }

    /// The closed-loop runs, each repetition at each connection count: the ceiling, cache hits,
    /// cache hits with analytics off, and hits with 5% unknown codes.
    fn closed_loop(
        &self,
        settings: &Settings,
        script: &Path,
        codes_file: &Path,
        out: &mut Redirects,
    ) -> anyhow::Result<()> {
        let hits = HITS;
        let mix = wrk::Mix {
            zipf: 1.0,
            unknown: 0.05,
        };
        let d = settings.redirect;
        for rep in 0..settings.reps {
            for conns in CONNECTIONS {
                eprintln!(
                    "redirects: rep {rep}, {conns} connections: ceiling, hits, hits with analytics off, 5% unknown"
                );
                let r = wrk::run(
                    script,
                    codes_file,
                    self.ceiling_addr,
                    conns,
                    d,
                    hits,
                    self.ceiling.pid(),
                )?;
                entry(&mut out.ceiling, conns).push(r);
                let r = wrk::run(
                    script,
                    codes_file,
                    self.node.http,
                    conns,
                    d,
                    hits,
                    self.node.server.pid(),
                )?;
                entry(&mut out.hit, conns).push(redirected(&r, "cache hits")?);
                let r = wrk::run(
                    script,
                    &self.codes_off_file,
                    self.node_off.http,
                    conns,
                    d,
                    hits,
                    self.node_off.server.pid(),
                )?;
                entry(&mut out.hit_analytics_off, conns)
                    .push(redirected(&r, "cache hits, analytics off")?);
                let r = wrk::run(
                    script,
                    codes_file,
                    self.node.http,
                    conns,
                    d,
                    mix,
                    self.node.server.pid(),
                )?;
                entry(&mut out.mix404, conns).push(r);
            }
        }
        Ok(())
    }

    /// The steady rounds: at 64 connections, the ceiling, the node and the node with analytics
    /// off, each for `settings.steady`. The closed-loop windows above are shorter than the
    /// node's rollups flush interval (30 s), so whether one of them holds a flush (the hand-over
    /// of every cached link's counts, and the writer's upserts on the same core) is a matter of
    /// phase: a median over them may count the flush's cost several times or not at all. A
    /// window of a whole interval holds one flush, as every 30 s of a serving node does.
    fn steady(
        &self,
        settings: &Settings,
        script: &Path,
        codes_file: &Path,
        out: &mut Redirects,
    ) -> anyhow::Result<()> {
        let hits = HITS;
        let d = settings.steady;
        out.steady.window = d;
        for round in 0..settings.steady_rounds {
            eprintln!(
                "redirects: steady round {round}, 64 connections, {} s each: ceiling, hits, hits with analytics off",
                d.as_secs()
            );
            let pid = self.ceiling.pid();
            let run = wrk::run(script, codes_file, self.ceiling_addr, 64, d, hits, pid)?;
            out.steady.ceiling.push(run);
            let pid = self.node.server.pid();
            let run = wrk::run(script, codes_file, self.node.http, 64, d, hits, pid)?;
            out.steady.hit.push(redirected(&run, "steady cache hits")?);
            let (off, pid) = (&self.codes_off_file, self.node_off.server.pid());
            let run = wrk::run(script, off, self.node_off.http, 64, d, hits, pid)?;
            out.steady
                .hit_analytics_off
                .push(redirected(&run, "steady cache hits, analytics off")?);
        }
        Ok(())
    }

    /// The open-loop points: the ceiling and the node at the same fractions of the node's peak.
    async fn open_loop(&self, settings: &Settings, out: &mut Redirects) -> anyhow::Result<()> {
        // Both servers get the same rates, fractions of the node's peak: at equal load, the
        // difference in latency is what the node adds. (The ceiling's own peak would also take
        // the higher fractions past what the generator can send.)
        let d = settings.redirect;
        let node_peak = rate_at(&out.hit, 64);
        if !(node_peak.is_finite() && node_peak > 0.0) {
            eprintln!("redirects: no cache-hit peak measured; open loop skipped");
        }
        let fractions = if node_peak.is_finite() && node_peak > 0.0 {
            settings.open_fractions.as_slice()
        } else {
            &[]
        };
        for &fraction in fractions {
            eprintln!(
                "redirects: open loop at {:.0}% of the node's peak",
                fraction * 100.0
            );
            let rate = node_peak * fraction;
            let codes = || Arc::clone(&self.codes);
            let ceiling =
                load::open_loop(self.ceiling_addr, codes(), rate, Pick::Zipf(d), 64).await?;
            let node = load::open_loop(self.node.http, codes(), rate, Pick::Zipf(d), 64).await?;
            out.open.push(OpenPoint {
                fraction,
                rate,
                ceiling,
                node,
            });
        }
        Ok(())
    }

    /// Fails if a server died during the runs, then stops the ceiling, the node and the
    /// analytics-off node, in that order.
    fn stop(mut self) -> anyhow::Result<()> {
        // A server that died during the runs is reported with its log, not by whatever fails next.
        self.ceiling.check_alive()?;
        self.node.server.check_alive()?;
        self.node_off.server.check_alive()?;
        let Rig {
            ceiling,
            node_off,
            node,
            ..
        } = self;
        drop(ceiling);
        drop(node);
        drop(node_off);
        Ok(())
    }
}

/// Preloads `n` links into the store in `data` (on a blocking thread); returns their codes.
async fn preload_links(data: &Path, key: &CodeKey, n: u64) -> anyhow::Result<Vec<String>> {
    let (data, key) = (data.to_path_buf(), key.clone());
    tokio::task::spawn_blocking(move || preload::links(&data, &key, n)).await?
}

/// The cache-disabled runs on a node whose cache holds nothing; returns them per connection count.
async fn cache_disabled(
    settings: &Settings,
    dir: &Path,
    data: &Path,
    key: &CodeKey,
    script: &Path,
    codes_file: &Path,
) -> anyhow::Result<Vec<(usize, Repeated)>> {
    // A node whose cache holds nothing: every redirect reads the store.
    let node = Node::start(NodeSpec {
        backend: Backend::Embedded(data),
        key_hex: key.to_hex(),
        cache_bytes: 1,
        blocks: None,
        log_dir: dir.to_path_buf(),
        name: "no-cache".into(),
        env: Vec::new(),
    })
    .await?;
    let uniform = wrk::Mix {
        zipf: 0.0,
        unknown: 0.0,
    };
    let mut miss = Vec::new();
    for rep in 0..settings.reps {
        for conns in CONNECTIONS {
            eprintln!("redirects: rep {rep}, {conns} connections: cache disabled");
            let r = wrk::run(
                script,
                codes_file,
                node.http,
                conns,
                settings.redirect,
                uniform,
                node.server.pid(),
            )?;
            entry(&mut miss, conns).push(r);
        }
    }
    Ok(miss)
}
