//! Building and running a node: the same code for `main` and for tests.

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::http::{self, HttpState};
use crate::metrics::Metrics;
use crate::service::{LinkService, ServiceSettings};
use crate::setup;
use anyhow::Context;
use axum::http::StatusCode;
use codespace::CodeSpace;
use id_client::{IdPool, PoolConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A node with its listeners bound, ready to [`run`](App::run).
pub struct App {
    http: TcpListener,
    admin: TcpListener,
    http_state: HttpState,
    admin_state: AdminState,
    drain: Duration,
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
        let space = CodeSpace::new(&resources.key, config.code_length)
            .context("configure the code space")?;
        tracing::info!(fingerprint = %resources.key.fingerprint(), length = config.code_length, "code space ready");

        let http = TcpListener::bind(config.http_addr)
            .await
            .with_context(|| format!("bind HTTP listener {}", config.http_addr))?;
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
        let service = Arc::new(LinkService::new(
            resources.store,
            Arc::new(pool),
            Arc::new(space),
            ServiceSettings {
                public_url: public_url.clone(),
                own_host,
                max_url_length: config.max_url_length,
            },
        ));
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
            admin,
            http_state: HttpState {
                service: Arc::clone(&service),
                keys: Arc::new(resources.api_keys),
                redirect_status,
            },
            admin_state: AdminState {
                service,
                accepting: Arc::new(AtomicBool::new(true)),
                metrics: Arc::new(Metrics::default()),
            },
            drain: config.drain(),
            banner,
        })
    }

    /// The bound public HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
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

    /// Serves until `shutdown` is cancelled; then readiness goes off first and in-flight
    /// requests drain within the configured bound.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            http,
            admin,
            http_state,
            admin_state,
            drain,
            banner,
        } = self;
        let http_addr = http.local_addr()?;
        let admin_addr = admin.local_addr()?;
        // Wait briefly for the first block so the banner reflects a working node.
        let ready = http_state
            .service
            .ids()
            .wait_ready(Duration::from_secs(5))
            .await;
        tracing::info!(%http_addr, %admin_addr, ids_ready = ready, "shortener serving");
        if !banner.is_empty() {
            tracing::info!("{banner}");
        }
        let accepting = Arc::clone(&admin_state.accepting);
        let http_stop = CancellationToken::new();
        let admin_stop = CancellationToken::new();
        let http_task = tokio::spawn({
            let stop = http_stop.clone();
            async move {
                axum::serve(http, http::router(http_state))
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }
        });
        let admin_task = tokio::spawn({
            let stop = admin_stop.clone();
            async move {
                axum::serve(admin, admin::router(admin_state))
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }
        });
        shutdown.cancelled().await;
        tracing::info!(drain = ?drain, "shutting down: readiness off, draining");
        accepting.store(false, Ordering::SeqCst);
        http_stop.cancel();
        if tokio::time::timeout(drain, http_task).await.is_err() {
            tracing::warn!("drain bound reached; closing remaining connections");
        }
        admin_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), admin_task).await;
        Ok(())
    }
}

fn display_addr(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("localhost:{}", addr.port())
    } else {
        addr.to_string()
    }
}
