//! The node's configuration: flags and environment variables, validated before any port is
//! bound (`validate`, which names the setting in every [`ConfigError`]).
//!
//! About 500 lines: the settings are grouped in the modules below; this file holds the
//! top-level `Config`, its test configuration and the tests that read every setting at once.

mod access;
mod compat;
mod cors;
mod ids;
mod limits;
mod listeners;
mod redirects;
mod store;
mod units;
mod validate;
mod visits;
mod webhooks;

pub use access::AccessConfig;
pub use compat::{CompatConfig, Dialect, Dialects};
pub use cors::CorsOrigins;
pub use ids::IdsConfig;
pub use limits::LimitsConfig;
pub use listeners::ListenerConfig;
pub use redirects::{RedirectConfig, UnknownHosts};
pub use store::{StoreConfig, parse_pool_mode};
pub(crate) use units::parse_bytes;
pub use validate::ConfigError;
pub use visits::VisitsConfig;
pub use webhooks::WebhookConfig;

use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::num::NonZeroU64;
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
        listen_addr(text)
            .map(Listen::At)
            .map_err(|e| format!("{e}, or off"))
    }
}

/// A listener's address: an IP address and port, or `localhost:PORT` (the IPv4 loopback, as
/// people write it; no other name is looked up).
pub(crate) fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        format!("{text:?} is not an IP address and port (127.0.0.1:8080, 0.0.0.0:8080, [::1]:8080)")
    })
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
    /// The listeners and how connections to them are bounded.
    #[command(flatten)]
    pub listeners: ListenerConfig,
    /// Where links live: the embedded SQLite file or PostgreSQL (and a replica).
    #[command(flatten)]
    pub store: StoreConfig,
    /// Where IDs come from and how they become codes.
    #[command(flatten)]
    pub ids: IdsConfig,
    /// Who may use the API and the console.
    #[command(flatten)]
    pub access: AccessConfig,
    /// How redirects answer, what targets are accepted, and the link cache.
    #[command(flatten)]
    pub redirects: RedirectConfig,
    /// How visits are counted: exact totals and the analytics rollups.
    #[command(flatten)]
    pub visits: VisitsConfig,
    /// How webhook events are delivered.
    #[command(flatten)]
    pub webhooks: WebhookConfig,
    /// Rates and caps per caller.
    #[command(flatten)]
    pub limits: LimitsConfig,
    /// Other shorteners' APIs the node speaks.
    #[command(flatten)]
    pub compat: CompatConfig,
    /// Log format.
    #[arg(long, env = "SHORTENER_LOG_FORMAT", value_enum, ignore_case = true, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub log_format: LogFormat,
    /// The clock analytics run on (tests set one by hand).
    #[arg(skip)]
    pub clock: crate::clock::Clock,
}

impl Config {
    /// A configuration for tests: every listener on 127.0.0.1 port 0, embedded mode in
    /// `data_dir`, the given API key.
    pub fn for_tests(data_dir: PathBuf, api_key: &str) -> Self {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
        Self {
            listeners: ListenerConfig {
                http_addr: any,
                grpc_addr: Listen::At(any),
                admin_addr: Listen::At(any),
                public_url: Some("https://sho.rt/".into()),
                short_domains: Vec::new(),
                drain_timeout: 5,
                shutdown_delay: 0,
                header_read_timeout: std::num::NonZero::new(10).expect("non-zero"),
                client_ip_header: None,
                trusted_proxies: Vec::new(),
                ipv6_prefix: 64,
                max_connections_per_client: std::num::NonZero::new(10_000).expect("non-zero"),
                public_fd_reserve: 0,
                grpc_idle_timeout: std::num::NonZero::new(300).expect("non-zero"),
                grpc_max_in_flight: std::num::NonZero::new(1024).expect("non-zero"),
                grpc_max_streams: std::num::NonZero::new(128).expect("non-zero"),
                send_timeout: NonZeroU64::new(30).expect("non-zero"),
            },
            store: StoreConfig {
                data_dir,
                database_url: None,
                database_read_url: None,
                database_pool_mode: Default::default(),
                database_direct_url: None,
                database_max_connections: 8,
                database_statement_timeout_ms: 10_000,
                database_ca_file: None,
                write_batch: 64,
                write_concurrency: 4,
                write_fill: 32,
            },
            ids: IdsConfig {
                id_service: Vec::new(),
                id_service_token: None,
                id_namespace: "links".into(),
                holder: Some("test-node".into()),
                key_file: None,
                key: None,
                code_length: codespace::DEFAULT_LENGTH,
                min_block: 10,
                max_block: 100_000,
            },
            access: AccessConfig {
                api_keys: vec![api_key.to_string()],
                api_keys_file: None,
                console: true,
                password_attempts: 5,
                idempotency_ttl: std::num::NonZero::new(86_400).expect("non-zero"),
                reload_interval_ms: std::num::NonZero::new(100).expect("non-zero"),
                domain_suffixes: Vec::new(),
                audit_retention_days: std::num::NonZero::new(365).expect("non-zero"),
                audit_retention_seconds: None,
                audit_purge_interval_ms: std::num::NonZero::new(3_600_000).expect("non-zero"),
                oidc_issuer: None,
                oidc_client_id: None,
                oidc_client_secret_file: None,
                roles_file: None,
                session_idle_seconds: std::num::NonZero::new(3600).expect("non-zero"),
                session_max_seconds: std::num::NonZero::new(43_200).expect("non-zero"),
            },
            redirects: RedirectConfig {
                redirect_status: axum::http::StatusCode::FOUND,
                blocked_status: axum::http::StatusCode::GONE,
                blocklist_file: None,
                refuse_private_targets: false,
                max_url_length: crate::domain::DEFAULT_MAX_URL_LENGTH,
                cache_bytes: 16 * 1024 * 1024,
                negative_cache_bytes: 1024 * 1024,
                cache_ttl: std::num::NonZero::new(60).expect("non-zero"),
                negative_cache_ttl_ms: 500,
                high_water_reads: std::num::NonZero::new(50).expect("non-zero"),
                unknown_hosts: UnknownHosts::Default,
                domain_metrics: Vec::new(),
            },
            visits: VisitsConfig {
                click_flush_interval_ms: std::num::NonZero::new(200).expect("non-zero"),
                click_max_pending: std::num::NonZero::new(1_000_000).expect("non-zero"),
                analytics: true,
                analytics_flush_interval_ms: std::num::NonZero::new(200).expect("non-zero"),
                analytics_max_entries: std::num::NonZero::new(1_000_000).expect("non-zero"),
                analytics_referrers_per_hour: std::num::NonZero::new(100).expect("non-zero"),
                analytics_compact_after_days: std::num::NonZero::new(30).expect("non-zero"),
                analytics_retention_days: 400,
                geoip_db: None,
            },
            webhooks: WebhookConfig {
                webhook_timeout_ms: std::num::NonZero::new(2000).expect("non-zero"),
                webhook_retry_base_ms: std::num::NonZero::new(50).expect("non-zero"),
                webhook_max_failures: std::num::NonZero::new(10).expect("non-zero"),
                webhook_max_attempts: std::num::NonZero::new(72).expect("non-zero"),
                webhook_allow_private: false,
                webhook_log_days: 30,
                webhook_max_pending: std::num::NonZero::new(100_000).expect("non-zero"),
            },
            limits: LimitsConfig::for_tests(),
            compat: CompatConfig {
                compat: Vec::new(),
                compat_cors_origins: vec!["*".into()],
            },
            log_format: LogFormat::Text,
            clock: crate::clock::Clock::system(),
        }
    }

    /// The node's per-caller limits ([`LimitsConfig::rates`] with the password attempts and the
    /// IPv6 prefix clients are keyed by).
    pub fn rates(&self) -> crate::limits::Limits {
        self.limits
            .rates(self.access.password_attempts, self.listeners.ipv6_prefix)
    }

    /// The drain bound.
    pub fn drain(&self) -> Duration {
        Duration::from_secs(self.listeners.drain_timeout)
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
        EnvOnly::try_parse_from(["shortener"])
            .map(|only| only.config)
            .map_err(|error| {
                let text = match otel::env_refusal(
                    &error,
                    &<EnvOnly as clap::CommandFactory>::command(),
                ) {
                    Some(refusal) => format!("error: {refusal}"),
                    None => error.render().to_string(),
                };
                anyhow::Error::new(UsageError(text.trim_end().to_string()))
            })
    }
}

/// Settings the parser refused, as the text to print (`error: ...`): a usage error, which
/// the binary reports as it is and exits 2 for, as clap does for the command line.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

use otel::parse_switch;

#[cfg(test)]
mod tests {
    use super::EnvOnly;
    use clap::{ArgAction, CommandFactory, Parser};

    /// A cache bound below what one entry weighs turns that cache off, and is said at start;
    /// the defaults say nothing.
    #[test]
    fn caches_bounded_below_one_entry_are_said_to_be_off() {
        let mut config = super::Config::for_tests("/tmp/unused".into(), "k");
        assert!(config.redirects.cache_notices().is_empty());
        for (links, codes, said) in [
            (0, 1 << 20, 1),
            (200, 1 << 20, 1),
            (256, 0, 1),
            (1, 150, 2),
            (4096, 4096, 0),
        ] {
            config.redirects.cache_bytes = links;
            config.redirects.negative_cache_bytes = codes;
            assert_eq!(
                config.redirects.cache_notices().len(),
                said,
                "{links} {codes}"
            );
        }
    }

    /// A setting read from the environment takes a value on the command line as well: one
    /// derived as a bare flag would refuse `--console off` while `SHORTENER_CONSOLE=off` works.
    #[test]
    fn every_setting_with_an_environment_variable_takes_a_value_as_a_flag() {
        let command = EnvOnly::command();
        for arg in command.get_arguments() {
            if arg.get_env().is_some() {
                assert!(
                    !matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse),
                    "--{} is a bare flag but is documented with a value",
                    arg.get_id()
                );
            }
        }
        for (args, console, analytics) in [
            (&["shortener"][..], true, true),
            (
                &["shortener", "--console", "off", "--analytics=off"],
                false,
                false,
            ),
            (
                &["shortener", "--console=on", "--analytics", "no"],
                true,
                false,
            ),
        ] {
            let parsed = EnvOnly::try_parse_from(args).expect("parses");
            assert_eq!(
                (parsed.config.access.console, parsed.config.visits.analytics),
                (console, analytics),
                "{args:?}"
            );
        }
        assert!(EnvOnly::try_parse_from(["shortener", "--console", "maybe"]).is_err());
        // Every switch reads the same spellings.
        let parsed = EnvOnly::try_parse_from([
            "shortener",
            "--refuse-private-targets",
            "on",
            "--webhook-allow-private=YES",
        ])
        .expect("parses");
        assert!(parsed.config.redirects.refuse_private_targets);
        assert!(parsed.config.webhooks.webhook_allow_private);
        let parsed = EnvOnly::try_parse_from(["shortener"]).expect("parses");
        assert!(!parsed.config.redirects.refuse_private_targets);
        assert!(!parsed.config.webhooks.webhook_allow_private);
    }

    /// A setting that takes one of a few words takes it in any case (`SHORTENER_LOG_FORMAT=JSON`,
    /// `SHORTENER_DATABASE_POOL_MODE=Transaction`, as PgBouncer's `pool_mode` may be written).
    #[test]
    fn word_settings_take_any_case() {
        // Every command's, the subcommands' (`migrate`, `layout`, ...) too.
        fn walk(command: &clap::Command, seen: &mut Vec<String>) {
            for arg in command.get_arguments() {
                if arg.get_env().is_some() && !arg.get_possible_values().is_empty() {
                    let name = format!("{} {}", command.get_name(), arg.get_id());
                    assert!(arg.is_ignore_case_set(), "{name} is case-sensitive");
                    seen.push(name);
                }
            }
            command.get_subcommands().for_each(|sub| walk(sub, seen));
        }
        let mut seen = Vec::new();
        walk(&crate::cli::Cli::command(), &mut seen);
        for name in ["migrate log_format", "layout log_format"] {
            assert!(seen.iter().any(|s| s == name), "{name} not in {seen:?}");
        }
        let parsed = EnvOnly::try_parse_from([
            "shortener",
            "--log-format",
            "JSON",
            "--unknown-hosts",
            "Not-Found",
            "--database-pool-mode",
            "Transaction",
        ])
        .expect("parses");
        assert_eq!(parsed.config.log_format, super::LogFormat::Json);
        assert_eq!(
            parsed.config.redirects.unknown_hosts,
            super::UnknownHosts::NotFound
        );
        assert_eq!(
            parsed.config.store.database_pool_mode,
            pgtls::pooler::PoolMode::Transaction
        );
        assert!(EnvOnly::try_parse_from(["shortener", "--log-format", "xml"]).is_err());
    }

    /// Listeners take an IP address and port, `localhost:PORT`, and (where they may be) `off`.
    #[test]
    fn listeners_take_addresses_localhost_and_off() {
        use super::{Listen, listen_addr};
        assert_eq!(
            listen_addr("localhost:8080"),
            Ok(([127, 0, 0, 1], 8080).into())
        );
        assert_eq!(listen_addr("0.0.0.0:80"), Ok(([0, 0, 0, 0], 80).into()));
        assert!(listen_addr("[::1]:9").is_ok());
        for bad in [
            "localhost",
            "example.com:80",
            ":8080",
            "8080",
            "localhost:99999",
        ] {
            let error = listen_addr(bad).expect_err(bad);
            assert!(
                error.contains("is not an IP address and port"),
                "{bad}: {error}"
            );
        }
        assert_eq!("OFF".parse::<Listen>(), Ok(Listen::Off));
        assert!(
            "nowhere"
                .parse::<Listen>()
                .expect_err("nowhere")
                .ends_with(", or off")
        );
    }

    /// Every setting that is a span of time takes one with a unit (`20s`, `2m`, `30d`) besides
    /// a bare number in its own unit, and refuses other text saying what it takes.
    #[test]
    fn every_time_setting_takes_a_unit() {
        let command = EnvOnly::command();
        let mut checked = 0;
        for arg in command.get_arguments() {
            let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
                continue;
            };
            let timed = ["_MS", "_SECONDS", "_DAYS", "_TTL", "_TIMEOUT", "_DELAY"]
                .iter()
                .any(|suffix| env.ends_with(suffix));
            if !timed {
                continue;
            }
            let flag = format!("--{}", arg.get_long().expect("long flag"));
            let error = EnvOnly::try_parse_from(["shortener", &flag, "5 fortnights"])
                .err()
                .unwrap_or_else(|| panic!("{env} took 5 fortnights"));
            assert!(
                error.to_string().contains("not a span of time"),
                "{env}: {error}"
            );
            checked += 1;
        }
        assert!(checked >= 24, "only {checked} time settings found");
        let parsed = EnvOnly::try_parse_from([
            "shortener",
            "--drain-timeout=20s",
            "--cache-ttl=2m",
            "--import-idle-ms=1m",
            "--session-idle-seconds=1h",
            "--analytics-retention-days=400d",
            "--database-statement-timeout-ms=30s",
        ])
        .expect("parses");
        let config = parsed.config;
        assert_eq!(config.listeners.drain_timeout, 20);
        assert_eq!(config.redirects.cache_ttl.get(), 120);
        assert_eq!(config.limits.import_idle_ms.get(), 60_000);
        assert_eq!(config.access.session_idle_seconds.get(), 3600);
        assert_eq!(config.visits.analytics_retention_days, 400);
        assert_eq!(config.store.database_statement_timeout_ms, 30_000);
    }
}
