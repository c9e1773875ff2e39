//! Building and running a node: the same code for `main` and for tests.
//!
//! [`App::build`] validates the configuration, opens the store and keys (`resources`), binds
//! the three listeners and wires the node's parts (`node`). [`App::run`] starts the listeners
//! (`servers`) and the background tasks (`tasks`), waits for the shutdown signal, then drains:
//! readiness off, in-flight requests finished within the bound, background work (the last
//! click flush) stopped, the admin port last.

mod banner;
mod lease_source;
mod memory;
mod metrics;
mod node;
mod resources;
mod servers;
mod tasks;

pub use node::Node;
pub use resources::{
    API_KEYS_FILE, DB_FILE, DefaultApiKey, KEY_FILE, Resources, postgres_store, prepare,
};

use crate::config::Config;
use crate::net::{self, Gates, fd::Budget};
use anyhow::Context;
use servers::{Listeners, Servers};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tasks::{Intervals, Stopped, Tasks};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long a background task may take to stop (the last click flush among them).
const TASK_STOP: Duration = Duration::from_secs(5);

/// A node with its listeners bound, ready to [`run`](App::run).
pub struct App {
    config: Config,
    listeners: Listeners,
    addrs: Addrs,
    node: Arc<Node>,
    release: Release,
}

/// Lets go of the store's hold on its data (the embedded file's one-writer lock,
/// [`crate::store::Store::release`]) when dropped: a node that has stopped, or an app built and
/// dropped without running, leaves the file to the next node or tool even while tasks it
/// spawned (an ID pool's refill) still hold the store.
struct Release(crate::store::Store);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// The store's hold while the node stops: let go only by [`let_go`], once nothing of this
/// process may still write. Dropped before that (the task waiting for a background task stuck
/// past its bound is dropped, not finished, when the runtime shuts down), it keeps the hold
/// until the process exits: a task that may still write never shares the file with the next
/// node.
struct Stopping(Option<Release>);

impl Drop for Stopping {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            std::mem::forget(release);
        }
    }
}

/// Lets go of the store's hold once the writes handed to it have landed (the audit log's queue,
/// then [`crate::store::Store::settle`], within [`TASK_STOP`]): the next node or tool on the
/// data directory may start. A store that does not settle in time keeps the hold until the
/// process exits.
async fn let_go(node: &Node, mut stopping: Stopping) {
    // Audit entries handed over by requests the drain cut short go to the store's writer
    // first; then a writer round behind everything queued.
    let settled = async {
        node.audit.settle().await;
        node.store.settle().await;
    };
    if tokio::time::timeout(TASK_STOP, settled).await.is_ok() {
        drop(stopping.0.take());
    } else {
        tracing::warn!(
            "the store's writes did not settle; the data directory stays locked until this process exits"
        );
    }
}

/// The bound addresses: public HTTP always, gRPC and admin unless turned off.
#[derive(Debug, Clone, Copy)]
struct Addrs {
    http: SocketAddr,
    grpc: Option<SocketAddr>,
    admin: Option<SocketAddr>,
}

impl App {
    /// Validates `config`, prepares the store, keys and ID pool, and binds every listener
    /// (port 0 picks a free port).
    pub async fn build(config: Config) -> anyhow::Result<App> {
        config.validate().context("validate configuration")?;
        // The ports first: a start that cannot bind them writes no keys, so the next start
        // is still a first start and says where its key is.
        let bind = |addr: SocketAddr, what: &'static str, var: &'static str, flag: &'static str| async move {
            TcpListener::bind(addr).await.with_context(|| {
                format!(
                    "bind the {what} listener on {addr} (set {var} or --{flag} to a free address)"
                )
            })
        };
        let listeners = Listeners {
            http: bind(
                config.listeners.http_addr,
                "HTTP",
                "SHORTENER_HTTP_ADDR",
                "http-addr",
            )
            .await?,
            grpc: match config.listeners.grpc_addr.addr() {
                Some(addr) => {
                    Some(bind(addr, "gRPC", "SHORTENER_GRPC_ADDR", "grpc-addr (or off)").await?)
                }
                None => None,
            },
            admin: match config.listeners.admin_addr.addr() {
                Some(addr) => {
                    Some(bind(addr, "admin", "SHORTENER_ADMIN_ADDR", "admin-addr (or off)").await?)
                }
                None => None,
            },
        };
        let resources = resources::prepare(&config).await?;
        let local = |listener: &TcpListener| listener.local_addr().context("read a bound address");
        let addrs = Addrs {
            http: local(&listeners.http)?,
            grpc: listeners.grpc.as_ref().map(local).transpose()?,
            admin: listeners.admin.as_ref().map(local).transpose()?,
        };
        let open_files = net::fd::raise_open_files();
        let pool = config
            .store
            .database_url
            .as_ref()
            .map_or(8, |_| config.store.database_max_connections);
        let budget = Budget::split(open_files, pool, config.listeners.public_fd_reserve);
        tracing::info!(
            open_files,
            public = budget.public,
            grpc = budget.grpc,
            admin = budget.admin,
            "connections allowed per listener"
        );
        let gates = Gates::new(
            budget,
            config.listeners.max_connections_per_client.get(),
            config.listeners.ipv6_prefix,
        );
        let bound: Vec<SocketAddr> = [Some(addrs.http), addrs.grpc, addrs.admin]
            .into_iter()
            .flatten()
            .collect();
        let node = Arc::new(Node::wire(&config, resources, &bound, gates)?);
        // The blocked domains kept in the store are in force before the first request.
        node.blocklist
            .sync()
            .await
            .context("read the blocked domains")?;
        // So are the API keys kept in the store.
        node.api_keys
            .sync()
            .await
            .context("read the stored API keys")?;
        Ok(App {
            config,
            listeners,
            addrs,
            release: Release(node.store.clone()),
            node,
        })
    }

    /// The bound public HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.addrs.http
    }

    /// The bound gRPC address (`None` when turned off).
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.addrs.grpc
    }

    /// The bound admin address (`None` when turned off).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.addrs.admin
    }

    /// The node's parts (for tests and embedding: its store, ID pool, counters).
    pub fn node(&self) -> Arc<Node> {
        Arc::clone(&self.node)
    }

    /// Serves until `shutdown` is cancelled; then readiness goes off first (`/readyz` 503, gRPC
    /// health NOT_SERVING) and in-flight requests drain within the configured bound. Pending
    /// click counts are flushed last.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let App {
            config,
            listeners,
            addrs,
            node,
            release,
        } = self;
        let tasks = Tasks::start(
            &node,
            Intervals {
                visits: config.visits.schedule(Duration::from_millis(
                    config.access.reload_interval_ms.get(),
                )),
                reload: Duration::from_millis(config.access.reload_interval_ms.get()),
            },
        );
        let mut servers = Servers::start(&node, &config, listeners).await?;
        let ready = node.ids.wait_ready(Duration::from_secs(5)).await;
        let shown = |addr: Option<SocketAddr>| addr.map_or("off".to_string(), |a| a.to_string());
        tracing::info!(
            http_addr = %addrs.http,
            grpc_addr = %shown(addrs.grpc),
            admin_addr = %shown(addrs.admin),
            ids_ready = ready,
            "shortener serving"
        );
        if !ready {
            // Creates answer 503 and readiness fails until a lease arrives; say why once here
            // (each failed lease is logged too).
            tracing::warn!("serving without IDs: {}", node.ids.shortage());
        }
        for notice in config.redirects.cache_notices() {
            tracing::warn!("{notice}");
        }
        tracing::info!("{}", banner::banner(&node, &config, addrs.http));

        shutdown.cancelled().await;
        let drain = config.drain();
        let delay = Duration::from_secs(config.listeners.shutdown_delay);
        tracing::info!(
            delay_seconds = delay.as_secs(),
            drain_seconds = drain.as_secs(),
            "shutting down: readiness off, then draining"
        );
        servers.drain(&node, delay, drain).await;
        let stopping = Stopping(Some(release));
        // An import's writing stage outlives its cut transport by the chunk in flight and
        // that chunk's audit entry: waited for beside the tasks, within the same bound.
        let (settled, stopped) =
            tokio::join!(node.links.imports_settled(TASK_STOP), tasks.stop(TASK_STOP));
        servers.stop_admin().await;
        match stopped {
            Stopped::Ended { aborted } => {
                warn_unwritten(&node, aborted);
                if settled {
                    let_go(&node, stopping).await;
                } else {
                    // An import still writing keeps the file this process's until it ends.
                    tracing::warn!(
                        "an import was still writing when the node stopped; the data directory stays locked until it ends or this process exits"
                    );
                    let node = Arc::clone(&node);
                    tokio::spawn(async move {
                        while !node.links.imports_settled(TASK_STOP).await {}
                        let_go(&node, stopping).await;
                    });
                }
            }
            Stopped::Running(handles) => {
                // A task that may still write keeps the file this process's until it ends.
                tracing::warn!(
                    tasks = handles.len(),
                    "background tasks are still running; the data directory stays locked until they end or this process exits"
                );
                let node = Arc::clone(&node);
                tokio::spawn(async move {
                    for handle in handles {
                        let _ = handle.await;
                    }
                    let_go(&node, stopping).await;
                });
            }
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Warns of the counts a stop could not write: those a last flush the store kept refusing left
/// in the map or in a batch in doubt, and those of `aborted` tasks; either way they are lost
/// with the process.
fn warn_unwritten(node: &Node, aborted: usize) {
    let clicks = node.visits.clicks().unwritten_codes();
    let rollups = node.visits.analytics().unwritten();
    if aborted > 0 || clicks > 0 || rollups > 0 {
        tracing::warn!(
            aborted,
            unwritten_click_codes = clicks,
            unwritten_rollup_counters = rollups,
            "counts not written before the stop are lost"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SqliteStore, Store};
    use codespace::{CodeKey, CodeSpace};

    fn open(path: &std::path::Path) -> Result<SqliteStore, crate::store::StoreError> {
        let space = CodeSpace::new(&CodeKey::generate(), codespace::DEFAULT_LENGTH).expect("space");
        SqliteStore::open(path, Arc::new(space), 64)
    }

    /// A runtime shutting down drops the task that waits for a stuck background task before
    /// it lets go: the file stays this process's, and a second writer is still refused. Let
    /// go as it should be, the file is free.
    #[test]
    fn a_stop_dropped_before_it_lets_go_keeps_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("links.db");
        let store = open(&path).expect("open");
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let stopping = Stopping(Some(Release(Store::Sqlite(store.clone()))));
        runtime.spawn(async move {
            // A background task that never ends, then the let-go it never reaches.
            std::future::pending::<()>().await;
            drop(stopping);
        });
        drop(runtime);
        assert!(open(&path).is_err(), "a second writer beside a stuck task");

        let other = tempfile::tempdir().expect("tempdir");
        let path = other.path().join("links.db");
        let store = open(&path).expect("open");
        let mut stopping = Stopping(Some(Release(Store::Sqlite(store))));
        drop(stopping.0.take());
        open(&path).expect("let go, the file is free");
    }
}
