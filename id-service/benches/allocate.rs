//! AllocateIds calls per second and latency through the id-service, beside a bare tonic unary
//! server answering a fixed AllocateIdsResponse in the same run (the RPC ceiling on this
//! machine), and the latency across segment refills.
//!
//! Run: `cargo bench -p id-service --bench allocate` (needs the local PostgreSQL the tests use).
//! `BENCH_SECONDS` sets the length of each measurement (default 3). The servers run on one
//! tokio runtime and the load on another, one worker thread each, so that on a 2-core machine
//! both sides get a core; pin them with `taskset` for steadier figures.

use id_service::{App, Config};
use proto::idalloc::v1 as pb;
use proto::idalloc::v1::id_allocator_client::IdAllocatorClient;
use proto::idalloc::v1::id_allocator_server::{IdAllocator, IdAllocatorServer};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

const NAMESPACE: &str = "bench";
const TOKEN: &str = "idsvc_bench-caller-token-0123456789abcdefghijkl";

/// The ceiling: the same service and messages, answering a fixed reply without doing anything.
struct Fixed;

#[tonic::async_trait]
impl IdAllocator for Fixed {
    async fn lease_block(
        &self,
        _: Request<pb::LeaseBlockRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        Err(Status::unimplemented("ceiling"))
    }
    async fn lookup_id(
        &self,
        _: Request<pb::LookupIdRequest>,
    ) -> Result<Response<pb::Lease>, Status> {
        Err(Status::unimplemented("ceiling"))
    }
    async fn list_leases(
        &self,
        _: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        Err(Status::unimplemented("ceiling"))
    }
    async fn allocate_ids(
        &self,
        request: Request<pb::AllocateIdsRequest>,
    ) -> Result<Response<pb::AllocateIdsResponse>, Status> {
        let count = request.into_inner().count;
        Ok(Response::new(pb::AllocateIdsResponse {
            ranges: vec![pb::IdRange {
                start: 1_000_000_000,
                end: 1_000_000_000 + count,
            }],
        }))
    }
}

struct Figures {
    calls_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `callers` tasks, each on its own HTTP/2 connection, calling AllocateIds(count) for `seconds`.
async fn load(addr: SocketAddr, callers: usize, count: u64, seconds: Duration) -> Figures {
    let mut clients = Vec::new();
    for _ in 0..callers {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        clients.push(IdAllocatorClient::new(channel));
    }
    let call = move |mut client: IdAllocatorClient<tonic::transport::Channel>| async move {
        let mut request = Request::new(pb::AllocateIdsRequest {
            namespace: NAMESPACE.into(),
            count,
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {TOKEN}").parse().expect("ascii"),
        );
        client.allocate_ids(request).await.expect("allocate");
    };
    // Warm-up: connections, the namespace's segments, the rate estimate.
    let warm = Instant::now() + Duration::from_millis(500);
    let mut tasks = Vec::new();
    for client in &clients {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < warm {
                call(client.clone()).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("join");
    }
    let started = Instant::now();
    let deadline = started + seconds;
    let mut tasks = Vec::new();
    for client in clients {
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(1 << 16);
            while Instant::now() < deadline {
                let t = Instant::now();
                call(client.clone()).await;
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join"));
    }
    let elapsed = started.elapsed();
    all.sort_by(f64::total_cmp);
    Figures {
        calls_per_second: all.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&all, 0.50),
        p99_ms: percentile(&all, 0.99),
        p999_ms: percentile(&all, 0.999),
        max_ms: all.last().copied().unwrap_or(f64::NAN),
    }
}

/// The mean of several runs' figures (the maximum of their maxima).
fn mean(runs: Vec<Figures>) -> Figures {
    let n = runs.len() as f64;
    let avg = |f: fn(&Figures) -> f64| runs.iter().map(f).sum::<f64>() / n;
    Figures {
        calls_per_second: avg(|f| f.calls_per_second),
        p50_ms: avg(|f| f.p50_ms),
        p99_ms: avg(|f| f.p99_ms),
        p999_ms: avg(|f| f.p999_ms),
        max_ms: runs.iter().map(|f| f.max_ms).fold(f64::NAN, f64::max),
    }
}

/// Ceiling and service alternately, twice each way (C S S C C S S C): load drifting elsewhere
/// on the machine hits both sides alike.
fn paired(
    clients: &Runtime,
    ceiling: SocketAddr,
    service: SocketAddr,
    callers: usize,
    count: u64,
    seconds: Duration,
) -> (Figures, Figures) {
    let (mut c, mut s) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        c.push(clients.block_on(load(ceiling, callers, count, seconds)));
        s.push(clients.block_on(load(service, callers, count, seconds)));
        s.push(clients.block_on(load(service, callers, count, seconds)));
        c.push(clients.block_on(load(ceiling, callers, count, seconds)));
    }
    (mean(c), mean(s))
}

/// An id-service on `runtime` with a tokens file holding the bench caller (no quota).
fn start_service(
    runtime: &Runtime,
    url: &str,
    dir: &std::path::Path,
    segment: Option<u64>,
) -> (SocketAddr, CancellationToken) {
    let tokens = dir.join(format!("tokens-{}.toml", segment.unwrap_or(0)));
    let digest = hex::encode(id_service::auth::token::digest(TOKEN.as_bytes()));
    std::fs::write(
        &tokens,
        format!("[[callers]]\nname = \"bench\"\ntoken_sha256 = \"{digest}\"\nnamespaces = [\"*\"]\nscopes = [\"allocate\"]\n"),
    )
    .expect("write the tokens file");
    let mut config = Config {
        tokens_file: Some(tokens),
        insecure_no_auth: false,
        namespaces: vec![NAMESPACE.into()],
        auto_create_namespaces: false,
        db_pool_size: 4,
        ..Config::for_tests(url)
    };
    if let Some(size) = segment {
        config.segment_min = size;
        config.segment_max = size;
        config.allocate_max_count = 100;
    }
    let app = runtime
        .block_on(App::build(config))
        .expect("build the id-service");
    let addr = app.grpc_addr();
    let stop = CancellationToken::new();
    runtime.spawn(app.run(stop.clone()));
    (addr, stop)
}

fn main() {
    let seconds = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    );
    let one_worker = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let (servers, clients) = (one_worker(), one_worker());
    let db = servers.block_on(testkit::TestDb::create());
    let dir = tempfile::tempdir().expect("tempdir");
    let (service, stop_service) = start_service(&servers, db.url(), dir.path(), None);
    let fixed: Vec<(u64, SocketAddr, CancellationToken)> = [1_000, 100_000, 1_000_000]
        .into_iter()
        .map(|size| {
            let (addr, stop) = start_service(&servers, db.url(), dir.path(), Some(size));
            (size, addr, stop)
        })
        .collect();
    let ceiling = {
        let listener = servers
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the ceiling");
        let addr = listener.local_addr().expect("address");
        servers.spawn(
            tonic::transport::Server::builder()
                .add_service(IdAllocatorServer::new(Fixed))
                .serve_with_incoming(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                ),
        );
        addr
    };
    // Warm both sides up once (allocator, connections, the service's first segments).
    for addr in [ceiling, service] {
        clients.block_on(load(addr, 16, 100, Duration::from_secs(1)));
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## AllocateIds beside a bare tonic server ({seconds:?} per run, {cores} cores)\n");
    println!(
        "| callers | count | ceiling calls/s | p50 ms | p99 ms | p99.9 ms | service calls/s | p50 ms | p99 ms | p99.9 ms | service/ceiling |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for count in [1, 100] {
        for callers in [1, 16, 64] {
            let (c, s) = paired(&clients, ceiling, service, callers, count, seconds);
            println!(
                "| {callers} | {count} | {:.0} | {:.3} | {:.3} | {:.3} | {:.0} | {:.3} | {:.3} | {:.3} | {:.2} |",
                c.calls_per_second,
                c.p50_ms,
                c.p99_ms,
                c.p999_ms,
                s.calls_per_second,
                s.p50_ms,
                s.p99_ms,
                s.p999_ms,
                s.calls_per_second / c.calls_per_second
            );
        }
    }
    println!("\n## Across segment refills (16 callers, count 100, each beside the ceiling)\n");
    println!(
        "| segments | segments leased | service calls/s | p50 ms | p99 ms | p99.9 ms | max ms | ceiling calls/s | p99 ms | p99.9 ms | max ms | service/ceiling |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // All services share the database; only the one under load leases segments meanwhile.
    let segments = || -> u64 {
        let conn = servers.block_on(db.connect());
        let n: i64 = servers
            .block_on(conn.query_one(
                "SELECT count(*) FROM id_leases WHERE holder LIKE '@segment/%'",
                &[],
            ))
            .expect("count segments")
            .get(0);
        n as u64
    };
    let mut runs: Vec<(String, SocketAddr)> = vec![("adaptive (default)".into(), service)];
    runs.extend(
        fixed
            .iter()
            .map(|(size, addr, _)| (format!("fixed, {size} IDs"), *addr)),
    );
    for (label, addr) in runs {
        let before = segments();
        let (c, s) = paired(&clients, ceiling, addr, 16, 100, seconds);
        // Four service runs of `seconds` each.
        let leased = segments() - before;
        println!(
            "| {label} | {leased} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} | {:.3} | {:.3} | {:.3} | {:.2} |",
            s.calls_per_second,
            s.p50_ms,
            s.p99_ms,
            s.p999_ms,
            s.max_ms,
            c.calls_per_second,
            c.p99_ms,
            c.p999_ms,
            c.max_ms,
            s.calls_per_second / c.calls_per_second
        );
    }
    stop_service.cancel();
    for (_, _, stop) in &fixed {
        stop.cancel();
    }
    servers.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
}
