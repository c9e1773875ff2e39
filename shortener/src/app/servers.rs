//! The node's three listeners, started together and stopped in the order a drain needs.

use super::node::Node;
use crate::config::Config;
use crate::grpc::{self, BodyLimits, GuardLayer, StreamBounds};
use crate::http::serve::ServeSettings;
use crate::http::{self, PublicService};
use crate::net;
use crate::ops::OpsService;
use anyhow::Context;
use proto::server::Health;
use proto::shortener::v1::links_server::LinksServer;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The gRPC services whose calls get server spans (not health checks or reflection).
const TRACED_SERVICES: &[&str] =
    &[<LinksServer<grpc::LinksApi> as tonic::server::NamedService>::NAME];

/// How often an idle gRPC connection is pinged, to find peers that went away.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is closed.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long servers get to end once their connections are cut past the drain bound.
const CUT_GRACE: Duration = Duration::from_secs(1);

/// The HTTP/2 flow-control window of one gRPC call, in bytes.
const STREAM_WINDOW: u32 = 256 * 1024;
/// The HTTP/2 flow-control window of one gRPC connection, in bytes.
const CONNECTION_WINDOW: u32 = 1024 * 1024;

/// The bound listeners of a node (gRPC and admin unless turned off).
pub(super) struct Listeners {
    pub(super) http: TcpListener,
    pub(super) grpc: Option<TcpListener>,
    pub(super) admin: Option<TcpListener>,
}

/// The running servers.
pub(super) struct Servers {
    health: Health,
    stop_traffic: CancellationToken,
    /// Past the drain bound: ends the gRPC connections still open (see [`net::idle`]).
    cut_traffic: CancellationToken,
    traffic: Vec<JoinHandle<()>>,
    stop_admin: CancellationToken,
    admin: Option<JoinHandle<()>>,
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
        let cut_traffic = CancellationToken::new();
        let limits = BodyLimits::new(config.redirects.max_url_length, config.limits.batch_limit);
        // A stream's last messages may take one send timeout past its own bound; an import's
        // own bound starts with its first message, which may take the idle bound to come.
        let send_timeout = Duration::from_secs(config.listeners.send_timeout.get());
        let streams = StreamBounds {
            import: config.limits.import_max() + config.limits.import_idle() + send_timeout,
            export: config.limits.exports(send_timeout).deadline + send_timeout,
        };
        let guard = GuardLayer::new(
            Arc::clone(&node.admission),
            limits,
            streams,
            config.listeners.grpc_max_in_flight.get(),
        );
        let mut traffic = Vec::with_capacity(2);
        if let Some(grpc) = listeners.grpc {
            let grpc_server = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
                .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
                .max_concurrent_streams(config.listeners.grpc_max_streams.get())
                // Small windows bound what a connection can make the node buffer for calls it has
                // not read yet (a refused call's body, say).
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW)
                // Outermost, so that a call the guard refuses is traced with its status.
                .layer(otel::grpc::TraceLayer::new(TRACED_SERVICES))
                .layer(guard)
                .add_service(health_service)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
                .add_service(
                    LinksServer::new(node.links_api()).max_decoding_message_size(limits.batch),
                )
                .serve_with_incoming_shutdown(
                    net::idle::incoming(
                        grpc,
                        Arc::clone(&node.gates.grpc),
                        Duration::from_secs(config.listeners.grpc_idle_timeout.get()),
                        cut_traffic.clone(),
                    ),
                    stop_traffic.clone().cancelled_owned(),
                );
            let grpc_task = tokio::spawn(async move {
                if let Err(error) = grpc_server.await {
                    tracing::error!(%error, "gRPC server failed");
                }
            });
            traffic.push(grpc_task);
        }
        let settings = ServeSettings {
            header_timeout: Duration::from_secs(config.listeners.header_read_timeout.get()),
            drain: config.drain(),
            send_timeout: Duration::from_secs(config.listeners.send_timeout.get()),
            max_head: ServeSettings::head_for(config.redirects.max_url_length),
        };
        let http_task = tokio::spawn(http::serve::serve(
            listeners.http,
            PublicService::new(node.http_state(config)?),
            Arc::clone(&node.gates.public),
            settings,
            stop_traffic.clone(),
        ));
        traffic.push(http_task);
        let stop_admin = CancellationToken::new();
        let admin = listeners.admin.map(|admin| {
            tokio::spawn(http::serve::serve(
                admin,
                OpsService::new(
                    node.ops_state(Duration::from_secs(config.redirects.cache_ttl.get())),
                ),
                Arc::clone(&node.gates.admin),
                ServeSettings {
                    drain: Duration::from_secs(1),
                    ..settings
                },
                stop_admin.clone(),
            ))
        });
        health.set(true).await;
        Ok(Self {
            health,
            stop_traffic,
            cut_traffic,
            traffic,
            stop_admin,
            admin,
        })
    }

    /// Turns readiness off (`/readyz` 503, gRPC health `NOT_SERVING`), serves on for `delay`
    /// (`SHORTENER_SHUTDOWN_DELAY`), then stops accepting traffic and waits up to `drain` (plus
    /// a second) for in-flight requests; past that, cuts the
    /// connections still open (HTTP cuts its own at the same bound) and waits a second more for
    /// their tasks to end. No call is served after this returns. The admin port keeps serving
    /// until [`Servers::stop_admin`].
    pub(super) async fn drain(&mut self, node: &Node, delay: Duration, drain: Duration) {
        node.accepting.store(false, Ordering::SeqCst);
        self.health.set(false).await;
        if !delay.is_zero() {
            // Readiness off, traffic still served: load balancers take the node out first.
            tokio::time::sleep(delay).await;
        }
        self.stop_traffic.cancel();
        let handles: Vec<_> = self.traffic.drain(..).collect();
        let aborts: Vec<_> = handles.iter().map(JoinHandle::abort_handle).collect();
        let mut drained = futures::future::join_all(handles);
        if tokio::time::timeout(drain + Duration::from_secs(1), &mut drained)
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!("drain bound reached; closing remaining calls");
        self.cut_traffic.cancel();
        if tokio::time::timeout(CUT_GRACE, drained).await.is_err() {
            tracing::warn!("a server outlived its cut connections; aborting it");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
    }

    /// Stops the admin port, last.
    pub(super) async fn stop_admin(self) {
        self.stop_admin.cancel();
        if let Some(admin) = self.admin {
            let _ = tokio::time::timeout(Duration::from_secs(1), admin).await;
        }
    }
}
