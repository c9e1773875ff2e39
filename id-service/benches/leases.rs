//! Lease throughput and latency through the service, beside pgbench running the same lease
//! transaction directly against the same database, and IDs per second from an `IdPool`'s RAM.
//!
//! Run: `cargo bench -p id-service --bench leases` (needs the local PostgreSQL that the tests
//! use, and `pgbench` on PATH or under /usr/lib/postgresql/<version>/bin). `BENCH_SECONDS`
//! sets the length of each measurement (default 5).

use id_client::{GrpcLeaseSource, GrpcSourceConfig, IdPool, PoolConfig};
use id_service::{App, Config};
use proto::idalloc::v1::LeaseBlockRequest;
use proto::idalloc::v1::id_allocator_client::IdAllocatorClient;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "bench";
const LEASE_SIZE: u64 = 1000;

struct Figures {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn figures(mut latencies_ms: Vec<f64>, elapsed: Duration) -> Figures {
    latencies_ms.sort_by(f64::total_cmp);
    Figures {
        per_second: latencies_ms.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&latencies_ms, 0.50),
        p99_ms: percentile(&latencies_ms, 0.99),
    }
}

async fn through_service(endpoint: &str, callers: usize, seconds: Duration) -> Figures {
    let deadline = Instant::now() + seconds;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for caller in 0..callers {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        let mut client = IdAllocatorClient::new(channel);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                client
                    .lease_block(LeaseBlockRequest {
                        namespace: NAMESPACE.into(),
                        size: LEASE_SIZE,
                        holder: format!("bench-{caller}"),
                        high_water: None,
                    })
                    .await
                    .expect("lease");
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join"));
    }
    figures(all, started.elapsed())
}

fn pgbench_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("pgbench"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut installed: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| {
            dirs.filter_map(Result::ok)
                .map(|d| d.path().join("bin/pgbench"))
                .collect()
        })
        .unwrap_or_default();
    installed.sort();
    on_path
        .into_iter()
        .chain(installed.into_iter().rev())
        .find(|p| p.exists())
        .expect("pgbench on PATH or under /usr/lib/postgresql/<version>/bin")
}

/// Runs pgbench with the service's exact lease statement; latencies from its per-transaction log.
/// `None` (with the reason printed) when pgbench cannot run, e.g. the server is out of
/// connection slots.
fn through_pgbench(url: &str, callers: usize, seconds: Duration, dir: &Path) -> Option<Figures> {
    for old in std::fs::read_dir(dir)
        .expect("read logs")
        .filter_map(Result::ok)
    {
        if old.file_name().to_string_lossy().starts_with("log") {
            let _ = std::fs::remove_file(old.path());
        }
    }
    let script = dir.join("lease.sql");
    std::fs::write(
        &script,
        format!(
            "SELECT lease_id, first_id, end_id, leased_at FROM id_grant_lease('{NAMESPACE}', {LEASE_SIZE}, 'pgbench');\n"
        ),
    )
    .expect("write the pgbench script");
    let prefix = dir.join(format!("log{callers}"));
    let output = std::process::Command::new(pgbench_binary())
        .args(["-n", "-M", "prepared", "-l"])
        .arg(format!("--log-prefix={}", prefix.display()))
        .args([
            "-c",
            &callers.to_string(),
            "-j",
            &callers.min(2).to_string(),
        ])
        .args(["-T", &seconds.as_secs().max(1).to_string(), "-f"])
        .arg(&script)
        .arg(url)
        .output()
        .expect("run pgbench");
    if !output.status.success() {
        eprintln!(
            "pgbench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("read logs")
        .filter_map(Result::ok)
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&format!("log{callers}.")) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).expect("read a pgbench log");
        for line in text.lines() {
            // client_id transaction_no latency_us script_no epoch_s epoch_us
            if let Some(us) = line
                .split_whitespace()
                .nth(2)
                .and_then(|f| f.parse::<f64>().ok())
            {
                latencies.push(us / 1000.0);
            }
        }
    }
    Some(figures(latencies, seconds.max(Duration::from_secs(1))))
}

/// The mean of two runs' figures (throughput and percentiles averaged).
fn mean(a: Figures, b: Figures) -> Figures {
    Figures {
        per_second: (a.per_second + b.per_second) / 2.0,
        p50_ms: (a.p50_ms + b.p50_ms) / 2.0,
        p99_ms: (a.p99_ms + b.p99_ms) / 2.0,
    }
}

fn pool_ids_per_second(pool: &Arc<IdPool>, threads: usize, seconds: Duration) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let dry = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (pool, stop, issued, dry) = (
                Arc::clone(pool),
                Arc::clone(&stop),
                Arc::clone(&issued),
                Arc::clone(&dry),
            );
            std::thread::spawn(move || {
                let mut mine = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        match pool.next_id() {
                            Ok(_) => mine += 1,
                            Err(_) => {
                                dry.fetch_add(1, Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                        }
                    }
                }
                issued.fetch_add(mine, Ordering::Relaxed);
            })
        })
        .collect();
    std::thread::sleep(seconds);
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.join().expect("join a consumer");
    }
    (
        issued.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(),
        dry.load(Ordering::Relaxed),
    )
}

#[tokio::main]
async fn main() {
    let seconds = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
    let db = testkit::TestDb::create().await;
    // The default pool size: grants in one namespace are serialised by its row lock anyway,
    // and pgbench needs connection slots of its own on the same server.
    let config = Config {
        db_pool_size: 16,
        ..Config::for_tests(db.url())
    };
    let app = App::build(config).await.expect("build the id-service");
    let endpoint = format!("http://{}", app.grpc_addr());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    // Create the namespace before measuring.
    through_service(&endpoint, 1, Duration::from_millis(200)).await;

    let logs = tempfile::tempdir().expect("a directory for pgbench logs");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## lease throughput ({seconds:?} per point, {cores} cores, size {LEASE_SIZE})\n");
    println!(
        "| callers | service leases/s | p50 ms | p99 ms | pgbench tx/s | p50 ms | p99 ms | service/pgbench |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for callers in [1, 16, 64] {
        // Service, pgbench, pgbench, service: load from elsewhere on the machine drifts, and
        // this order gives both sides the same share of it.
        let url = db.url().to_string();
        let dir = logs.path().to_path_buf();
        let pgbench = move || {
            let (url, dir) = (url.clone(), dir.clone());
            tokio::task::spawn_blocking(move || through_pgbench(&url, callers, seconds, &dir))
        };
        let service_a = through_service(&endpoint, callers, seconds).await;
        let direct_a = pgbench().await.expect("join pgbench");
        let direct_b = pgbench().await.expect("join pgbench");
        let service_b = through_service(&endpoint, callers, seconds).await;
        let service = mean(service_a, service_b);
        let direct = match (direct_a, direct_b) {
            (Some(a), Some(b)) => mean(a, b),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => Figures {
                per_second: f64::NAN,
                p50_ms: f64::NAN,
                p99_ms: f64::NAN,
            },
        };
        println!(
            "| {callers} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} |",
            service.per_second,
            service.p50_ms,
            service.p99_ms,
            direct.per_second,
            direct.p50_ms,
            direct.p99_ms,
            service.per_second / direct.per_second
        );
    }

    let source = GrpcLeaseSource::new(&GrpcSourceConfig {
        endpoints: vec![endpoint.clone()],
        namespace: "bench_pool".into(),
        holder: "bench-pool".into(),
        token: None,
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(5),
    })
    .expect("grpc source");
    let pool = Arc::new(IdPool::start(
        Arc::new(source),
        PoolConfig {
            min_block: 10_000_000,
            max_block: 10_000_000,
            initial_block: 10_000_000,
            ..PoolConfig::default()
        },
    ));
    assert!(
        pool.wait_ready(Duration::from_secs(5)).await,
        "no first block"
    );
    println!("\n## IdPool next_id() from RAM (blocks of 10M over gRPC)\n");
    println!("| threads | IDs/s | calls that found the pool dry |");
    println!("|---:|---:|---:|");
    for threads in [1, 8] {
        let pool = Arc::clone(&pool);
        let (rate, dry) =
            tokio::task::spawn_blocking(move || pool_ids_per_second(&pool, threads, seconds))
                .await
                .expect("join");
        println!("| {threads} | {rate:.3e} | {dry} |");
    }
    println!("\n{:?}", pool.stats());
    shutdown.cancel();
    let _ = server.await;
}
