//! Start-up (validate, migrate, bind) and the serve-then-drain lifecycle.

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::domain::{BlockBounds, Namespace};
use crate::grpc::{LeaseService, TokenCheck};
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use proto::idalloc::v1::id_allocator_server::IdAllocatorServer;
use proto::server::Health;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// A built id-service: migrated, with both ports bound, ready to [`App::run`].
pub struct App {
    config: Config,
    ledger: Ledger,
    metrics: Arc<Metrics>,
    grpc_listener: TcpListener,
    admin_listener: TcpListener,
    grpc_addr: SocketAddr,
    admin_addr: SocketAddr,
}

impl App {
    /// Validates `config`, applies pending migrations, creates the configured namespaces and
    /// binds both ports (port 0 picks a free one).
    pub async fn build(config: Config) -> anyhow::Result<App> {
        migrate(&config).await?;
        let ledger = Ledger::new(
            build_pool(&config)?,
            config.namespace_max,
            config.auto_create_namespaces,
        );
        for name in &config.namespaces {
            let namespace = Namespace::parse(name)?;
            ledger
                .ensure_namespace(&namespace)
                .await
                .with_context(|| format!("create namespace {namespace}"))?;
        }
        let grpc_listener = TcpListener::bind(config.grpc_addr)
            .await
            .with_context(|| format!("bind the gRPC port {}", config.grpc_addr))?;
        let admin_listener = TcpListener::bind(config.admin_addr)
            .await
            .with_context(|| format!("bind the admin port {}", config.admin_addr))?;
        Ok(App {
            grpc_addr: grpc_listener
                .local_addr()
                .context("read the gRPC address")?,
            admin_addr: admin_listener
                .local_addr()
                .context("read the admin address")?,
            config,
            ledger,
            metrics: Arc::new(Metrics::new()),
            grpc_listener,
            admin_listener,
        })
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The bound admin HTTP address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves until `shutdown` is cancelled, then turns readiness off (gRPC health NOT_SERVING,
    /// `/readyz` 503), keeps accepting for the shutdown delay, stops accepting and lets in-flight
    /// calls finish within the drain timeout. Both ports are closed when this returns.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            config,
            ledger,
            metrics,
            grpc_listener,
            admin_listener,
            grpc_addr,
            admin_addr,
        } = self;
        let (health, health_service) =
            Health::new(&[<IdAllocatorServer<LeaseService> as tonic::server::NamedService>::NAME]);
        let (reflection_v1, reflection_v1alpha) =
            proto::server::reflection().context("build the reflection services")?;
        let bounds = BlockBounds {
            min: config.min_block,
            max: config.max_block,
        };
        let cut_off = CancellationToken::new();
        let service = LeaseService::new(
            ledger.clone(),
            bounds,
            Arc::clone(&metrics),
            cut_off.clone(),
        );
        let token_check = TokenCheck::new(config.token.as_ref(), Arc::clone(&metrics));

        let stop_grpc = CancellationToken::new();
        let grpc = Server::builder()
            .timeout(config.request_timeout)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(IdAllocatorServer::with_interceptor(service, token_check))
            .serve_with_incoming_shutdown(
                TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
                stop_grpc.clone().cancelled_owned(),
            );
        let mut grpc_task = tokio::spawn(grpc);

        let draining = CancellationToken::new();
        let stop_admin = CancellationToken::new();
        let admin = axum::serve(
            admin_listener,
            admin::router(AdminState {
                ledger: ledger.clone(),
                metrics: Arc::clone(&metrics),
                draining: draining.clone(),
            }),
        )
        .with_graceful_shutdown(stop_admin.clone().cancelled_owned());
        let admin_task = tokio::spawn(admin.into_future());

        health.set(true).await;
        metrics.set_ready(true);
        tracing::info!(%grpc_addr, %admin_addr, "serving");

        let failed = tokio::select! {
            _ = shutdown.cancelled() => None,
            result = &mut grpc_task => Some(result),
        };
        if let Some(result) = failed {
            stop_admin.cancel();
            ledger.pool().close();
            return match result {
                Ok(Ok(())) => Err(anyhow::anyhow!("the gRPC server stopped unexpectedly")),
                Ok(Err(e)) => Err(e).context("serve gRPC"),
                Err(e) => Err(e).context("join the gRPC server"),
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
        match tokio::time::timeout(config.drain_timeout, &mut grpc_task).await {
            Ok(Ok(Ok(()))) => tracing::info!("drained"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "gRPC server ended with an error"),
            Ok(Err(error)) => tracing::warn!(%error, "gRPC server task failed"),
            Err(_) => {
                // Calls still running end with UNAVAILABLE; a lease committed without its
                // reply reaching the caller is a gap, never a duplicate. Connections then
                // close by themselves; health Watch streams are the only calls left open.
                tracing::warn!("drain timeout passed; cutting off calls still in flight");
                cut_off.cancel();
                if tokio::time::timeout(Duration::from_secs(1), &mut grpc_task)
                    .await
                    .is_err()
                {
                    grpc_task.abort();
                    let _ = grpc_task.await;
                }
            }
        }
        stop_admin.cancel();
        match tokio::time::timeout(Duration::from_secs(1), admin_task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "admin server ended with an error"),
            Ok(Err(error)) => tracing::warn!(%error, "admin server task failed"),
            Err(_) => tracing::warn!("admin server did not stop within 1s"),
        }
        ledger.pool().close();
        Ok(())
    }
}

/// Validates `config` like [`App::build`], then applies pending migrations over a dedicated
/// connection; returns the versions applied.
pub async fn migrate(config: &Config) -> anyhow::Result<Vec<i32>> {
    config.validate().context("validate configuration")?;
    let pg = config.pg_config().context("read DATABASE_URL")?;
    let tls = config.tls().context("configure TLS to postgres")?;
    let (mut client, connection) = pg.connect(tls).await.context("connect to postgres")?;
    let connection = tokio::spawn(connection);
    let applied = crate::migrate::apply(&mut client)
        .await
        .context("apply migrations");
    drop(client);
    // The connection ends once the client is dropped; its error (if any) adds nothing here.
    let _ = connection.await;
    applied
}

fn build_pool(config: &Config) -> anyhow::Result<Pool> {
    let mut pg = config.pg_config()?;
    // A call the server gave up on (request timeout) must not keep waiting inside PostgreSQL,
    // for example on a namespace lock an operator holds, and pin a pooled connection there.
    // Migrations use their own connection without this bound: they may queue behind another
    // replica's.
    let mut options = pg.get_options().unwrap_or_default().to_string();
    if !options.contains("statement_timeout") {
        options.push_str(&format!(
            " -c statement_timeout={}",
            config.request_timeout.as_millis()
        ));
    }
    pg.options(options.trim());
    let manager = Manager::from_config(
        pg,
        config.tls()?,
        ManagerConfig {
            // A closed connection is detected without a round trip; a server that died under
            // an open one makes the next query fail with UNAVAILABLE and the pool drops it.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(config.db_pool_size)
        .wait_timeout(Some(config.db_pool_timeout))
        .create_timeout(Some(config.db_connect_timeout))
        .recycle_timeout(Some(config.db_connect_timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .context("build the connection pool")
}
