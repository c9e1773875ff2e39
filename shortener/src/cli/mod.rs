//! The command line of the `shortener` binary: serving is the default; `migrate`, `codes`,
//! `keygen`, `keys`, `layout` and the benchmark's `preload` are the operator's tools.

pub mod codes;
pub mod keys;
pub mod layout;
pub mod migrate;
pub mod preload;

use clap::{Args, Parser, Subcommand};
use codes::Direction;
use std::path::PathBuf;

/// URL shortener node. With no subcommand it serves (see `shortener serve --help`).
#[derive(Debug, Parser)]
#[command(
    name = "shortener",
    version,
    about,
    args_conflicts_with_subcommands = true,
    after_help = SERVE_EXAMPLES
)]
pub struct Cli {
    /// What to do; serving is the default.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Warns of each `SHORTENER_*` variable no setting reads (a misspelled one would otherwise
/// leave its default in force without a word), and refuses `SHORTENER_DATABASE_URL` when
/// `database_url` (`DATABASE_URL`) is unset: the node would run on the embedded store while
/// its operator meant PostgreSQL.
pub fn check_environment(database_url: Option<&str>) -> anyhow::Result<()> {
    if database_url.is_none() && std::env::var_os("SHORTENER_DATABASE_URL").is_some() {
        return Err(anyhow::Error::new(crate::config::UsageError(
            "error: SHORTENER_DATABASE_URL is set, but a node reads its database from \
             DATABASE_URL; without it the node would serve from the embedded store in \
             SHORTENER_DATA_DIR. Set DATABASE_URL (or unset SHORTENER_DATABASE_URL)"
                .into(),
        )));
    }
    otel::warn_of_unread(
        "SHORTENER_",
        &<Cli as clap::CommandFactory>::command(),
        "shortener serve --help",
    );
    Ok(())
}

/// Examples under `shortener serve --help` (and `shortener --help`).
const SERVE_EXAMPLES: &str = "Examples:
  shortener                                  # embedded: SQLite in ./data, http://127.0.0.1:8080/
  SHORTENER_HTTP_ADDR=0.0.0.0:8080 shortener # serve other machines too
  SHORTENER_GRPC_ADDR=off SHORTENER_ADMIN_ADDR=off shortener   # HTTP only (embedded)
  DATABASE_URL=postgres://shortener@db:5432/links SHORTENER_ID_SERVICE=http://id-service:50051 \\
    SHORTENER_ID_SERVICE_TOKEN=idsvc_... SHORTENER_KEY_FILE=code.key \\
    SHORTENER_API_KEYS_FILE=keys.toml SHORTENER_PUBLIC_URL=https://sho.rt/ shortener serve

Every flag has the environment variable shown beside it; `--help` describes each one.";

/// Examples under `shortener keys --help`.
pub(crate) const KEYS_EXAMPLES: &str = "Examples:
  shortener keys add --file keys.toml --tenant default --name ci --scopes links:create,links:read
  shortener keys add --file keys.toml --tenant default --name admin --scopes admin
  shortener keys yourls-token --file keys.toml --tenant default --name ci --key-file code.key";

/// Examples under `shortener keys yourls-token --help`.
pub(crate) const YOURLS_TOKEN_EXAMPLES: &str = "Examples:
  shortener keys yourls-token --file keys.toml --tenant default --name ci --key-file code.key
  shortener keys yourls-token --file data/api-keys --key-file data/code.key   # embedded mode";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve redirects, the JSON API and the admin endpoints (the default).
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<crate::config::Config>),
    /// Apply the schema migrations to the configured store and exit.
    #[command(after_help = "Examples:\n  \
        DATABASE_URL=postgres://shortener@db:5432/links shortener migrate\n  \
        shortener migrate --data-dir ./data    # the embedded SQLite file (a start migrates it too)")]
    Migrate(migrate::MigrateArgs),
    /// Map IDs to codes and back with a code-space key.
    #[command(after_help = "Examples:\n  \
        shortener codes encode --key-file data/code.key 1 2 3\n  \
        echo 3kTMd9x | shortener codes decode --key-file data/code.key")]
    Codes {
        /// Encode or decode.
        #[command(subcommand)]
        action: CodesAction,
    },
    /// Write a fresh random code-space key (32 bytes, hex) to a new file with mode 0600.
    #[command(after_help = "Example:\n  \
        shortener keygen --out /etc/shortener/code.key    # then SHORTENER_KEY_FILE=/etc/shortener/code.key")]
    Keygen {
        /// Where to write the key.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace the file if it exists (codes made under the old key stop decoding).
        #[arg(long)]
        force: bool,
    },
    /// Manage API keys.
    #[command(after_help = KEYS_EXAMPLES)]
    Keys {
        /// What to do.
        #[command(subcommand)]
        action: keys::KeysCommand,
    },
    /// Where the PostgreSQL store finds a link's row, and moving it online.
    #[command(after_help = "Examples:\n  \
        DATABASE_URL=... SHORTENER_KEY_FILE=code.key shortener layout status\n  \
        DATABASE_URL=... SHORTENER_KEY_FILE=code.key shortener layout migrate")]
    Layout(Box<layout::LayoutArgs>),
    /// Write synthetic generated links through the store, as creates would (for benchmarks);
    /// prints their codes in ID order.
    #[command(hide = true)]
    Preload(Box<preload::PreloadArgs>),
}

/// `shortener codes ...`.
#[derive(Debug, Subcommand)]
pub enum CodesAction {
    /// Print the code of each ID, one per line.
    #[command(after_help = "Example:\n  shortener codes encode --key-file data/code.key 1 2 3")]
    Encode(CodesArgs),
    /// Print the ID of each generated code, one per line.
    #[command(
        after_help = "Example:\n  echo 3kTMd9x | shortener codes decode --key-file data/code.key"
    )]
    Decode(CodesArgs),
}

impl CodesAction {
    /// The direction and its arguments.
    pub fn split(&self) -> (Direction, &CodesArgs) {
        match self {
            CodesAction::Encode(args) => (Direction::Encode, args),
            CodesAction::Decode(args) => (Direction::Decode, args),
        }
    }
}

/// Arguments of `codes encode|decode`.
#[derive(Debug, Args)]
pub struct CodesArgs {
    /// The code-space key file (64 hex digits or base64).
    #[arg(long, env = "SHORTENER_KEY_FILE", value_name = "FILE")]
    pub key_file: PathBuf,
    /// The base code length L (4 to 11).
    #[arg(long, env = "SHORTENER_CODE_LENGTH", default_value_t = codespace::DEFAULT_LENGTH)]
    pub length: usize,
    /// IDs (encode) or codes (decode); with none, one item per line is read from standard input.
    pub items: Vec<String>,
}
