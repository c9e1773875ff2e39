//! The command line around [`Config`]: subcommands, log format, secrets and durations.

use super::Config;
use clap::parser::ValueSource;
use clap::{
    ArgGroup, ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum,
};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The command line: `id-service [serve]` runs the server, `id-service migrate` only applies
/// migrations, `id-service tokens add` adds a caller to a tokens file. Settings go after
/// `serve` or `migrate`, or before it (`id-service --namespaces links` serves); read what a
/// command line asks for with [`Cli::action_from`].
#[derive(Parser)]
#[command(name = "id-service", version, about, after_help = SERVE_EXAMPLES)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The service configuration.
    #[command(flatten)]
    pub config: Config,
}

/// What one run of the binary does, with the settings it runs with.
pub enum Action {
    /// Serve until SIGTERM or SIGINT.
    Serve(Box<Config>),
    /// Apply pending migrations, then exit.
    Migrate(Box<Config>),
    /// Add a caller to a tokens file.
    AddToken(AddToken),
}

impl Cli {
    /// What `args` (the program's name first) ask for. The settings of `serve` and `migrate`
    /// come from the flags on one side of the subcommand's name, with the environment and the
    /// defaults under them; flags on both sides are refused, since neither side would be
    /// right to drop the other's.
    pub fn action_from<I, T>(args: I) -> Result<Action, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut command = Cli::command();
        let matches = command.try_get_matches_from_mut(args)?;
        let Cli {
            command: chosen,
            config,
        } = Cli::from_arg_matches(&matches)?;
        let before = flags_given(&matches);
        let sub = matches
            .subcommand()
            .map(|(name, sub)| (name, flags_given(sub)));
        if let (Some((name, true)), true) = (sub, before) {
            return Err(command.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "settings on both sides of `{name}`: give them all after it \
                     (`id-service {name} --grpc-addr ...`)"
                ),
            ));
        }
        if before && matches!(chosen, Some(Command::Tokens(_))) {
            return Err(command.error(
                clap::error::ErrorKind::ArgumentConflict,
                "`tokens` takes none of the service's settings: only its own flags, after `tokens add`",
            ));
        }
        Ok(match chosen {
            None => Action::Serve(Box::new(config)),
            Some(Command::Serve(_)) if before => Action::Serve(Box::new(config)),
            Some(Command::Migrate(_)) if before => Action::Migrate(Box::new(config)),
            Some(Command::Serve(config)) => Action::Serve(config),
            Some(Command::Migrate(config)) => Action::Migrate(config),
            Some(Command::Tokens(TokensCommand::Add(add))) => Action::AddToken(add),
        })
    }
}

/// Whether any setting in `matches` (not its subcommand's) was given as a flag.
fn flags_given(matches: &ArgMatches) -> bool {
    matches
        .ids()
        .any(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
}

/// Examples under `id-service --help` and `id-service serve --help`.
const SERVE_EXAMPLES: &str = "Examples:
  DATABASE_URL=postgres://idservice@db:5432/ids ID_SERVICE_TOKENS_FILE=tokens.toml \\
    ID_SERVICE_NAMESPACES=links id-service
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/ids id-service --insecure-no-auth \\
    --namespaces links,orders    # development only: no tokens

A caller's namespaces must exist (ID_SERVICE_NAMESPACES creates them at start); every flag has
the environment variable shown beside it.";

/// Examples under `id-service tokens --help`.
const TOKENS_EXAMPLES: &str = "Examples:
  id-service tokens add --file tokens.toml --name shortener --namespaces links --scopes lease \\
    --ids-per-second 100000
  id-service tokens add --file tokens.toml --name billing --namespaces orders --scopes allocate \\
    --unlimited";

/// The subcommands of [`Cli`].
#[derive(Clone, Subcommand)]
pub enum Command {
    /// Serve gRPC, the JSON endpoint and the admin port until SIGTERM or SIGINT (the default).
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<Config>),
    /// Apply pending database migrations, then exit.
    #[command(
        after_help = "Example:\n  DATABASE_URL=postgres://idservice@db:5432/ids id-service migrate"
    )]
    Migrate(Box<Config>),
    /// Manage the tokens file (needs no database).
    #[command(subcommand, after_help = TOKENS_EXAMPLES)]
    Tokens(TokensCommand),
}

/// `id-service tokens ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum TokensCommand {
    /// Create a caller with a fresh token: prints the token once, appends its digest to FILE.
    #[command(after_help = TOKENS_EXAMPLES)]
    Add(AddToken),
}

/// `id-service tokens add`. A caller gets an IDs quota (`--ids-per-second`) or, explicitly,
/// none (`--unlimited`): a caller without one can take IDs as fast as the ledger grants them.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(group(ArgGroup::new("quota").required(true).args(["ids_per_second", "unlimited"])))]
pub struct AddToken {
    /// The tokens file (created with mode 0600 if missing).
    #[arg(long)]
    pub file: PathBuf,
    /// The caller's name: [a-z][a-z0-9_-]{0,63}, unique in the file.
    #[arg(long)]
    pub name: String,
    /// Namespaces the caller may use, comma-separated (`*`: every namespace).
    #[arg(long, value_delimiter = ',', required = true)]
    pub namespaces: Vec<String>,
    /// Scopes, comma-separated: lease, allocate, lookup, admin.
    #[arg(long, value_delimiter = ',', required = true)]
    pub scopes: Vec<String>,
    /// Quota: IDs per second (leases count their size), for all replicas together.
    #[arg(long)]
    pub ids_per_second: Option<u32>,
    /// Quota: the most IDs at once (default: ten seconds of --ids-per-second).
    #[arg(long)]
    pub ids_burst: Option<u32>,
    /// Quota: leases per second.
    #[arg(long)]
    pub leases_per_second: Option<u32>,
    /// No quota at all: the caller may take IDs as fast as the service grants them. Required to
    /// add a caller without --ids-per-second.
    #[arg(long, conflicts_with_all = ["ids_per_second", "ids_burst", "leases_per_second"])]
    pub unlimited: bool,
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

/// Why a duration setting does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number where one must be (the text as given).
    #[error("{0:?} is not a duration (try 500ms, 10s or 2m)")]
    NotANumber(String),
    /// A unit other than `ms`, `s` or `m`.
    #[error("unknown duration unit {unit:?} in {text:?} (use ms, s, m, h or d)")]
    UnknownUnit {
        /// The unit as given.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// Negative, or too large for a duration.
    #[error("{text:?}: {reason}")]
    OutOfRange {
        /// The whole text.
        text: String,
        /// Why it is out of range.
        reason: std::time::TryFromFloatSecsError,
    },
}

/// Parses `250ms`, `10s`, `2m`, `1h`, `1d` or a bare number of seconds (`2.5s` too).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::NotANumber(text.to_string()))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        other => {
            return Err(DurationError::UnknownUnit {
                unit: other.to_string(),
                text: text.to_string(),
            });
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|reason| DurationError::OutOfRange {
        text: text.to_string(),
        reason,
    })
}

/// Parses `ID_SERVICE_DATABASE_POOL_MODE` (`session` or `transaction`).
pub fn parse_pool_mode(text: &str) -> Result<pgtls::pooler::PoolMode, String> {
    text.trim().parse()
}
