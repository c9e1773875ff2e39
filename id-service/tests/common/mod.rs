//! Helpers shared by the integration tests: in-process servers on port 0, typed clients and
//! ledger checks.
#![allow(dead_code)] // Each test binary uses a different subset.

use id_service::{App, Config};
use proto::idalloc::v1::id_allocator_client::IdAllocatorClient;
use proto::idalloc::v1::{Lease, LeaseBlockRequest};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// An id-service running in this process.
pub struct Server {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound admin address.
    pub admin_addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Builds and starts an App for `config`.
    pub async fn start(config: Config) -> Server {
        let app = App::build(config).await.expect("build the id-service");
        let (grpc_addr, admin_addr) = (app.grpc_addr(), app.admin_addr());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(app.run(shutdown.clone()));
        Server {
            grpc_addr,
            admin_addr,
            shutdown,
            task,
        }
    }

    /// A client connected to this server.
    pub async fn client(&self) -> IdAllocatorClient<Channel> {
        client(self.grpc_addr).await
    }

    /// `http://<grpc_addr>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.grpc_addr)
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

/// A client for the id-service at `addr` (connects lazily).
pub async fn client(addr: SocketAddr) -> IdAllocatorClient<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("valid endpoint")
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .connect_lazy();
    IdAllocatorClient::new(channel)
}

/// Leases `size` IDs of `namespace` for `holder`.
pub async fn lease(
    client: &mut IdAllocatorClient<Channel>,
    namespace: &str,
    size: u64,
    holder: &str,
) -> Result<Lease, tonic::Status> {
    client
        .lease_block(LeaseBlockRequest {
            namespace: namespace.into(),
            size,
            holder: holder.into(),
        })
        .await
        .map(tonic::Response::into_inner)
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

/// Picks a port that is free right now (for processes that must be told their port).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}
