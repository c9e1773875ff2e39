//! Configuration from flags and environment variables, validated before anything is bound.
//!
//! Secure by default: every listener binds 127.0.0.1 unless told otherwise, and the service
//! refuses to serve without a tokens file unless started with `--insecure-no-auth`.

mod cli;
mod validate;

pub use cli::{
    Action, AddToken, Cli, Command, DurationError, LogFormat, Secret, TokensCommand,
    parse_duration, parse_pool_mode,
};
pub use validate::ConfigError;

use clap::{ArgAction, Parser};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The default bound of a new namespace: 2^53 - 1, so every ID is exact in a JSON number.
pub const DEFAULT_NAMESPACE_MAX: u64 = (1 << 53) - 1;

/// Everything the id-service needs to start. Build it with clap in `main`, or directly (see
/// [`Config::for_tests`]) in tests.
#[derive(Clone, Parser)]
pub struct Config {
    /// Address of the gRPC port (IdAllocator, NamespaceAdmin, health, reflection).
    #[arg(
        long,
        env = "ID_SERVICE_GRPC_ADDR",
        default_value = "127.0.0.1:50051",
        help_heading = "Listeners"
    )]
    pub grpc_addr: SocketAddr,
    /// Address of the JSON endpoint (POST /v1/namespaces/{ns}/ids:allocate).
    #[arg(
        long,
        env = "ID_SERVICE_HTTP_ADDR",
        default_value = "127.0.0.1:8091",
        help_heading = "Listeners"
    )]
    pub http_addr: SocketAddr,
    /// Address of the admin HTTP port (/healthz, /readyz, /metrics).
    #[arg(
        long,
        env = "ID_SERVICE_ADMIN_ADDR",
        default_value = "127.0.0.1:9091",
        help_heading = "Listeners"
    )]
    pub admin_addr: SocketAddr,
    /// PostgreSQL connection string of the ledger (URL or key=value form); required to serve
    /// or migrate.
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "",
        hide_default_value = true,
        help_heading = "Database"
    )]
    pub database_url: String,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's; used
    /// with `sslmode=require` in DATABASE_URL, which verifies the server's certificate and name.
    #[arg(long, env = "ID_SERVICE_DATABASE_CA_FILE", help_heading = "Database")]
    pub database_ca_file: Option<PathBuf>,
    /// The pooling mode of a pooler between the service and PostgreSQL: `session` (the
    /// default, also without a pooler) or `transaction` (PgBouncer's transaction pooling: the
    /// ledger then prepares nothing that outlives a transaction, and migrations use
    /// ID_SERVICE_DATABASE_DIRECT_URL).
    #[arg(long, env = "ID_SERVICE_DATABASE_POOL_MODE", default_value = "session", value_parser = parse_pool_mode, help_heading = "Database")]
    pub database_pool_mode: pgtls::pooler::PoolMode,
    /// A connection string that reaches the primary itself, not through the pooler: required
    /// with ID_SERVICE_DATABASE_POOL_MODE=transaction, for the migrations and their advisory
    /// lock. A standby there is refused at start-up.
    #[arg(
        long,
        env = "ID_SERVICE_DATABASE_DIRECT_URL",
        hide_env_values = true,
        help_heading = "Database"
    )]
    pub database_direct_url: Option<String>,
    /// The callers and their tokens (TOML; see `id-service tokens add`). Re-read when it
    /// changes and on SIGHUP.
    #[arg(long, env = "ID_SERVICE_TOKENS_FILE", help_heading = "Callers")]
    pub tokens_file: Option<PathBuf>,
    /// How often the tokens file is checked for changes.
    #[arg(long, env = "ID_SERVICE_TOKENS_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_duration, help_heading = "Callers")]
    pub tokens_reload_interval: Duration,
    /// Serve without authentication: anyone who reaches a port may lease, allocate, look up
    /// and manage namespaces under any holder name. For development only.
    #[arg(long, help_heading = "Callers")]
    pub insecure_no_auth: bool,
    /// The single shared token of earlier releases, no longer accepted (see the tokens file).
    #[arg(
        long = "token",
        env = "ID_SERVICE_TOKEN",
        hide = true,
        hide_env_values = true,
        help_heading = "Callers"
    )]
    pub legacy_token: Option<Secret>,
    /// Smallest block granted: smaller requests are rounded up to it.
    #[arg(
        long,
        env = "ID_SERVICE_MIN_BLOCK",
        default_value_t = 1,
        help_heading = "Namespaces and blocks"
    )]
    pub min_block: u64,
    /// Largest block a caller may ask for; larger requests are refused.
    #[arg(
        long,
        env = "ID_SERVICE_MAX_BLOCK",
        default_value_t = 10_000_000,
        help_heading = "Namespaces and blocks"
    )]
    pub max_block: u64,
    /// The highest ID (sequence MAXVALUE) of namespaces created without a bound of their own.
    #[arg(long, env = "ID_SERVICE_NAMESPACE_MAX", default_value_t = DEFAULT_NAMESPACE_MAX, help_heading = "Namespaces and blocks")]
    pub namespace_max: u64,
    /// Namespaces to create at start-up (comma-separated).
    #[arg(
        long,
        env = "ID_SERVICE_NAMESPACES",
        value_delimiter = ',',
        help_heading = "Namespaces and blocks"
    )]
    pub namespaces: Vec<String>,
    /// Whether a call for an unknown (valid) namespace creates it.
    #[arg(long, env = "ID_SERVICE_AUTO_CREATE_NAMESPACES", default_value = "false", value_parser = otel::parse_switch, action = ArgAction::Set, help_heading = "Namespaces and blocks")]
    pub auto_create_namespaces: bool,
    /// The most IDs one AllocateIds call may ask for.
    #[arg(
        long,
        env = "ID_SERVICE_ALLOCATE_MAX_COUNT",
        default_value_t = 10_000,
        help_heading = "AllocateIds"
    )]
    pub allocate_max_count: u64,
    /// The smallest segment a replica leases for AllocateIds (at least the maximum count).
    #[arg(
        long,
        env = "ID_SERVICE_SEGMENT_MIN",
        default_value_t = 10_000,
        help_heading = "AllocateIds"
    )]
    pub segment_min: u64,
    /// The largest segment a replica leases for AllocateIds (never above ID_SERVICE_MAX_BLOCK).
    #[arg(
        long,
        env = "ID_SERVICE_SEGMENT_MAX",
        default_value_t = 10_000_000,
        help_heading = "AllocateIds"
    )]
    pub segment_max: u64,
    /// How long a segment should last at the measured rate.
    #[arg(long, env = "ID_SERVICE_SEGMENT_DURATION", default_value = "30s", value_parser = parse_duration, help_heading = "AllocateIds")]
    pub segment_duration: Duration,
    /// This replica's name in the ledger's holders of its segments (default: host name and
    /// process ID).
    #[arg(long, env = "ID_SERVICE_INSTANCE", help_heading = "Listeners")]
    pub instance: Option<String>,
    /// After a failover or restore: skip at least this many IDs past the ledger's end.
    #[arg(
        long,
        env = "ID_SERVICE_FAILOVER_MARGIN_IDS",
        default_value_t = 1_000_000,
        help_heading = "After a failover"
    )]
    pub failover_margin_ids: u64,
    /// After a failover or restore: skip this many times the largest recent lease, if more.
    #[arg(
        long,
        env = "ID_SERVICE_FAILOVER_MARGIN_LEASES",
        default_value_t = 1000,
        help_heading = "After a failover"
    )]
    pub failover_margin_leases: u64,
    /// The most a caller's reported high water may lie above the cursor (FAILED_PRECONDITION
    /// beyond).
    #[arg(
        long,
        env = "ID_SERVICE_MAX_REPORTED_AHEAD",
        default_value_t = 1_000_000_000,
        help_heading = "After a failover"
    )]
    pub max_reported_ahead: u64,
    /// How long to keep accepting calls after readiness goes off, so that load balancers
    /// (Kubernetes endpoints) stop sending new calls before the port closes.
    #[arg(long, env = "ID_SERVICE_SHUTDOWN_DELAY", default_value = "0s", value_parser = parse_duration, help_heading = "Shutdown and timeouts")]
    pub shutdown_delay: Duration,
    /// How long in-flight calls may take to finish after the port closes.
    #[arg(long, env = "ID_SERVICE_DRAIN_TIMEOUT", default_value = "10s", value_parser = parse_duration, help_heading = "Shutdown and timeouts")]
    pub drain_timeout: Duration,
    /// Deadline of one call on the server side.
    #[arg(long, env = "ID_SERVICE_REQUEST_TIMEOUT", default_value = "5s", value_parser = parse_duration, help_heading = "Shutdown and timeouts")]
    pub request_timeout: Duration,
    /// Maximum number of PostgreSQL connections.
    #[arg(
        long,
        env = "ID_SERVICE_DB_POOL_SIZE",
        default_value_t = 16,
        help_heading = "Database"
    )]
    pub db_pool_size: usize,
    /// How long to wait for a new PostgreSQL connection.
    #[arg(long, env = "ID_SERVICE_DB_CONNECT_TIMEOUT", default_value = "2s", value_parser = parse_duration, help_heading = "Database")]
    pub db_connect_timeout: Duration,
    /// How long a call waits for a free connection before failing with UNAVAILABLE.
    #[arg(long, env = "ID_SERVICE_DB_POOL_TIMEOUT", default_value = "1s", value_parser = parse_duration, help_heading = "Database")]
    pub db_pool_timeout: Duration,
    /// Log format.
    #[arg(long, env = "ID_SERVICE_LOG_FORMAT", value_enum, ignore_case = true, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub log_format: LogFormat,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The database URL may carry a password: never print it.
        f.debug_struct("Config")
            .field("grpc_addr", &self.grpc_addr)
            .field("http_addr", &self.http_addr)
            .field("admin_addr", &self.admin_addr)
            .field("database_url", &"<redacted>")
            .field("database_ca_file", &self.database_ca_file)
            .field("database_pool_mode", &self.database_pool_mode)
            .field(
                "database_direct_url",
                &self.database_direct_url.as_ref().map(|_| "<redacted>"),
            )
            .field("tokens_file", &self.tokens_file)
            .field("tokens_reload_interval", &self.tokens_reload_interval)
            .field("insecure_no_auth", &self.insecure_no_auth)
            .field("legacy_token", &self.legacy_token)
            .field("min_block", &self.min_block)
            .field("max_block", &self.max_block)
            .field("namespace_max", &self.namespace_max)
            .field("namespaces", &self.namespaces)
            .field("auto_create_namespaces", &self.auto_create_namespaces)
            .field("allocate_max_count", &self.allocate_max_count)
            .field("segment_min", &self.segment_min)
            .field("segment_max", &self.segment_max)
            .field("segment_duration", &self.segment_duration)
            .field("instance", &self.instance)
            .field("failover_margin_ids", &self.failover_margin_ids)
            .field("failover_margin_leases", &self.failover_margin_leases)
            .field("max_reported_ahead", &self.max_reported_ahead)
            .field("shutdown_delay", &self.shutdown_delay)
            .field("drain_timeout", &self.drain_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("db_pool_size", &self.db_pool_size)
            .field("db_connect_timeout", &self.db_connect_timeout)
            .field("db_pool_timeout", &self.db_pool_timeout)
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl Config {
    /// A configuration for tests: every port on `127.0.0.1:0`, short timeouts, namespaces
    /// created on first use, and **explicitly insecure** (no tokens file, every call admitted).
    /// Tests of authentication set `tokens_file` and clear `insecure_no_auth`.
    pub fn for_tests(database_url: &str) -> Self {
        Self {
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            database_url: database_url.to_string(),
            database_ca_file: None,
            database_pool_mode: pgtls::pooler::PoolMode::Session,
            database_direct_url: None,
            tokens_file: None,
            tokens_reload_interval: Duration::from_millis(100),
            insecure_no_auth: true,
            legacy_token: None,
            min_block: 1,
            max_block: 10_000_000,
            namespace_max: DEFAULT_NAMESPACE_MAX,
            namespaces: Vec::new(),
            auto_create_namespaces: true,
            allocate_max_count: 10_000,
            segment_min: 10_000,
            segment_max: 10_000_000,
            segment_duration: Duration::from_secs(30),
            instance: Some("test-replica".into()),
            failover_margin_ids: 1_000_000,
            failover_margin_leases: 1000,
            max_reported_ahead: 1_000_000_000,
            shutdown_delay: Duration::ZERO,
            drain_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            db_pool_size: 8,
            db_connect_timeout: Duration::from_secs(1),
            db_pool_timeout: Duration::from_secs(1),
            log_format: LogFormat::Text,
        }
    }
}

#[cfg(test)]
mod tests;
