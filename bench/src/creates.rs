//! Create load through the node: JSON over HTTP, gRPC `CreateLink`, gRPC `BatchCreateLinks`.
//! Each client keeps one create in flight for the whole run, on its own connection, except for
//! [`Transport::GrpcShared`], whose clients share one channel as a service's callers share it.

use crate::http::Conn;
use crate::node::API_KEY;
use crate::procs::target_url;
use crate::stats::Run;
use proto::shortener::v1::links_client::LinksClient;
use proto::shortener::v1::{BatchCreateLinksRequest, CreateLinkRequest, batch_create_result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How creates reach the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `POST /api/v1/links`.
    Http,
    /// gRPC `CreateLink`, each client on a channel (an HTTP/2 connection) of its own.
    Grpc,
    /// gRPC `CreateLink`, every client of the run on one channel: how a service uses a tonic
    /// channel (cloned to each caller, its calls multiplexed on one HTTP/2 connection).
    GrpcShared,
    /// gRPC `BatchCreateLinks` with this many items per call.
    GrpcBatch(usize),
    /// `POST /api/v1/links` from h2load ([`crate::h2load`]), a connection per client.
    H2loadHttp,
    /// gRPC `CreateLink` from h2load, every client's call on one HTTP/2 connection.
    H2loadGrpcShared,
}

impl Transport {
    /// Whether h2load drives it (one target URL for every create of a run).
    pub fn by_h2load(self) -> bool {
        matches!(self, Transport::H2loadHttp | Transport::H2loadGrpcShared)
    }

    /// Its name in tables.
    pub fn label(self) -> String {
        match self {
            Transport::Http => "HTTP".into(),
            Transport::Grpc => "gRPC".into(),
            Transport::GrpcShared => "gRPC, one channel".into(),
            Transport::GrpcBatch(n) => format!("gRPC batch×{n}"),
            Transport::H2loadHttp => "HTTP, h2load".into(),
            Transport::H2loadGrpcShared => "gRPC, one channel, h2load".into(),
        }
    }
}

static NEXT_URL: AtomicU64 = AtomicU64::new(1);

fn next_url() -> String {
    target_url(NEXT_URL.fetch_add(1, Ordering::Relaxed))
}

async fn channel(addr: SocketAddr) -> anyhow::Result<LinksClient<Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    Ok(LinksClient::new(channel))
}

fn authorized<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {API_KEY}")
            .parse()
            .expect("ASCII header value"),
    );
    request
}

enum Client {
    Http(Conn),
    Grpc(LinksClient<Channel>),
}

/// One call; returns (links created, items that failed).
async fn call(client: &mut Client, transport: Transport) -> anyhow::Result<(u64, u64)> {
    match (client, transport) {
        (Client::Http(conn), _) => {
            let body = serde_json::json!({ "url": next_url() }).to_string();
            let (status, _) = conn.post_json("/api/v1/links", API_KEY, body).await?;
            Ok(if status.as_u16() == 201 {
                (1, 0)
            } else {
                (0, 1)
            })
        }
        (Client::Grpc(client), Transport::GrpcBatch(n)) => {
            let items = (0..n)
                .map(|_| CreateLinkRequest {
                    url: next_url(),
                    ..Default::default()
                })
                .collect();
            let response = client
                .batch_create_links(authorized(BatchCreateLinksRequest { items }))
                .await;
            Ok(match response {
                Ok(r) => {
                    let ok = r
                        .get_ref()
                        .results
                        .iter()
                        .filter(|r| {
                            matches!(r.outcome, Some(batch_create_result::Outcome::Link(_)))
                        })
                        .count() as u64;
                    (ok, n as u64 - ok)
                }
                Err(_) => (0, n as u64),
            })
        }
        (Client::Grpc(client), _) => {
            let request = CreateLinkRequest {
                url: next_url(),
                ..Default::default()
            };
            Ok(match client.create_link(authorized(request)).await {
                Ok(_) => (1, 0),
                Err(_) => (0, 1),
            })
        }
    }
}

/// Runs `clients` concurrent clients for `warmup + duration`; measures the last `duration`.
/// The rate counts links (a batch call counts its items); latencies are per call.
pub async fn run(
    node: &crate::node::Node,
    transport: Transport,
    clients: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Run> {
    let target = Target {
        http: node.http,
        grpc: node.grpc,
        pid: Some(node.server.pid()),
    };
    run_at(target, transport, clients, warmup, duration).await
}

/// Where [`run_at`] sends its creates.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The node's public HTTP address.
    pub http: SocketAddr,
    /// Its gRPC address.
    pub grpc: SocketAddr,
    /// Its process, for CPU per link (none: not measured).
    pub pid: Option<u32>,
}

/// [`run`] against any node, also one started by hand (`bench drive`, for profiling).
pub async fn run_at(
    target: Target,
    transport: Transport,
    clients: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Run> {
    Ok(run_counted(target, transport, clients, warmup, duration)
        .await?
        .0)
}

/// [`run_at`], also returning every link the run created, warm-up included (for costs the
/// store reports over the whole run, such as the WAL it wrote).
pub async fn run_counted(
    target: Target,
    transport: Transport,
    clients: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<(Run, u64)> {
    if transport.by_h2load() {
        anyhow::bail!("{} runs through crate::h2load", transport.label());
    }
    let cpu_before = target.pid.and_then(crate::machine::cpu_seconds);
    let own_before = crate::machine::cpu_seconds(std::process::id());
    let start = Instant::now() + warmup;
    let end = start + duration;
    let mut tasks = Vec::new();
    let shared = match transport {
        Transport::GrpcShared => Some(channel(target.grpc).await?),
        _ => None,
    };
    for _ in 0..clients {
        let mut client = match (transport, &shared) {
            (Transport::Http, _) => Client::Http(Conn::connect(target.http).await?),
            (_, Some(shared)) => Client::Grpc(shared.clone()),
            (_, None) => Client::Grpc(channel(target.grpc).await?),
        };
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut links, mut errors, mut all_links) =
                (Vec::new(), 0u64, 0u64, 0u64);
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                let (ok, failed) = call(&mut client, transport).await?;
                all_links += ok;
                if t >= start {
                    latencies.push(t.elapsed().as_micros() as u32);
                    links += ok;
                    errors += failed;
                }
            }
            anyhow::Ok((latencies, links, errors, all_links))
        }));
    }
    let (mut all, mut links, mut errors, mut all_links) = (Vec::new(), 0, 0, 0);
    for task in tasks {
        let (l, n, e, a) = task.await??;
        all.extend(l);
        links += n;
        errors += e;
        all_links += a;
    }
    let cpu_after = target.pid.and_then(crate::machine::cpu_seconds);
    let own_after = crate::machine::cpu_seconds(std::process::id());
    // Calls still in flight at `end` finished after it: measure to the last completion.
    let elapsed = Instant::now()
        .saturating_duration_since(start)
        .max(duration);
    let mut run = Run::from_latencies(all, links, elapsed, errors);
    // Server CPU per link over the whole run, warm-up included (so over every link created).
    if let (Some(a), Some(b)) = (cpu_before, cpu_after)
        && all_links > 0
    {
        run.cpu_us = Some((b - a) * 1e6 / all_links as f64);
    }
    if let (Some(a), Some(b)) = (own_before, own_after)
        && all_links > 0
    {
        run.client_cpu_us = Some((b - a) * 1e6 / all_links as f64);
    }
    Ok((run, all_links))
}
