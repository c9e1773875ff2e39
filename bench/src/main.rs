//! Benchmarks of the shortener beside their baselines, in one bounded command.
//!
//! `bench all` starts everything itself (nodes, an id-service, a hyper redirect ceiling,
//! throwaway PostgreSQL databases), pins servers and load generators to different cores, runs
//! each point several times, prints Markdown tables, and writes the shortener section of
//! docs/benchmarks.md (between `<!-- bench:begin -->` and `<!-- bench:end -->`) and the charts
//! in docs/. Groups run alone with `bench redirects|creates|memory|micro` (print only).
//! `bench manage` (link management: lists, import, export, edit propagation) is not part of
//! `all`; it writes its own section of docs/benchmarks.md (between `<!-- bench:manage:begin -->`
//! and `<!-- bench:manage:end -->`). `bench stats` (stats latency over a year of rollups on
//! PostgreSQL) is not part of `all` either; it writes between `<!-- bench:stats:begin -->` and
//! `<!-- bench:stats:end -->`. `bench growth` (the PostgreSQL store's cost as the links table
//! grows, on a cluster of its own) is not part of `all`; it writes between
//! `<!-- bench:growth:begin -->` and `<!-- bench:growth:end -->`. `bench branded` (cache-hit
//! redirects on a branded domain beside the default domain, one node) prints only, and so does
//! `bench routing` (cache-hit redirects of links with rules and splits beside plain links).
//! `bench budgets` (node memory against its configured budgets, and the cold working set) is
//! not part of `all`; it writes between `<!-- bench:budgets:begin -->` and
//! `<!-- bench:budgets:end -->`.

mod analytics;
mod baselines;
mod branded;
mod budgets;
mod ceiling;
mod create_suite;
mod creates;
mod groups;
mod growth;
mod h2load;
mod http;
mod load;
mod machine;
mod manage;
mod memory;
mod micro;
mod node;
mod plot;
mod preload;
mod procs;
mod redirects;
mod report;
mod routing;
mod settings;
mod stats;
mod wrk;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Shortener benchmarks beside their baselines.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Cli {
    /// What to run.
    #[command(subcommand)]
    command: Command,
    /// The short smoke run (under 2 minutes): one repetition, 1-second points, fewer links.
    #[arg(long, global = true)]
    quick: bool,
    /// Write docs/benchmarks.md and the charts even for --quick or a single group.
    #[arg(long, global = true)]
    write_docs: bool,
    /// Do not write docs/ (print only).
    #[arg(long, global = true, conflicts_with = "write_docs")]
    no_docs: bool,
    /// Measure creates on one store only (print only; ratios against the other's baseline
    /// read as absent).
    #[arg(long, global = true, value_enum)]
    store: Option<create_suite::StoreKind>,
    /// Repetitions of every redirect, create and memory point (3 by default, 1 with --quick);
    /// more give steadier medians on a noisy machine.
    #[arg(long, global = true, env = "BENCH_REPS", value_parser = clap::value_parser!(u16).range(1..=50))]
    reps: Option<u16>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every group; writes docs/benchmarks.md and docs/bench-*.svg (unless --quick or --no-docs).
    All,
    /// Redirects through the edge beside the hyper ceiling.
    Redirects,
    /// Creates on PostgreSQL and embedded beside pgbench and SQLite, and block rollovers.
    Creates,
    /// Node memory with 0 and N cached links.
    Memory,
    /// Code encode/decode and IDs per second, in process.
    Micro,
    /// Link management on PostgreSQL and embedded: list pages at the top and deep in the
    /// list, NDJSON import, export, and edit propagation between two PostgreSQL nodes, each
    /// beside the store doing the same work directly. Not part of `all`; writes its own
    /// section of docs/benchmarks.md (unless --quick, --store or --no-docs).
    Manage,
    /// Cache-hit redirects on a branded domain beside the default domain, on one embedded node
    /// in the same run: requests per CPU second of the node for each host, and their ratio
    /// (target ≥ 0.95×). Not part of `all`; prints only.
    Branded,
    /// Cache-hit redirects of links with 10 rules (the last matching) and of links with a
    /// 50/50 split beside plain links, on one embedded node in the same run: requests per CPU
    /// second of the node for each kind, and the ratios (target ≥ 0.9×). Not part of `all`;
    /// prints only.
    Routing,
    /// Node memory against its configured budgets (embedded and PostgreSQL: idle RSS, 100k
    /// links, 300k uniform redirects, a million unknown codes, then RSS and every structure's
    /// gauge; target ≤ 1.25× the budgets plus the idle RSS), and the cold working set beside
    /// the hyper ceiling (uniform codes, default cache; targets ≥ 0.8× embedded, 0.7×
    /// PostgreSQL). Not part of `all`; writes its own section of docs/benchmarks.md (unless
    /// --quick or --no-docs).
    Budgets,
    /// Stats on PostgreSQL over a year of rollups of 100k links of one tenant: one link's
    /// 90-day daily series, the tenant's 30-day summary and one tag's, through the node and as
    /// its own statements sent directly. Not part of `all`; writes its own section of
    /// docs/benchmarks.md (unless --quick or --no-docs).
    Stats,
    /// The PostgreSQL store as the links table grows: creates/s (HTTP and gRPC batches at 64
    /// clients), WAL per create, buffer hit ratio and cache-miss redirect latency at each table
    /// size, per layout and shared_buffers, on a PostgreSQL cluster of its own. Not part of
    /// `all`; writes its own section of docs/benchmarks.md and docs/bench-growth.svg (unless
    /// --quick or --no-docs).
    Growth {
        /// Table sizes (rows), e.g. `0,10M,50M` (default; `0,200k,1M` with --quick).
        #[arg(long, env = "BENCH_GROWTH_SIZES", value_delimiter = ',', value_parser = growth::parse_count)]
        sizes: Option<Vec<u64>>,
        /// shared_buffers settings; the first is the default the targets refer to.
        #[arg(
            long,
            env = "BENCH_GROWTH_SHARED_BUFFERS",
            value_delimiter = ',',
            default_value = "128MB,2GB"
        )]
        shared_buffers: Vec<String>,
        /// Layouts of the links table (one the binary cannot make is skipped, with the reason).
        #[arg(long, env = "BENCH_GROWTH_LAYOUTS", value_delimiter = ',', value_enum, default_values_t = [growth::Layout::Code, growth::Layout::Slot])]
        layouts: Vec<growth::Layout>,
        /// The most minutes a layout's loading may take in all (it fails beyond).
        #[arg(long, env = "BENCH_GROWTH_LOAD_MINUTES", default_value_t = 300)]
        load_minutes: u64,
    },
    /// Drives creates at a node that is already running (for profiling it); prints one line.
    /// Give the node's API key `bench-api-key-0123456789abcdef`.
    Drive {
        /// The node's public HTTP address (for `--transport http`).
        #[arg(long, default_value = "127.0.0.1:8080")]
        http: SocketAddr,
        /// The node's gRPC address (for `--transport grpc|grpc-shared|batch`).
        #[arg(long, default_value = "127.0.0.1:50051")]
        grpc: SocketAddr,
        /// `http`, `grpc` (a channel per client), `grpc-shared` (one channel for all clients),
        /// or `batch` (gRPC `BatchCreateLinks` of 100).
        #[arg(long, default_value = "http")]
        transport: String,
        /// Concurrent clients, one call in flight each.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// The node's process ID, to report its CPU per link.
        #[arg(long)]
        pid: Option<u32>,
    },
    /// Offers redirects at a fixed rate to a server that is already running (the open loop of
    /// `redirects`, one point); prints one line.
    OpenLoop {
        /// The server's HTTP address.
        #[arg(long)]
        addr: SocketAddr,
        /// Codes to request, one per line (chosen by Zipf(1) rank in file order).
        #[arg(long)]
        codes: PathBuf,
        /// Requests per second.
        #[arg(long)]
        rate: f64,
        /// Seconds to run.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// Loads the `stats` group's year of rollups into an existing shortener database whose
    /// links (of tenant `default`) are already there, for looking at query plans; prints the
    /// row counts.
    StatsLoad {
        /// The database (migrated by `shortener migrate`).
        #[arg(long)]
        database_url: String,
    },
    /// (internal) Measures how late this core wakes from short sleeps; prints one line.
    #[command(hide = true)]
    WakeProbe,
    /// (internal) The hyper redirect ceiling server.
    #[command(hide = true)]
    CeilingServer {
        /// Listen address.
        #[arg(long)]
        addr: SocketAddr,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::CeilingServer { addr } = cli.command {
        let runtime = tokio::runtime::Runtime::new()?;
        return runtime.block_on(ceiling::serve(addr));
    }
    if let Command::WakeProbe = cli.command {
        println!("{}", machine::wake_probe());
        return Ok(());
    }
    if let Some(code) = machine::repin_self()? {
        std::process::exit(code);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

/// Dispatches the subcommand `main` did not serve itself.
async fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Drive {
            http,
            grpc,
            transport,
            clients,
            seconds,
            pid,
        } => {
            drive(
                creates::Target {
                    http: *http,
                    grpc: *grpc,
                    pid: *pid,
                },
                transport,
                *clients,
                Duration::from_secs(*seconds),
            )
            .await
        }
        Command::OpenLoop {
            addr,
            codes,
            rate,
            seconds,
        } => open_loop(*addr, codes, *rate, *seconds).await,
        Command::Manage => groups::manage(&cli).await,
        Command::Branded => groups::branded(&cli).await,
        Command::Routing => groups::routing(&cli).await,
        Command::Budgets => groups::budgets(&cli).await,
        Command::Stats => groups::stats(&cli).await,
        Command::Growth { .. } => growth_until_interrupted(&cli).await,
        Command::StatsLoad { database_url } => stats_load(database_url, cli.quick).await,
        // `main` serves the two internal commands before the runtime starts.
        Command::All
        | Command::Redirects
        | Command::Creates
        | Command::Memory
        | Command::Micro
        | Command::WakeProbe
        | Command::CeilingServer { .. } => suite(&cli).await,
    }
}

/// `bench open-loop`: one open-loop point against a running server.
async fn open_loop(addr: SocketAddr, codes: &Path, rate: f64, seconds: u64) -> anyhow::Result<()> {
    let codes: Vec<String> = std::fs::read_to_string(codes)
        .with_context(|| format!("read {}", codes.display()))?
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(!codes.is_empty(), "no codes to request");
    anyhow::ensure!(seconds > 0, "--seconds must be at least 1");
    let r = load::open_loop(
        addr,
        std::sync::Arc::new(codes),
        rate,
        load::Pick::Zipf(Duration::from_secs(seconds)),
        64,
    )
    .await?;
    println!(
        "open loop at {rate:.0}/s x64: {:.0} answered/s, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, generator behind {:.2} ms at worst, {} errors",
        r.per_second,
        r.p50_ms,
        r.p99_ms,
        r.p999_ms,
        r.behind_ms.unwrap_or(f64::NAN),
        r.errors
    );
    Ok(())
}

/// `bench growth`, stopped by Ctrl-C.
async fn growth_until_interrupted(cli: &Cli) -> anyhow::Result<()> {
    // Interrupted, the run's cluster, id-service and nodes are still stopped (on drop).
    tokio::select! {
        r = groups::growth(cli) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    }
}

/// `bench stats-load`: loads the stats group's rollups into an existing database.
async fn stats_load(database_url: &str, quick: bool) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let settings = analytics::StatsSettings::new(quick);
    let now = chrono::Utc::now().timestamp();
    let loaded = analytics::load(&client, &settings, now).await?;
    println!("loaded at {now}: {loaded:?}");
    Ok(())
}

/// `bench all` or one of its groups: runs them, prints the report, and writes docs/ if asked.
async fn suite(cli: &Cli) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut settings = settings::Settings::new(cli.quick);
    if let Some(reps) = cli.reps {
        settings.reps = usize::from(reps);
    }
    let scratch = tempfile::Builder::new()
        .prefix("shortener-bench-")
        .tempdir()?;
    let dir = scratch.path();
    let all = matches!(cli.command, Command::All);
    let mut report = report::Report {
        command: format!(
            "{}{}",
            format!("{:?}", cli.command).to_lowercase(),
            if cli.quick { " --quick" } else { "" }
        ),
        // Blocking: it runs psql, wrk -v and the wake-up probes (seconds).
        machine: tokio::task::spawn_blocking(machine::describe).await?,
        ..report::Report::default()
    };
    for (k, v) in &report.machine {
        eprintln!("{k}: {v}");
    }
    measure(cli, all, &settings, dir, &mut report).await?;
    report.elapsed = started.elapsed();
    report
        .machine
        .push(("load average at end".into(), machine::load_average()));
    println!("{}", report.markdown(&settings));

    let write = !cli.no_docs && (cli.write_docs || (all && !cli.quick && cli.store.is_none()));
    if write {
        write_charts_and_docs(&report, &settings)?;
    }
    Ok(())
}

/// Runs the groups the command asks for (every one when `all`), into `report`.
async fn measure(
    cli: &Cli,
    all: bool,
    settings: &settings::Settings,
    dir: &Path,
    report: &mut report::Report,
) -> anyhow::Result<()> {
    if all || matches!(cli.command, Command::Micro) {
        let d = if cli.quick {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(1)
        };
        let codes = tokio::task::spawn_blocking(move || micro::code_rates(d)).await??;
        let ids = micro::pool_ids_per_second(d).await?;
        report.micro = Some((codes, ids));
    }
    if all || matches!(cli.command, Command::Redirects) {
        report.redirects = Some(redirects::run(settings, dir).await?);
    }
    if all || matches!(cli.command, Command::Creates) {
        report.creates = Some(create_suite::run(settings, dir, cli.store).await?);
    }
    if all || matches!(cli.command, Command::Memory) {
        report.memory = Some(memory::run(settings, dir).await?);
    }
    Ok(())
}

/// Writes the charts and docs/benchmarks.md's shortener section from `report`.
fn write_charts_and_docs(
    report: &report::Report,
    settings: &settings::Settings,
) -> anyhow::Result<()> {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut extra = String::new();
    if let Some(r) = &report.redirects {
        plot::redirect_latency(r, &docs.join("bench-redirect-latency.svg"))?;
        extra.push_str("![Redirect latency against offered load](bench-redirect-latency.svg)\n\n");
    }
    if let Some(c) = &report.creates {
        plot::create_throughput(c, settings.batch, &docs.join("bench-creates.svg"))?;
        extra.push_str("![Creates per second against concurrent clients](bench-creates.svg)\n\n");
    }
    let notes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("notes.md");
    if let Ok(text) = std::fs::read_to_string(&notes) {
        extra.push_str(text.trim_end());
        extra.push_str("\n\n");
    }
    report.write_docs(settings, &docs.join("benchmarks.md"), &extra)?;
    eprintln!("wrote docs/benchmarks.md and docs/bench-*.svg");
    Ok(())
}

/// `bench drive`: one create point against a running node.
async fn drive(
    target: creates::Target,
    transport: &str,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<()> {
    let transport = match transport {
        "http" => creates::Transport::Http,
        "grpc" => creates::Transport::Grpc,
        "grpc-shared" => creates::Transport::GrpcShared,
        "batch" => creates::Transport::GrpcBatch(100),
        other => anyhow::bail!("unknown transport {other:?}: use http, grpc, grpc-shared or batch"),
    };
    let run = creates::run_at(
        target,
        transport,
        clients,
        Duration::from_millis(500),
        duration,
    )
    .await?;
    println!(
        "{} x{clients}: {:.0} links/s, p50 {:.2} ms, p99 {:.2} ms, node CPU {} us/link, generator CPU {} us/link, {} errors",
        transport.label(),
        run.per_second,
        run.p50_ms,
        run.p99_ms,
        run.cpu_us.map_or("-".into(), |us| format!("{us:.1}")),
        run.client_cpu_us
            .map_or("-".into(), |us| format!("{us:.1}")),
        run.errors
    );
    Ok(())
}
