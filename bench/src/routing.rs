//! Cache-hit redirects of links that route beside plain links, on one embedded node in the
//! same run: what deciding rules and a split costs a redirect. The node gets three sets of links
//! created through `POST /api/v1/links`: plain links; links with ten rules of which only the
//! last holds for the benchmark's requests; and links with a 50/50 split. Every code is
//! requested once (each must redirect where its kind says), then wrk runs of equal length over
//! each set alternate within every round, all with the same headers: a desktop Chrome
//! `User-Agent` and an `Accept-Language`. No request carries a cookie, so every visit of a split
//! is a new visitor's and takes the hash path (a seeded foldhash of the link, the address and
//! the agent, and a `Set-Cookie` on the answer), the costlier of the two.

use crate::http::Conn;
use crate::node::{API_KEY, Backend, Node, NodeSpec};
use crate::procs::target_url;
use crate::stats::Run;
use crate::wrk;
use anyhow::{Context, ensure};
use codespace::CodeKey;
use hyper::body::Bytes;
use hyper::{Request, header};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections of every wrk run (as the redirect group's 64-connection rows).
pub const CONNECTIONS: usize = 64;

/// The target the issue sets: rules and split links at least this many times a plain link's
/// requests per CPU second.
pub const TARGET: f64 = 0.9;

/// The `User-Agent` of every request: desktop Chrome on Windows.
pub const USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
                              (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

/// The `Accept-Language` of every request (a language no rule names).
pub const ACCEPT_LANGUAGE: &str = "en-US,en;q=0.9";

/// Clients creating and warming links at once.
const CLIENTS: usize = 16;

/// A set of links of one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A target and nothing else.
    Plain,
    /// Ten rules; only the last (`device` = `desktop`) holds for the benchmark's requests.
    Rules,
    /// Two variants, 50/50.
    Split,
}

impl Kind {
    /// Every kind, in the order of the first round.
    pub const ALL: [Kind; 3] = [Kind::Plain, Kind::Rules, Kind::Split];

    /// The kind's name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Rules => "10 rules",
            Kind::Split => "50/50 split",
        }
    }

    /// The create body of link `i` of this kind.
    pub fn body(self, i: u64) -> Value {
        let url = target_url(i);
        match self {
            Kind::Plain => json!({ "url": url }),
            Kind::Rules => json!({ "url": url, "rules": rules(i) }),
            Kind::Split => json!({ "url": url, "variants": [
                { "url": variant_url(i, 0), "weight": 50 },
                { "url": variant_url(i, 1), "weight": 50 },
            ] }),
        }
    }

    /// Whether `location` is where link `i` of this kind must send the benchmark's requests.
    fn sends_to(self, i: u64, location: &str) -> bool {
        match self {
            Kind::Plain => location == target_url(i),
            Kind::Rules => location == rule_url(i, 9),
            Kind::Split => location == variant_url(i, 0) || location == variant_url(i, 1),
        }
    }
}

/// Rule `j`'s target of link `i`.
fn rule_url(i: u64, j: usize) -> String {
    format!("https://www.example.com/routed/{j}/article-{i:08}?utm_source=bench")
}

/// Variant `v`'s target of link `i`.
fn variant_url(i: u64, v: usize) -> String {
    format!("https://www.example.com/variant-{v}/article-{i:08}?utm_source=bench")
}

/// Ten rules for link `i`: nine that do not hold for the benchmark's requests (query keys the
/// request lacks, languages it does not prefer, another system, browser and device class),
/// then `device` = `desktop`, which does.
pub fn rules(i: u64) -> Value {
    let conditions = [
        json!([{ "type": "query", "key": "ref" }]),
        json!([{ "type": "query", "key": "campaign", "value": "spring" }]),
        json!([{ "type": "query", "key": "src", "value": ["newsletter", "feed"] }]),
        json!([{ "type": "language", "value": "de" }]),
        json!([{ "type": "language", "value": "fr" }]),
        json!([{ "type": "language", "value": "pt-BR" }]),
        json!([{ "type": "os", "value": "ios" }]),
        json!([{ "type": "browser", "value": "firefox" }]),
        json!([{ "type": "device", "value": "mobile" }]),
        json!([{ "type": "device", "value": "desktop" }]),
    ];
    Value::Array(
        conditions
            .into_iter()
            .enumerate()
            .map(|(j, c)| json!({ "url": rule_url(i, j), "conditions": c }))
            .collect(),
    )
}

/// The headers of every request, wrk's and the warm-up's.
pub fn headers() -> Vec<String> {
    vec![
        format!("User-Agent: {USER_AGENT}"),
        format!("Accept-Language: {ACCEPT_LANGUAGE}"),
    ]
}

/// How much the group measures.
#[derive(Debug, Clone)]
pub struct RoutingSettings {
    /// Links of each kind.
    pub links: u64,
    /// Length of each wrk run.
    pub duration: Duration,
    /// Rounds: each runs every kind once.
    pub reps: usize,
}

impl RoutingSettings {
    /// The full run (about 2 minutes) or the smoke run (about 20 seconds).
    pub fn new(quick: bool, reps: Option<usize>) -> RoutingSettings {
        let (links, duration, default_reps) = if quick {
            (1_000, Duration::from_secs(1), 1)
        } else {
            (10_000, Duration::from_secs(5), 5)
        };
        RoutingSettings {
            links,
            duration,
            reps: reps.unwrap_or(default_reps),
        }
    }
}

/// One round: a run over each kind of link.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    /// Plain links.
    pub plain: Run,
    /// Links with ten rules.
    pub rules: Run,
    /// Links with a 50/50 split.
    pub split: Run,
}

impl Round {
    /// Rules links' requests per CPU second over plain links'.
    pub fn rules_ratio(&self) -> f64 {
        per_cpu_second(&self.rules) / per_cpu_second(&self.plain)
    }

    /// Split links' requests per CPU second over plain links'.
    pub fn split_ratio(&self) -> f64 {
        per_cpu_second(&self.split) / per_cpu_second(&self.plain)
    }
}

/// Requests per CPU second of the node (user + system) in `run`.
pub fn per_cpu_second(run: &Run) -> f64 {
    run.cpu_us.map_or(f64::NAN, |us| 1e6 / us)
}

/// Everything the group measures.
#[derive(Debug, Clone, Default)]
pub struct Routing {
    /// Links of each kind.
    pub links: u64,
    /// Seconds of each wrk run.
    pub seconds: u64,
    /// The rounds.
    pub rounds: Vec<Round>,
}

/// One kind's codes, in a file for wrk.
struct Codes {
    kind: Kind,
    codes: Arc<Vec<String>>,
    file: PathBuf,
}

/// Runs the group with scratch files in `dir`.
pub async fn run(settings: &RoutingSettings, dir: &Path) -> anyhow::Result<Routing> {
    let data = dir.join("routing-node");
    std::fs::create_dir_all(&data)?;
    let script = wrk::install_script(dir)?;
    let mut node = Node::start(NodeSpec {
        backend: Backend::Embedded(&data),
        key_hex: CodeKey::generate().to_hex(),
        cache_bytes: 256 << 20,
        blocks: Some((100_000, 100_000)),
        log_dir: dir.to_path_buf(),
        name: "routing".into(),
        env: Vec::new(),
    })
    .await?;
    let mut sets = Vec::new();
    for kind in Kind::ALL {
        let started = Instant::now();
        let codes = create(node.http, kind, settings.links).await?;
        eprintln!(
            "routing: {} {} links created in {:.1} s",
            codes.len(),
            kind.label(),
            started.elapsed().as_secs_f64()
        );
        let file = dir.join(format!("codes-{kind:?}.txt").to_lowercase());
        std::fs::write(&file, codes.join("\n") + "\n")?;
        let codes = Codes {
            kind,
            codes: Arc::new(codes),
            file,
        };
        warm(node.http, &codes).await?;
        sets.push(codes);
    }

    let mut out = Routing {
        links: settings.links,
        seconds: settings.duration.as_secs().max(1),
        rounds: Vec::new(),
    };
    for rep in 0..settings.reps {
        // Each kind goes first in turn, so that a drift of the machine within a round does not
        // favour one of them.
        let mut order: Vec<&Codes> = sets.iter().collect();
        let first = rep % order.len();
        order.rotate_left(first);
        let mut runs = Vec::new();
        for codes in order {
            eprintln!("routing: round {rep}, {}", codes.kind.label());
            runs.push((codes.kind, hits(&script, &node, codes, settings.duration)?));
        }
        let of = |kind: Kind| {
            runs.iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, r)| *r)
                .expect("every kind ran")
        };
        out.rounds.push(Round {
            plain: of(Kind::Plain),
            rules: of(Kind::Rules),
            split: of(Kind::Split),
        });
    }
    node.server.check_alive()?;
    Ok(out)
}

/// One wrk run of Zipf(1) cache hits on `codes`; every answer must be a redirect.
fn hits(script: &Path, node: &Node, codes: &Codes, duration: Duration) -> anyhow::Result<Run> {
    let mix = wrk::Mix {
        zipf: 1.0,
        unknown: 0.0,
    };
    let r = wrk::run_with(
        script,
        &codes.file,
        node.http,
        &headers(),
        CONNECTIONS,
        duration,
        mix,
        node.server.pid(),
    )?;
    ensure!(
        r.errors == 0,
        "{} requests for {} links failed or did not redirect",
        r.errors,
        codes.kind.label()
    );
    Ok(r)
}

/// Creates `n` links of `kind` through `POST /api/v1/links` over [`CLIENTS`] connections;
/// returns their codes in order.
async fn create(addr: SocketAddr, kind: Kind, n: u64) -> anyhow::Result<Vec<String>> {
    let mut tasks = Vec::new();
    for c in 0..CLIENTS as u64 {
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            let mut made = Vec::new();
            for i in (c..n).step_by(CLIENTS) {
                let body = kind.body(i).to_string();
                let (status, answer) = conn.post_json("/api/v1/links", API_KEY, body).await?;
                ensure!(
                    status.as_u16() == 201,
                    "creating a {} link answered {status}: {}",
                    kind.label(),
                    String::from_utf8_lossy(&answer)
                );
                let link: Value = serde_json::from_slice(&answer)?;
                let code = link["code"].as_str().context("a link without code")?;
                made.push((i, code.to_string()));
            }
            anyhow::Ok(made)
        }));
    }
    let mut codes = vec![String::new(); n as usize];
    for task in tasks {
        for (i, code) in task.await?? {
            codes[i as usize] = code;
        }
    }
    Ok(codes)
}

/// Requests every code of `codes` once with the benchmark's headers over [`CLIENTS`]
/// connections (filling the cache); each must answer 302 to where its kind sends these
/// requests (for rules, the last rule's target), else the runs would not measure what they say.
async fn warm(addr: SocketAddr, codes: &Codes) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..CLIENTS {
        let (all, kind) = (Arc::clone(&codes.codes), codes.kind);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            for (i, code) in all.iter().enumerate().skip(w).step_by(CLIENTS) {
                let request = Request::get(format!("/{code}"))
                    .header(header::HOST, conn.host())
                    .header(header::USER_AGENT, USER_AGENT)
                    .header(header::ACCEPT_LANGUAGE, ACCEPT_LANGUAGE)
                    .body(http_body_util::Full::new(Bytes::new()))?;
                let (status, headers, _) = conn.send_reading_headers(request).await?;
                let location = headers
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                ensure!(
                    status.as_u16() == 302 && kind.sends_to(i as u64, location),
                    "/{code} ({} link {i}) answered {status} to {location:?}",
                    kind.label()
                );
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    eprintln!(
        "routing: {} {} codes requested once in {:.1} s",
        codes.codes.len(),
        codes.kind.label(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
