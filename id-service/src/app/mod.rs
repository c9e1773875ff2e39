//! Building and running a replica: the same code for `main` and for tests.
//!
//! [`App::build`] validates the configuration, loads the callers, migrates and opens the ledger
//! (`startup`), binds the three ports and wires the replica's parts (`parts`). [`App::run`]
//! starts the servers (`servers`) and the tokens-file reloader, waits for the shutdown signal,
//! then drains: readiness off, the shutdown delay, in-flight calls finished within the drain
//! timeout, the admin port last.

mod parts;
mod servers;
mod startup;

pub use startup::migrate;

use crate::config::Config;
use crate::metrics::Metrics;
use anyhow::Context;
use parts::Parts;
use servers::{Listeners, Servers};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A built id-service: callers loaded, database migrated, every port bound, its parts wired,
/// ready to [`App::run`].
pub struct App {
    config: Config,
    parts: Parts,
    listeners: Listeners,
    addrs: Addrs,
    /// The tokens file's text the callers came from (for the reloader).
    tokens_text: Option<String>,
}

/// The bound addresses.
#[derive(Debug, Clone, Copy)]
struct Addrs {
    grpc: SocketAddr,
    http: SocketAddr,
    admin: SocketAddr,
}

impl App {
    /// Validates `config` and loads the tokens file (refusing to go on without one unless
    /// `--insecure-no-auth`), applies pending migrations, creates the configured namespaces and
    /// binds every port (port 0 picks a free one).
    pub async fn build(config: Config) -> anyhow::Result<App> {
        config.validate().context("validate configuration")?;
        config
            .validate_serving()
            .context("validate configuration")?;
        let metrics = Arc::new(Metrics::new());
        let (gate, tokens_text) = startup::load_gate(&config, &metrics)?;
        // No primary among the URL's hosts (an HA cluster between leaders): wait for one.
        pgtls::evict::wait_for_primary(
            "apply migrations",
            || startup::migrate(&config),
            |e: &anyhow::Error| {
                e.chain().any(|c| {
                    c.downcast_ref::<tokio_postgres::Error>()
                        .is_some_and(|e| pgtls::evict::explain_connect(e).is_some())
                })
            },
        )
        .await?;
        let ledger = startup::open_ledger(&config).await?;
        startup::expect_namespaces(&ledger, &metrics).await;
        if let Some(text) = &tokens_text
            && !config.auto_create_namespaces
        {
            startup::warn_of_missing_namespaces(&ledger, text).await;
        }
        let listeners = bind(&config).await?;
        let addrs = listeners.addrs()?;
        let parts = Parts::wire(&config, ledger, metrics, Arc::new(gate))?;
        Ok(App {
            config,
            parts,
            listeners,
            addrs,
            tokens_text,
        })
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.addrs.grpc
    }

    /// The bound address of the JSON endpoint.
    pub fn http_addr(&self) -> SocketAddr {
        self.addrs.http
    }

    /// The bound admin HTTP address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.addrs.admin
    }

    /// Serves until `shutdown` is cancelled, then turns readiness off (gRPC health NOT_SERVING,
    /// `/readyz` 503), keeps accepting for the shutdown delay, stops accepting and lets in-flight
    /// calls finish within the drain timeout. Every port is closed when this returns; the IDs
    /// left in the replica's segments become a gap.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            config,
            parts,
            listeners,
            addrs,
            tokens_text,
        } = self;
        let mut servers = Servers::start(&parts, &config, listeners)?;
        let stop_reload = start_reloader(&parts, &config, tokens_text);
        servers.ready(&parts.metrics).await;
        tracing::info!(
            grpc_addr = %addrs.grpc,
            http_addr = %addrs.http,
            admin_addr = %addrs.admin,
            instance = parts.instance.as_str(),
            "serving"
        );

        if let Some(failure) = servers.until_shutdown(&shutdown).await {
            servers.abandon_admin();
            stop_reload.cancel();
            parts.close();
            return Err(failure);
        }
        servers.drain(&parts, &config).await;
        stop_reload.cancel();
        servers.stop_admin().await;
        parts.close();
        Ok(())
    }
}

/// Binds the three ports of `config`.
async fn bind(config: &Config) -> anyhow::Result<Listeners> {
    let bind = |addr: SocketAddr, what: &'static str| async move {
        TcpListener::bind(addr)
            .await
            .with_context(|| format!("bind the {what} port {addr}"))
    };
    Ok(Listeners {
        grpc: bind(config.grpc_addr, "gRPC").await?,
        http: bind(config.http_addr, "JSON").await?,
        admin: bind(config.admin_addr, "admin").await?,
    })
}

/// Starts re-reading the tokens file (when callers came from one); cancel the token to stop.
fn start_reloader(
    parts: &Parts,
    config: &Config,
    tokens_text: Option<String>,
) -> CancellationToken {
    let stop = CancellationToken::new();
    if let (Some(path), Some(text)) = (config.tokens_file.clone(), tokens_text) {
        // A caller the new file adds may name namespaces that do not exist, as at start.
        let (ledger, warn) = (parts.ledger.clone(), !config.auto_create_namespaces);
        let reloaded = move |text: &str| {
            if warn {
                let (ledger, text) = (ledger.clone(), text.to_string());
                tokio::spawn(async move {
                    startup::warn_of_missing_namespaces(&ledger, &text).await;
                });
            }
        };
        tokio::spawn(crate::auth::reload::watch(
            Arc::clone(&parts.gate),
            (path, text),
            config.tokens_reload_interval,
            Arc::clone(&parts.metrics),
            Box::new(reloaded),
            stop.clone(),
        ));
    }
    stop
}
