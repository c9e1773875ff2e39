//! The node's configuration: flags and environment variables, validated before any port is
//! bound (`validate`, which names the setting in every [`ConfigError`]).

mod validate;

pub use validate::ConfigError;

use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where a listener that may be turned off listens: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// Not served at all.
    Off,
    /// Bound at this address (port 0 picks a free port).
    At(SocketAddr),
}

impl Listen {
    /// The address, unless off.
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Listen::Off => None,
            Listen::At(addr) => Some(addr),
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.eq_ignore_ascii_case("off") {
            return Ok(Listen::Off);
        }
        text.parse()
            .map(Listen::At)
            .map_err(|_| format!("{text:?} is neither an address (host:port) nor off"))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Off => f.write_str("off"),
            Listen::At(addr) => addr.fmt(f),
        }
    }
}

/// Configuration of `shortener serve`. Every flag has an environment variable (12-factor).
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Public HTTP listener: redirects (`GET /{code}`) and the JSON API (`/api/v1/...`).
    /// Loopback by default: set `0.0.0.0:8080` to serve other machines (the container image
    /// and the manifests do).
    #[arg(
        long,
        env = "SHORTENER_HTTP_ADDR",
        default_value = "127.0.0.1:8080",
        help_heading = "Listeners and connections"
    )]
    pub http_addr: SocketAddr,
    /// Internal gRPC listener (`shortener.v1.Links`, health, reflection), or `off`.
    #[arg(
        long,
        env = "SHORTENER_GRPC_ADDR",
        default_value = "127.0.0.1:50052",
        help_heading = "Listeners and connections"
    )]
    pub grpc_addr: Listen,
    /// Admin listener: `/healthz`, `/readyz`, `/metrics`; or `off` (embedded mode only: a
    /// distributed node needs its probes).
    #[arg(
        long,
        env = "SHORTENER_ADMIN_ADDR",
        default_value = "127.0.0.1:9090",
        help_heading = "Listeners and connections"
    )]
    pub admin_addr: Listen,
    /// Embedded mode: the directory holding the SQLite file and generated keys.
    #[arg(
        long,
        env = "SHORTENER_DATA_DIR",
        default_value = "data",
        help_heading = "Storage"
    )]
    pub data_dir: PathBuf,
    /// PostgreSQL connection string; set it for the distributed mode (unset: embedded SQLite).
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        help_heading = "Storage"
    )]
    pub database_url: Option<String>,
    /// A streaming replica of DATABASE_URL's database: redirect cache misses, gets, histories,
    /// lists and exports read from it, falling back to the primary for what it has not
    /// replayed yet and whenever it is down.
    #[arg(
        long,
        env = "SHORTENER_DATABASE_READ_URL",
        hide_env_values = true,
        help_heading = "Storage"
    )]
    pub database_read_url: Option<String>,
    /// Most PostgreSQL connections this node opens (to the primary; as many again to a replica).
    #[arg(
        long,
        env = "SHORTENER_DATABASE_MAX_CONNECTIONS",
        default_value_t = 16,
        help_heading = "Storage"
    )]
    pub database_max_connections: usize,
    /// Most milliseconds one PostgreSQL statement may run before the server cancels it (a
    /// lock wait or a runaway plan fails fast instead of holding a connection); migrations and
    /// rollup maintenance lift it for their own statements.
    #[arg(long, env = "SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000),
        help_heading = "Storage"
    )]
    pub database_statement_timeout_ms: u64,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's; used
    /// with `sslmode=require` in DATABASE_URL, which verifies the server's certificate and name.
    #[arg(long, env = "SHORTENER_DATABASE_CA_FILE", help_heading = "Storage")]
    pub database_ca_file: Option<PathBuf>,
    /// id-service addresses, comma-separated (`http://id-service:50051`); required with DATABASE_URL.
    #[arg(
        long,
        env = "SHORTENER_ID_SERVICE",
        value_delimiter = ',',
        help_heading = "IDs and codes"
    )]
    pub id_service: Vec<String>,
    /// Bearer token for the id-service, if it requires one.
    #[arg(
        long,
        env = "SHORTENER_ID_SERVICE_TOKEN",
        hide_env_values = true,
        help_heading = "IDs and codes"
    )]
    pub id_service_token: Option<String>,
    /// The ID namespace this deployment leases from.
    #[arg(
        long,
        env = "SHORTENER_ID_NAMESPACE",
        default_value = "links",
        help_heading = "IDs and codes"
    )]
    pub id_namespace: String,
    /// This node's identity in the lease ledger (default: host name and process id).
    #[arg(long, env = "SHORTENER_HOLDER", help_heading = "IDs and codes")]
    pub holder: Option<String>,
    /// Code-space key file (32 bytes as hex or base64); the same on every node.
    /// Embedded mode default: `<data dir>/code.key`, generated on first start.
    #[arg(long, env = "SHORTENER_KEY_FILE", help_heading = "IDs and codes")]
    pub key_file: Option<PathBuf>,
    /// Code-space key given directly (hex or base64), instead of a file.
    #[arg(
        long,
        env = "SHORTENER_KEY",
        hide_env_values = true,
        conflicts_with = "key_file",
        help_heading = "IDs and codes"
    )]
    pub key: Option<String>,
    /// API keys, comma-separated: raw keys or `sha256:<hex digest>`, each of tenant `default`
    /// with every scope but `admin`.
    #[arg(
        long,
        env = "SHORTENER_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true,
        help_heading = "Access"
    )]
    pub api_keys: Vec<String>,
    /// File of API keys: TOML `[[key]]` tables (tenant, name, sha256 digest, scopes, expiry;
    /// `shortener keys add` writes them), or one key per line (raw or `sha256:<hex>`, tenant
    /// `default`). Re-read when it changes or on SIGHUP. Embedded mode default:
    /// `<data dir>/api-keys`, generated on first start.
    #[arg(long, env = "SHORTENER_API_KEYS_FILE", help_heading = "Access")]
    pub api_keys_file: Option<PathBuf>,
    /// The public base URL of short links (default: `http://<http addr>/`).
    #[arg(
        long,
        env = "SHORTENER_PUBLIC_URL",
        help_heading = "Listeners and connections"
    )]
    pub public_url: Option<String>,
    /// Length L of generated codes (4 to 11).
    #[arg(long, env = "SHORTENER_CODE_LENGTH", default_value_t = codespace::DEFAULT_LENGTH, help_heading = "IDs and codes")]
    pub code_length: usize,
    /// Status of a link whose target domain is on the blocklist: 403, 404, 410 or 451.
    #[arg(
        long,
        env = "SHORTENER_BLOCKED_STATUS",
        default_value_t = 410,
        help_heading = "Redirects and targets"
    )]
    pub blocked_status: u16,
    /// File of blocked target domains, one per line (`example.com`; `.example.com` or
    /// `*.example.com` for a domain and all its subdomains): refused for new links, and
    /// existing links to them answer SHORTENER_BLOCKED_STATUS. Re-read when it changes.
    #[arg(
        long,
        env = "SHORTENER_BLOCKLIST_FILE",
        help_heading = "Redirects and targets"
    )]
    pub blocklist_file: Option<PathBuf>,
    /// Password attempts per minute one client address may make on one protected link.
    #[arg(
        long,
        env = "SHORTENER_PASSWORD_ATTEMPTS",
        default_value_t = 5,
        help_heading = "Access"
    )]
    pub password_attempts: u32,
    /// Serve the web console at `/console/` on the public port (`on` or `off`).
    #[arg(long, env = "SHORTENER_CONSOLE", default_value = "on", value_parser = parse_switch, help_heading = "Access")]
    pub console: bool,
    /// Refuse targets in loopback, link-local, private and unique-local ranges and cloud
    /// metadata host names.
    #[arg(long, env = "SHORTENER_REFUSE_PRIVATE_TARGETS", default_value_t = false, action = clap::ArgAction::Set, help_heading = "Redirects and targets")]
    pub refuse_private_targets: bool,
    /// Other domains this deployment's short links are served under, comma-separated; refused
    /// as targets with their subdomains, as the public URL's host is.
    #[arg(
        long,
        env = "SHORTENER_SHORT_DOMAINS",
        value_delimiter = ',',
        help_heading = "Listeners and connections"
    )]
    pub short_domains: Vec<String>,
    /// Redirect status: 301, 302, 307 or 308.
    #[arg(
        long,
        env = "SHORTENER_REDIRECT_STATUS",
        default_value_t = 302,
        help_heading = "Redirects and targets"
    )]
    pub redirect_status: u16,
    /// Longest accepted target URL, in bytes.
    #[arg(long, env = "SHORTENER_MAX_URL_LENGTH", default_value_t = crate::domain::DEFAULT_MAX_URL_LENGTH, help_heading = "Redirects and targets")]
    pub max_url_length: usize,
    /// Smallest ID block to lease.
    #[arg(
        long,
        env = "SHORTENER_MIN_BLOCK",
        default_value_t = 100,
        help_heading = "IDs and codes"
    )]
    pub min_block: u64,
    /// Largest ID block to lease.
    #[arg(
        long,
        env = "SHORTENER_MAX_BLOCK",
        default_value_t = 100_000,
        help_heading = "IDs and codes"
    )]
    pub max_block: u64,
    /// Seconds to drain in-flight requests on SIGTERM.
    #[arg(
        long,
        env = "SHORTENER_DRAIN_TIMEOUT",
        default_value_t = 20,
        help_heading = "Listeners and connections"
    )]
    pub drain_timeout: u64,
    /// Log format.
    #[arg(long, env = "SHORTENER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub log_format: LogFormat,
    /// Most creates written in one batched insert (one statement, one commit).
    #[arg(
        long,
        env = "SHORTENER_WRITE_BATCH",
        default_value_t = 256,
        help_heading = "Storage"
    )]
    pub write_batch: usize,
    /// Most batched inserts in flight at once on PostgreSQL.
    #[arg(
        long,
        env = "SHORTENER_WRITE_CONCURRENCY",
        default_value_t = 4,
        help_heading = "Storage"
    )]
    pub write_concurrency: usize,
    /// Memory bound of the redirect cache, in bytes.
    #[arg(long, env = "SHORTENER_CACHE_BYTES", default_value_t = 64 * 1024 * 1024, help_heading = "Redirects and targets")]
    pub cache_bytes: u64,
    /// Seconds a cached link is kept (bounds staleness if a change notification is missed).
    #[arg(
        long,
        env = "SHORTENER_CACHE_TTL",
        default_value_t = 60,
        help_heading = "Redirects and targets"
    )]
    pub cache_ttl: u64,
    /// Milliseconds an unknown code is remembered.
    #[arg(
        long,
        env = "SHORTENER_NEGATIVE_CACHE_TTL_MS",
        default_value_t = 2000,
        help_heading = "Redirects and targets"
    )]
    pub negative_cache_ttl_ms: u64,
    /// Milliseconds between click-count flushes (a crash loses at most this much). A flush
    /// writes one row per code clicked since the last, so a longer interval writes less under
    /// skewed traffic.
    #[arg(
        long,
        env = "SHORTENER_CLICK_FLUSH_INTERVAL_MS",
        default_value_t = 5000,
        help_heading = "Clicks and analytics"
    )]
    pub click_flush_interval_ms: u64,
    /// Whether visits are counted by hour, referrer, device and country for the stats API.
    #[arg(long, env = "SHORTENER_ANALYTICS", default_value = "on", value_parser = parse_switch, help_heading = "Clicks and analytics")]
    pub analytics: bool,
    /// Milliseconds between writes of the analytics counters to the rollups. A crash loses at
    /// most this long of analytics (the link totals flush on their own interval); longer means
    /// fewer rollup writes per visit, since a link's visits in one interval share a row. At most
    /// 50 s: the hourly rollup webhook event is recorded a minute after its hour ends.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS",
        default_value_t = 30_000,
        help_heading = "Clicks and analytics"
    )]
    pub analytics_flush_interval_ms: u64,
    /// Most analytics counters held in memory between flushes; visits needing more are left
    /// out of the rollups (the link totals still count them). Past half of it, a tenant makes
    /// new counters only within its fair share, so one tenant cannot fill it for the others.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_MAX_ENTRIES",
        default_value_t = 1_000_000,
        help_heading = "Clicks and analytics"
    )]
    pub analytics_max_entries: usize,
    /// Distinct referrer hosts counted per link and hour; the rest fold into "(other)".
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_REFERRERS_PER_HOUR",
        default_value_t = 100,
        help_heading = "Clicks and analytics"
    )]
    pub analytics_referrers_per_hour: usize,
    /// Hourly rollups older than this many days are compacted into daily ones.
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS",
        default_value_t = 30,
        help_heading = "Clicks and analytics"
    )]
    pub analytics_compact_after_days: u32,
    /// Rollups older than this many days are removed (0: kept forever).
    #[arg(
        long,
        env = "SHORTENER_ANALYTICS_RETENTION_DAYS",
        default_value_t = 400,
        help_heading = "Clicks and analytics"
    )]
    pub analytics_retention_days: u32,
    /// A MaxMind-format (GeoIP2 / GeoLite2 Country or City) database file: visits are counted
    /// by country when set. Re-read when it changes.
    #[arg(
        long,
        env = "SHORTENER_GEOIP_DB",
        help_heading = "Clicks and analytics"
    )]
    pub geoip_db: Option<PathBuf>,
    /// Milliseconds a webhook delivery may take (connect, send, answer).
    #[arg(
        long,
        env = "SHORTENER_WEBHOOK_TIMEOUT_MS",
        default_value_t = 10_000,
        help_heading = "Webhooks"
    )]
    pub webhook_timeout_ms: u64,
    /// Milliseconds before a failed delivery's first retry; each further one doubles it.
    #[arg(
        long,
        env = "SHORTENER_WEBHOOK_RETRY_BASE_MS",
        default_value_t = 1000,
        help_heading = "Webhooks"
    )]
    pub webhook_retry_base_ms: u64,
    /// Failed deliveries in a row after which an endpoint is disabled.
    #[arg(
        long,
        env = "SHORTENER_WEBHOOK_MAX_FAILURES",
        default_value_t = 10,
        help_heading = "Webhooks"
    )]
    pub webhook_max_failures: u32,
    /// Whether webhook URLs may name (or resolve to) loopback, private, link-local or
    /// metadata hosts; the other target rules apply either way.
    #[arg(long, env = "SHORTENER_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set, help_heading = "Webhooks")]
    pub webhook_allow_private: bool,
    /// Days a delivered webhook delivery stays in its endpoint's log before it is purged, with
    /// events no delivery refers to any more (0 keeps them forever).
    #[arg(
        long,
        env = "SHORTENER_WEBHOOK_LOG_DAYS",
        default_value_t = 30,
        help_heading = "Webhooks"
    )]
    pub webhook_log_days: u32,
    /// Pending webhook deliveries a tenant may have. Measured every ten delivery polls: while
    /// a tenant is at the bound its events are dropped (and counted in
    /// `shortener_webhook_events_dropped_total`); the link changes themselves still succeed.
    #[arg(
        long,
        env = "SHORTENER_WEBHOOK_MAX_PENDING",
        default_value_t = 100_000,
        help_heading = "Webhooks"
    )]
    pub webhook_max_pending: u64,
    /// The clock analytics run on (tests set one by hand).
    #[arg(skip)]
    pub clock: crate::clock::Clock,
    /// Sustained 404s per second allowed per client address.
    #[arg(
        long,
        env = "SHORTENER_NOT_FOUND_RATE",
        default_value_t = 5,
        help_heading = "Limits"
    )]
    pub not_found_rate: u32,
    /// Burst of 404s allowed per client address.
    #[arg(
        long,
        env = "SHORTENER_NOT_FOUND_BURST",
        default_value_t = 20,
        help_heading = "Limits"
    )]
    pub not_found_burst: u32,
    /// Sustained creates per second allowed per API key.
    #[arg(
        long,
        env = "SHORTENER_CREATE_RATE",
        default_value_t = 1000,
        help_heading = "Limits"
    )]
    pub create_rate: u32,
    /// Burst of creates allowed per API key (at least the batch limit).
    #[arg(
        long,
        env = "SHORTENER_CREATE_BURST",
        default_value_t = 2000,
        help_heading = "Limits"
    )]
    pub create_burst: u32,
    /// Sustained API reads per second allowed per API key.
    #[arg(
        long,
        env = "SHORTENER_READ_RATE",
        default_value_t = 200,
        help_heading = "Limits"
    )]
    pub read_rate: u32,
    /// Burst of API reads allowed per API key.
    #[arg(
        long,
        env = "SHORTENER_READ_BURST",
        default_value_t = 400,
        help_heading = "Limits"
    )]
    pub read_burst: u32,
    /// Seconds an idempotency key is remembered; a retry after that creates anew.
    #[arg(
        long,
        env = "SHORTENER_IDEMPOTENCY_TTL",
        default_value_t = 86_400,
        help_heading = "Access"
    )]
    pub idempotency_ttl: u64,
    /// Milliseconds between checks of the keys file (and the blocklist) for changes; SIGHUP
    /// re-reads them at once.
    #[arg(
        long,
        env = "SHORTENER_RELOAD_INTERVAL_MS",
        default_value_t = 2000,
        help_heading = "Access"
    )]
    pub reload_interval_ms: u64,
    /// Most links in one batch create.
    #[arg(
        long,
        env = "SHORTENER_BATCH_LIMIT",
        default_value_t = 1000,
        help_heading = "Limits"
    )]
    pub batch_limit: usize,
    /// Seconds a client has to send its request headers.
    #[arg(
        long,
        env = "SHORTENER_HEADER_READ_TIMEOUT",
        default_value_t = 10,
        help_heading = "Listeners and connections"
    )]
    pub header_read_timeout: u64,
    /// A header with the client address chain (e.g. `x-forwarded-for`), trusted only from
    /// SHORTENER_TRUSTED_PROXIES.
    #[arg(
        long,
        env = "SHORTENER_CLIENT_IP_HEADER",
        help_heading = "Listeners and connections"
    )]
    pub client_ip_header: Option<String>,
    /// Networks of trusted proxies, comma-separated CIDRs (e.g. `10.0.0.0/8`).
    #[arg(
        long,
        env = "SHORTENER_TRUSTED_PROXIES",
        value_delimiter = ',',
        help_heading = "Listeners and connections"
    )]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// IPv6 clients are counted by this many leading bits of their address (one host usually
    /// holds a whole /64), for the 404 budget and the connection caps.
    #[arg(
        long,
        env = "SHORTENER_IPV6_PREFIX",
        default_value_t = 64,
        help_heading = "Listeners and connections"
    )]
    pub ipv6_prefix: u8,
    /// Most connections one client address may hold on each listener.
    #[arg(
        long,
        env = "SHORTENER_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = 256,
        help_heading = "Listeners and connections"
    )]
    pub max_connections_per_client: usize,
    /// Open files kept for the public listener alone, so it keeps accepting when the gRPC and
    /// admin listeners are full (0: a quarter of the limit).
    #[arg(
        long,
        env = "SHORTENER_PUBLIC_FD_RESERVE",
        default_value_t = 0,
        help_heading = "Listeners and connections"
    )]
    pub public_fd_reserve: u64,
    /// Seconds a gRPC connection may stay without a call before it is closed.
    #[arg(
        long,
        env = "SHORTENER_GRPC_IDLE_TIMEOUT",
        default_value_t = 300,
        help_heading = "Listeners and connections"
    )]
    pub grpc_idle_timeout: u64,
    /// Most gRPC calls running at once on the node (more get RESOURCE_EXHAUSTED).
    #[arg(
        long,
        env = "SHORTENER_GRPC_MAX_IN_FLIGHT",
        default_value_t = 1024,
        help_heading = "Listeners and connections"
    )]
    pub grpc_max_in_flight: usize,
    /// Most concurrent streams (calls) on one gRPC connection.
    #[arg(
        long,
        env = "SHORTENER_GRPC_MAX_STREAMS",
        default_value_t = 128,
        help_heading = "Listeners and connections"
    )]
    pub grpc_max_streams: u32,
    /// Most exports running at once on the node (more answer 429). Each takes a store
    /// connection only while it reads a page, so at most this many of the pool's connections
    /// serve exports at any moment.
    #[arg(
        long,
        env = "SHORTENER_EXPORT_MAX_CONCURRENT",
        default_value = "4",
        help_heading = "Limits"
    )]
    pub export_max_concurrent: NonZeroUsize,
    /// Most exports running at once for one API key (more answer 429).
    #[arg(
        long,
        env = "SHORTENER_EXPORT_MAX_PER_KEY",
        default_value = "2",
        help_heading = "Limits"
    )]
    pub export_max_per_key: NonZeroUsize,
    /// Seconds a client may take no bytes of a response (an export, any answer) before its
    /// connection is closed; an export whose reader takes no page for this long ends.
    #[arg(
        long,
        env = "SHORTENER_SEND_TIMEOUT",
        default_value = "30",
        help_heading = "Listeners and connections"
    )]
    pub send_timeout: NonZeroU64,
}

impl Config {
    /// A configuration for tests: every listener on 127.0.0.1 port 0, embedded mode in
    /// `data_dir`, the given API key.
    pub fn for_tests(data_dir: PathBuf, api_key: &str) -> Self {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
        Self {
            http_addr: any,
            grpc_addr: Listen::At(any),
            admin_addr: Listen::At(any),
            data_dir,
            database_url: None,
            database_read_url: None,
            database_max_connections: 8,
            database_statement_timeout_ms: 10_000,
            database_ca_file: None,
            id_service: Vec::new(),
            id_service_token: None,
            id_namespace: "links".into(),
            holder: Some("test-node".into()),
            key_file: None,
            key: None,
            api_keys: vec![api_key.to_string()],
            api_keys_file: None,
            public_url: Some("https://sho.rt/".into()),
            code_length: codespace::DEFAULT_LENGTH,
            redirect_status: 302,
            blocked_status: 410,
            blocklist_file: None,
            refuse_private_targets: false,
            console: true,
            password_attempts: 5,
            short_domains: Vec::new(),
            max_url_length: crate::domain::DEFAULT_MAX_URL_LENGTH,
            min_block: 10,
            max_block: 100_000,
            drain_timeout: 5,
            log_format: LogFormat::Text,
            write_batch: 64,
            write_concurrency: 4,
            cache_bytes: 16 * 1024 * 1024,
            cache_ttl: 60,
            negative_cache_ttl_ms: 500,
            click_flush_interval_ms: 200,
            analytics: true,
            analytics_flush_interval_ms: 200,
            analytics_max_entries: 1_000_000,
            analytics_referrers_per_hour: 100,
            analytics_compact_after_days: 30,
            analytics_retention_days: 400,
            geoip_db: None,
            webhook_timeout_ms: 2000,
            webhook_retry_base_ms: 50,
            webhook_max_failures: 10,
            webhook_allow_private: false,
            webhook_log_days: 30,
            webhook_max_pending: 100_000,
            clock: crate::clock::Clock::system(),
            not_found_rate: 1000,
            not_found_burst: 1000,
            create_rate: 100_000,
            create_burst: 100_000,
            read_rate: 100_000,
            read_burst: 100_000,
            idempotency_ttl: 86_400,
            reload_interval_ms: 100,
            batch_limit: 1000,
            header_read_timeout: 10,
            client_ip_header: None,
            trusted_proxies: Vec::new(),
            ipv6_prefix: 64,
            max_connections_per_client: 10_000,
            public_fd_reserve: 0,
            grpc_idle_timeout: 300,
            grpc_max_in_flight: 1024,
            grpc_max_streams: 128,
            export_max_concurrent: NonZeroUsize::new(4).expect("non-zero"),
            export_max_per_key: NonZeroUsize::new(2).expect("non-zero"),
            send_timeout: NonZeroU64::new(30).expect("non-zero"),
        }
    }

    /// The drain bound.
    pub fn drain(&self) -> Duration {
        Duration::from_secs(self.drain_timeout)
    }
}

/// Parses only the serve configuration (flags are not accepted here; environment and defaults).
#[derive(Debug, clap::Parser)]
struct EnvOnly {
    #[command(flatten)]
    config: Config,
}

impl Config {
    /// The configuration from environment variables and defaults, for `shortener` run without a
    /// subcommand.
    pub fn from_env_and_defaults() -> anyhow::Result<Config> {
        use clap::Parser;
        Ok(EnvOnly::try_parse_from(["shortener"])?.config)
    }
}

/// A switch written `on` or `off` (or `true` / `false`).
fn parse_switch(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{text:?} is not on or off")),
    }
}
