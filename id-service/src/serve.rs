//! The serve-then-drain lifecycle of a built [`App`].

use crate::admin::{self, AdminState};
use crate::allocator::Allocator;
use crate::app::App;
use crate::auth::{SharedQuotas, reload};
use crate::domain::BlockBounds;
use crate::grpc::{AdminService, IdService, Shared};
use crate::http_api::{self, HttpApi};
use crate::segments::{SegmentSettings, Segments};
use anyhow::Context;
use proto::idalloc::v1::id_allocator_server::IdAllocatorServer;
use proto::idalloc::v1::namespace_admin_server::NamespaceAdminServer;
use proto::server::Health;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// The largest request message read (every request of the API is a few dozen bytes).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

impl App {
    /// Serves until `shutdown` is cancelled, then turns readiness off (gRPC health NOT_SERVING,
    /// `/readyz` 503), keeps accepting for the shutdown delay, stops accepting and lets in-flight
    /// calls finish within the drain timeout. Every port is closed when this returns; the IDs
    /// left in the replica's segments become a gap.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            config,
            ledger,
            metrics,
            gate,
            tokens_text,
            grpc_listener,
            http_listener,
            admin_listener,
        } = self;
        let grpc_addr = grpc_listener
            .local_addr()
            .context("read the gRPC address")?;
        let http_addr = http_listener
            .local_addr()
            .context("read the JSON address")?;
        let admin_addr = admin_listener
            .local_addr()
            .context("read the admin address")?;
        let instance = config.instance_name().context("name this replica")?;
        let segments = Arc::new(Segments::new(
            ledger.clone(),
            Arc::clone(&metrics),
            SegmentSettings {
                // Segments are leases: never above the largest block (nor, per namespace, its
                // own limit; see Segments::pool).
                min: config.segment_min.min(config.max_block),
                max: config.segment_max.min(config.max_block),
                duration: config.segment_duration,
                lease_timeout: config.request_timeout,
                holder: format!("@segment/{}", instance.as_str()),
            },
        ));
        let quotas = Arc::new(SharedQuotas::new(ledger.clone()));
        let allocator = Arc::new(Allocator::new(
            Arc::clone(&segments),
            Arc::clone(&metrics),
            Arc::clone(&quotas),
            config.request_timeout,
        ));
        let cut_off = CancellationToken::new();
        let shared = Arc::new(Shared {
            ledger: ledger.clone(),
            gate: Arc::clone(&gate),
            allocator: Arc::clone(&allocator),
            bounds: BlockBounds {
                min: config.min_block,
                max: config.max_block,
            },
            max_count: config.allocate_max_count,
            namespace_max: config.namespace_max,
            metrics: Arc::clone(&metrics),
            quotas,
            cut_off: cut_off.clone(),
        });

        let (health, health_service) = Health::new(&[
            <IdAllocatorServer<IdService> as tonic::server::NamedService>::NAME,
            <NamespaceAdminServer<AdminService> as tonic::server::NamedService>::NAME,
        ]);
        let (reflection_v1, reflection_v1alpha) =
            proto::server::reflection().context("build the reflection services")?;
        let stop_grpc = CancellationToken::new();
        let grpc = Server::builder()
            .timeout(config.request_timeout)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(
                IdAllocatorServer::new(IdService(Arc::clone(&shared)))
                    .max_decoding_message_size(MAX_REQUEST_BYTES),
            )
            .add_service(
                NamespaceAdminServer::new(AdminService(Arc::clone(&shared)))
                    .max_decoding_message_size(MAX_REQUEST_BYTES),
            )
            .serve_with_incoming_shutdown(
                TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
                stop_grpc.clone().cancelled_owned(),
            );
        let mut grpc_task = tokio::spawn(grpc);

        let stop_http = CancellationToken::new();
        let api = http_api::router(Arc::new(HttpApi {
            gate: Arc::clone(&gate),
            allocator,
            max_count: config.allocate_max_count,
        }));
        let http = axum::serve(http_listener, api)
            .with_graceful_shutdown(stop_http.clone().cancelled_owned());
        let mut http_task = tokio::spawn(http.into_future());

        let draining = CancellationToken::new();
        let stop_admin = CancellationToken::new();
        let admin = axum::serve(
            admin_listener,
            admin::router(AdminState {
                ledger: ledger.clone(),
                metrics: Arc::clone(&metrics),
                segments: Arc::clone(&segments),
                draining: draining.clone(),
            }),
        )
        .with_graceful_shutdown(stop_admin.clone().cancelled_owned());
        let admin_task = tokio::spawn(admin.into_future());

        let stop_reload = CancellationToken::new();
        if let (Some(path), Some(text)) = (config.tokens_file.clone(), tokens_text) {
            tokio::spawn(reload::watch(
                Arc::clone(&gate),
                path,
                text,
                config.tokens_reload_interval,
                Arc::clone(&metrics),
                stop_reload.clone(),
            ));
        }

        health.set(true).await;
        metrics.set_ready(true);
        tracing::info!(%grpc_addr, %http_addr, %admin_addr, instance = instance.as_str(), "serving");

        let failed = tokio::select! {
            _ = shutdown.cancelled() => None,
            result = &mut grpc_task => Some(result.map(|r| r.map_err(anyhow::Error::from))),
            result = &mut http_task => Some(result.map(|r| r.map_err(anyhow::Error::from))),
        };
        if let Some(result) = failed {
            stop_admin.cancel();
            stop_reload.cancel();
            segments.close();
            ledger.pool().close();
            return match result {
                Ok(Ok(())) => Err(anyhow::anyhow!("a server stopped unexpectedly")),
                Ok(Err(e)) => Err(e).context("serve"),
                Err(e) => Err(e).context("join a server"),
            };
        }

        // Readiness goes off before anything stops, so balancers move traffic away first.
        draining.cancel();
        metrics.set_ready(false);
        health.set(false).await;
        tracing::info!(
            shutdown_delay = ?config.shutdown_delay,
            drain_timeout = ?config.drain_timeout,
            "readiness off; draining"
        );
        tokio::time::sleep(config.shutdown_delay).await;
        stop_grpc.cancel();
        stop_http.cancel();
        let deadline = tokio::time::Instant::now() + config.drain_timeout;
        let grpc_done = tokio::time::timeout_at(deadline, &mut grpc_task).await;
        let http_done = tokio::time::timeout_at(deadline, &mut http_task).await;
        match (grpc_done, http_done) {
            (Ok(grpc), Ok(http)) => {
                report("gRPC", grpc.map(|r| r.map_err(anyhow::Error::from)));
                report("JSON", http.map(|r| r.map_err(anyhow::Error::from)));
                tracing::info!("drained");
            }
            (grpc, http) => {
                // Calls still running end with UNAVAILABLE; a lease committed without its
                // reply reaching the caller is a gap, never a duplicate. Connections then
                // close by themselves; health Watch streams are the only calls left open.
                tracing::warn!("drain timeout passed; cutting off calls still in flight");
                cut_off.cancel();
                if grpc.is_err() {
                    stop_within(&mut grpc_task, Duration::from_secs(1)).await;
                }
                if http.is_err() {
                    stop_within(&mut http_task, Duration::from_secs(1)).await;
                }
            }
        }
        stop_reload.cancel();
        stop_admin.cancel();
        match tokio::time::timeout(Duration::from_secs(1), admin_task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "admin server ended with an error"),
            Ok(Err(error)) => tracing::warn!(%error, "admin server task failed"),
            Err(_) => tracing::warn!("admin server did not stop within 1s"),
        }
        segments.close();
        ledger.pool().close();
        Ok(())
    }
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
