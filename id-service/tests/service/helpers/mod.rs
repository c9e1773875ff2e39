//! Helpers shared by the integration tests: in-process servers on port 0, typed clients,
//! tokens files and ledger checks.

pub mod process;
pub mod proxy;
pub mod tokens;

use id_service::{App, Config};
use proto::idalloc::v1::id_allocator_client::IdAllocatorClient;
use proto::idalloc::v1::namespace_admin_client::NamespaceAdminClient;
use proto::idalloc::v1::{AllocateIdsRequest, IdRange, Lease, LeaseBlockRequest};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// An id-service running in this process.
pub struct Server {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound address of the JSON endpoint.
    pub http_addr: SocketAddr,
    /// The bound admin address.
    pub admin_addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Builds and starts an App for `config`.
    pub async fn start(config: Config) -> Server {
        let app = App::build(config).await.expect("build the id-service");
        let (grpc_addr, http_addr, admin_addr) =
            (app.grpc_addr(), app.http_addr(), app.admin_addr());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(app.run(shutdown.clone()));
        Server {
            grpc_addr,
            http_addr,
            admin_addr,
            shutdown,
            task,
        }
    }

    /// A client connected to this server.
    pub async fn client(&self) -> IdAllocatorClient<Channel> {
        client(self.grpc_addr).await
    }

    /// A namespace-admin client connected to this server.
    pub async fn admin_client(&self) -> NamespaceAdminClient<Channel> {
        NamespaceAdminClient::new(channel(self.grpc_addr))
    }

    /// `http://<grpc_addr>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.grpc_addr)
    }

    /// The URL of the JSON endpoint for `namespace`.
    pub fn allocate_url(&self, namespace: &str) -> String {
        format!(
            "http://{}/v1/namespaces/{namespace}/ids:allocate",
            self.http_addr
        )
    }

    /// The text of `/metrics`.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin_addr))
            .await
            .expect("scrape /metrics")
            .text()
            .await
            .expect("read /metrics")
    }

    /// Cancels the server and waits until both ports are closed.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server stops within its drain timeout")
            .expect("join the server")
            .expect("the server ran cleanly");
    }

    /// The cancellation token `run` watches.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// A lazily connecting channel to `addr`.
pub fn channel(addr: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("valid endpoint")
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .connect_lazy()
}

/// A client for the id-service at `addr` (connects lazily).
pub async fn client(addr: SocketAddr) -> IdAllocatorClient<Channel> {
    IdAllocatorClient::new(channel(addr))
}

/// `message` with `authorization: Bearer <token>` when a token is given.
pub fn authed<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("ascii token"),
        );
    }
    request
}

/// Leases `size` IDs of `namespace` for `holder`.
pub async fn lease(
    client: &mut IdAllocatorClient<Channel>,
    namespace: &str,
    size: u64,
    holder: &str,
) -> Result<Lease, tonic::Status> {
    lease_as(client, None, namespace, size, holder, None).await
}

/// Leases with a token and a reported high water.
pub async fn lease_as(
    client: &mut IdAllocatorClient<Channel>,
    token: Option<&str>,
    namespace: &str,
    size: u64,
    holder: &str,
    high_water: Option<u64>,
) -> Result<Lease, tonic::Status> {
    let message = LeaseBlockRequest {
        namespace: namespace.into(),
        size,
        holder: holder.into(),
        high_water,
    };
    client
        .lease_block(authed(message, token))
        .await
        .map(tonic::Response::into_inner)
}

/// Calls AllocateIds; returns the ranges as (start, end).
pub async fn allocate(
    client: &mut IdAllocatorClient<Channel>,
    token: Option<&str>,
    namespace: &str,
    count: u64,
) -> Result<Vec<(u64, u64)>, tonic::Status> {
    let message = AllocateIdsRequest {
        namespace: namespace.into(),
        count,
    };
    client
        .allocate_ids(authed(message, token))
        .await
        .map(|reply| {
            reply
                .into_inner()
                .ranges
                .into_iter()
                .map(|IdRange { start, end }| (start, end))
                .collect()
        })
}

/// Panics unless the ranges (of one namespace) are non-empty and pairwise disjoint.
pub fn assert_ranges_disjoint(ranges: &[(u64, u64)]) {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    for r in &sorted {
        assert!(r.0 < r.1, "empty range {r:?}");
    }
    for pair in sorted.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "ranges overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Panics unless every range lies inside the leases of `namespace` in the ledger (a range may
/// span leases that touch: a replica's consecutive segments).
pub async fn assert_ledger_covers(
    db: &tokio_postgres::Client,
    namespace: &str,
    ranges: &[(u64, u64)],
) {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (ns, start, end, _) in ledger_leases(db).await {
        if ns != namespace {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.1 == start => run.1 = end,
            _ => runs.push((start, end)),
        }
    }
    for &(start, end) in ranges {
        let i = runs.partition_point(|&(s, _)| s <= start);
        let covered = i > 0 && runs[i - 1].1 >= end;
        assert!(
            covered,
            "range [{start}, {end}) is in no lease of {namespace}"
        );
    }
}

/// How many rows `table` has.
pub async fn count_rows(db: &tokio_postgres::Client, table: &str) -> i64 {
    db.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .expect("count rows")
        .get(0)
}

/// Panics unless the leases, all of one namespace, are pairwise disjoint and non-empty.
pub fn assert_disjoint(leases: &[Lease]) {
    let mut ranges: Vec<(u64, u64, u64)> = leases
        .iter()
        .map(|l| (l.start, l.end, l.lease_id))
        .collect();
    ranges.sort_unstable();
    for l in &ranges {
        assert!(l.0 < l.1, "empty lease {l:?}");
    }
    for pair in ranges.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "leases overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// How many pairs of leases of one namespace share an ID, counted by the database itself
/// (the EXCLUDE constraint should keep this at 0).
pub async fn ledger_overlaps(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT count(*) FROM id_leases a JOIN id_leases b
           ON a.namespace = b.namespace AND a.lease_id < b.lease_id AND a.ids && b.ids",
        &[],
    )
    .await
    .expect("count overlapping leases")
    .get(0)
}

/// Every lease in the ledger as (namespace, start, end, lease_id), sorted.
pub async fn ledger_leases(db: &tokio_postgres::Client) -> Vec<(String, u64, u64, u64)> {
    let rows = db
        .query(
            "SELECT namespace, lower(ids), upper(ids), lease_id FROM id_leases
              ORDER BY namespace, lower(ids)",
            &[],
        )
        .await
        .expect("read the ledger");
    rows.iter()
        .map(|r| {
            let (s, e, id): (i64, i64, i64) = (r.get(1), r.get(2), r.get(3));
            (r.get(0), s as u64, e as u64, id as u64)
        })
        .collect()
}
