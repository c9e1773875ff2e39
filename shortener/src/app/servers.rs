//! The node's three listeners, started together and stopped in the order a drain needs.

use super::node::Node;
use crate::config::Config;
use crate::http::{self, PublicService};
use crate::{admin, grpc};
use anyhow::Context;
use proto::server::Health;
use proto::shortener::v1::links_server::LinksServer;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The bound listeners of a node.
pub(super) struct Listeners {
    pub(super) http: TcpListener,
    pub(super) grpc: TcpListener,
    pub(super) admin: TcpListener,
}

/// The running servers.
pub(super) struct Servers {
    health: Health,
    stop_traffic: CancellationToken,
    traffic: Vec<JoinHandle<()>>,
    stop_admin: CancellationToken,
    admin: JoinHandle<()>,
}

impl Servers {
    /// Serves public HTTP, gRPC (`Links`, health, reflection) and admin HTTP for `node`, and
    /// marks gRPC health as serving.
    pub(super) async fn start(
        node: &Node,
        config: &Config,
        listeners: Listeners,
    ) -> anyhow::Result<Self> {
        let (health, health_service) =
            Health::new(&[<LinksServer<grpc::LinksApi> as tonic::server::NamedService>::NAME]);
        let (reflection_v1, reflection_v1alpha) =
            proto::server::reflection().context("build the reflection services")?;
        let stop_traffic = CancellationToken::new();
        let grpc_server = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(LinksServer::new(node.links_api()))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listeners.grpc)
                    .with_nodelay(Some(true)),
                stop_traffic.clone().cancelled_owned(),
            );
        let grpc_task = tokio::spawn(async move {
            if let Err(error) = grpc_server.await {
                tracing::error!(%error, "gRPC server failed");
            }
        });
        let http_task = tokio::spawn(http::serve::serve(
            listeners.http,
            PublicService::new(node.http_state(config)?),
            Duration::from_secs(config.header_read_timeout),
            stop_traffic.clone(),
            config.drain(),
        ));
        let stop_admin = CancellationToken::new();
        let admin_task = tokio::spawn({
            let (router, stop) = (admin::router(node.admin_state()), stop_admin.clone());
            async move {
                if let Err(error) = axum::serve(listeners.admin, router)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
                {
                    tracing::error!(%error, "admin server failed");
                }
            }
        });
        health.set(true).await;
        Ok(Self {
            health,
            stop_traffic,
            traffic: vec![http_task, grpc_task],
            stop_admin,
            admin: admin_task,
        })
    }

    /// Turns readiness off (`/readyz` 503, gRPC health `NOT_SERVING`), stops accepting traffic
    /// and waits up to `drain` (plus a second) for in-flight requests. The admin port keeps
    /// serving until [`Servers::stop_admin`].
    pub(super) async fn drain(&mut self, node: &Node, drain: Duration) {
        node.accepting.store(false, Ordering::SeqCst);
        self.health.set(false).await;
        self.stop_traffic.cancel();
        let drained = futures::future::join_all(self.traffic.drain(..));
        if tokio::time::timeout(drain + Duration::from_secs(1), drained)
            .await
            .is_err()
        {
            tracing::warn!("drain bound reached; closing remaining calls");
        }
    }

    /// Stops the admin port, last.
    pub(super) async fn stop_admin(self) {
        self.stop_admin.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.admin).await;
    }
}
