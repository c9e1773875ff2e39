//! Cache-hit redirects on a branded domain beside the same on the default domain, on one
//! embedded node in the same run: what picking the domain by the request's `Host` costs a
//! redirect. The node lets tenant `default` (the benchmark key's) claim hosts under
//! `bench.example`; it claims [`HOST`], imports as many links onto it as onto the default
//! domain (generated codes, and aliases: the same alias names on both domains, two links each),
//! requests every code once on its own host (each must answer 302), then alternates wrk runs of
//! equal length with `Host: go.bench.example` and with the public URL's host.

use crate::http::Conn;
use crate::node::{API_KEY, Backend, Node, NodeSpec};
use crate::procs::target_url;
use crate::stats::Run;
use crate::wrk;
use anyhow::{Context, ensure};
use codespace::CodeKey;
use hyper::body::Bytes;
use hyper::{Method, Request, header};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The branded domain the benchmark claims.
pub const HOST: &str = "go.bench.example";

/// The default domain's host: the public URL's (`https://sho.rt/`, [`crate::node`]).
pub const DEFAULT_HOST: &str = "sho.rt";

/// Connections of every wrk run (as the redirect group's 64-connection rows).
pub const CONNECTIONS: usize = 64;

/// The target the issue sets: branded requests per CPU second against the default domain's.
pub const TARGET: f64 = 0.95;

/// How much the group measures.
#[derive(Debug, Clone)]
pub struct BrandedSettings {
    /// Links with generated codes on each domain.
    pub links: u64,
    /// Links with aliases on each domain (0: no alias runs).
    pub aliases: u64,
    /// Length of each wrk run.
    pub duration: Duration,
    /// Rounds: each runs every kind of code on both hosts once.
    pub reps: usize,
}

impl BrandedSettings {
    /// The full run (about 2 minutes) or the smoke run (about 20 seconds).
    pub fn new(quick: bool, reps: Option<usize>) -> BrandedSettings {
        let (links, aliases, duration, default_reps) = if quick {
            (2_000, 1_000, Duration::from_secs(1), 1)
        } else {
            (10_000, 10_000, Duration::from_secs(5), 5)
        };
        BrandedSettings {
            links,
            aliases,
            duration,
            reps: reps.unwrap_or(default_reps),
        }
    }
}

/// One round of one kind of code: the default domain's run and the branded domain's.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// `Host: sho.rt`.
    pub default: Run,
    /// `Host: go.bench.example`.
    pub branded: Run,
}

impl Pair {
    /// Branded requests per CPU second of the node over the default domain's.
    pub fn ratio(&self) -> f64 {
        per_cpu_second(&self.branded) / per_cpu_second(&self.default)
    }
}

/// Requests per CPU second of the node (user + system) in `run`.
pub fn per_cpu_second(run: &Run) -> f64 {
    run.cpu_us.map_or(f64::NAN, |us| 1e6 / us)
}

/// Everything the group measures.
#[derive(Debug, Clone, Default)]
pub struct Branded {
    /// Generated codes on each domain.
    pub links: u64,
    /// Aliases on each domain.
    pub aliases: u64,
    /// Seconds of each wrk run.
    pub seconds: u64,
    /// Generated codes, per round.
    pub generated: Vec<Pair>,
    /// Aliases, per round.
    pub alias: Vec<Pair>,
}

/// One domain's codes, in a file for wrk.
struct Codes {
    host: &'static str,
    codes: Arc<Vec<String>>,
    file: PathBuf,
}

/// Runs the group with scratch files in `dir`.
pub async fn run(settings: &BrandedSettings, dir: &Path) -> anyhow::Result<Branded> {
    let data = dir.join("branded-node");
    std::fs::create_dir_all(&data)?;
    let script = wrk::install_script(dir)?;
    let mut node = Node::start(NodeSpec {
        backend: Backend::Embedded(&data),
        key_hex: CodeKey::generate().to_hex(),
        cache_bytes: 256 << 20,
        // One block holds every link the imports make: an import faster than the pool
        // refills would otherwise find no IDs in hand for some rows.
        blocks: Some((100_000, 100_000)),
        log_dir: dir.to_path_buf(),
        name: "branded".into(),
        env: vec![(
            "SHORTENER_DOMAIN_SUFFIXES".into(),
            "default=bench.example".into(),
        )],
    })
    .await?;
    let mut conn = Conn::connect(node.http).await?;
    let claim = serde_json::json!({ "host": HOST }).to_string();
    let (status, body) = conn.post_json("/api/v1/domains", API_KEY, claim).await?;
    ensure!(
        status.as_u16() == 201,
        "claiming {HOST} answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    eprintln!(
        "branded: importing {} generated codes and {} aliases on each domain",
        settings.links, settings.aliases
    );
    let mut sets = Vec::new();
    for (label, aliases) in [("generated", false), ("alias", true)] {
        let n = if aliases {
            settings.aliases
        } else {
            settings.links
        };
        if n == 0 {
            continue;
        }
        let mut pair = Vec::new();
        for host in [DEFAULT_HOST, HOST] {
            let domain = (host == HOST).then_some(host);
            let codes = import(node.http, domain, n, aliases).await?;
            let file = dir.join(format!("codes-{label}-{host}.txt"));
            std::fs::write(&file, codes.join("\n") + "\n")?;
            let codes = Codes {
                host,
                codes: Arc::new(codes),
                file,
            };
            warm(node.http, &codes).await?;
            pair.push(codes);
        }
        sets.push((aliases, pair));
    }

    let mut out = Branded {
        links: settings.links,
        aliases: settings.aliases,
        seconds: settings.duration.as_secs().max(1),
        ..Branded::default()
    };
    for rep in 0..settings.reps {
        for (aliases, pair) in &sets {
            // Alternate which host goes first, so that a drift of the machine within a round
            // does not favour one side.
            let order: Vec<&Codes> = if rep % 2 == 0 {
                pair.iter().collect()
            } else {
                pair.iter().rev().collect()
            };
            let runs = order
                .into_iter()
                .map(|codes| {
                    eprintln!(
                        "branded: round {rep}, {}, Host: {}",
                        if *aliases {
                            "aliases"
                        } else {
                            "generated codes"
                        },
                        codes.host
                    );
                    hits_on(&script, &node, codes, settings.duration)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let side = |host: &str| {
                runs.iter()
                    .find(|(h, _)| *h == host)
                    .map(|(_, r)| *r)
                    .expect("both hosts ran")
            };
            let measured = Pair {
                default: side(DEFAULT_HOST),
                branded: side(HOST),
            };
            if *aliases {
                out.alias.push(measured);
            } else {
                out.generated.push(measured);
            }
        }
    }
    node.server.check_alive()?;
    Ok(out)
}

/// One wrk run of Zipf(1) cache hits on `codes`' host; every answer must be a redirect.
fn hits_on(
    script: &Path,
    node: &Node,
    codes: &Codes,
    duration: Duration,
) -> anyhow::Result<(&'static str, Run)> {
    let hits = wrk::Mix {
        zipf: 1.0,
        unknown: 0.0,
    };
    let r = wrk::run_on(
        script,
        &codes.file,
        node.http,
        Some(codes.host),
        CONNECTIONS,
        duration,
        hits,
        node.server.pid(),
    )?;
    ensure!(
        r.errors == 0,
        "{} requests on {} failed or did not redirect",
        r.errors,
        codes.host
    );
    Ok((codes.host, r))
}

/// Imports `n` links onto `domain` (`None`: the default domain) through
/// `POST /api/v1/links/import`, with aliases `promo-0`, `promo-1`, ... when `aliases`; returns
/// their codes in row order.
async fn import(
    addr: SocketAddr,
    domain: Option<&str>,
    n: u64,
    aliases: bool,
) -> anyhow::Result<Vec<String>> {
    let mut body = Vec::with_capacity(n as usize * 120);
    for i in 0..n {
        let row = if aliases {
            serde_json::json!({ "url": target_url(i), "alias": format!("promo-{i}") })
        } else {
            serde_json::json!({ "url": target_url(i) })
        };
        serde_json::to_writer(&mut body, &row)?;
        body.push(b'\n');
    }
    let path = match domain {
        Some(host) => format!("/api/v1/links/import?domain={host}"),
        None => "/api/v1/links/import".into(),
    };
    // A connection of its own: the node closes one after an import's streamed answer.
    let (status, answer) = Conn::connect(addr)
        .await?
        .call(
            Method::POST,
            &path,
            API_KEY,
            "application/x-ndjson",
            Bytes::from(body),
        )
        .await?;
    ensure!(status.as_u16() == 200, "import answered {status}");
    let mut codes = Vec::with_capacity(n as usize);
    for line in answer.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: serde_json::Value = serde_json::from_slice(line)?;
        if value["status"] == "created" {
            let code = value["code"]
                .as_str()
                .context("a created row without code")?;
            codes.push(code.to_string());
        }
    }
    ensure!(
        codes.len() as u64 == n,
        "import onto {} created {} of {n} links",
        domain.unwrap_or(DEFAULT_HOST),
        codes.len()
    );
    Ok(codes)
}

/// Requests every code of `codes` once on its host over 16 connections (filling the cache);
/// each must answer 302, or the codes do not answer where the runs will ask for them.
async fn warm(addr: SocketAddr, codes: &Codes) -> anyhow::Result<()> {
    const WARMERS: usize = 16;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WARMERS {
        let (all, host) = (Arc::clone(&codes.codes), codes.host);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            for code in all.iter().skip(w).step_by(WARMERS) {
                let request = Request::get(format!("/{code}"))
                    .header(header::HOST, host)
                    .body(http_body_util::Full::new(Bytes::new()))?;
                let (status, _) = conn.send(request).await?;
                ensure!(
                    status.as_u16() == 302,
                    "/{code} on {host} answered {status}"
                );
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    eprintln!(
        "branded: {} codes on {} requested once in {:.1} s",
        codes.codes.len(),
        codes.host,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
