//! The system under test as separate processes: a throwaway PostgreSQL cluster, id-service
//! replicas and shortener nodes on loopback ports, with a [`Proxy`] on every link from a node
//! to an id-service and from a node to PostgreSQL so the test can cut them.
//!
//! ```text
//!  clients ──HTTP/gRPC──> node i ──proxy──> id-service A ──┐
//!                           │    ──proxy──> id-service B ──┼──> PostgreSQL (own cluster)
//!                           └────proxy─────────────────────┘
//! ```
//!
//! Everything is killed on drop, also when the test panics.
//!
//! This file is longer than most: [`System`] is one type whose methods are the levers the
//! nemesis pulls (start, kill, restart, cut, heal) over one lifecycle, and splitting them
//! across files would scatter that lifecycle.

use crate::binaries::Binaries;
use crate::database::{Database, DatabaseKind};
use crate::process::Process;
use crate::proxy::{Mode, Proxy};
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// The API key every node accepts and every client sends.
pub const API_KEY: &str = "fault-test-api-key-0123456789";
/// The code-space key shared by every node.
pub const CODE_KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// The ID namespace the nodes lease from.
pub const NAMESPACE: &str = "links";
/// How long a process may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The shape of the system.
#[derive(Debug, Clone)]
pub struct SystemConfig {
    /// Shortener nodes.
    pub nodes: usize,
    /// id-service replicas.
    pub id_services: usize,
    /// `SHORTENER_MIN_BLOCK`.
    pub min_block: u64,
    /// `SHORTENER_MAX_BLOCK`: with the spare block, a node's runway is at most twice this.
    pub max_block: u64,
    /// The PostgreSQL underneath.
    pub database: DatabaseKind,
}

/// Where a node can be reached right now.
#[derive(Debug, Clone, Copy)]
pub struct NodeEndpoint {
    /// Redirects and the JSON API.
    pub http: SocketAddr,
    /// The `shortener.v1.Links` API.
    pub grpc: SocketAddr,
    /// Health, readiness and metrics.
    pub admin: SocketAddr,
    /// How many times the node has been started (its holder name ends in `-r<incarnation>`).
    pub incarnation: u32,
}

/// The nodes' addresses, shared with the workload (a restart may move a node).
#[derive(Debug)]
pub struct Topology {
    nodes: Vec<RwLock<NodeEndpoint>>,
}

impl Topology {
    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `i`'s current endpoint.
    pub fn node(&self, i: usize) -> NodeEndpoint {
        *self.nodes[i].read().expect("topology lock")
    }
}

/// The ledger holder name of incarnation `incarnation` of node `node`.
pub fn holder(node: usize, incarnation: u32) -> String {
    format!("node{node}-r{incarnation}")
}

struct IdService {
    process: Process,
    grpc: SocketAddr,
    admin: SocketAddr,
}

struct Node {
    process: Process,
    id_proxies: Vec<Proxy>,
    /// None when the node connects to a Patroni cluster by its multi-host URL.
    pg_proxy: Option<Proxy>,
}

/// The running system.
pub struct System {
    dir: tempfile::TempDir,
    pg: Database,
    db_url: String,
    id_services: Vec<IdService>,
    nodes: Vec<Node>,
    topology: Arc<Topology>,
    admin_client: reqwest::Client,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl System {
    /// Starts PostgreSQL, the id-services and the nodes, and waits until every node is ready.
    pub async fn start(binaries: &Binaries, config: &SystemConfig) -> anyhow::Result<System> {
        let dir = tempfile::Builder::new()
            .prefix("fault-test-")
            .tempdir()
            .context("create the log directory")?;
        let pg = Database::start(config.database).await;
        let db_url = pg.create_database("links").await;
        let admin_client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .context("build the admin HTTP client")?;

        let mut id_services = Vec::new();
        for i in 0..config.id_services {
            let (grpc, admin) = (
                loopback(testkit::free_port()),
                loopback(testkit::free_port()),
            );
            let process = Process::new(
                &format!("id-service{i}"),
                &binaries.id_service,
                env(&[
                    ("ID_SERVICE_GRPC_ADDR", grpc.to_string()),
                    ("ID_SERVICE_ADMIN_ADDR", admin.to_string()),
                    // Unused here; port 0 keeps the replicas' JSON ports apart.
                    ("ID_SERVICE_HTTP_ADDR", "127.0.0.1:0".into()),
                    ("DATABASE_URL", db_url.clone()),
                    ("ID_SERVICE_NAMESPACES", NAMESPACE.to_string()),
                    ("ID_SERVICE_DB_POOL_SIZE", "4".into()),
                    ("ID_SERVICE_DB_CONNECT_TIMEOUT", "1s".into()),
                    ("RUST_LOG", "info".into()),
                ]),
                dir.path(),
            )
            // The checker attributes leases by the holders the nodes send, unprefixed.
            .with_args(&["--insecure-no-auth"]);
            id_services.push(IdService {
                process,
                grpc,
                admin,
            });
        }

        let mut nodes = Vec::new();
        let mut endpoints = Vec::new();
        for i in 0..config.nodes {
            let mut id_proxies = Vec::new();
            for service in &id_services {
                id_proxies.push(Proxy::start(service.grpc).await?);
            }
            let pg_proxy = match pg.proxied_target() {
                Some(target) => Some(Proxy::start(target).await?),
                None => None,
            };
            let node_db_url = match &pg_proxy {
                Some(proxy) => format!("postgres://postgres@{}/links", proxy.addr()),
                None => db_url.clone(),
            };
            let endpoint = NodeEndpoint {
                http: loopback(testkit::free_port()),
                grpc: loopback(testkit::free_port()),
                admin: loopback(testkit::free_port()),
                incarnation: 0,
            };
            let id_urls: Vec<String> = id_proxies
                .iter()
                .map(|p| format!("http://{}", p.addr()))
                .collect();
            let data_dir = dir.path().join(format!("node{i}-data"));
            let process = Process::new(
                &format!("node{i}"),
                &binaries.shortener,
                env(&[
                    ("DATABASE_URL", node_db_url),
                    ("SHORTENER_ID_SERVICE", id_urls.join(",")),
                    ("SHORTENER_KEY", CODE_KEY.into()),
                    ("SHORTENER_API_KEYS", API_KEY.into()),
                    ("SHORTENER_MIN_BLOCK", config.min_block.to_string()),
                    ("SHORTENER_MAX_BLOCK", config.max_block.to_string()),
                    ("SHORTENER_DATABASE_MAX_CONNECTIONS", "8".into()),
                    ("SHORTENER_DRAIN_TIMEOUT", "2".into()),
                    ("SHORTENER_DATA_DIR", data_dir.display().to_string()),
                    ("RUST_LOG", "info".into()),
                ]),
                dir.path(),
            );
            endpoints.push(RwLock::new(endpoint));
            nodes.push(Node {
                process,
                id_proxies,
                pg_proxy,
            });
        }

        let mut system = System {
            dir,
            pg,
            db_url,
            id_services,
            nodes,
            topology: Arc::new(Topology { nodes: endpoints }),
            admin_client,
        };
        for i in 0..system.id_services.len() {
            system.start_id_service(i).await?;
        }
        for i in 0..system.nodes.len() {
            system.start_node(i).await?;
        }
        Ok(system)
    }

    /// The nodes' addresses, shared with the workload.
    pub fn topology(&self) -> Arc<Topology> {
        Arc::clone(&self.topology)
    }

    /// How many nodes there are.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// How many id-service replicas there are.
    pub fn id_service_count(&self) -> usize {
        self.id_services.len()
    }

    /// The directory holding every process log.
    pub fn log_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the log directory after the system is dropped (for a failed run) and returns it;
    /// on Patroni, the cluster's files too (their directory is printed).
    pub fn keep_logs(&mut self) -> std::path::PathBuf {
        if let Some(cluster) = self.pg.patroni_mut() {
            eprintln!(
                "Patroni cluster files kept in {}",
                cluster.keep_files().display()
            );
        }
        let dir = std::mem::replace(
            &mut self.dir,
            tempfile::tempdir().expect("create a placeholder directory"),
        );
        dir.keep()
    }

    /// The Patroni cluster underneath (panics when the run uses a single cluster).
    pub fn patroni(&mut self) -> &mut testkit::patroni::Patroni {
        self.pg.patroni()
    }

    /// Where id-service replica `i` serves gRPC right now.
    pub fn id_service_grpc(&self, i: usize) -> SocketAddr {
        self.id_services[i].grpc
    }

    /// Where id-service replica `i` serves health and metrics right now.
    pub fn id_service_admin(&self, i: usize) -> SocketAddr {
        self.id_services[i].admin
    }

    /// A direct connection to the links database (not through any proxy).
    pub async fn db(&self) -> anyhow::Result<tokio_postgres::Client> {
        let (client, connection) = tokio_postgres::connect(&self.db_url, tokio_postgres::NoTls)
            .await
            .context("connect to the links database")?;
        tokio::spawn(connection);
        Ok(client)
    }

    async fn start_id_service(&mut self, i: usize) -> anyhow::Result<()> {
        for attempt in 0..3 {
            let service = &mut self.id_services[i];
            if attempt > 0 {
                // The port was taken while the replica was down: move it and its proxies.
                service.grpc = loopback(testkit::free_port());
                service.admin = loopback(testkit::free_port());
                service
                    .process
                    .set_env("ID_SERVICE_GRPC_ADDR", &service.grpc.to_string());
                service
                    .process
                    .set_env("ID_SERVICE_ADMIN_ADDR", &service.admin.to_string());
                for node in &self.nodes {
                    node.id_proxies[i].set_target(service.grpc);
                }
            }
            service.process.spawn()?;
            let admin = service.admin;
            match wait_ready(&self.admin_client, &mut self.id_services[i].process, admin).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < 2 && e.to_string().contains("exited") => {
                    eprintln!("id-service{i} did not start (attempt {attempt}): {e}");
                }
                Err(e) => return Err(e),
            }
        }
        bail!("id-service{i} did not start")
    }

    async fn start_node(&mut self, i: usize) -> anyhow::Result<()> {
        for attempt in 0..3 {
            let mut endpoint = self.topology.node(i);
            if attempt > 0 {
                endpoint.http = loopback(testkit::free_port());
                endpoint.grpc = loopback(testkit::free_port());
                endpoint.admin = loopback(testkit::free_port());
            }
            let process = &mut self.nodes[i].process;
            process.set_env("SHORTENER_HTTP_ADDR", &endpoint.http.to_string());
            process.set_env("SHORTENER_GRPC_ADDR", &endpoint.grpc.to_string());
            process.set_env("SHORTENER_ADMIN_ADDR", &endpoint.admin.to_string());
            process.set_env(
                "SHORTENER_PUBLIC_URL",
                &format!("http://{}/", endpoint.http),
            );
            process.set_env("SHORTENER_HOLDER", &holder(i, process.starts() + 1));
            process.spawn()?;
            endpoint.incarnation = process.starts();
            *self.topology.nodes[i].write().expect("topology lock") = endpoint;
            match wait_ready(&self.admin_client, process, endpoint.admin).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < 2 && e.to_string().contains("exited") => {
                    eprintln!("node{i} did not start (attempt {attempt}): {e}");
                }
                Err(e) => return Err(e),
            }
        }
        bail!("node{i} did not start")
    }

    /// `kill -9` of node `i`.
    pub async fn kill_node(&mut self, i: usize) {
        self.nodes[i].process.kill().await;
    }

    /// Starts node `i` again (a new incarnation with a new holder name) and waits until it is
    /// ready.
    pub async fn restart_node(&mut self, i: usize) -> anyhow::Result<()> {
        self.nodes[i].process.kill().await;
        self.start_node(i).await
    }

    /// `kill -9` of id-service replica `i`.
    pub async fn kill_id_service(&mut self, i: usize) {
        self.id_services[i].process.kill().await;
    }

    /// Starts id-service replica `i` again and waits until it is ready.
    pub async fn restart_id_service(&mut self, i: usize) -> anyhow::Result<()> {
        self.id_services[i].process.kill().await;
        self.start_id_service(i).await
    }

    /// Cuts node `i` off from every id-service replica (or restores it with [`Mode::Open`]).
    pub fn set_id_service_link(&self, i: usize, mode: Mode) {
        for proxy in &self.nodes[i].id_proxies {
            proxy.set_mode(mode);
        }
    }

    /// Cuts node `i` off from PostgreSQL (or restores it with [`Mode::Open`]).
    pub fn set_postgres_link(&self, i: usize, mode: Mode) {
        if let Some(proxy) = &self.nodes[i].pg_proxy {
            proxy.set_mode(mode);
        }
    }

    /// Stops PostgreSQL with an immediate shutdown (like a crash).
    pub async fn crash_postgres(&self) {
        self.pg.single().crash().await;
    }

    /// `kill -9` of the PostgreSQL postmaster (its backends follow).
    pub async fn kill_postgres(&self) {
        self.pg.single().kill().await;
    }

    /// Starts PostgreSQL again after a crash or kill (crash recovery runs).
    pub async fn restart_postgres(&self) {
        self.pg.single().restart().await;
    }

    /// Waits until every node answers `/readyz` with 200 and nothing degraded (store reachable,
    /// IDs in hand): a node that was ready stays ready through an outage, saying `ready,
    /// degraded: ...`, which is not recovered.
    pub async fn wait_all_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        for i in 0..self.nodes.len() {
            let admin = self.topology.node(i).admin;
            let url = format!("http://{admin}/readyz");
            loop {
                if let Ok(r) = self.admin_client.get(&url).send().await
                    && r.status().is_success()
                    && r.text().await.is_ok_and(|body| body.trim() == "ready")
                {
                    break;
                }
                if Instant::now() >= deadline {
                    let body = match self.admin_client.get(&url).send().await {
                        Ok(r) => r.text().await.unwrap_or_default(),
                        Err(e) => e.to_string(),
                    };
                    bail!(
                        "node{i} not ready within {timeout:?}: {}\nlog tail:\n{}",
                        body.trim(),
                        self.nodes[i].process.log_tail(20)
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    /// Processes that exited without being killed by the test, with their log tails.
    pub fn unexpected_exits(&mut self) -> Vec<String> {
        let mut found = Vec::new();
        let processes = self
            .id_services
            .iter_mut()
            .map(|s| &mut s.process)
            .chain(self.nodes.iter_mut().map(|n| &mut n.process));
        for process in processes {
            if let Some(status) = process.exit_status() {
                found.push(format!(
                    "{} exited on its own ({status}); log tail:\n{}",
                    process.name(),
                    process.log_tail(20)
                ));
            }
        }
        found
    }

    /// Log lines of any process that contain one of `needles` (alarms that must never fire).
    pub fn log_lines_containing(&self, needles: &[&str]) -> Vec<String> {
        let processes = self
            .id_services
            .iter()
            .map(|s| &s.process)
            .chain(self.nodes.iter().map(|n| &n.process));
        let mut lines = Vec::new();
        for process in processes {
            for needle in needles {
                for line in process.log_lines_containing(needle) {
                    lines.push(format!("{}: {line}", process.name()));
                }
            }
        }
        lines
    }
}

/// Waits until `process` answers 200 on `/readyz` at `admin`; fails early if it exits.
async fn wait_ready(
    client: &reqwest::Client,
    process: &mut Process,
    admin: SocketAddr,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let url = format!("http://{admin}/readyz");
    loop {
        if let Some(status) = process.exit_status() {
            bail!(
                "{} exited during start-up ({status}); log tail:\n{}",
                process.name(),
                process.log_tail(20)
            );
        }
        if let Ok(r) = client.get(&url).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{} not ready within {START_TIMEOUT:?}; log tail:\n{}",
                process.name(),
                process.log_tail(20)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
