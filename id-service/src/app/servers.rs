//! The replica's three servers, started together and stopped in the order a drain needs.

use super::parts::Parts;
use crate::config::Config;
use crate::grpc::{IdService, NamespaceService};
use crate::http_api;
use crate::metrics::Metrics;
use crate::ops;
use anyhow::Context;
use proto::idalloc::v1::id_allocator_server::IdAllocatorServer;
use proto::idalloc::v1::namespace_admin_server::NamespaceAdminServer;
use proto::server::Health;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// The largest request message read (every request of the API is a few dozen bytes).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long a server cut off after the drain timeout, or the admin port, may take to stop.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// The bound ports of a replica.
pub(super) struct Listeners {
    pub(super) grpc: TcpListener,
    pub(super) http: TcpListener,
    pub(super) admin: TcpListener,
}

impl Listeners {
    /// The addresses the listeners are bound to.
    pub(super) fn addrs(&self) -> anyhow::Result<super::Addrs> {
        let local = |listener: &TcpListener, what: &str| -> anyhow::Result<SocketAddr> {
            listener
                .local_addr()
                .with_context(|| format!("read the {what} address"))
        };
        Ok(super::Addrs {
            grpc: local(&self.grpc, "gRPC")?,
            http: local(&self.http, "JSON")?,
            admin: local(&self.admin, "admin")?,
        })
    }
}

/// A server running on its own task.
type ServerTask = JoinHandle<anyhow::Result<()>>;

/// The running servers.
pub(super) struct Servers {
    health: Health,
    /// Stops the gRPC and JSON servers accepting.
    stop_traffic: CancellationToken,
    grpc: ServerTask,
    http: ServerTask,
    /// Turns `/readyz` off.
    draining: CancellationToken,
    stop_admin: CancellationToken,
    admin: ServerTask,
}

impl Servers {
    /// Serves gRPC (`IdAllocator`, `NamespaceAdmin`, health, reflection), the JSON endpoint and
    /// the admin port for `parts`. Health stays NOT_SERVING until [`Servers::ready`].
    pub(super) fn start(
        parts: &Parts,
        config: &Config,
        listeners: Listeners,
    ) -> anyhow::Result<Servers> {
        let stop_traffic = CancellationToken::new();
        let (health, grpc) = grpc_server(parts, config, listeners.grpc, &stop_traffic)?;
        let http = axum::serve(listeners.http, http_api::router(parts.http_api(config)))
            .with_graceful_shutdown(stop_traffic.clone().cancelled_owned());
        let draining = CancellationToken::new();
        let stop_admin = CancellationToken::new();
        let admin = axum::serve(
            listeners.admin,
            ops::router(parts.ops_state(draining.clone())),
        )
        .with_graceful_shutdown(stop_admin.clone().cancelled_owned());
        Ok(Servers {
            health,
            stop_traffic,
            grpc,
            http: spawn(http.into_future()),
            draining,
            stop_admin,
            admin: spawn(admin.into_future()),
        })
    }

    /// Reports the replica ready: gRPC health SERVING and the `ready` gauge at 1.
    pub(super) async fn ready(&self, metrics: &Metrics) {
        self.health.set(true).await;
        metrics.set_ready(true);
    }

    /// Waits for `shutdown`; returns the failure if the gRPC or the JSON server ends first.
    pub(super) async fn until_shutdown(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Option<anyhow::Error> {
        let ended = tokio::select! {
            _ = shutdown.cancelled() => return None,
            result = &mut self.grpc => result,
            result = &mut self.http => result,
        };
        Some(match ended {
            Ok(Ok(())) => anyhow::anyhow!("a server stopped unexpectedly"),
            Ok(Err(e)) => e.context("serve"),
            Err(e) => anyhow::Error::from(e).context("join a server"),
        })
    }

    /// Turns readiness off before anything stops, so balancers move traffic away first; keeps
    /// accepting for the shutdown delay, then stops accepting and waits for in-flight calls
    /// until the drain timeout, after which the calls still running are cut off. The admin port
    /// keeps serving until [`Servers::stop_admin`].
    pub(super) async fn drain(&mut self, parts: &Parts, config: &Config) {
        self.draining.cancel();
        parts.metrics.set_ready(false);
        self.health.set(false).await;
        tracing::info!(
            delay_seconds = config.shutdown_delay.as_secs_f64(),
            drain_seconds = config.drain_timeout.as_secs_f64(),
            "readiness off; draining after the shutdown delay"
        );
        tokio::time::sleep(config.shutdown_delay).await;
        self.stop_traffic.cancel();
        let deadline = tokio::time::Instant::now() + config.drain_timeout;
        let grpc_done = tokio::time::timeout_at(deadline, &mut self.grpc).await;
        let http_done = tokio::time::timeout_at(deadline, &mut self.http).await;
        match (grpc_done, http_done) {
            (Ok(grpc), Ok(http)) => {
                report("gRPC", grpc);
                report("JSON", http);
                tracing::info!("drained");
            }
            (grpc, http) => {
                // Calls still running end with UNAVAILABLE; a lease committed without its
                // reply reaching the caller is a gap, never a duplicate. Connections then
                // close by themselves; health Watch streams are the only calls left open.
                tracing::warn!("drain timeout passed; cutting off calls still in flight");
                parts.cut_off();
                if grpc.is_err() {
                    stop_within(&mut self.grpc, STOP_GRACE).await;
                }
                if http.is_err() {
                    stop_within(&mut self.http, STOP_GRACE).await;
                }
            }
        }
    }

    /// Stops the admin port without waiting (after a server failed).
    pub(super) fn abandon_admin(&self) {
        self.stop_admin.cancel();
    }

    /// Stops the admin port, last, waiting for it a moment.
    pub(super) async fn stop_admin(self) {
        self.stop_admin.cancel();
        match tokio::time::timeout(STOP_GRACE, self.admin).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "admin server ended with an error"),
            Ok(Err(error)) => tracing::warn!(%error, "admin server task failed"),
            Err(_) => tracing::warn!("admin server did not stop within 1s"),
        }
    }
}

/// The gRPC services whose calls get server spans (not health checks or reflection).
const TRACED_SERVICES: &[&str] = &[
    <IdAllocatorServer<IdService> as tonic::server::NamedService>::NAME,
    <NamespaceAdminServer<NamespaceService> as tonic::server::NamedService>::NAME,
];

/// The gRPC server on `listener` until `stop` is cancelled, and its health reporter.
fn grpc_server(
    parts: &Parts,
    config: &Config,
    listener: TcpListener,
    stop: &CancellationToken,
) -> anyhow::Result<(Health, ServerTask)> {
    let (health, health_service) = Health::new(&[
        <IdAllocatorServer<IdService> as tonic::server::NamedService>::NAME,
        <NamespaceAdminServer<NamespaceService> as tonic::server::NamedService>::NAME,
    ]);
    let (reflection_v1, reflection_v1alpha) =
        proto::server::reflection().context("build the reflection services")?;
    let server = Server::builder()
        .timeout(config.request_timeout)
        .layer(otel::grpc::TraceLayer::new(TRACED_SERVICES))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(
            IdAllocatorServer::new(IdService(Arc::clone(&parts.shared)))
                .max_decoding_message_size(MAX_REQUEST_BYTES),
        )
        .add_service(
            NamespaceAdminServer::new(NamespaceService(Arc::clone(&parts.shared)))
                .max_decoding_message_size(MAX_REQUEST_BYTES),
        )
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            stop.clone().cancelled_owned(),
        );
    Ok((health, spawn(server)))
}

/// Runs a server on its own task.
fn spawn<E>(server: impl Future<Output = Result<(), E>> + Send + 'static) -> ServerTask
where
    E: Into<anyhow::Error>,
{
    tokio::spawn(async move { server.await.map_err(Into::into) })
}

fn report(what: &str, outcome: Result<anyhow::Result<()>, tokio::task::JoinError>) {
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::warn!(server = what, error = %format!("{error:#}"), "server ended with an error")
        }
        Err(error) => tracing::warn!(server = what, %error, "server task failed"),
    }
}

/// Waits for `task` to end for `grace`, then aborts it.
async fn stop_within<T>(task: &mut JoinHandle<T>, grace: Duration) {
    if tokio::time::timeout(grace, &mut *task).await.is_err() {
        task.abort();
        let _ = task.await;
    }
}
