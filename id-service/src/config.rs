//! Configuration from flags and environment variables, validated before anything is bound.

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::domain::Namespace;

/// The default bound of a new namespace: 2^53 - 1, so every ID is exact in a JSON number.
pub const DEFAULT_NAMESPACE_MAX: u64 = (1 << 53) - 1;

/// The command line: `id-service [serve]` runs the server, `id-service migrate` only applies
/// migrations.
#[derive(Debug, Parser)]
#[command(name = "id-service", version, about)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The service configuration.
    #[command(flatten)]
    pub config: Config,
}

/// The subcommands of [`Cli`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Serve gRPC and the admin port until SIGTERM or SIGINT (the default).
    Serve,
    /// Apply pending database migrations, then exit.
    Migrate,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A secret that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Everything the id-service needs to start. Build it with clap in `main`, or directly (see
/// [`Config::for_tests`]) in tests.
#[derive(Clone, Parser)]
pub struct Config {
    /// Address of the gRPC port (IdAllocator, health, reflection).
    #[arg(long, env = "ID_SERVICE_GRPC_ADDR", default_value = "0.0.0.0:50051")]
    pub grpc_addr: SocketAddr,
    /// Address of the admin HTTP port (/healthz, /readyz, /metrics).
    #[arg(long, env = "ID_SERVICE_ADMIN_ADDR", default_value = "0.0.0.0:9091")]
    pub admin_addr: SocketAddr,
    /// PostgreSQL connection string of the ledger (URL or key=value form).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's; used
    /// with `sslmode=require` in DATABASE_URL, which verifies the server's certificate and name.
    #[arg(long, env = "ID_SERVICE_DATABASE_CA_FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// Smallest block granted: smaller requests are rounded up to it.
    #[arg(long, env = "ID_SERVICE_MIN_BLOCK", default_value_t = 1)]
    pub min_block: u64,
    /// Largest block a caller may ask for; larger requests are refused.
    #[arg(long, env = "ID_SERVICE_MAX_BLOCK", default_value_t = 10_000_000)]
    pub max_block: u64,
    /// The highest ID (sequence MAXVALUE) of namespaces created from now on.
    #[arg(long, env = "ID_SERVICE_NAMESPACE_MAX", default_value_t = DEFAULT_NAMESPACE_MAX)]
    pub namespace_max: u64,
    /// Namespaces to create at start-up (comma-separated).
    #[arg(long, env = "ID_SERVICE_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Whether a lease for an unknown (valid) namespace creates it.
    #[arg(long, env = "ID_SERVICE_AUTO_CREATE_NAMESPACES", default_value_t = true, action = ArgAction::Set)]
    pub auto_create_namespaces: bool,
    /// If set, IdAllocator calls must carry `authorization: Bearer <token>`.
    #[arg(long, env = "ID_SERVICE_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,
    /// How long to keep accepting calls after readiness goes off, so that load balancers
    /// (Kubernetes endpoints) stop sending new calls before the port closes.
    #[arg(long, env = "ID_SERVICE_SHUTDOWN_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,
    /// How long in-flight calls may take to finish after the port closes.
    #[arg(long, env = "ID_SERVICE_DRAIN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Deadline of one gRPC call on the server side.
    #[arg(long, env = "ID_SERVICE_REQUEST_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Maximum number of PostgreSQL connections.
    #[arg(long, env = "ID_SERVICE_DB_POOL_SIZE", default_value_t = 16)]
    pub db_pool_size: usize,
    /// How long to wait for a new PostgreSQL connection.
    #[arg(long, env = "ID_SERVICE_DB_CONNECT_TIMEOUT", default_value = "2s", value_parser = parse_duration)]
    pub db_connect_timeout: Duration,
    /// How long a call waits for a free connection before failing with UNAVAILABLE.
    #[arg(long, env = "ID_SERVICE_DB_POOL_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub db_pool_timeout: Duration,
    /// Log format.
    #[arg(long, env = "ID_SERVICE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The database URL may carry a password: never print it.
        f.debug_struct("Config")
            .field("grpc_addr", &self.grpc_addr)
            .field("admin_addr", &self.admin_addr)
            .field("database_url", &"<redacted>")
            .field("database_ca_file", &self.database_ca_file)
            .field("min_block", &self.min_block)
            .field("max_block", &self.max_block)
            .field("namespace_max", &self.namespace_max)
            .field("namespaces", &self.namespaces)
            .field("auto_create_namespaces", &self.auto_create_namespaces)
            .field("token", &self.token)
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

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `DATABASE_URL` is not a PostgreSQL connection string.
    #[error("DATABASE_URL is not a valid PostgreSQL connection string: {0}")]
    DatabaseUrl(String),
    /// The block bounds are inconsistent.
    #[error("block bounds: {0}")]
    Blocks(String),
    /// A listed namespace name is malformed.
    #[error("ID_SERVICE_NAMESPACES: {0}")]
    Namespace(String),
    /// The CA file is unusable, or does not fit the connection string's `sslmode`.
    #[error("ID_SERVICE_DATABASE_CA_FILE: {0}")]
    DatabaseTls(pgtls::Error),
    /// Another setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// A configuration for tests: both ports on `127.0.0.1:0`, short timeouts, no token.
    pub fn for_tests(database_url: &str) -> Self {
        Self {
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            database_url: database_url.to_string(),
            database_ca_file: None,
            min_block: 1,
            max_block: 10_000_000,
            namespace_max: DEFAULT_NAMESPACE_MAX,
            namespaces: Vec::new(),
            auto_create_namespaces: true,
            token: None,
            shutdown_delay: Duration::ZERO,
            drain_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            db_pool_size: 8,
            db_connect_timeout: Duration::from_secs(1),
            db_pool_timeout: Duration::from_secs(1),
            log_format: LogFormat::Text,
        }
    }

    /// Checks every setting; called by [`crate::App::build`] before any port is bound.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.tls()?;
        if self.min_block == 0 {
            return Err(ConfigError::Blocks(
                "ID_SERVICE_MIN_BLOCK must be at least 1".into(),
            ));
        }
        if self.min_block > self.max_block {
            return Err(ConfigError::Blocks(format!(
                "ID_SERVICE_MIN_BLOCK ({}) is above ID_SERVICE_MAX_BLOCK ({})",
                self.min_block, self.max_block
            )));
        }
        // One below i64::MAX so that "one past the last ID" still fits PostgreSQL's bigint.
        let ceiling = i64::MAX as u64 - 1;
        if self.namespace_max == 0 || self.namespace_max > ceiling {
            return Err(ConfigError::Invalid(format!(
                "ID_SERVICE_NAMESPACE_MAX must be within 1..={ceiling}, got {}",
                self.namespace_max
            )));
        }
        if self.max_block > self.namespace_max {
            return Err(ConfigError::Blocks(format!(
                "ID_SERVICE_MAX_BLOCK ({}) is above ID_SERVICE_NAMESPACE_MAX ({})",
                self.max_block, self.namespace_max
            )));
        }
        for name in &self.namespaces {
            Namespace::parse(name).map_err(|e| ConfigError::Namespace(e.to_string()))?;
        }
        if let Some(token) = &self.token {
            let ok =
                !token.expose().is_empty() && token.expose().bytes().all(|b| b.is_ascii_graphic());
            if !ok {
                return Err(ConfigError::Invalid(
                    "ID_SERVICE_TOKEN must be non-empty printable ASCII without spaces".into(),
                ));
            }
        }
        if self.db_pool_size == 0 {
            return Err(ConfigError::Invalid(
                "ID_SERVICE_DB_POOL_SIZE must be at least 1".into(),
            ));
        }
        for (name, value) in [
            ("ID_SERVICE_DRAIN_TIMEOUT", self.drain_timeout),
            ("ID_SERVICE_REQUEST_TIMEOUT", self.request_timeout),
            ("ID_SERVICE_DB_CONNECT_TIMEOUT", self.db_connect_timeout),
            ("ID_SERVICE_DB_POOL_TIMEOUT", self.db_pool_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::Invalid(format!("{name} must be above zero")));
            }
        }
        Ok(())
    }

    /// The PostgreSQL client settings: the URL plus our connect timeout and keepalives.
    pub fn pg_config(&self) -> Result<tokio_postgres::Config, ConfigError> {
        let mut pg: tokio_postgres::Config = self
            .database_url
            .parse()
            .map_err(|e: tokio_postgres::Error| ConfigError::DatabaseUrl(e.to_string()))?;
        if pg.get_hosts().is_empty() {
            return Err(ConfigError::DatabaseUrl("no host given".into()));
        }
        pg.connect_timeout(self.db_connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if pg.get_application_name().is_none() {
            pg.application_name("id-service");
        }
        Ok(pg)
    }
}

impl Config {
    /// The TLS connector for the ledger's connections, following DATABASE_URL's `sslmode`
    /// (see [`pgtls::connector`]). Reads the CA file, so a bad one is refused at start-up.
    pub fn tls(&self) -> Result<pgtls::MakeRustlsConnect, ConfigError> {
        if let Some(path) = &self.database_ca_file {
            pgtls::load_ca_file(path).map_err(ConfigError::DatabaseTls)?;
        }
        pgtls::connector(&self.pg_config()?, self.database_ca_file.as_deref())
            .map_err(ConfigError::DatabaseTls)
    }
}

/// Parses `250ms`, `10s`, `2m` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 500ms, 10s or 2m)"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {text:?} (use ms, s or m)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_or_without_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5h").is_err());
    }

    #[test]
    fn defaults_come_from_the_documented_environment() {
        let cli = Cli::try_parse_from(["id-service", "--database-url", "postgres://u@h/db"])
            .expect("parse");
        assert_eq!(cli.command, None);
        assert_eq!(cli.config.grpc_addr.to_string(), "0.0.0.0:50051");
        assert_eq!(cli.config.admin_addr.to_string(), "0.0.0.0:9091");
        assert!(cli.config.auto_create_namespaces);
        cli.config.validate().expect("defaults are valid");
        let cli =
            Cli::try_parse_from(["id-service", "--database-url", "postgres://h/db", "migrate"])
                .expect("parse");
        assert_eq!(cli.command, Some(Command::Migrate));
    }

    #[test]
    fn inconsistent_settings_are_refused_with_a_reason() {
        let base = Config::for_tests("postgres://postgres@127.0.0.1/x");
        base.validate().expect("test config is valid");
        let cases: Vec<(&str, Config)> = vec![
            (
                "min above max",
                Config {
                    min_block: 10,
                    max_block: 5,
                    ..base.clone()
                },
            ),
            (
                "min zero",
                Config {
                    min_block: 0,
                    ..base.clone()
                },
            ),
            (
                "bad url",
                Config {
                    database_url: "postgres://h:notaport/x".into(),
                    ..base.clone()
                },
            ),
            (
                "no host",
                Config {
                    database_url: "dbname=x".into(),
                    ..base.clone()
                },
            ),
            (
                "missing CA file",
                Config {
                    database_url: "postgres://h/x?sslmode=require".into(),
                    database_ca_file: Some("/nonexistent/ca.pem".into()),
                    ..base.clone()
                },
            ),
            (
                "CA file without certificates",
                Config {
                    database_ca_file: Some("/etc/hostname".into()),
                    ..base.clone()
                },
            ),
            (
                "bad namespace",
                Config {
                    namespaces: vec!["Links".into()],
                    ..base.clone()
                },
            ),
            (
                "huge bound",
                Config {
                    namespace_max: u64::MAX,
                    ..base.clone()
                },
            ),
            (
                "empty token",
                Config {
                    token: Some(Secret(String::new())),
                    ..base.clone()
                },
            ),
            (
                "no pool",
                Config {
                    db_pool_size: 0,
                    ..base.clone()
                },
            ),
            (
                "zero drain",
                Config {
                    drain_timeout: Duration::ZERO,
                    ..base.clone()
                },
            ),
        ];
        for (case, config) in cases {
            let err = config.validate().expect_err(case);
            assert!(!err.to_string().is_empty(), "{case}");
        }
    }

    #[test]
    fn debug_output_hides_secrets() {
        let config = Config {
            token: Some(Secret("hunter2".into())),
            ..Config::for_tests("postgres://u:pa55word@h/db")
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("pa55word"),
            "{shown}"
        );
    }
}
