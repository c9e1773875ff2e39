//! Starting shortener nodes (embedded or PostgreSQL + id-service) configured for benchmarking.

use crate::procs::{PgDatabase, Server, sibling_binary};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use testkit::free_addr;

/// The API key every benchmark node accepts.
pub const API_KEY: &str = "bench-api-key-0123456789abcdef";

/// Where a node keeps its links.
pub enum Backend<'a> {
    /// SQLite in this data directory.
    Embedded(&'a Path),
    /// PostgreSQL at this URL, IDs from this id-service.
    Postgres {
        /// The links database.
        database_url: String,
        /// The id-service's gRPC URL.
        id_service: String,
    },
}

/// How to start a node.
pub struct NodeSpec<'a> {
    /// The store.
    pub backend: Backend<'a>,
    /// The code-space key (hex).
    pub key_hex: String,
    /// Redirect cache bound in bytes.
    pub cache_bytes: u64,
    /// Smallest and largest leased block (None: the defaults).
    pub blocks: Option<(u64, u64)>,
    /// Directory for the log file.
    pub log_dir: PathBuf,
    /// A name for logs.
    pub name: String,
    /// More environment for the node (set after the defaults, so it may override them).
    pub env: Vec<(String, String)>,
}

/// A running node and its addresses.
pub struct Node {
    /// The process.
    pub server: Server,
    /// Public HTTP.
    pub http: SocketAddr,
    /// gRPC.
    pub grpc: SocketAddr,
    /// Admin (`/readyz`, `/metrics`).
    pub admin: SocketAddr,
}

impl Node {
    /// Starts a node and waits until it is ready (store reachable, IDs in hand).
    pub async fn start(spec: NodeSpec<'_>) -> anyhow::Result<Node> {
        let (http, grpc, admin) = (free_addr(), free_addr(), free_addr());
        let mut env: Vec<(String, String)> = vec![
            ("SHORTENER_HTTP_ADDR".into(), http.to_string()),
            ("SHORTENER_GRPC_ADDR".into(), grpc.to_string()),
            ("SHORTENER_ADMIN_ADDR".into(), admin.to_string()),
            ("SHORTENER_KEY".into(), spec.key_hex.clone()),
            ("SHORTENER_API_KEYS".into(), API_KEY.into()),
            ("SHORTENER_PUBLIC_URL".into(), "https://sho.rt/".into()),
            ("SHORTENER_HOLDER".into(), format!("bench-{}", spec.name)),
            ("SHORTENER_CACHE_BYTES".into(), spec.cache_bytes.to_string()),
            // The cache's lifetime is left at its default: an unchanged link is not read again
            // when it ends (docs/shortener.md), so warmed entries outlive the run as they
            // would in production.
            // Abuse limits would otherwise throttle the load generators.
            ("SHORTENER_NOT_FOUND_RATE".into(), "1000000000".into()),
            ("SHORTENER_NOT_FOUND_BURST".into(), "1000000000".into()),
            ("SHORTENER_CREATE_RATE".into(), "1000000000".into()),
            ("SHORTENER_CREATE_BURST".into(), "1000000000".into()),
            // Lists, exports and histories are charged to the read rate.
            ("SHORTENER_READ_RATE".into(), "1000000000".into()),
            ("SHORTENER_READ_BURST".into(), "1000000000".into()),
            ("RUST_LOG".into(), "warn".into()),
        ];
        match &spec.backend {
            Backend::Embedded(dir) => {
                env.push(("SHORTENER_DATA_DIR".into(), dir.display().to_string()));
            }
            Backend::Postgres {
                database_url,
                id_service,
            } => {
                env.push(("DATABASE_URL".into(), database_url.clone()));
                env.push(("SHORTENER_ID_SERVICE".into(), id_service.clone()));
            }
        }
        if let Some((min, max)) = spec.blocks {
            env.push(("SHORTENER_MIN_BLOCK".into(), min.to_string()));
            env.push(("SHORTENER_MAX_BLOCK".into(), max.to_string()));
        }
        env.extend(spec.env.iter().cloned());
        let mut server = Server::spawn(
            &format!("shortener ({})", spec.name),
            &sibling_binary("shortener")?,
            &["serve"],
            &env,
            spec.log_dir.join(format!("shortener-{}.log", spec.name)),
        )?;
        server.wait_http_ok(admin, "/readyz").await?;
        Ok(Node {
            server,
            http,
            grpc,
            admin,
        })
    }

    /// A counter or gauge from `/metrics` (summed over label sets).
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let text = crate::http::get_text(self.admin, "/metrics").await.ok()?;
        let values: Vec<f64> = text
            .lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }
}

/// A running id-service, with its own database unless it was started on one it does not own.
pub struct IdService {
    /// The process (stopped first on drop).
    pub _server: Server,
    /// Its database, when it owns one (dropped after the process stops).
    pub _db: Option<PgDatabase>,
    /// Its gRPC URL.
    pub url: String,
}

impl IdService {
    /// Starts an id-service over a fresh database on the local PostgreSQL.
    pub async fn start(log_dir: &Path) -> anyhow::Result<IdService> {
        let db = PgDatabase::create("ids")?;
        let mut service = Self::start_on(log_dir, &db.url()).await?;
        service._db = Some(db);
        Ok(service)
    }

    /// Starts an id-service over the database at `database_url` (migrated by the service
    /// itself on its first start, kept when it stops: the next one continues its sequence).
    pub async fn start_on(log_dir: &Path, database_url: &str) -> anyhow::Result<IdService> {
        let (grpc, admin) = (free_addr(), free_addr());
        let env: Vec<(String, String)> = vec![
            ("DATABASE_URL".into(), database_url.to_string()),
            ("ID_SERVICE_GRPC_ADDR".into(), grpc.to_string()),
            ("ID_SERVICE_ADMIN_ADDR".into(), admin.to_string()),
            // The JSON port is not used here; port 0 keeps it out of the way.
            ("ID_SERVICE_HTTP_ADDR".into(), "127.0.0.1:0".into()),
            // The nodes' default namespace (the id-service no longer creates one on first use).
            ("ID_SERVICE_NAMESPACES".into(), "links".into()),
            ("RUST_LOG".into(), "warn".into()),
        ];
        let mut server = Server::spawn(
            "id-service",
            &sibling_binary("id-service")?,
            // A benchmark on loopback with a throwaway database: no callers to tell apart.
            &["--insecure-no-auth", "serve"],
            &env,
            log_dir.join("id-service.log"),
        )?;
        server.wait_http_ok(admin, "/readyz").await?;
        Ok(IdService {
            _server: server,
            _db: None,
            url: format!("http://{grpc}"),
        })
    }
}
