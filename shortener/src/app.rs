//! Building and running a node: the same code for `main` and for tests.

use crate::admin::{self, AdminState};
use crate::cache::{CacheConfig, LinkCache};
use crate::config::Config;
use crate::grpc::LinksApi;
use crate::http::{self, HttpState};
use crate::limits::{ClientAddressPolicy, Limits, Rate};
use crate::metrics::Metrics;
use crate::service::{LinkService, ServiceSettings};
use crate::setup;
use crate::store::{ListenEvent, Store};
use anyhow::Context;
use axum::http::StatusCode;
use id_client::{IdPool, PoolConfig};
use proto::shortener::v1::links_server::LinksServer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;

/// A node with its listeners bound, ready to [`run`](App::run).
pub struct App {
    config: Config,
    http: TcpListener,
    grpc: TcpListener,
    admin: TcpListener,
    http_state: HttpState,
    admin_state: AdminState,
    banner: String,
}

impl App {
    /// Validates `config`, prepares the store, keys and ID pool, and binds every listener
    /// (port 0 picks a free port).
    pub async fn build(config: Config) -> anyhow::Result<App> {
        config
            .validate()
            .map_err(anyhow::Error::msg)
            .context("validate configuration")?;
        let resources = setup::prepare(&config).await?;

        let http = TcpListener::bind(config.http_addr)
            .await
            .with_context(|| format!("bind HTTP listener {}", config.http_addr))?;
        let grpc = TcpListener::bind(config.grpc_addr)
            .await
            .with_context(|| format!("bind gRPC listener {}", config.grpc_addr))?;
        let admin = TcpListener::bind(config.admin_addr)
            .await
            .with_context(|| format!("bind admin listener {}", config.admin_addr))?;
        let http_addr = http.local_addr().context("read HTTP address")?;

        let public_url = match &config.public_url {
            Some(url) => url.clone(),
            None => format!("http://{}", display_addr(http_addr)),
        };
        let public_url = if public_url.ends_with('/') {
            public_url
        } else {
            format!("{public_url}/")
        };
        let own_host = url::Url::parse(&public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));

        let pool = IdPool::start(
            resources.lease_source,
            PoolConfig {
                min_block: config.min_block,
                max_block: config.max_block,
                initial_block: config.min_block.max(1000).min(config.max_block),
                ..PoolConfig::default()
            },
        );
        let cache = LinkCache::new(CacheConfig {
            max_bytes: config.cache_bytes,
            ttl: Duration::from_secs(config.cache_ttl),
            negative_ttl: Duration::from_millis(config.negative_cache_ttl_ms),
        });
        let service = Arc::new(LinkService::new(
            resources.store,
            cache,
            Arc::new(pool),
            Arc::clone(&resources.space),
            ServiceSettings {
                public_url: public_url.clone(),
                own_host,
                max_url_length: config.max_url_length,
                write_batch: config.write_batch,
                write_concurrency: config.write_concurrency,
            },
        ));
        let metrics = Arc::new(Metrics::new(&service));
        let limits = Arc::new(Limits::new(
            Rate {
                per_second: config.not_found_rate,
                burst: config.not_found_burst,
            },
            Rate {
                per_second: config.create_rate,
                burst: config.create_burst,
            },
        ));
        let client_policy = ClientAddressPolicy {
            header: config
                .client_ip_header
                .as_deref()
                .map(axum::http::HeaderName::try_from)
                .transpose()
                .context("client IP header")?,
            trusted: config.trusted_proxies.clone(),
        };
        let redirect_status =
            StatusCode::from_u16(config.redirect_status).context("redirect status")?;
        let banner = match &resources.generated_api_key_file {
            Some(path) => format!(
                "generated an API key in {path}; try:\n  curl -i -H \"Authorization: Bearer $(head -1 {path})\" -H 'Content-Type: application/json' -d '{{\"url\":\"https://example.com/\"}}' {public_url}api/v1/links",
                path = path.display()
            ),
            None => String::new(),
        };
        Ok(App {
            http,
            grpc,
            admin,
            http_state: HttpState {
                service: Arc::clone(&service),
                keys: Arc::new(resources.api_keys),
                redirect_status,
                limits,
                client_policy: Arc::new(client_policy),
                metrics: Arc::clone(&metrics),
            },
            admin_state: AdminState {
                service,
                accepting: Arc::new(AtomicBool::new(true)),
                metrics,
            },
            banner,
            config,
        })
    }

    /// The bound public HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The bound admin address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The link service (for tests and embedding).
    pub fn service(&self) -> Arc<LinkService> {
        Arc::clone(&self.http_state.service)
    }

    /// Serves until `shutdown` is cancelled; then readiness goes off first (`/readyz` 503, gRPC
    /// health NOT_SERVING) and in-flight requests drain within the configured bound. Pending
    /// click counts are flushed last.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            config,
            http,
            grpc,
            admin,
            http_state,
            admin_state,
            banner,
        } = self;
        let drain = config.drain();
        let service = Arc::clone(&http_state.service);
        let (http_addr, grpc_addr, admin_addr) =
            (http.local_addr()?, grpc.local_addr()?, admin.local_addr()?);

        let background = CancellationToken::new();
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        tasks.push(tokio::spawn({
            let (service, stop) = (Arc::clone(&service), background.clone());
            let interval = Duration::from_millis(config.click_flush_interval_ms);
            async move {
                service
                    .clicks()
                    .run(service.store().clone(), interval, stop)
                    .await
            }
        }));
        tasks.push(tokio::spawn({
            let (limits, stop) = (Arc::clone(&http_state.limits), background.clone());
            async move {
                while tokio::time::timeout(Duration::from_secs(60), stop.cancelled())
                    .await
                    .is_err()
                {
                    limits.housekeeping();
                }
            }
        }));
        if let Store::Postgres(pg) = service.store() {
            let cache = service.cache().clone();
            let stop = background.clone();
            tasks.push(tokio::spawn(pg.clone().listen(
                move |event| match event {
                    ListenEvent::Changed(code) => cache.invalidate(&code),
                    ListenEvent::Reset => cache.clear(),
                },
                stop,
            )));
        }

        let (health, health_service) = tonic_health::server::health_reporter();
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let api = LinksApi {
            service: Arc::clone(&service),
            keys: Arc::clone(&http_state.keys),
            limits: Arc::clone(&http_state.limits),
            metrics: Arc::clone(&http_state.metrics),
            batch_limit: config.batch_limit,
        };
        let grpc_stop = CancellationToken::new();
        let grpc_server = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(reflection().build_v1().context("build reflection v1")?)
            .add_service(
                reflection()
                    .build_v1alpha()
                    .context("build reflection v1alpha")?,
            )
            .add_service(LinksServer::new(api))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true)),
                grpc_stop.clone().cancelled_owned(),
            );
        let grpc_task = tokio::spawn(grpc_server);
        set_health(&health, ServingStatus::Serving).await;

        let accepting = Arc::clone(&admin_state.accepting);
        let http_stop = CancellationToken::new();
        let http_task = tokio::spawn(http::serve::serve(
            http,
            http::Edge::new(http_state),
            Duration::from_secs(config.header_read_timeout),
            http_stop.clone(),
            drain,
        ));
        let admin_stop = CancellationToken::new();
        let admin_task = tokio::spawn({
            let stop = admin_stop.clone();
            async move {
                axum::serve(admin, admin::router(admin_state))
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }
        });

        let ready = service.ids().wait_ready(Duration::from_secs(5)).await;
        tracing::info!(%http_addr, %grpc_addr, %admin_addr, ids_ready = ready, "shortener serving");
        if !banner.is_empty() {
            tracing::info!("{banner}");
        }

        shutdown.cancelled().await;
        tracing::info!(?drain, "shutting down: readiness off, draining");
        accepting.store(false, Ordering::SeqCst);
        set_health(&health, ServingStatus::NotServing).await;
        http_stop.cancel();
        grpc_stop.cancel();
        let drained = async {
            let _ = http_task.await;
            let _ = grpc_task.await;
        };
        if tokio::time::timeout(drain + Duration::from_secs(1), drained)
            .await
            .is_err()
        {
            tracing::warn!("drain bound reached; closing remaining calls");
        }
        background.cancel();
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        admin_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), admin_task).await;
        Ok(())
    }
}

async fn set_health(health: &tonic_health::server::HealthReporter, status: ServingStatus) {
    health
        .set_service_status(
            <LinksServer<LinksApi> as tonic::server::NamedService>::NAME,
            status,
        )
        .await;
    health.set_service_status("", status).await;
}

fn display_addr(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("localhost:{}", addr.port())
    } else {
        addr.to_string()
    }
}
